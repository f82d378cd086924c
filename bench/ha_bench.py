"""Replication benchmarks: what a slave costs a master, how far behind it runs, how fast it catches up.

    rocketq bench ha [--reps 3] [--seconds 10] [--gap-mib 1024] [--json FILE] [--smoke]
    rocketq bench ha failover [...]          (the kill -9 campaign: bench/ha_campaign.py)

Throughput (same run, same machine, phases interleaved per repetition): 1 KiB sends, 64 in flight, from a
load-generator process (rocketq.aio.Producer, closed loop, 2 s warm-up), to
  single master | ASYNC_MASTER + slave | SYNC_MASTER + slave,  each with ASYNC_FLUSH and with SYNC_FLUSH
(real processes on 127.0.0.1, a fresh NameServer and store per phase; the slave runs ASYNC_FLUSH, as its
fdatasyncs would otherwise compete for the disk the master uses on this one machine). Reported: acknowledged
msg/s (SEND_OK only), the ratio to the single master of the same flush type, send p50/p99, and for the
replicated phases the replication lag: bytes behind (the master's haStatus #Diff, sampled every 200 ms) and
the time from the master streaming bytes to the slave acknowledging them (ackLagMillis, over the last 4096
acknowledgements).

Catch-up: a master with an attached slave; the slave is stopped, the master takes --gap-mib of 1 KiB
messages, the slave is started again; the rate is the gap over the time from its reconnection to its log
matching the master's, next to `dd if=/dev/zero bs=1M count=<gap> conv=fdatasync` in the same directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.integration.ha_support import (  # noqa: E402
    HACluster,
    create_topic,
    ha_status,
    invoke,
    runtime_info,
    start_ha_cluster,
    wait_caught_up,
    wait_slave_attached,
    wait_until,
)

from rocketq.protocol.codes import RequestCode  # noqa: E402

TOPIC = "HA_BENCH"
QUEUES = 8
SIZE = 1024
INFLIGHT = 64
PHASES = [
    ("single", "ASYNC_MASTER", False),
    ("async", "ASYNC_MASTER", True),
    ("sync", "SYNC_MASTER", True),
]
FLUSHES = ["ASYNC_FLUSH", "SYNC_FLUSH"]
BENCH_CONF = {
    "haHousekeepingInterval": "20000",
    "haSendHeartbeatInterval": "5000",
    "registerNameServerPeriod": "5000",
}


# -- the load generator -----------------------------------------------------------------------------------
async def load(ns: str, warm: float, secs: float) -> dict:
    """64 coroutines each awaiting its send (closed loop): SEND_OK per second and send latency."""
    from rocketq.aio import Message, Producer, SendStatus

    body = b"x" * SIZE
    lat: list[float] = []
    statuses: dict[str, int] = {}
    errors = 0
    async with Producer("PG_ha_bench", namesrv=ns, send_msg_timeout=10_000) as p:
        t_meas = time.monotonic() + warm
        t_end = t_meas + secs

        async def one() -> None:
            nonlocal errors
            while (t0 := time.monotonic()) < t_end:
                try:
                    r = await p.send(Message(TOPIC, body))
                except Exception:
                    errors += 1
                    continue
                if t0 >= t_meas:
                    statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
                    if r.status is SendStatus.SEND_OK:
                        lat.append(time.monotonic() - t0)

        await asyncio.gather(*(one() for _ in range(INFLIGHT)))
    return {"ok": len(lat), "seconds": secs, "statuses": statuses, "errors": errors,
            "p50_ms": round(pct(lat, 0.5) * 1000, 3), "p99_ms": round(pct(lat, 0.99) * 1000, 3)}  # fmt: skip


def loadgen(ns: str, warm: float, secs: float, in_process: bool) -> dict:
    """In its own process (the real run: its CPU is not the orchestrator's), or here (the smoke run)."""
    if in_process:
        from rocketq.remoting import run as aio_run

        return aio_run(load(ns, warm, secs))
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--loadgen", ns, str(warm), str(secs)],
        capture_output=True, text=True, timeout=warm + secs + 120,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"load generator failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(int(q * len(v)), len(v) - 1)]


def throughput_phase(
    c: HACluster,
    tag: str,
    role: str,
    with_slave: bool,
    flush: str,
    warm: float,
    secs: float,
    in_process: bool,
) -> dict:
    """One phase on the run's NameServer: a fresh master (and slave) named broker-<tag>, stopped after."""
    conf = {**BENCH_CONF, "mapedFileSizeCommitLog": str(256 << 20)}
    name = f"broker-{tag}"
    try:
        m = c.add(f"{tag}-m", name, role, flushDiskType=flush, **conf)
        create_topic(m.addr, TOPIC, QUEUES)
        if with_slave:  # ASYNC_FLUSH: its fdatasyncs would compete for the one disk the master uses here
            c.add(f"{tag}-s", name, "SLAVE", 1, **conf)
            wait_slave_attached(m)
        diffs: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                try:
                    conns = ha_status(m.addr)["haConnectionInfo"]
                except Exception:
                    continue
                if conns:
                    diffs.append(conns[0]["diff"])

        sampler = threading.Thread(target=sample, daemon=True)
        if with_slave:
            sampler.start()
        res = loadgen(c.ns, warm, secs, in_process)
        stop.set()
        if with_slave:
            sampler.join(5)
            conn = ha_status(m.addr)["haConnectionInfo"][0]
            res.update(
                lag_bytes_p50=pct(diffs, 0.5), lag_bytes_p99=pct(diffs, 0.99),
                ack_lag_ms_p50=conn["ackLagMillisP50"], ack_lag_ms_p99=conn["ackLagMillisP99"],
            )  # fmt: skip
        res["msg_s"] = round(res["ok"] / res["seconds"], 1)
        return res
    finally:
        for node in (f"{tag}-s", f"{tag}-m"):
            if node in c.nodes:
                c.stop(node)
                shutil.rmtree(c.nodes[node].home, ignore_errors=True)  # the disk is shared


def dd_rate(directory: Path, mib: int) -> float:
    path = directory / "dd.bin"
    t = time.monotonic()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fdatasync"],
                   check=True, capture_output=True)  # fmt: skip
    dt = time.monotonic() - t
    path.unlink()
    return mib * (1 << 20) / dt


