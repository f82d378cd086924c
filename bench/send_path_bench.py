"""The broker's per-message CPU for SEND_MESSAGE_V2 on the event-loop thread, in process (no sockets).

    python bench/send_path_bench.py [--n 20000] [--runs 5] [--size 1024] [--window 64] [--tags]
    python bench/send_path_bench.py --ab /path/to/tree_a /path/to/tree_b [--rounds 6] [--runs 2]
    python bench/send_path_bench.py --ab TREE TREE::metricsExporterType=PROM,metricsPromExporterPort=0

A real BrokerController (ASYNC_FLUSH, store in a temp dir) and a server Channel whose transport only records
what is written. Requests are pre-encoded as the rocketq producer sends them (V2 short-name header, UNIQ_KEY +
WAIT properties, 1 KiB body) and fed to Channel.data_received ``window`` frames per call, like a pipelined
client: frame decode, dispatch, header decode, checks, MessageStore.put_message, response encode and the
transport write are all measured. Reports CPU µs per message of this thread (time.thread_time; the store's
flush threads are not counted) and wall µs per message, per run, then median/min/max.

--ab runs this script in child processes alternately against two source trees (PYTHONPATH=tree/src:tree),
``--rounds`` times each, and compares the pooled per-run numbers: on a noisy machine only interleaved runs
are comparable. ``TREE::key=value,key=value`` runs that tree with those broker.conf keys (``--conf`` in the
child), so one tree can be compared with itself under another configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any


class FakeTransport:
    """Records writes; enough of asyncio.Transport for Channel."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: Any) -> None:
        self.out.append(bytes(data))

    def writelines(self, parts: Any) -> None:
        self.out.append(b"".join(bytes(p) for p in parts))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def build_chunks(topic: str, n: int, size: int, window: int, tags: bool, opaque0: int) -> list[bytes]:
    """n SEND_MESSAGE_V2 frames as rocketq's producer builds them (Producer._header), window per chunk."""
    from rocketq.client.codec import UNIQ_IDS
    from rocketq.protocol.codes import RequestCode
    from rocketq.protocol.frame import RemotingCommand
    from rocketq.protocol.properties import properties_to_string

    body = os.urandom(size)
    frames = []
    for i in range(n):
        props = {"UNIQ_KEY": UNIQ_IDS.next_id(), "WAIT": "true"}
        if tags:
            props = {"TAGS": "TagA", "KEYS": f"k{i}", **props}
        ext = {
            "a": "bench_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
            "g": str(time.time_ns() // 1_000_000), "h": "0", "i": properties_to_string(props), "j": "0",
            "k": "false", "m": "false",
        }  # fmt: skip
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body)
        cmd.opaque = opaque0 + i
        frames.append(cmd.encode())
    return [b"".join(frames[i : i + window]) for i in range(0, n, window)]


def check_responses(out: list[bytes], n: int) -> None:
    from rocketq.protocol.frame import FrameDecoder

    dec = FrameDecoder()
    resps = dec.feed(b"".join(out))
    assert len(resps) == n, (len(resps), n)
    bad = [r for r in resps if r.code != 0]
    assert not bad, bad[0]
    for key in ("msgId", "queueId", "queueOffset"):
        assert key in resps[-1].ext_fields, resps[-1]


