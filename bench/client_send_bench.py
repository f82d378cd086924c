"""The client's own CPU per Producer.send, in process: the broker's answers are fed back without sockets.

    python bench/client_send_bench.py [--n 20000] [--runs 5] [--size 128]
    python bench/client_send_bench.py --ab /path/to/tree_a /path/to/tree_b [--rounds 3]

Starts `rocketq standalone` (ASYNC_FLUSH) only to let a rocketq.aio.Producer start and learn its route, then
swaps the producer's connection transport for one that answers every SEND_MESSAGE_V2 at once (an asyncio
callback that feeds a SUCCESS answer to Channel.data_received, as a socket read would). So what is measured
per send is the client's Python: building and encoding the request, the request/answer bookkeeping, decoding
the answer, the SendResult, and the awaits in between, with no syscalls and no wake-ups. The fake answer's
own cost (decoding the request, encoding the answer) is timed apart and subtracted. Prints thread-CPU µs
per call of send(), _send_default() and _send_to_queue() (median over runs).

--ab runs this script alternately against two source trees (PYTHONPATH=tree/src) and prints both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench.peers

from bench.send_path_bench import FakeTransport  # the no-op rest of a transport


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AnsweringTransport(FakeTransport):
    """Stands in for the producer's socket: each request frame written gets a SUCCESS answer on the next
    loop turn. ``spent`` is the thread CPU this class used (subtracted from the client's)."""

    spent = 0.0

    def __init__(self, channel: Any, loop: asyncio.AbstractEventLoop) -> None:
        from rocketq.protocol.frame import FrameDecoder

        super().__init__()
        self.channel = channel
        self.loop = loop
        self.decoder = FrameDecoder()

    def _answer(self, data: bytes) -> None:
        t0 = time.thread_time()
        for req in self.decoder.feed(data):
            ext = {
                "msgId": "7F00000100002A9F0000000000001000",
                "queueId": req.ext_fields.get("e", "0"),
                "queueOffset": "12345",
                "MSG_REGION": "DefaultRegion",
                "TRACE_ON": "true",
            }
            self.loop.call_soon(self.channel.data_received, req.response(0, None, ext).encode())
        AnsweringTransport.spent += time.thread_time() - t0

    def write(self, data: Any) -> None:
        self._answer(bytes(data))

    def writelines(self, parts: Any) -> None:
        self._answer(b"".join(bytes(p) for p in parts))


async def wait_port(port: int) -> None:
    for _ in range(150):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise RuntimeError("broker did not start")


async def run_bench(a: argparse.Namespace) -> dict[str, float]:
    from bench.peers.sys_rocketq import RocketqClient

    from rocketq.aio import Message, Producer

    with tempfile.TemporaryDirectory(prefix="rq-client-send-") as root:
        ns, bp = free_port(), free_port()
        conf = os.path.join(root, "broker.conf")
        with open(conf, "w") as f:
            f.write("brokerName=broker-a\nflushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=false\n")
        home = os.path.join(root, "home")
        cmd = [sys.executable, "-m", "rocketq.cli", "standalone", "--home", home, "--namesrv-port", str(ns),
               "--broker-port", str(bp), "-c", conf, "--log-level", "WARNING"]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await wait_port(bp)
            topic = "ClientSendBench"
            await RocketqClient({"namesrv": f"127.0.0.1:{ns}"}).prepare(topic)  # 4 queues, route known
            p = Producer(
                "client_send_bench", namesrv=f"127.0.0.1:{ns}", compress_msg_body_over_howmuch=1 << 30
            )
            await p.start()
            body = os.urandom(a.size)
            for _ in range(200):  # real round trips first: routes, connection
                await p.send(Message(topic, body))
            loop = asyncio.get_running_loop()
            for ch in p.instance.remoting._channels.values():
                ch._transport = AnsweringTransport(ch, loop)
            mq = (await p.fetch_publish_message_queues(topic))[0]
            calls = {
                "send": lambda: p.send(Message(topic, body)),
                "_send_default": lambda: p._send_default(Message(topic, body), topic, 3, 3.0),
                "_send_to_queue": lambda: p._send_to_queue(Message(topic, body), mq, 3.0),
            }
            out: dict[str, float] = {}
            for name, call in calls.items():
                per_run = []
                for run in range(a.runs + 1):  # the first run warms up
                    AnsweringTransport.spent = 0.0
                    c0 = time.thread_time()
                    for _ in range(a.n):
                        await call()
                    if run:
                        per_run.append((time.thread_time() - c0 - AnsweringTransport.spent) / a.n * 1e6)
                out[name] = statistics.median(per_run)
            return out
        finally:
            proc.terminate()
            proc.wait()


def run_ab(a: argparse.Namespace) -> None:
    pooled: dict[str, list[dict[str, float]]] = {t: [] for t in a.ab}
    for rnd in range(a.rounds):
        for tree in a.ab if rnd % 2 == 0 else a.ab[::-1]:
            env = dict(os.environ, PYTHONPATH=f"{tree}/src")
            cmd = [sys.executable, os.path.abspath(__file__), "--json", "--n", str(a.n),
                   "--runs", str(a.runs), "--size", str(a.size)]  # fmt: skip
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if r.returncode:
                sys.exit(f"{tree} failed:\n{r.stdout}\n{r.stderr}")
            res = json.loads(r.stdout.strip().splitlines()[-1])
            pooled[tree].append(res)
            print(f"round {rnd} {tree}: " + "  ".join(f"{k} {v:.2f}" for k, v in res.items()), flush=True)
    for tree, runs in pooled.items():
        print(tree + ": " + "  ".join(f"{k} {statistics.median(r[k] for r in runs):.2f} µs" for k in runs[0]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20000, help="calls per run")
    p.add_argument("--runs", type=int, default=5, help="measured runs per call (after one warm-up run)")
    p.add_argument("--size", type=int, default=128, help="body bytes")
    p.add_argument("--json", action="store_true", help="print the result as JSON (for --ab)")
    p.add_argument("--ab", nargs=2, metavar="TREE", help="compare two source trees, interleaved")
    p.add_argument("--rounds", type=int, default=3, help="--ab: child processes per tree")
    a = p.parse_args()
    if a.ab:
        run_ab(a)
        return
    try:
        import uvloop

        res = uvloop.run(run_bench(a))
    except ImportError:
        res = asyncio.run(run_bench(a))
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:15s} {v:6.2f} µs of client CPU per call")


if __name__ == "__main__":
    main()