async def _fill(ns: str, target: int, addr: str) -> None:
    from rocketq.aio import Message, Producer

    body = b"g" * SIZE
    async with Producer("PG_ha_fill", namesrv=ns, send_msg_timeout=30_000) as p:
        stop = False

        async def one() -> None:
            nonlocal stop
            while not stop:
                await p.send([Message(TOPIC, body) for _ in range(32)])

        async def watch() -> None:
            nonlocal stop
            while True:
                resp = await invoke(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
                if int(json.loads(resp.body_bytes)["table"]["commitLogMaxOffset"]) >= target:
                    break
                await asyncio.sleep(0.5)
            stop = True

        await asyncio.gather(watch(), *(one() for _ in range(8)))


def catchup_phase(home: Path, gap_mib: int) -> dict:
    c = start_ha_cluster(home)
    try:
        conf = {**BENCH_CONF, "mapedFileSizeCommitLog": str(256 << 20)}
        m = c.add("m", "broker-catchup", "ASYNC_MASTER", **conf)
        create_topic(m.addr, TOPIC, QUEUES)
        s = c.add("s", "broker-catchup", "SLAVE", 1, **conf)
        wait_slave_attached(m)
        # the slave holds the start of the log (an empty one would start over at the master's last segment)
        asyncio.run(_fill(c.ns, 1 << 20, m.addr))
        wait_caught_up(m, s)
        assert c.stop("s") == 0
        start = int(runtime_info(m.addr)["commitLogMaxOffset"])
        target = start + gap_mib * (1 << 20)
        asyncio.run(_fill(c.ns, target, m.addr))
        end = int(runtime_info(m.addr)["commitLogMaxOffset"])
        c.start("s")
        wait_slave_attached(m, timeout=60)
        t0 = time.monotonic()
        wait_until(
            lambda: int(runtime_info(s.addr)["commitLogMaxOffset"]) >= end, 600, "the slave to catch up"
        )
        dt = time.monotonic() - t0
        gap = end - start
        dd = dd_rate(home, gap_mib)
        return {"gap_bytes": gap, "seconds": round(dt, 2), "mb_s": round(gap / dt / 1e6, 1),
                "dd_mb_s": round(dd / 1e6, 1), "ratio_to_dd": round(gap / dt / dd, 2)}  # fmt: skip
    finally:
        c.close()


def run(reps: int, secs: float, warm: float, gap_mib: int, in_process: bool = False, log=print) -> dict:
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="rocketq-ha-bench-") as tmp:
        c = start_ha_cluster(Path(tmp) / "throughput")
        try:
            for rep in range(reps):
                for flush in FLUSHES:
                    for name, role, slave in PHASES:
                        key = f"{name}/{flush}"
                        tag = f"{rep}-{name}-{flush.split('_')[0].lower()}"
                        r = throughput_phase(c, tag, role, slave, flush, warm, secs, in_process)
                        results.setdefault(key, []).append(r)
                        log(f"rep {rep + 1} {key}: {r['msg_s']} msg/s {r}")
        finally:
            c.close()
        catchup = catchup_phase(Path(tmp) / "catchup", gap_mib)
        log(f"catch-up: {catchup}")
    return {"throughput": results, "catchup": catchup, "reps": reps, "seconds": secs}


