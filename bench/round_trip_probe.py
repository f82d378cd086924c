"""Where one send's round trip goes, step by step, on the broker and on the client (one send in flight).

    python bench/round_trip_probe.py [--tree DIR] [--tier A|B] [--size 128] [--seconds 3]

Copies the source tree (default: this checkout) into a temp dir, inserts timing marks (time.perf_counter_ns
into a list, written out at exit) at named places of the send path, runs bench/thread_probe.py from that
copy with one send in flight, and prints the median time between consecutive marks:

  broker  dr0 read in, dr1 frames decoded, sp1 store called, pw0/pw1 around the record's pwrite (SYNC_FLUSH),
          sb0/sb1 around io_submit of the round, sp2 store returned, ev0 eventfd readable, ev2 completions
          reaped, ev3 round reported, fw1 answers queued, wq0/wq1 around the answers' send (SYNC_FLUSH),
          rp0/rp1 around an inline answer's send (ASYNC_FLUSH)
  client  cs0 send() called, cw0/cw1 around the request's write, dr0/dr1 answer read and decoded,
          cr1 invoke() resumed, cl9 send() returned to the load loop

A mark costs about 0.1 µs; the steps are what the code costs with a CPU that idles between messages,
which on a VM is several times what the same code costs back to back (bench/peers/NOTES.md). The source is
not changed; a mark whose anchor is gone is reported and skipped.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MARK = "__import__('rocketq._tp')._tp.mark"
TP_MODULE = """import atexit, os, time
_ns = time.perf_counter_ns
T = []
def mark(tag):
    T.append((tag, _ns()))
def _dump():
    if T:
        with open(os.path.join(os.environ["RQ_TP"], f"tp_{os.getpid()}.txt"), "w") as f:
            f.writelines(f"{tag} {t}\\n" for tag, t in T)
if os.environ.get("RQ_TP"):
    atexit.register(_dump)