async def run_bench(args: argparse.Namespace) -> list[dict[str, float]]:
    from rocketq.broker.config import load_config
    from rocketq.broker.controller import BrokerController
    from rocketq.protocol.codes import RequestCode
    from rocketq.protocol.frame import RemotingCommand

    with tempfile.TemporaryDirectory(prefix="rq-send-bench-") as tmp:
        cfg = load_config(
            None,
            {
                "storePathRootDir": tmp,
                "listenPort": 0,
                "brokerIP1": "127.0.0.1",
                "flushDiskType": "ASYNC_FLUSH",
                "autoCreateTopicEnable": "false",
                "diskSpaceWarningLevelRatio": "99",  # a shared disk's fill level must not refuse the sends
                **dict(kv.split("=", 1) for kv in args.conf),
            },
        )
        ctl = BrokerController(cfg)
        await ctl.start()
        try:
            ch = ctl.server._make_channel()
            tr = FakeTransport()
            ch.connection_made(tr)  # type: ignore[arg-type]
            topic = "BenchSend"
            ext = {"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
            req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
            req.opaque = 1
            ch.data_received(req.encode())
            for _ in range(50):
                await asyncio.sleep(0.01)
                if tr.out:
                    break
            assert tr.out, "no answer to UPDATE_AND_CREATE_TOPIC"
            tr.out.clear()
            results = []
            opaque = 10
            for run in range(args.runs + 1):  # the first run warms up
                chunks = build_chunks(topic, args.n, args.size, args.window, args.tags, opaque)
                opaque += args.n
                gc.collect()
                await asyncio.sleep(0)
                r0 = resource.getrusage(resource.RUSAGE_THREAD)
                c0, w0 = time.thread_time(), time.perf_counter()
                feed = ch.data_received
                for i, chunk in enumerate(chunks):
                    feed(chunk)
                    if not i % 16:
                        await asyncio.sleep(0)  # let the loop turn, as between socket reads
                while ch._backlog:  # a read of more than 16 frames is handled 16 per loop turn
                    await asyncio.sleep(0)
                c1, w1 = time.thread_time(), time.perf_counter()
                r1 = resource.getrusage(resource.RUSAGE_THREAD)
                check_responses(tr.out, args.n)
                tr.out.clear()
                if run:
                    per = 1e6 / args.n
                    results.append({
                        "cpu_us": (c1 - c0) * per, "wall_us": (w1 - w0) * per,
                        "user_us": (r1.ru_utime - r0.ru_utime) * per,
                        "sys_us": (r1.ru_stime - r0.ru_stime) * per,
                    })  # fmt: skip
            ch.connection_lost(None)  # the fake transport never reports it
            return results
        finally:
            await ctl.shutdown()


def summary(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med:6.2f} (min {min(values):6.2f}, max {max(values):6.2f}, n={len(values)})"


def run_ab(args: argparse.Namespace) -> None:
    trees = args.ab
    pooled: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for rnd in range(args.rounds):
        order = trees if rnd % 2 == 0 else trees[::-1]
        for tree in order:
            path, _, conf = tree.partition("::")
            env = dict(os.environ, PYTHONPATH=f"{path}/src:{path}")
            cmd = [sys.executable, os.path.abspath(__file__), "--json", "--n", str(args.n), "--runs",
                   str(args.runs), "--size", str(args.size), "--window", str(args.window)]  # fmt: skip
            for kv in filter(None, conf.split(",")):
                cmd += ["--conf", kv]
            if args.tags:
                cmd.append("--tags")
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if r.returncode:
                sys.exit(f"{tree} failed:\n{r.stdout}\n{r.stderr}")
            res = json.loads(r.stdout.strip().splitlines()[-1])
            pooled[tree] += res
            runs = " ".join(f"{x['cpu_us']:.2f}" for x in res)
            print(f"round {rnd} {tree}: cpu µs/msg {runs}", flush=True)
    base = statistics.median(x["cpu_us"] for x in pooled[trees[0]])
    for tree in trees:
        cpu = [x["cpu_us"] for x in pooled[tree]]
        wall = [x["wall_us"] for x in pooled[tree]]
        print(f"{tree}\n  cpu  µs/msg {summary(cpu)}  ({statistics.median(cpu) / base - 1:+.1%})")
        print(f"  wall µs/msg {summary(wall)}")
        print(f"  user µs/msg {summary([x['user_us'] for x in pooled[tree]])}")
        print(f"  sys  µs/msg {summary([x['sys_us'] for x in pooled[tree]])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20000, help="messages per run")
    p.add_argument("--runs", type=int, default=5, help="measured runs (after one warm-up run)")
    p.add_argument("--size", type=int, default=1024, help="body bytes")
    p.add_argument("--window", type=int, default=64, help="frames per data_received call")
    p.add_argument("--tags", action="store_true", help="messages carry TAGS and KEYS")
    p.add_argument("--json", action="store_true", help="print the per-run results as JSON (for --ab)")
    p.add_argument("--ab", nargs=2, metavar="TREE", help="compare two source trees, interleaved")
    p.add_argument("--rounds", type=int, default=6, help="--ab: child processes per tree")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf key")
    args = p.parse_args()
    if args.ab:
        run_ab(args)
        return
    from rocketq.remoting import new_event_loop

    loop = new_event_loop()
    try:
        results = loop.run_until_complete(run_bench(args))
    finally:
        loop.close()
    if args.json:
        print(json.dumps(results))
        return
    print(f"SEND_MESSAGE_V2 {args.size} B body, {args.window} frames per read, {args.n} messages per run")
    print(f"  cpu  µs/msg {summary([r['cpu_us'] for r in results])}")
    print(f"  wall µs/msg {summary([r['wall_us'] for r in results])}")
    print(f"  user µs/msg {summary([r['user_us'] for r in results])}")
    print(f"  sys  µs/msg {summary([r['sys_us'] for r in results])}")


if __name__ == "__main__":
    main()