def med(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else 0.0


def report(res: dict) -> str:
    t = res["throughput"]
    lines = [
        f"1 KiB sends, {INFLIGHT} in flight, {res['seconds']:g} s per phase, median of {res['reps']} "
        "(phases interleaved per repetition)",
        "",
        "| flush | setup | SEND_OK msg/s | ÷ single master | send p50 / p99 ms | lag bytes p50 / p99 | "
        "ack lag ms p50 / p99 |",
        "|---|---|---|---|---|---|---|",
    ]
    for flush in FLUSHES:
        base = med(t[f"single/{flush}"], "msg_s") or 1.0
        for name, label in (("single", "single master"), ("async", "ASYNC_MASTER + slave"),
                            ("sync", "SYNC_MASTER + slave")):  # fmt: skip
            rows = t[f"{name}/{flush}"]
            msg_s = med(rows, "msg_s")
            lag = (f"{med(rows, 'lag_bytes_p50'):.0f} / {med(rows, 'lag_bytes_p99'):.0f}"
                   if name != "single" else "-")  # fmt: skip
            ack = (f"{med(rows, 'ack_lag_ms_p50'):.2f} / {med(rows, 'ack_lag_ms_p99'):.2f}"
                   if name != "single" else "-")  # fmt: skip
            lines.append(
                f"| {flush} | {label} | {msg_s:,.0f} | {msg_s / base:.2f} | "
                f"{med(rows, 'p50_ms'):.2f} / {med(rows, 'p99_ms'):.2f} | {lag} | {ack} |"
            )
    cu = res["catchup"]
    lines += [
        "",
        f"Catch-up of a {cu['gap_bytes'] / (1 << 20):.0f} MiB gap (1 KiB messages): {cu['mb_s']} MB/s in "
        f"{cu['seconds']} s; dd (1 MiB blocks, fdatasync) {cu['dd_mb_s']} MB/s; ratio {cu['ratio_to_dd']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--loadgen":  # the load generator's own process
        from rocketq.remoting import run as aio_run

        print(json.dumps(aio_run(load(argv[1], float(argv[2]), float(argv[3])))))
        return 0
    if argv and argv[0] == "failover":
        from bench.ha_campaign import main as campaign

        return campaign(argv[1:])
    ap = argparse.ArgumentParser(prog="rocketq bench ha", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--gap-mib", type=int, default=1024)
    ap.add_argument("--smoke", action="store_true", help="one short repetition, a 32 MiB gap")
    ap.add_argument("--json", help="write the raw results here")
    a = ap.parse_args(argv)
    if a.smoke:
        a.reps, a.seconds, a.warmup, a.gap_mib = 1, 0.5, 0.3, 16
    res = run(a.reps, a.seconds, a.warmup, a.gap_mib, in_process=a.smoke)
    print(report(res))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
