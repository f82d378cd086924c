"""What the metrics exporter costs: the send path with and without it, and one scrape.

    rocketq bench metrics [--rounds 6] [--runs 2] [--n 20000] [--size 128] [--scrape-n 200000] [--smoke]

1. Send path (bench/send_path_bench.py, in process, one tree): the broker's CPU per SEND_MESSAGE_V2 on
   its event-loop thread under three configurations, run interleaved in child processes ``--rounds``
   times each: metricsExporterType=DISABLE; PROM (what rocketq counts by default: nothing on the send
   path); PROM with enableRemotingMetrics=true (rocketmq_rpc_latency times every request through the
   remoting RPC hook).
2. Scrape: an in-process broker with PROM takes ``--scrape-n`` messages over 8 queues, then one scrape
   is timed (the loop-thread part, prepare(), and the whole render, which reads the new consume queue
   units on the worker thread); then a scrape with nothing new.

Figures taken on a loaded machine are noisy; compare the configurations of one run only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {
    "DISABLE": [],
    "PROM": ["metricsExporterType=PROM", "metricsPromExporterPort=0"],
    "PROM+rpc": ["metricsExporterType=PROM", "metricsPromExporterPort=0", "enableRemotingMetrics=true"],
}


def send_path(args: argparse.Namespace) -> dict[str, list[float]]:
    pooled: dict[str, list[float]] = {name: [] for name in CONFIGS}
    names = list(CONFIGS)
    for rnd in range(args.rounds):
        order = names if rnd % 2 == 0 else names[::-1]
        for name in order:
            cmd = [sys.executable, os.path.join(HERE, "send_path_bench.py"), "--json", "--n", str(args.n),
                   "--runs", str(args.runs), "--size", str(args.size)]  # fmt: skip
            for kv in CONFIGS[name]:
                cmd += ["--conf", kv]
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if r.returncode:
                sys.exit(f"send path bench ({name}) failed:\n{r.stdout}\n{r.stderr}")
            res = json.loads(r.stdout.strip().splitlines()[-1])
            pooled[name] += [x["cpu_us"] for x in res]
            runs = " ".join(f"{x['cpu_us']:.2f}" for x in res)
            print(f"round {rnd} {name:9}: cpu µs/msg {runs}", flush=True)
    return pooled


async def scrape_cost(n: int, size: int) -> dict[str, float]:
    if os.path.dirname(HERE) not in sys.path:
        sys.path.insert(0, os.path.dirname(HERE))
    from bench.send_path_bench import FakeTransport, build_chunks, check_responses

    from rocketq.broker.config import load_config
    from rocketq.broker.controller import BrokerController
    from rocketq.protocol.codes import RequestCode
    from rocketq.protocol.frame import RemotingCommand

    with tempfile.TemporaryDirectory(prefix="rq-metrics-bench-") as tmp:
        cfg = load_config(None, {
            "storePathRootDir": tmp, "listenPort": 0, "flushDiskType": "ASYNC_FLUSH",
            "diskSpaceWarningLevelRatio": "99", "metricsExporterType": "PROM", "metricsPromExporterPort": "0",
            "mapedFileSizeCommitLog": str(256 * 1024 * 1024),
        })  # fmt: skip
        ctl = BrokerController(cfg)
        await ctl.start()
        try:
            ch = ctl.server._make_channel()
            tr = FakeTransport()
            ch.connection_made(tr)  # type: ignore[arg-type]
            ext = {"topic": "BenchSend", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6"}
            req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
            req.opaque = 1
            ch.data_received(req.encode())
            while not tr.out:
                await asyncio.sleep(0.01)
            tr.out.clear()
            exporter = ctl.metrics.exporter
            await exporter.render("")  # the first scrape after start
            sent = 0
            while sent < n:
                batch = min(20_000, n - sent)
                for i, chunk in enumerate(build_chunks("BenchSend", batch, size, 64, False, 10 + sent)):
                    ch.data_received(chunk)
                    if not i % 16:
                        await asyncio.sleep(0)
                while ch._backlog:
                    await asyncio.sleep(0)
                check_responses(tr.out, batch)
                tr.out.clear()
                sent += batch
            t0 = time.perf_counter()
            exporter.collector.prepare()
            prepare_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            body, _ = await exporter.render("")
            render_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            await exporter.render("")
            idle_s = time.perf_counter() - t0
            ch.connection_lost(None)
            assert b"rocketmq_messages_in_total" in body
            return {
                "messages": n, "prepare_ms": prepare_s * 1e3, "render_ms": render_s * 1e3,
                "render_ns_per_new_message": render_s * 1e9 / n, "idle_render_ms": idle_s * 1e3,
                "body_bytes": len(body),
            }  # fmt: skip
        finally:
            await ctl.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--scrape-n", type=int, default=200_000)
    p.add_argument("--smoke", action="store_true", help="one short round of each (numbers come out)")
    args = p.parse_args(argv)
    if args.smoke:
        args.rounds, args.runs, args.n, args.scrape_n = 1, 1, 2000, 5000
    pooled = send_path(args)
    base = statistics.median(pooled["DISABLE"])
    n = len(pooled["DISABLE"])
    print(f"send path, {args.size} B body: broker loop CPU µs/message, median [min-max] of {n} runs")
    for name, values in pooled.items():
        med = statistics.median(values)
        print(f"  {name:9} {med:6.2f} [{min(values):.2f}-{max(values):.2f}]  {med / base - 1:+.1%}")
    from rocketq.remoting import new_event_loop

    loop = new_event_loop()
    try:
        res = loop.run_until_complete(scrape_cost(args.scrape_n, args.size))
    finally:
        loop.close()
    print(
        f"scrape after {res['messages']} new messages: prepare (loop) {res['prepare_ms']:.2f} ms, "
        f"render {res['render_ms']:.1f} ms ({res['render_ns_per_new_message']:.0f} ns per new message), "
        f"next scrape {res['idle_render_ms']:.1f} ms, {res['body_bytes']} bytes"
    )
    print("RESULT " + json.dumps({"send_path": {k: statistics.median(v) for k, v in pooled.items()}, **res}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
