"""rocketq and one or more peers side by side on one cell, interleaved, with each CPU's busy time per message.

    rocketq bench pair [--tier B] [--size 128] [--window 1] [--seconds 3] [--reps 4]
        [--systems rocketq,beanstalkd] [--perf]

A quick look at one cell of the peers benchmark (bench/peers, which takes an hour for the whole matrix):
every server starts once, pinned to CPU 1, with a fresh data dir; this process, pinned to CPU 0 on uvloop,
drives each in turn with the peers benchmark's own client (closed loop, ``--window`` sends in flight), in
A B B A order. Per phase it prints msg/s, the publish-ack p50/p99, and for each CPU the busy time per message
(user + system + irq + softirq from /proc/stat), so a gap splits into the server's CPU, the client's CPU and
the time both idle (wake-ups).

A system is a name from bench/peers (rocketq, beanstalkd, redis, nats, rabbitmq), optionally with
``@TREE`` (the server runs from that source tree: an A/B of two rocketq versions) or ``#k=v;k2=v2`` (extra
broker.conf lines for rocketq), e.g. ``--systems 'rocketq,rocketq#messageIndexEnable=false'``. Bounds
(bench/floor.py): ``rocketq%nostore`` answers sends without storing them, ``rocketq%floor`` answers them right
after the frame decode, and ``+bare`` drives a rocketq server with a bare client (one prebuilt frame) instead
of the producer, e.g. ``--systems 'rocketq,rocketq%floor+bare,beanstalkd'``.

--perf records every CPU (perf record -a, 2 s of each phase) and prints where each CPU's samples went per
message, by process and by kernel / interpreter / extension: µs per message ≈ samples / rate / messages.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench.peers

from bench.peers.common import cpu_busy, payload_template, stamp
from bench.peers.loadgen import SYSTEMS

from bench import floor

SERVER_CPU, CLIENT_CPU = 1, 0
PERF_HZ = 10_000
PERF_S = 2.0
_TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


async def closed_loop(cl: Any, topic: str, size: int, window: int, seconds: float, batch: int = 0) -> int:
    """Closed loop, `window` sends in flight; with `batch`, each send is a batch of that many messages."""
    buf = payload_template(size)
    end = time.monotonic() + seconds
    n = 0

    lat: list[int] = []

    async def one() -> None:
        nonlocal n
        while time.monotonic() < end:
            t = time.monotonic_ns()
            if batch:
                await cl.publish_batch(topic, [stamp(buf, t) for _ in range(batch)])
            else:
                await cl.publish(topic, stamp(buf, t))
            lat.append(time.monotonic_ns() - t)
            n += batch or 1

    await asyncio.gather(*(one() for _ in range(window)))
    lat.sort()
    if lat:
        LAST_LAT[:] = [lat[len(lat) // 2] // 1000, lat[len(lat) * 99 // 100] // 1000]
    return n


LAST_LAT = [0, 0]  # ack latency p50 / p99 (µs) of the last closed_loop


class Entry:
    """One system of the comparison: its server (started once) and a producer client."""

    def __init__(self, spec: str, tier: str, root: str) -> None:  # root: this server's own data dir
        self.spec = spec
        name, _, conf = spec.partition("#")
        name, _, client = name.partition("+")
        name, _, variant = name.partition("%")
        name, _, self.tree = name.partition("@")
        mod = importlib.import_module(f"bench.peers.{SYSTEMS[name]}")
        if tier not in mod.SERVER.tiers:
            sys.exit(f"{name} has no tier {tier} (its tiers: {', '.join(mod.SERVER.tiers)})")
        if (variant or client) and name != "rocketq":
            sys.exit(f"{spec}: variants (%) and the bare client (+bare) are rocketq's only")
        if variant:
            if variant not in floor.VARIANTS or self.tree:
                sys.exit(f"{spec}: variants are {', '.join(floor.VARIANTS)}, of this checkout (no @TREE)")
            self.tree = floor.build_variant(variant, os.path.join(root, "tree"))
        if client not in ("", "bare"):
            sys.exit(f"{spec}: the only other client is +bare")
        self.server = mod.SERVER(tier, root, SERVER_CPU)
        self.conf = conf
        self.client_cls = floor.BareSendClient if client else mod.CLIENT
        self.client: Any = None

    async def start(self, topic: str) -> None:
        if self.tree:  # the server's code from another source tree
            tree = os.path.abspath(self.tree)
            env = dict(os.environ, PYTHONPATH=f"{tree}/src:{tree}")
            self.server.env = lambda: env  # type: ignore[method-assign]
        os.environ["ROCKETQ_BENCH_BROKER_CONF"] = self.conf  # read by the rocketq server's prepare()
        try:
            self.server.start()
        finally:
            os.environ.pop("ROCKETQ_BENCH_BROKER_CONF", None)
        self.client = self.client_cls(self.server.client_args())
        await self.client.connect("producer")
        await self.client.prepare(topic)

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        self.server.cleanup()


def perf_report(path: str, msgs: float) -> list[str]:
    """Samples per (CPU, process, object) as µs per message, the largest first."""
    r = subprocess.run(
        ["perf", "report", "-i", path, "-n", "--sort", "cpu,comm,dso", "--stdio"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    rows = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].endswith("%") and parts[1].isdigit():
            us = int(parts[1]) / PERF_HZ * 1e6 / msgs
            if us >= 0.5:
                where = " ".join(parts[4:])[:40]
                rows.append(f"      cpu{int(parts[2])} {parts[3][:16]:16s} {where:40s} {us:6.1f}")
    return rows


async def phase(e: Entry, a: argparse.Namespace, label: str) -> float:
    perf = None
    if a.perf:
        data = os.path.join(a.scratch, f"perf-{label}.data")
        perf = subprocess.Popen(
            ["perf", "record", "-q", "-a", "-F", str(PERF_HZ), "-o", data, "--", "sleep", str(PERF_S)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        await asyncio.sleep(0.2)
    b0 = cpu_busy()
    n = await closed_loop(e.client, "pair", a.size, a.window, a.seconds)
    b1 = cpu_busy()
    rate = n / a.seconds
    p50, p99 = LAST_LAT
    per = _TICK_US / max(n, 1)
    cpus = "  ".join(
        f"cpu{c} busy {(b1[c][0] - b0[c][0]) * per:5.1f} idle {(b1[c][1] - b0[c][1]) * per:5.1f}"
        for c in sorted(b0)
    )
    print(f"{label:40s} {rate:9,.0f} msg/s  ack p50 {p50:6.0f} p99 {p99:6.0f} µs  µs/msg {cpus}")
    if perf is not None:
        perf.wait()
        for row in perf_report(data, rate * PERF_S):
            print(row)
    return rate


async def main_async(a: argparse.Namespace) -> None:
    os.sched_setaffinity(0, {CLIENT_CPU})
    with tempfile.TemporaryDirectory(prefix="peer-pair-") as root:
        a.scratch = root
        entries = [Entry(s, a.tier, os.path.join(root, str(i))) for i, s in enumerate(a.systems.split(","))]
        try:
            for e in entries:
                await e.start("pair")
                await closed_loop(e.client, "pair", a.size, a.window, 1.0)  # warm-up
            rates: dict[str, list[float]] = {e.spec: [] for e in entries}
            for rep in range(a.reps):
                for e in entries if rep % 2 == 0 else entries[::-1]:
                    rates[e.spec].append(await phase(e, a, f"rep {rep} {e.spec}"))
            base = statistics.median(rates[entries[0].spec])
            print(f"tier {a.tier}, {a.size} B, {a.window} in flight, {a.reps} phases of {a.seconds:g} s:")
            for e in entries:
                r = rates[e.spec]
                med = statistics.median(r)
                spread = f"[{min(r):,.0f}–{max(r):,.0f}]"
                print(f"  {e.spec:38s} median {med:9,.0f} msg/s {spread}  ÷ first {med / base:.2f}")
        finally:
            for e in entries:
                await e.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", choices=("A", "B"), default="B")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--systems", default="rocketq,beanstalkd")
    ap.add_argument("--perf", action="store_true", help="perf record -a during each phase")
    a = ap.parse_args()
    try:
        import uvloop

        uvloop.run(main_async(a))
    except ImportError:
        asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
