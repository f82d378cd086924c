"""Remoting round trips per second vs a bare asyncio echo server, side by side in one run.

    rocketq bench remoting [--seconds 3] [--reps 3] [--windows 1,64] [--no-uvloop]

Two server processes run for the whole benchmark (pinned to the last CPU, the load generator to the
first when there are two or more):
  * rocketq: RemotingServer with one inline processor answering a small request (JSON header, no body);
    the load generator uses RemotingClient.invoke from W concurrent coroutines.
  * echo:    an asyncio.Protocol that writes back whatever it reads; the client keeps W fixed-size
    64-byte messages in flight (no framing, no decoding): the floor for any Python request/reply.
Measurements alternate (echo, rocketq, echo, rocketq, ...) and each ratio is rocketq / echo of the
same repetition. Prints a markdown table (median, min, max) for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient, RemotingServer, run, uvloop_enabled

PING_CODE = 1000
ECHO_MSG = 64
COALESCE = os.environ.get("RQ_BENCH_COALESCE", "1") == "1"


# -- servers (run in child processes) ----------------------------------------------------------
async def serve_rocketq(port: int) -> None:
    server = RemotingServer("127.0.0.1", port, idle_timeout_s=0)
    server.register_processor(PING_CODE, lambda ch, req: req.response(0))
    await server.start()
    print(f"READY {server.port}", flush=True)
    await asyncio.Event().wait()


class EchoServer(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[attr-defined]


async def serve_echo(port: int) -> None:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(EchoServer, "127.0.0.1", port)
    print(f"READY {srv.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


# -- load generators -----------------------------------------------------------------------------
class EchoClient(asyncio.Protocol):
    """Keeps ``window`` 64-byte messages in flight; counts whole messages coming back."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.done = 0
        self.pending_bytes = 0
        self.payload = b"x" * ECHO_MSG
        self.running = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.transport.write(self.payload * self.window)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.pending_bytes += len(data)
        n, self.pending_bytes = divmod(self.pending_bytes, ECHO_MSG)
        self.done += n
        if n and self.running:
            self.transport.write(self.payload * n)  # type: ignore[attr-defined]


class Sample(NamedTuple):
    rate: float  # round trips per second
    client_us: float  # CPU microseconds per round trip, load generator
    server_us: float  # CPU microseconds per round trip, server process


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid

    def start(self, n: int) -> None:
        self.n0, self.t0 = n, time.perf_counter()
        self.c0, self.s0 = time.process_time(), proc_cpu_s(self.pid)

    def stop(self, n: int) -> Sample:
        t1, c1, s1 = time.perf_counter(), time.process_time(), proc_cpu_s(self.pid)
        count = max(1, n - self.n0)
        return Sample(count / (t1 - self.t0), (c1 - self.c0) * 1e6 / count, (s1 - self.s0) * 1e6 / count)


async def measure_echo(port: int, pid: int, window: int, seconds: float, warmup: float) -> Sample:
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_connection(lambda: EchoClient(window), "127.0.0.1", port)
    await asyncio.sleep(warmup)
    meter = Meter(pid)
    meter.start(proto.done)
    await asyncio.sleep(seconds)
    sample = meter.stop(proto.done)
    proto.running = False
    transport.close()
    return sample


async def measure_rocketq(port: int, pid: int, window: int, seconds: float, warmup: float) -> Sample:
    addr = f"127.0.0.1:{port}"
    client = RemotingClient(coalesce_writes=COALESCE)
    count = 0
    stop = False

    async def worker() -> None:
        nonlocal count
        while not stop:
            resp = await client.invoke(addr, RemotingCommand.request(PING_CODE), 5.0)
            if resp.code != 0:
                raise RuntimeError(f"unexpected response {resp}")
            count += 1

    await client.invoke(addr, RemotingCommand.request(PING_CODE))  # connect
    tasks = [asyncio.ensure_future(worker()) for _ in range(window)]
    await asyncio.sleep(warmup)
    meter = Meter(pid)
    meter.start(count)
    await asyncio.sleep(seconds)
    sample = meter.stop(count)
    stop = True
    await asyncio.gather(*tasks)
    await client.close()
    return sample


