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
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench.peers

from bench.inproc import ab_rounds, bench_main, bench_parser, standalone
from bench.send_path_bench import FakeTransport  # the no-op rest of a transport


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


async def run_bench(a: argparse.Namespace) -> dict[str, float]:
    from bench.peers.sys_rocketq import RocketqClient

    from rocketq.aio import Message, Producer

    async with standalone("rq-client-send-") as namesrv:
        topic = "ClientSendBench"
        await RocketqClient({"namesrv": namesrv}).prepare(topic)  # 4 queues, route known
        p = Producer("client_send_bench", namesrv=namesrv, compress_msg_body_over_howmuch=1 << 30)
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
            for rnd in range(a.runs + 1):  # the first run warms up
                AnsweringTransport.spent = 0.0
                c0 = time.thread_time()
                for _ in range(a.n):
                    await call()
                if rnd:
                    per_run.append((time.thread_time() - c0 - AnsweringTransport.spent) / a.n * 1e6)
            out[name] = statistics.median(per_run)
        return out


def run_ab(a: argparse.Namespace) -> None:
    args = ["--n", str(a.n), "--runs", str(a.runs), "--size", str(a.size)]
    for tree, runs in ab_rounds(__file__, a.ab, a.rounds, args).items():
        print(tree + ": " + "  ".join(f"{k} {statistics.median(r[k] for r in runs):.2f} µs" for k in runs[0]))


def show(res: dict[str, float]) -> None:
    for k, v in res.items():
        print(f"{k:15s} {v:6.2f} µs of client CPU per call")


def main() -> None:
    a = bench_parser(__doc__, 20000, "calls per run").parse_args()
    bench_main(a, run_bench, run_ab, show)


if __name__ == "__main__":
    main()
