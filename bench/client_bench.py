"""Broker + client throughput and end-to-end latency through the public client API.

    rocketq bench client [--reps 3] [--seconds 4] [--rate 1000] [--e2e-seconds 10] [--quick]

Starts its own `rocketq standalone` (ASYNC_FLUSH, small store files) on free 127.0.0.1 ports in a temp
dir, creates an 8-queue topic with `rocketq admin updateTopic`, then per repetition (phases interleaved):
  a) rocketq.Producer.send, 1 KiB, one call in flight                      -> msg/s
  b) rocketq.aio.Producer.send, 1 KiB, 64 coroutines in flight              -> msg/s, broker CPU s per 100k
  c) rocketq.Producer.send([32 x 1 KiB]), one batch in flight               -> msg/s, MB/s
  d) open loop at --rate msg/s for --e2e-seconds: each send is scheduled at its intended time (a late
     scheduler does not move the intended time, so there is no coordinated omission); the intended
     time.time_ns() is in the body; an aio PushConsumer (clustering, fresh group and topic, FIRST_OFFSET)
     records receive time - intended time; publish-ack latency = ack time - intended time.
Prints a markdown section (median [min-max] over the repetitions).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import rocketq
import rocketq.aio as aio
from rocketq.remoting import run as aio_run
from rocketq.remoting import uvloop_enabled

ROOT = Path(__file__).resolve().parents[1]
ROCKETQ = str(ROOT / ".venv" / "bin" / "rocketq")
BROKER_CONF = {
    "brokerName": "broker-a",
    "flushDiskType": "ASYNC_FLUSH",
    "mapedFileSizeCommitLog": "67108864",
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
    "diskSpaceWarningLevelRatio": "99",
    "diskSpaceCleanForciblyRatio": "99",
    "diskMaxUsedSpaceRatio": "99",
}
BODY = b"x" * 1024
QUEUES = 8
CLK_TCK = os.sysconf("SC_CLK_TCK")
LAT_HEAD = struct.Struct(">cq")  # kind (b"W" warm-up / b"M" measured), intended send time_ns


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Standalone:
    """`rocketq standalone` in a child process; ready once the broker's boot line is printed."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONF.items()))
        self.ns_port, self.broker_port = free_port(), free_port()
        self.namesrv = f"127.0.0.1:{self.ns_port}"
        args = [ROCKETQ, "standalone", "--home", str(home), "--namesrv-port", str(self.ns_port)]
        args += ["--broker-port", str(self.broker_port), "-c", str(conf)]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()
        if not self._ready.wait(60):
            self.stop()
            raise RuntimeError("standalone did not boot:\n" + "".join(self.lines[-30:]))

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if "The broker[" in line:
                self._ready.set()

    def cpu_seconds(self) -> float:
        """utime + stime of the standalone process (all its threads)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def update_topic(namesrv: str, topic: str) -> None:
    q = str(QUEUES)
    cmd = [ROCKETQ, "admin", "updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", topic]
    cmd += ["-r", q, "-w", q]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"updateTopic {topic} failed: {out.stdout}{out.stderr}")


# -- (a) sync, 1 in flight; (c) sync batches ---------------------------------------------------------
def sync_send(namesrv: str, topic: str, seconds: float, batch: int) -> dict[str, float]:
    p = rocketq.Producer(f"bench_sync_{batch}_{os.getpid()}", namesrv=namesrv)
    p.start()
    try:

        def loop(until: float) -> int:
            n = 0
            while time.perf_counter() < until:
                if batch == 1:
                    r = p.send(rocketq.Message(topic, BODY))
                else:
                    r = p.send([rocketq.Message(topic, BODY) for _ in range(batch)])
                assert r.status is rocketq.SendStatus.SEND_OK, r.status
                n += batch
            return n

        loop(time.perf_counter() + 0.5)  # warm-up: route, connection
        t0 = time.perf_counter()
        n = loop(t0 + seconds)
        dt = time.perf_counter() - t0
    finally:
        p.shutdown()
    return {"msgs": n, "msg_s": n / dt, "mb_s": n * len(BODY) / dt / 1e6}


# -- (b) aio, 64 in flight ---------------------------------------------------------------------------
async def aio_send(sa: Standalone, topic: str, seconds: float, window: int) -> dict[str, float]:
    p = aio.Producer(f"bench_aio_{os.getpid()}", namesrv=sa.namesrv)
    await p.start()
    try:

        async def worker(until: float, counts: list[int]) -> None:
            while time.perf_counter() < until:
                r = await p.send(aio.Message(topic, BODY))
                assert r.status is aio.SendStatus.SEND_OK, r.status
                counts[0] += 1

        async def phase(secs: float) -> int:
            counts = [0]
            until = time.perf_counter() + secs
            await asyncio.gather(*(worker(until, counts) for _ in range(window)))
            return counts[0]

        await phase(0.5)
        cpu0, own0, t0 = sa.cpu_seconds(), time.process_time(), time.perf_counter()
        n = await phase(seconds)
        dt = time.perf_counter() - t0
        cpu, own = sa.cpu_seconds() - cpu0, time.process_time() - own0
    finally:
        await p.shutdown()
    return {
        "msgs": n,
        "msg_s": n / dt,
        "broker_cpu_100k": cpu / n * 1e5,
        "client_cpu_100k": own / n * 1e5,
        "broker_cpu_frac": cpu / dt,
    }


# -- (d) open-loop end-to-end latency ----------------------------------------------------------------
async def e2e(namesrv: str, topic: str, group: str, rate: float, seconds: float) -> dict[str, float]:
    n_total = int(rate * seconds)
    e2e_ns = np.zeros(n_total, dtype=np.int64)
    ack_ns = np.zeros(n_total, dtype=np.int64)
    got = np.zeros(n_total, dtype=bool)
    warm: set[int] = set()
    all_in = asyncio.Event()
    received = [0]

    async def listener(msgs: list[Any]) -> aio.ConsumeResult:
        now = time.time_ns()
        for m in msgs:
            kind, intended = LAT_HEAD.unpack_from(m.body)
            if kind == b"W":
                warm.add(m.queue_id)
                continue
            seq = struct.unpack_from(">q", m.body, LAT_HEAD.size)[0]
            if not got[seq]:  # a redelivery would not be a new sample
                got[seq] = True
                e2e_ns[seq] = now - intended
                received[0] += 1
        if received[0] >= n_total:
            all_in.set()
        return aio.ConsumeResult.SUCCESS

    first = aio.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    c = aio.PushConsumer(group, namesrv=namesrv, consume_from_where=first)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    p = aio.Producer(group + "_P", namesrv=namesrv)
    await p.start()
    await c.start()
    try:
        # warm-up: one message per queue; measure only once the consumer receives from all 8 queues
        for mq in await p.fetch_publish_message_queues(topic):
            body = LAT_HEAD.pack(b"W", 0) + BODY[LAT_HEAD.size :]
            await p.send(aio.Message(topic, body), queue=mq)
        deadline = time.monotonic() + 60
        while len(warm) < QUEUES:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumer got warm-up messages from only {len(warm)} queues")
            await asyncio.sleep(0.05)

        pad = BODY[LAT_HEAD.size + 8 :]
        errors = [0]

        async def send_one(seq: int, intended: int) -> None:
            body = LAT_HEAD.pack(b"M", intended) + struct.pack(">q", seq) + pad
            try:
                await p.send(aio.Message(topic, body))
                ack_ns[seq] = time.time_ns() - intended
            except Exception:
                errors[0] += 1
                ack_ns[seq] = -1

        period_ns = int(1e9 / rate)
        tasks: set[asyncio.Task[None]] = set()
        wall0, mono0 = time.time_ns(), time.perf_counter_ns()
        max_late_ns = 0
        for seq in range(n_total):
            due = seq * period_ns
            wait = due - (time.perf_counter_ns() - mono0)
            if wait > 0:
                await asyncio.sleep(wait / 1e9)
            max_late_ns = max(max_late_ns, time.perf_counter_ns() - mono0 - due)
            t = asyncio.create_task(send_one(seq, wall0 + due))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        try:
            async with asyncio.timeout(15):
                await all_in.wait()
        except TimeoutError:
            pass
    finally:
        await c.shutdown()
        await p.shutdown()
    lat = e2e_ns[got] / 1e6
    acks = ack_ns[ack_ns > 0] / 1e6
    out = {"sent": n_total, "received": int(got.sum()), "send_errors": errors[0]}
    out["sched_late_max_ms"] = max_late_ns / 1e6
    if len(lat):
        p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
        out |= {"p50": p50, "p99": p99, "p999": p999, "max": float(lat.max())}
    if len(acks):
        a50, a99 = np.percentile(acks, [50, 99])
        out |= {"ack_p50": a50, "ack_p99": a99}
    return out


# -- report ------------------------------------------------------------------------------------------
def agg(vals: list[float], fmt: str = "{:,.0f}") -> str:
    if not vals:
        return "failed"
    med = statistics.median(vals)
    if len(vals) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} [{fmt.format(min(vals))}–{fmt.format(max(vals))}]"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0, help="per throughput phase")
    ap.add_argument("--rate", type=float, default=1000.0, help="open-loop msg/s for the latency phase")
    ap.add_argument("--e2e-seconds", type=float, default=10.0)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 rep, 1 s phases, 2 s at 200 msg/s")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.seconds, a.rate, a.e2e_seconds = 1, 1.0, 200.0, 2.0

    cmd = " ".join(["rocketq bench client", *sys.argv[1:]])
    load0 = os.getloadavg()
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    t_start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="client_bench_"))
    sa = Standalone(tmp / "home")
    res: dict[str, list[dict[str, float]]] = {"a": [], "b": [], "c": [], "d": []}
    failures: list[str] = []
    try:
        topic = "BenchClient"
        update_topic(sa.namesrv, topic)
        for rep in range(a.reps):
            for key, fn in (
                ("a", lambda: sync_send(sa.namesrv, topic, a.seconds, 1)),
                ("b", lambda: aio_run(aio_send(sa, topic, a.seconds, a.window))),
                ("c", lambda: sync_send(sa.namesrv, topic, a.seconds, a.batch)),
                ("d", lambda rep=rep: run_e2e(sa.namesrv, rep, a.rate, a.e2e_seconds)),
            ):
                try:
                    r = fn()
                    res[key].append(r)
                    print(f"rep {rep + 1} {key}: {fmt_row(r)}", file=sys.stderr, flush=True)
                except Exception as exc:  # keep measuring the rest; the report says what failed
                    failures.append(f"rep {rep + 1} phase {key}: {type(exc).__name__}: {exc}")
                    print(failures[-1], file=sys.stderr, flush=True)
    finally:
        sa.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.monotonic() - t_start
    print(report(a, cmd, started, load0, total, res, failures))
    return 1 if failures else 0


def run_e2e(namesrv: str, rep: int, rate: float, seconds: float) -> dict[str, float]:
    tag = f"{os.getpid()}_{rep}"
    topic = f"BenchE2E_{tag}"
    update_topic(namesrv, topic)
    return aio_run(e2e(namesrv, topic, f"bench_e2e_{tag}", rate, seconds))


def fmt_row(r: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:,.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())


def report(
    a: Any,
    cmd: str,
    started: str,
    load0: tuple[float, float, float],
    total: float,
    res: dict[str, list[dict[str, float]]],
    failures: list[str],
) -> str:
    def col(key: str, field: str) -> list[float]:
        return [r[field] for r in res[key] if field in r]

    n = a.reps
    lines = [
        "## Client",
        "",
        f"Command: `{cmd}` — {started}, total run time {total:.0f} s.",
        "",
        f"Machine: nproc={os.cpu_count()}, {platform.machine()}, Python {platform.python_version()}, "
        f"uvloop {'on' if uvloop_enabled() else 'off'} (client; the broker picks its loop the same way), "
        f"load average {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f} at start (the machine is shared). "
        f"Broker: one `rocketq standalone` (NameServer + broker in one process), ASYNC_FLUSH, 64 MiB commit "
        f"log files, topic with {QUEUES} queues; client and broker on the same 127.0.0.1 host. "
        f"{n} repetition(s), phases interleaved (a, b, c, d, a, b, ...): median [min–max].",
        "",
        "### Produce throughput (1 KiB bodies)",
        "",
        "| case | msg/s | MB/s (payload) |",
        "|---|---|---|",
        f"| (a) `rocketq.Producer.send`, 1 in flight, {a.seconds:g} s | {agg(col('a', 'msg_s'))} "
        f"| {agg(col('a', 'mb_s'), '{:.1f}')} |",
        f"| (b) `rocketq.aio.Producer.send`, {a.window} in flight, {a.seconds:g} s "
        f"| {agg(col('b', 'msg_s'))} "
        f"| {agg([v * 1024 / 1e6 for v in col('b', 'msg_s')], '{:.1f}')} |",
        f"| (c) `rocketq.Producer.send([{a.batch} × 1 KiB])`, 1 batch in flight, {a.seconds:g} s "
        f"| {agg(col('c', 'msg_s'))} | {agg(col('c', 'mb_s'), '{:.1f}')} |",
        "",
        f"CPU for (b): broker (standalone process, utime+stime from /proc) "
        f"{agg(col('b', 'broker_cpu_100k'), '{:.1f}')} CPU s per 100k messages "
        f"(busy {agg(col('b', 'broker_cpu_frac'), '{:.2f}')} cores during the phase); "
        f"client (this process) {agg(col('b', 'client_cpu_100k'), '{:.1f}')} CPU s per 100k messages.",
        "",
        f"### End-to-end latency, open loop at {a.rate:g} msg/s for {a.e2e_seconds:g} s (1 KiB)",
        "",
        "Latency = consumer receive time (listener entry, `time.time_ns()`) − intended send time; ack = send "
        "ack − intended send time. Producer (`rocketq.aio.Producer`, one task per message) and PushConsumer "
        "(`rocketq.aio`, clustering, async listener, fresh group and topic each repetition, started and "
        "receiving from all 8 queues before the run) share one event loop in the bench process.",
        "",
        "| metric | ms |",
        "|---|---|",
    ]
    for label, field in (
        ("e2e p50", "p50"),
        ("e2e p99", "p99"),
        ("e2e p99.9", "p999"),
        ("e2e max", "max"),
        ("publish ack p50", "ack_p50"),
        ("publish ack p99", "ack_p99"),
        ("scheduler lateness max (send started after its intended time)", "sched_late_max_ms"),
    ):
        lines.append(f"| {label} | {agg(col('d', field), '{:.2f}')} |")
    sent = sum(int(r["sent"]) for r in res["d"])
    recv = sum(int(r["received"]) for r in res["d"])
    errs = sum(int(r["send_errors"]) for r in res["d"])
    lines += ["", f"Messages: {sent:,} sent, {recv:,} received, {errs} send errors over the latency runs."]
    if failures:
        lines += ["", "Failures:", *(f"- {f}" for f in failures)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
