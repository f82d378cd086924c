"""The consumer's own CPU per received message, in process: pulls are answered without a broker round trip.

    python bench/consume_path_bench.py [--n 200000] [--runs 5] [--size 128] [--batch 256]
    python bench/consume_path_bench.py --ab /path/to/tree_a /path/to/tree_b [--rounds 3]

Starts `rocketq standalone` (ASYNC_FLUSH) so that a rocketq.aio.PushConsumer can start, learn its route and
rebalance a 4-queue topic, then swaps the consumer's connection transport for one that answers every
PULL_MESSAGE at once with FOUND and --batch stored records (with a property string like a producer's:
UNIQ_KEY, WAIT) whose queue offsets continue where the pull asked; other requests (heartbeats, offset
commits) still go to the broker. So what is measured per message is the consumer's Python from one pull to
the next: building the pull request, the answer's frame and header, the records' decoding, the process
queue, the consume request, a listener that reads every body (as the peers benchmark's does), the offset
update. The fake answers' own cost is timed apart and subtracted. Prints thread-CPU µs per message (median
over runs).

--ab runs this script alternately against two source trees (PYTHONPATH=tree/src) and prints both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench.peers

from bench.inproc import ab_rounds, bench_main, bench_parser, standalone
from bench.send_path_bench import FakeTransport

_QUEUE_OFFSET = struct.Struct(">q")
_POS_QUEUE_OFFSET = 20  # protocol.record.POS_QUEUE_OFFSET (kept literal: the script also runs old trees)


class PullAnsweringTransport(FakeTransport):
    """Answers PULL_MESSAGE frames on the next loop turn with ``batch`` records starting at the requested
    offset; passes every other frame to the real transport. ``spent``: this class's thread CPU."""

    spent = 0.0

    def __init__(self, channel: Any, real: Any, template: bytearray, sizes: list[int], batch: int) -> None:
        from rocketq.protocol.frame import FrameDecoder

        super().__init__()
        self.channel, self.real = channel, real
        self.loop = asyncio.get_running_loop()
        self.decoder = FrameDecoder()
        self.template, self.batch = template, batch
        self.starts = [sum(sizes[:i]) for i in range(len(sizes))]

    def _body(self, first: int) -> bytes:
        buf = self.template
        for i, pos in enumerate(self.starts):
            _QUEUE_OFFSET.pack_into(buf, pos + _POS_QUEUE_OFFSET, first + i)
        return bytes(buf)

    def _feed(self, data: bytes) -> None:
        t0 = time.thread_time()
        passthrough = []
        for req in self.decoder.feed(data):
            if req.code != 11:  # PULL_MESSAGE
                passthrough.append(req.encode())
                continue
            first = int(req.ext_fields["queueOffset"])
            ext = {
                "nextBeginOffset": str(first + self.batch),
                "minOffset": "0",
                "maxOffset": str(1 << 40),
                "suggestWhichBrokerId": "0",
            }
            self.loop.call_soon(
                self.channel.data_received, req.response(0, None, ext, self._body(first)).encode()
            )
        PullAnsweringTransport.spent += time.thread_time() - t0
        for frame in passthrough:
            self.real.write(frame)

    def write(self, data: Any) -> None:
        self._feed(bytes(data))

    def writelines(self, parts: Any) -> None:
        self._feed(b"".join(bytes(p) for p in parts))


def records(topic: str, size: int, batch: int) -> tuple[bytearray, list[int]]:
    from rocketq.protocol.record import encode_record

    props = "UNIQ_KEY\x017F0000010A2B18B4AAC27A1B2C3D4E5F\x02WAIT\x01true\x02"
    out, sizes = bytearray(), []
    for i in range(batch):
        r = encode_record(os.urandom(size), topic, props, queue_offset=i, phys_offset=i * 300,
                          born_timestamp=1_700_000_000_000, store_timestamp=1_700_000_000_001)  # fmt: skip
        out += r
        sizes.append(len(r))
    return out, sizes


async def run_bench(a: argparse.Namespace) -> dict[str, float]:
    from bench.peers.sys_rocketq import RocketqClient

    from rocketq.aio import ConsumeFromWhere, ConsumeResult, Message, Producer, PushConsumer

    async with standalone("rq-consume-path-") as namesrv:
        topic = "ConsumePathBench"
        await RocketqClient({"namesrv": namesrv}).prepare(topic)  # 4 queues
        p = Producer("consume_path_bench_p", namesrv=namesrv)
        await p.start()
        for _ in range(64):  # a stored message per queue at least: the first pulls find some at once
            await p.send(Message(topic, b"x" * a.size))
        await p.shutdown()
        template, sizes = records(topic, a.size, a.batch)
        got = 0
        marks: dict[int, asyncio.Future[None]] = {}

        async def listener(msgs: list[Any]) -> ConsumeResult:
            nonlocal got
            bodies = [m.body for m in msgs]  # what the peers benchmark's listener does
            got += len(bodies)
            for k in [k for k in marks if got >= k]:
                marks.pop(k).set_result(None)
            return ConsumeResult.SUCCESS

        c = PushConsumer(
            "consume_path_bench",
            namesrv=namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=a.batch,
            consume_message_batch_max_size=a.batch,
        )
        c.subscribe(topic, "*")
        c.register_listener(listener)
        await c.start()
        while got < 64:  # the real messages: pulls and rebalance done once
            await asyncio.sleep(0.01)
        for ch in c.instance.remoting._channels.values():
            ch._transport = PullAnsweringTransport(ch, ch._transport, template, sizes, a.batch)
        loop = asyncio.get_running_loop()
        out: list[float] = []
        for rnd in range(a.runs + 1):  # the first run warms up
            target = got + a.n
            done = marks[target] = loop.create_future()
            PullAnsweringTransport.spent = 0.0
            c0, n0 = time.thread_time(), got
            await done
            if rnd:
                out.append((time.thread_time() - c0 - PullAnsweringTransport.spent) / (got - n0) * 1e6)
        await c.shutdown()
        return {"per_msg": statistics.median(out), "min": min(out), "max": max(out)}


def run_ab(a: argparse.Namespace) -> None:
    args = ["--n", str(a.n), "--runs", str(a.runs), "--size", str(a.size), "--batch", str(a.batch)]
    for tree, runs in ab_rounds(__file__, a.ab, a.rounds, args).items():
        v = [r["per_msg"] for r in runs]
        spread = f"{min(v):.3f}–{max(v):.3f}"
        print(f"{tree}: median {statistics.median(v):.3f} µs/msg over {len(v)} processes ({spread})")


def show(res: dict[str, float]) -> None:
    print(f"{res['per_msg']:.3f} µs of consumer CPU per message [{res['min']:.3f}–{res['max']:.3f}]")


def main() -> None:
    p = bench_parser(__doc__, 200_000, "messages per run")
    p.add_argument("--batch", type=int, default=256, help="messages per pull answer (and per listener call)")
    bench_main(p.parse_args(), run_bench, run_ab, show)


if __name__ == "__main__":
    main()