# -- orchestration -------------------------------------------------------------------------------
def start_server(kind: str, no_uvloop: bool, cpu: int | None) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ}
    if no_uvloop:
        env["ROCKETQ_NO_UVLOOP"] = "1"
    cmd = [sys.executable, __file__, "--serve", kind]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"{kind} server failed to start: {line!r}")
    return proc, int(line.split()[1])


class _NullTransport:
    def get_extra_info(self, key: str) -> object:
        return ("127.0.0.1", 1)

    def writelines(self, parts: object) -> None:
        pass

    def write(self, data: object) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:  # a long pipelined read backs up: the channel pauses reading
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


def breakdown(n: int = 64_000) -> list[str]:
    """CPU per request of the server's Python path without sockets (deterministic, unlike the above)."""
    from rocketq.protocol.frame import FrameDecoder
    from rocketq.remoting.channel import Channel, Dispatcher

    async def go() -> list[str]:
        d = Dispatcher()
        d.register(PING_CODE, lambda ch, req: req.response(0))
        ch = Channel(d)
        ch.connection_made(_NullTransport())  # type: ignore[arg-type]
        frame = RemotingCommand(PING_CODE, opaque=5).encode()
        batch = frame * 64

        def per_req(fn: Callable[[], object], calls: int, per_call: int) -> float:
            t0 = time.process_time()
            for _ in range(calls):
                fn()
            return (time.process_time() - t0) * 1e6 / (calls * per_call)

        full1 = per_req(lambda: ch.data_received(frame), n, 1)
        full64 = per_req(lambda: ch.data_received(batch), n // 64, 64)
        dec = FrameDecoder()
        decode = per_req(lambda: dec.feed(batch), n // 64, 64)
        req = RemotingCommand(PING_CODE, opaque=5)
        resp = req.response(0)
        respond = per_req(lambda: req.response(0), n, 1)
        encode = per_req(resp.frame_parts, n, 1)
        rest = full64 - decode - respond - encode
        return [
            f"- whole server path per request: {full1:.2f} µs (1 frame per read), "
            f"{full64:.2f} µs (64 per read)",
            f"- of which frame decode (FrameDecoder.feed → RemotingCommand, JSON header): {decode:.2f} µs",
            f"- building the response (RemotingCommand.response): {respond:.2f} µs",
            f"- encoding it (frame_parts: orjson header + length prefix): {encode:.2f} µs",
            f"- the remoting layer itself (dispatch, reply, cork): {rest:.2f} µs",
        ]

    return run(go())


def profile_server(pid: int, port: int, seconds: float) -> list[str]:
    """Sample the rocketq server with py-spy while 64 requests are kept in flight; top frames."""
    raw = f"/tmp/remoting-bench-{os.getpid()}.txt"
    local = os.path.join(os.path.dirname(sys.executable), "py-spy")
    cmd = [local if os.path.exists(local) else "py-spy", "record", "--nonblocking", "-r", "250"]
    cmd += ["-d", str(int(seconds) + 1)]
    cmd += ["-f", "raw", "-o", raw, "-p", str(pid)]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    run(measure_rocketq(port, pid, 64, seconds, 0.0))
    spy.wait(30)
    self_t: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    try:
        with open(raw) as f:
            for line in f:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                if not stack:
                    continue
                n = int(count)
                frames = [_short(fr) for fr in stack.split(";")]
                total += n
                self_t[frames[-1]] = self_t.get(frames[-1], 0) + n
                for fr in set(frames):
                    incl[fr] = incl.get(fr, 0) + n
        os.unlink(raw)
    except FileNotFoundError:
        return ["(py-spy produced no samples)"]
    by_self = sorted(self_t.items(), key=lambda x: -x[1])[:14]
    out = [f"{100 * n / total:5.1f} % self  {fr}" for fr, n in by_self]
    # py-spy shows native time (recv/send/epoll in uvloop) as the outermost Python frame; on a loaded
    # machine it also counts runnable-but-descheduled time there.
    out = [o + "   <- native: uvloop/libuv, syscalls" if "Runner.run" in o else o for o in out]
    skip = ("run", "run_forever", "run_until_complete", "<module>", "main", "serve_rocketq")
    top = [(fr, n) for fr, n in sorted(incl.items(), key=lambda x: -x[1]) if fr.split(" ")[0] not in skip]
    out += [f"{100 * n / total:5.1f} % incl  {fr}" for fr, n in top[:10]]
    return out


def _short(frame: str) -> str:
    # "func (/abs/path/site-packages/rocketq/x.py:12)" -> "func (rocketq/x.py)": per function, not line
    func, _, loc = frame.partition(" (")
    loc = loc.rstrip(")").rsplit(":", 1)[0]
    for marker in ("/src/", "/site-packages/", "/lib/python3"):
        if marker in loc:
            loc = loc.split(marker, 1)[1]
            break
    return f"{func} ({loc})" if loc else func


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", choices=["rocketq", "echo"])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--windows", default="1,64")
    ap.add_argument("--no-uvloop", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also sample the server with py-spy")
    ap.add_argument("--write-docs", action="store_true", help="replace '## Remoting' in docs/benchmarks.md")
    a = ap.parse_args()
    if a.no_uvloop:
        os.environ["ROCKETQ_NO_UVLOOP"] = "1"
    if a.serve:
        run(serve_rocketq(0) if a.serve == "rocketq" else serve_echo(0))
        return

    ncpu = os.cpu_count() or 1
    server_cpu = ncpu - 1 if ncpu >= 2 else None
    if server_cpu is not None:
        os.sched_setaffinity(0, {0})
    windows = [int(w) for w in a.windows.split(",")]
    servers = {k: start_server(k, a.no_uvloop, server_cpu) for k in ("echo", "rocketq")}
    results: dict[tuple[str, int], list[Sample]] = {}
    profile: list[str] = []
    try:
        for rep in range(a.reps):
            for w in windows:
                for kind in ("echo", "rocketq"):
                    fn = measure_echo if kind == "echo" else measure_rocketq
                    proc, port = servers[kind]
                    sm = run(fn(port, proc.pid, w, a.seconds, a.warmup))
                    results.setdefault((kind, w), []).append(sm)
                    print(
                        f"rep {rep + 1} window {w:>3} {kind:>7}: {sm.rate:>10,.0f} rt/s  "
                        f"CPU/rt client {sm.client_us:6.1f} us server {sm.server_us:6.1f} us",
                        file=sys.stderr,
                    )
        if a.profile:
            proc, port = servers["rocketq"]
            profile = profile_server(proc.pid, port, max(a.seconds, 4.0))
    finally:
        for proc, _ in servers.values():
            proc.kill()
            proc.wait()
    text = report(a, results, windows, ncpu, server_cpu, profile, breakdown())
    print(text)
    if a.write_docs:
        write_docs(text)


def report(
    a: argparse.Namespace,
    results: dict[tuple[str, int], list[Sample]],
    windows: list[int],
    ncpu: int,
    server_cpu: int | None,
    profile: list[str],
    parts: list[str],
) -> str:
    pinning = f"server on CPU {server_cpu}, load generator on CPU 0" if server_cpu is not None else "unpinned"
    cmd = " ".join(["rocketq bench remoting", *sys.argv[1:]])
    lines = [
        "## Remoting",
        "",
        f"Command: `{cmd}` — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"Machine: nproc={ncpu}, {platform.machine()}, Python {platform.python_version()}, "
        f"uvloop {'on' if uvloop_enabled() else 'off'} (both sides), client request coalescing "
        f"{'on' if COALESCE else 'off'}, {pinning}, load average {os.getloadavg()[0]:.2f} at the end "
        "(the machine is shared: absolute numbers are noise, the same-run ratios are the result).",
        "",
        "Round trips per second with W requests in flight on one connection: rocketq = "
        "RemotingClient.invoke → RemotingServer with an inline processor (JSON header, empty body); "
        "floor = a bare asyncio.Protocol "
        "echo server and client exchanging 64-byte messages without framing. Measured alternately in the "
        f"same run, {a.seconds:g} s each after {a.warmup:g} s warm-up, {a.reps} repetitions; ratio = rocketq "
        "/ echo of the same repetition.",
        "",
        "| in flight | echo rt/s median [min–max] | rocketq rt/s median [min–max] | ratio median [min–max] |",
        "|---|---|---|---|",
    ]

    def fmt(xs: list[float]) -> str:
        return f"{statistics.median(xs):,.0f} [{min(xs):,.0f}–{max(xs):,.0f}]"

    for w in windows:
        echo = [s.rate for s in results[("echo", w)]]
        rq = [s.rate for s in results[("rocketq", w)]]
        ratios = [r / e for r, e in zip(rq, echo, strict=True)]
        lines.append(
            f"| {w} | {fmt(echo)} | {fmt(rq)} | "
            f"{statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}] |"
        )
    lines += [
        "",
        "CPU microseconds per round trip (process CPU time / round trips, median of the repetitions). "
        "The CPU ratio (echo client+server CPU per round trip ÷ rocketq's, per repetition) is the throughput "
        "ratio a CPU-bound run would show and is much less sensitive to other load on the machine:",
        "",
        "| in flight | echo client | echo server | rocketq client | rocketq server | CPU ratio |",
        "|---|---|---|---|---|---|",
    ]
    for w in windows:
        e, r = results[("echo", w)], results[("rocketq", w)]

        def med(xs: list[Sample], attr: str) -> str:
            return f"{statistics.median(getattr(x, attr) for x in xs):.1f}"

        cpu_ratio = statistics.median(
            (x.client_us + x.server_us) / (y.client_us + y.server_us) for x, y in zip(e, r, strict=True)
        )
        lines.append(
            f"| {w} | {med(e, 'client_us')} | {med(e, 'server_us')} | {med(r, 'client_us')} | "
            f"{med(r, 'server_us')} | {cpu_ratio:.2f} |"
        )
    srv64 = statistics.median(x.server_us for x in results[("rocketq", windows[-1])])
    python64 = float(parts[0].rsplit(", ", 1)[1].split(" ")[0]) if parts else 0.0
    native = max(0.0, srv64 - python64)
    lines += [
        "",
        "Server CPU per request without sockets (in-process, a null transport; same run):",
        "",
        *parts,
        f"- so with {windows[-1]} in flight the server spends ≈ {native:.1f} µs of its {srv64:.1f} µs "
        f"CPU per round trip in native code (recv/send/epoll, libuv) ≈ {100 * native / srv64:.0f} %, "
        "the rest in Python",
    ]
    lines += [
        "",
        "Reading the numbers: with 1 request in flight both systems pay the same wake-ups and syscalls per "
        "round trip (tens of µs on this VM), so rocketq's extra Python work (frame decode/encode, a future "
        "and a task wake-up on the client) is a fraction of the total. With 64 in flight the echo floor "
        "degenerates into a byte stream (one recv/send moves dozens of 64-byte messages and no per-message "
        "Python code runs), while rocketq still decodes, dispatches and encodes every request on both sides: "
        "the ratio there is the per-request Python cost. The server already batches: all responses to the "
        "frames of one read leave in one write (cork), and the client sends the requests issued in one loop "
        "turn in one write. What remains is mostly the protocol codec (`rocketq.protocol.frame`: JSON header "
        "decode ≈ 60 % of the server's Python time) and, on the client, the per-request future/task wake-up.",
    ]
    if profile:
        lines += [
            "",
            "### Where the server's time goes (py-spy, 250 Hz, 64 in flight, busy samples only)",
            "",
            "py-spy attributes native time to the outermost Python frame (Runner.run) and, on a loaded "
            "machine, also counts time spent runnable but waiting for a CPU there; the CPU accounting above "
            "is the better measure of the native share. The Python frames' relative weights are what "
            "to read.",
            "",
            "```",
            *profile,
            "```",
        ]
    return "\n".join(lines) + "\n"


def write_docs(text: str) -> None:
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "benchmarks.md")
    old = "# Benchmarks\n"
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    # Replace only our section; other teams own the rest of the file.
    m = re.search(r"^## Remoting\n.*?(?=^## |\Z)", old, flags=re.S | re.M)
    if m:
        rest = old[m.end() :]
        new = old[: m.start()] + text + ("\n" + rest if rest else "")
    else:
        new = old.rstrip() + "\n\n" + text
    with open(path, "w") as f:
        f.write(new)


if __name__ == "__main__":
    main()
