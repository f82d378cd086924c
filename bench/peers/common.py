"""Helpers shared by the harness and the load generator: payloads, percentiles, ports, /proc readers."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterable

TS = struct.Struct(">q")  # intended send time (time.monotonic_ns, system-wide on Linux) at the head of a body
WARMUP_TS = 0  # bodies stamped 0 are warm-up messages: consumers skip them
# A cell's "batch" value for single sends through a producer that groups them itself (rocketq auto_batch)
AUTO_BATCH = -1


def payload_template(size: int) -> bytearray:
    # incompressible filler so no client or broker gets a free ride from compression
    return bytearray(os.urandom(size))


def stamp(buf: bytearray, ts_ns: int) -> bytes:
    TS.pack_into(buf, 0, ts_ns)
    return bytes(buf)


def stamp_of(body: bytes | memoryview) -> int:
    return TS.unpack_from(body, 0)[0]


def now_ns() -> int:
    return time.monotonic_ns()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout_s: float, alive: object = None) -> bool:
    """True once 127.0.0.1:port accepts a connection; ``alive()`` False aborts early."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if alive is not None and not alive():  # type: ignore[operator]
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def proc_tree(pid: int) -> list[int]:
    """pid and all its descendants (RabbitMQ's beam runs under a shell wrapper)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU time of the given processes (all their live threads), in seconds.

    Each thread's run time in nanoseconds from /proc/PID/task/TID/schedstat: the clock ticks of
    /proc/PID/stat (10 ms) round a short phase of an efficient server (a smoke run of Redis) down to 0.
    Where schedstat is missing, utime + stime from /proc/PID/stat."""
    total = 0.0
    for p in pids:
        ns = _schedstat_ns(p)
        if ns is not None:
            total += ns / 1e9
            continue
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def _schedstat_ns(pid: int) -> int | None:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            if tid == str(pid):
                return None  # no schedstat on this kernel
    return total


def _cpu_rows(stat_text: str):
    """(CPU number, its first 8 tick counters: user nice system idle iowait irq softirq steal) per CPU line
    of the text of /proc/stat."""
    for line in stat_text.splitlines():
        if not (line.startswith("cpu") and len(line) > 3 and line[3].isdigit()):
            continue
        name, *vals = line.split()
        ticks = [int(x) for x in vals[:8]]
        if len(ticks) == 8:
            yield int(name[3:]), ticks


def parse_cpu_ticks(stat_text: str) -> dict[int, tuple[int, int]]:
    """Per CPU number: (steal, all) clock ticks since boot, from the text of /proc/stat. "all" is the sum of
    user, nice, system, idle, iowait, irq, softirq and steal (guest time is already inside user)."""
    return {cpu: (t[7], sum(t)) for cpu, t in _cpu_rows(stat_text)}


def cpu_busy() -> dict[int, tuple[int, int]]:
    """Per CPU number: (busy, idle) clock ticks since boot; busy = user + nice + system + irq + softirq,
    idle = idle + iowait ({} without /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            text = f.read()
    except OSError:
        return {}
    return {cpu: (t[0] + t[1] + t[2] + t[5] + t[6], t[3] + t[4]) for cpu, t in _cpu_rows(text)}


def cpu_ticks() -> dict[int, tuple[int, int]]:
    """parse_cpu_ticks of this machine's /proc/stat ({} where there is none)."""
    try:
        with open("/proc/stat") as f:
            return parse_cpu_ticks(f.read())
    except OSError:
        return {}


def steal_share(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cpu: int | None
) -> float | None:
    """Share of the interval's time that ``cpu`` spent stolen: runnable, but the hypervisor was running
    something else on the physical CPU behind it. None if unknown (no /proc/stat, no such CPU, no ticks)."""
    if cpu is None or cpu not in before or cpu not in after:
        return None
    steal = after[cpu][0] - before[cpu][0]
    total = after[cpu][1] - before[cpu][1]
    return steal / total if total > 0 else None


def write_bytes(pids: Iterable[int]) -> int:
    """Bytes the processes caused to be sent to storage (/proc/PID/io write_bytes)."""
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/io") as f:
                for line in f:
                    if line.startswith("write_bytes:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def rss_bytes(pids: Iterable[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def percentiles(h: object) -> dict[str, float]:
    """p50/p99/p99.9/max in microseconds from an HdrHistogram."""
    if h is None or h.get_total_count() == 0:  # type: ignore[attr-defined]
        return {"n": 0}
    return {
        "n": h.get_total_count(),  # type: ignore[attr-defined]
        "p50": h.get_value_at_percentile(50.0),  # type: ignore[attr-defined]
        "p99": h.get_value_at_percentile(99.0),  # type: ignore[attr-defined]
        "p999": h.get_value_at_percentile(99.9),  # type: ignore[attr-defined]
        "max": h.get_max_value(),  # type: ignore[attr-defined]
    }


def new_hist() -> object:
    from hdrh.histogram import HdrHistogram

    return HdrHistogram(1, 120_000_000, 3)  # 1 us .. 120 s


def taskset(cpu: int | None) -> list[str]:
    if cpu is None or (os.cpu_count() or 1) < 2:
        return []
    return ["taskset", "-c", str(cpu)]
