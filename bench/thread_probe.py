"""Where a broker's CPU goes, per thread: start `rocketq standalone` pinned to one CPU, drive it from this
process (pinned to another) with the peers benchmark's rocketq client, and read every broker thread's
utime/stime from /proc before and after each closed-loop phase.

    taskset is not needed: the script pins itself and the broker.
    python bench/thread_probe.py --tier B --size 1024 --window 1 --seconds 3 --reps 3

Prints msg/s and µs of CPU per message for each broker thread (user + system), per phase, and the CPU steal
(broker CPU / client CPU) during it.
Extra broker.conf lines (an A/B of one setting): --conf 'key=value;key2=value2'."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import subprocess
import sys
import tempfile
import time
from array import array

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.peers.common import cpu_ticks, free_port, payload_template, stamp, steal_share
from bench.peers.sys_rocketq import DISK_GUARD_CONF, PULL_BATCH_CONF, RocketqClient

TICK = os.sysconf("SC_CLK_TCK")


def thread_names(pid: int) -> dict[int, str]:
    """OS thread id -> Python thread name (py-spy dump), as CPython does not name native threads."""
    exe = os.path.join(os.path.dirname(sys.executable), "py-spy")
    try:
        r = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
        out = r.stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for m in re.finditer(r'Thread (0x[0-9A-Fa-f]+|\d+) \([^)]*\): "([^"]*)"', out):
        names[int(m.group(1), 0)] = m.group(2)
    return names


def start_pyspy(pid: int, seconds: float, out: str, rate: int) -> subprocess.Popen[bytes]:
    exe = os.path.join(os.path.dirname(sys.executable), "py-spy")
    cmd = [exe, "record", "-p", str(pid), "-r", str(rate), "-d", str(max(1, int(seconds))), "-f", "raw",
           "-o", out, "--threads", "--nonblocking"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def thread_times(pid: int, names: dict[int, str]) -> dict[str, tuple[float, float]]:
    """name -> (user s, system s), summed over same-named threads."""
    out: dict[str, tuple[float, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = names.get(int(tid)) or s[s.index("(") + 1 : s.rindex(")")] + f"/{tid}"
        fields = s[s.rindex(")") + 2 :].split()
        u, st = int(fields[11]) / TICK, int(fields[12]) / TICK
        pu, ps = out.get(name, (0.0, 0.0))
        out[name] = (pu + u, ps + st)
    return out


def start_broker(root: str, tier: str, cpu: int, extra: str) -> tuple[subprocess.Popen[bytes], int, int]:
    ns, bp = free_port(), free_port()
    conf = os.path.join(root, "broker.conf")
    flush = "SYNC_FLUSH" if tier == "A" else "ASYNC_FLUSH"
    with open(conf, "w") as f:
        f.write(f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\nflushDiskType={flush}\n")
        f.write(
            f"haListenPort={free_port()}\nautoCreateTopicEnable=false\n{PULL_BATCH_CONF}{DISK_GUARD_CONF}"
        )
        for line in extra.split(";"):
            if line.strip():
                f.write(line.strip() + "\n")
    cmd = ["taskset", "-c", str(cpu), sys.executable, "-m", "rocketq.cli", "standalone",
           "--no-console", "--home", os.path.join(root, "home"), "--namesrv-port", str(ns),
           "--broker-port", str(bp), "-c", conf,
           "--log-level", "WARNING"]  # fmt: skip
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p, ns, bp


async def wait_port(port: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise TimeoutError(f"port {port}")


async def closed_loop(
    cl: RocketqClient, topic: str, size: int, window: int, seconds: float, batch: int = 0
) -> int:
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


async def open_loop(cl: RocketqClient, topic: str, size: int, rate: float, seconds: float) -> str:
    """Sends on a fixed schedule (at most 1024 in flight); ack latency from each send's scheduled time (no
    coordinated omission). Returns p50 / p99 / p99.9 / max and when the acks slower than 5 ms were due.
    Nothing per message is kept as an object (arrays, done tasks dropped): this process's own garbage
    collections would otherwise be the tail."""
    buf = payload_template(size)
    lat_us = array("q")
    due_s = array("d")
    slots = asyncio.Semaphore(1024)
    t0 = time.monotonic()
    interval = 1 / rate
    pending: set[asyncio.Task[None]] = set()

    async def one(due: float) -> None:
        try:
            await cl.publish(topic, stamp(buf, time.monotonic_ns()))
            lat_us.append(int((time.monotonic() - due) * 1e6))
            due_s.append(due - t0)
        finally:
            slots.release()

    i = 0
    while (due := t0 + i * interval) < t0 + seconds:
        delay = due - time.monotonic()
        if delay > 0.0005:
            await asyncio.sleep(delay)
        await slots.acquire()
        t = asyncio.ensure_future(one(due))
        pending.add(t)
        t.add_done_callback(pending.discard)
        i += 1
    if pending:
        await asyncio.wait(pending)
    lat = list(zip(lat_us, due_s, strict=True))
    us = sorted(x for x, _ in lat)
    n = len(us)
    slow = sorted(round(at, 2) for x, at in lat if x > 5000)
    runs: list[str] = []
    for at in slow:  # group the slow acks into episodes (due within 50 ms of each other)
        if runs and at - float(runs[-1].split("+")[0]) < 0.05:
            continue
        runs.append(f"{at:.2f}+")
    return (f"{n / seconds:,.0f} msg/s, ack p50 {us[n // 2]} µs p99 {us[n * 99 // 100]} p99.9 "
            f"{us[n * 999 // 1000]} max {us[-1]}; {len(slow)} acks > 5 ms, episodes at s: "
            + " ".join(r.rstrip("+") for r in runs[:20]))  # fmt: skip


def report(label: str, n: int, el: float, t0: dict, t1: dict, client_s: float) -> None:
    rows = []
    for name, (u1, s1) in t1.items():
        u0, s0 = t0.get(name, (0.0, 0.0))
        du, ds = (u1 - u0) / n * 1e6, (s1 - s0) / n * 1e6
        if du + ds > 0.05:
            rows.append((du + ds, name, du, ds))
    rows.sort(reverse=True)
    tot = sum(r[0] for r in rows)
    print(f"{label}: {n / el:,.0f} msg/s, client {client_s / n * 1e6:.1f} µs/msg, broker {tot:.1f} µs/msg",
          flush=True)  # fmt: skip
    for t, name, du, ds in rows:
        print(f"    {name:24} {t:6.1f} µs/msg  (user {du:5.1f}, sys {ds:5.1f})")


# the consumer side's garbage collections during a drain: (generation, seconds) per collection
gc_stats: list[tuple[int, float]] = []
_gc_t0 = [0.0]


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _gc_t0[0] = time.perf_counter()
    else:
        gc_stats.append((info["generation"], time.perf_counter() - _gc_t0[0]))


def gc_summary() -> str:
    by_gen = {g: [t for gg, t in gc_stats if gg == g] for g in (0, 1, 2)}
    return ", ".join(f"gen{g} {len(v)}× {sum(v) * 1e3:.1f} ms" for g, v in by_gen.items())


async def drain_phases(a: argparse.Namespace, cl: RocketqClient, pid: int, names: dict[int, str]) -> None:
    """Fill a topic with --drain messages (batch sends), then time a fresh PushConsumer reading them all."""
    buf = bytes(payload_template(a.size))
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)
    for rep in range(a.reps):
        topic = f"drain{rep}"
        await cl.prepare(topic)
        sent = 0
        while sent < a.drain:
            k = min(64, a.drain - sent)
            await cl.publish_batch(topic, [buf] * k)
            sent += k
        got = 0
        done = asyncio.Event()
        t_first = 0.0

        def on_bodies(bodies: list, done: asyncio.Event = done) -> None:
            nonlocal got, t_first
            if not got:
                t_first = time.monotonic()
            got += len(bodies)
            if got >= a.drain:
                done.set()

        spy = None
        if a.pyspy and rep == 0:  # the consumer side (this process)
            spy = start_pyspy(os.getpid(), 2, a.pyspy, 1000)
            await asyncio.sleep(0.3)
        t0 = thread_times(pid, names)
        gc_stats.clear()
        c0 = time.process_time()
        w0 = time.monotonic()
        sub = RocketqClient(cl.args)
        sub.pull_batch_size = a.pull_batch
        await sub.subscribe(topic, f"g{rep}", on_bodies)
        await asyncio.wait_for(done.wait(), 120)
        el = time.monotonic() - w0
        c1 = time.process_time()
        t1 = thread_times(pid, names)
        report(f"drain {rep} ({time.monotonic() - t_first:.2f} s after the first)", got, el, t0, t1, c1 - c0)
        print(f"    client GC: {gc_summary()}", flush=True)
        await sub.unsubscribe()
        if spy is not None:
            spy.wait()


async def main_async(a: argparse.Namespace) -> None:
    os.sched_setaffinity(0, {a.client_cpu})
    with tempfile.TemporaryDirectory(prefix="rq-probe-") as root:
        proc, ns, bp = start_broker(root, a.tier, a.broker_cpu, a.conf)
        try:
            await wait_port(bp)
            cl = RocketqClient(
                {
                    "namesrv": f"127.0.0.1:{ns}",
                    "broker": f"127.0.0.1:{bp}",
                    "auto_batch": a.auto_batch,
                    "batch_max_bytes": a.batch_max_bytes,
                }
            )
            await cl.prepare("probe")
            await cl.connect("producer")
            await closed_loop(cl, "probe", a.size, a.window, 0.5)  # warm-up
            names = thread_names(proc.pid)
            if a.drain:
                await drain_phases(a, cl, proc.pid, names)
                await cl.close()
                return
            if a.open_rate:
                if _on_gc not in gc.callbacks:
                    gc.callbacks.append(_on_gc)
                for rep in range(a.reps):
                    gc_stats.clear()
                    res = await open_loop(cl, "probe", a.size, a.open_rate, a.seconds)
                    print(f"open {rep}: {res}\n    client GC: {gc_summary()}", flush=True)
                await cl.close()
                return
            for rep in range(a.reps):
                if a.gap and rep:
                    await asyncio.sleep(a.gap)  # an idle broker between bursts (what background work gets)
                spy = None
                if a.pyspy and rep == 0:
                    spy = start_pyspy(proc.pid, a.seconds, a.pyspy, 500)
                t0 = thread_times(proc.pid, names)
                c0 = time.process_time()
                w0, k0 = time.monotonic(), cpu_ticks()
                n = await closed_loop(cl, "probe", a.size, a.window, a.seconds, a.batch)
                el, k1 = time.monotonic() - w0, cpu_ticks()
                t1 = thread_times(proc.pid, names)
                c1 = time.process_time()
                if spy is not None:
                    spy.wait()
                steal = [steal_share(k0, k1, c) for c in (a.broker_cpu, a.client_cpu)]
                stolen = "" if None in steal else f", steal {steal[0]:.0%} / {steal[1]:.0%}"
                label = f"rep {rep} (ack p50 {LAST_LAT[0]} µs, p99 {LAST_LAT[1]} µs{stolen})"
                report(label, n, el, t0, t1, c1 - c0)
            await cl.close()
        finally:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", choices=("A", "B"), default="B")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--broker-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--conf", default="", help="extra broker.conf lines, ';'-separated")
    ap.add_argument("--drain", type=int, default=0, help="time consumers draining this many messages instead")
    ap.add_argument("--pull-batch", type=int, default=RocketqClient.pull_batch_size)
    ap.add_argument("--pyspy", default="", help="py-spy raw samples of the first phase go here")
    ap.add_argument("--batch", type=int, default=0, help="closed loop of batch sends of this many messages")
    ap.add_argument("--auto-batch", action="store_true", help="the producer's auto_batch on (single sends)")
    ap.add_argument("--batch-max-bytes", type=int, default=0, help="with --auto-batch: batch_max_bytes")
    ap.add_argument("--gap", type=float, default=0, help="seconds of idle between closed-loop phases")
    ap.add_argument("--open-rate", type=float, default=0, help="open loop at this msg/s (ack latency)")
    a = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