"""
# (file under src/rocketq, anchor text, mark, before the anchor's line?)
_PW = "                if not self._write_at(mf, memoryview(buf)[: size + pad], pos):"
_SB = "            self._ctx.submit([seg.fd for seg, _, _ in todo], 1)"
_WQ = "            _send(self._transport, q)"
_CS = "        timeout_s = (timeout if timeout is not None else self.send_msg_timeout) / 1000.0"
_PUT = "        result = self.ctl.store.put_message(msg)"
_NOTIFY = "        self._notify(mfq.flushed_where)\n        if not self._stopped"
LINE_MARKS = [
    ("remoting/channel.py", "def data_received(self, data: bytes) -> None:", "dr0", False),
    ("remoting/channel.py", "        if not commands:  # the start of a frame", "dr1", True),
    ("broker/processors/send.py", _PUT, "sp1", True),
    ("broker/processors/send.py", _PUT, "sp2", False),
    ("store/commit_log.py", _PW, "pw0", True),
    ("store/commit_log.py", "                mf.wrote_position = end", "pw1", False),
    ("store/loop_flush.py", _SB, "sb0", True),
    ("store/loop_flush.py", _SB, "sb1", False),
    ("store/loop_flush.py", "    def _on_eventfd(self) -> None:", "ev0", False),
    ("store/loop_flush.py", "            events = self._ctx.reap(0.0)", "ev2", False),
    ("store/loop_flush.py", _NOTIFY, "ev3", True),
    ("broker/flush_waiter.py", "        flush_deferred()  # this round's answers", "fw1", True),
    ("remoting/channel.py", "        if q and not self.closed:\n" + _WQ, "wq0", True),
    ("remoting/channel.py", _WQ, "wq1", False),
    ("client/producer.py", _CS, "cs0", True),
]
_EXPECT = "        opaque, fut, deadline = self._expect_answer(request, timeout_s)\n        try:\n"
_WRITE = "            self.write_command(request)\n"
_AWAIT = "            return await fut\n        except TimeoutError:"
_INLINE = "        else:\n            self._transport.writelines(parts)\n"
_LOAD = "                await cl.publish(topic, stamp(buf, t))\n"
# (file under the copy, old text, new text)
REPLACEMENTS = [
    ("src/rocketq/remoting/channel.py", _EXPECT + _WRITE,
     f"        {MARK}('cw0')\n" + _EXPECT + _WRITE + f"            {MARK}('cw1')\n"),
    ("src/rocketq/remoting/channel.py", _AWAIT,
     f"            _r = await fut\n            {MARK}('cr1')\n            return _r\n"
     "        except TimeoutError:"),
    ("src/rocketq/remoting/channel.py", _INLINE,
     f"        else:\n            {MARK}('rp0')\n            self._transport.writelines(parts)\n"
     f"            {MARK}('rp1')\n"),
    ("bench/thread_probe.py", _LOAD, _LOAD + f"                {MARK}('cl9')\n"),
]  # fmt: skip
BROKER_ORDER = ["dr0", "dr1", "sp1", "pw0", "pw1", "sb0", "sb1", "sp2", "ev0", "ev2", "ev3", "fw1", "wq0",
                "wq1", "rp0", "rp1"]  # fmt: skip
CLIENT_ORDER = ["cs0", "cw0", "cw1", "dr0", "dr1", "cr1", "cl9"]


def insert_line_mark(path: str, anchor: str, tag: str, before: bool) -> bool:
    with open(path) as f:
        s = f.read()
    idx = s.find(anchor)
    if idx < 0:
        return False
    start = s.rfind("\n", 0, idx) + 1
    indent = re.match(r"\s*", s[start:]).group(0)  # type: ignore[union-attr]
    if before:
        s = s[:start] + f"{indent}{MARK}({tag!r})\n" + s[start:]
    else:
        end = s.index("\n", idx) + 1
        deeper = "    " if s[idx:end].rstrip().endswith(":") else ""
        s = s[:end] + f"{indent}{deeper}{MARK}({tag!r})\n" + s[end:]
    with open(path, "w") as f:
        f.write(s)
    return True


def instrument(tree: str, dst: str) -> None:
    shutil.copytree(os.path.join(tree, "src"), os.path.join(dst, "src"))
    shutil.copytree(os.path.join(tree, "bench"), os.path.join(dst, "bench"))
    with open(os.path.join(dst, "src", "rocketq", "_tp.py"), "w") as f:
        f.write(TP_MODULE)
    for rel, anchor, tag, before in LINE_MARKS:
        if not insert_line_mark(os.path.join(dst, "src", "rocketq", rel), anchor, tag, before):
            print(f"  (mark {tag}: anchor not found in {rel})")
    for rel, old, new in REPLACEMENTS:
        path = os.path.join(dst, rel)
        with open(path) as f:
            s = f.read()
        if old not in s:
            print(f"  (a mark in {rel}: text not found)")
            continue
        with open(path, "w") as f:
            f.write(s.replace(old, new, 1))


def cycles(events: list[tuple[str, int]], start: str) -> list[dict[str, int]]:
    """Split the marks into cycles beginning at `start`; within one, the first of each mark counts."""
    out: list[dict[str, int]] = []
    cur: dict[str, int] | None = None
    for tag, t in events:
        if tag == start:
            if cur:
                out.append(cur)
            cur = {start: t}
        elif cur is not None and tag not in cur:
            cur[tag] = t
    return out


def report(name: str, cyc: list[dict[str, int]], order: list[str]) -> None:
    tags = [k for k in order if sum(k in c for c in cyc) > 0.9 * len(cyc)]
    full = [c for c in cyc if all(k in c for k in tags)]
    if not full:
        print(f"{name}: no complete cycles")
        return
    first = tags[0]
    tags.sort(key=lambda k: statistics.median(c[k] - c[first] for c in full))  # the order they happened in
    print(f"{name}: {len(full)} sends, median µs between marks")
    for a, b in itertools.pairwise(tags):
        print(f"  {a} -> {b}  {statistics.median((c[b] - c[a]) / 1e3 for c in full):7.1f}")
    total = statistics.median((c[tags[-1]] - c[first]) / 1e3 for c in full)
    print(f"  {tags[0]} -> {tags[-1]}  {total:7.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", default=os.path.dirname(HERE), help="the source tree (with src/ and bench/)")
    ap.add_argument("--tier", choices=("A", "B"), default="A")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rq-rtp-") as tmp:
        copy = os.path.join(tmp, "tree")
        out = os.path.join(tmp, "marks")
        os.makedirs(out)
        instrument(os.path.abspath(a.tree), copy)
        env = dict(os.environ, RQ_TP=out, PYTHONPATH=f"{copy}/src:{copy}")
        cmd = [sys.executable, os.path.join(copy, "bench", "thread_probe.py"), "--tier", a.tier, "--size",
               str(a.size), "--window", "1", "--seconds", str(a.seconds), "--reps", "1"]  # fmt: skip
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        print("\n".join(line for line in r.stdout.splitlines() if line.startswith("rep")))
        logs = []
        for path in glob.glob(os.path.join(out, "tp_*.txt")):
            with open(path) as f:
                logs.append([(t, int(ns)) for t, ns in (line.split() for line in f)])
        broker = [ev for ev in logs if any(t == "sp1" for t, _ in ev[:5000])]
        client = [ev for ev in logs if any(t == "cs0" for t, _ in ev[:5000])]
        if not broker or not client:
            sys.exit(f"no marks written (thread_probe rc {r.returncode}):\n{r.stderr[-2000:]}")
        report("broker", cycles(broker[0], "dr0"), BROKER_ORDER)
        report("client", cycles(client[0], "cs0"), CLIENT_ORDER)
        cs = cycles(client[0], "cs0")
        rt = statistics.median((b["cs0"] - a["cs0"]) / 1e3 for a, b in itertools.pairwise(cs))
        print(f"round trip (client send to send): {rt:.1f} µs")


if __name__ == "__main__":
    main()
