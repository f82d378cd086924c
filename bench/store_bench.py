"""Store benchmark: append / read throughput and crash-recovery time, as ratios to this machine's limits.

    rocketq bench store [--quick] [--write-docs] [--dir DIR] [--seconds S] [--reps N]
        [--skip-recovery] [--profile]

Measured in the same run (specs/benchmarks.md, "Physical limits"):
  dd        dd if=/dev/zero bs=1M count=N conv=fdatasync           sequential write MB/s
  fsync     Python write()+fdatasync() loop per message size       the ceiling of per-message durability
  memcpy    Python mmap slice-assignment loop per message size     the ceiling of any Python append path
Then the MessageStore (contract API of rocketq.store):
  append    128 B / 1 KiB / 4 KiB x ASYNC_FLUSH / SYNC_FLUSH x 1 / 8 / 64 appender threads (SYNC
            threads wait on flush_future); plus SYNC with an asyncio driver (64 coroutines awaiting
            wrap_future, as the broker does)
  read      get_message in batches of 32 through the ConsumeQueue
  recovery  a child fills a CommitLog (1 GiB, --quick 128 MiB) and is SIGKILLed; time of start() (abnormal
            recovery) and to the first get_message; then the same after a clean shutdown
"""

from __future__ import annotations

import argparse
import asyncio
import mmap
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SIZES = (128, 1024, 4096)
CONCURRENCY = (1, 8, 64)
TOPIC = "BenchTopic"
QUEUES = 4
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
T0 = time.perf_counter()


# ---------------------------------------------------------------- physical limits
# dd and the append+fdatasync loop are the peer benchmark's own definitions, so both tables measure one limit.
sys.path.insert(0, ROOT)
from bench.peers.limits import dd_write, fsync_loop  # noqa: E402


def memcpy_loop_per_s(size: int, seconds: float) -> float:
    total = 64 << 20
    mm = mmap.mmap(-1, total)
    buf = os.urandom(size)
    pos = n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        if pos + size > total:
            pos = 0
        mm[pos : pos + size] = buf
        pos += size
        n += 1
        if n % 1024 == 0 and time.perf_counter() >= end:
            break
    dt = time.perf_counter() - t0
    mm.close()
    return n / dt


# ---------------------------------------------------------------- store helpers
def make_store(root: str, sync: bool, seg_mib: int = 64):
    from rocketq.store import FlushDiskType, MessageStore, StoreConfig

    cfg = StoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commitlog=seg_mib << 20,
        flush_disk_type=FlushDiskType.SYNC_FLUSH if sync else FlushDiskType.ASYNC_FLUSH,
        max_hash_slot_num=100_000,
        max_index_num=400_000,
    )
    store = MessageStore(cfg, ("127.0.0.1", 10911))
    store.start()
    return store


def make_msg(size: int, queue_id: int):
    from rocketq.store import MessageToStore

    return MessageToStore(topic=TOPIC, queue_id=queue_id, body=os.urandom(size), properties={"TAGS": "bench"})


def append_run(
    root: str, size: int, sync: bool, threads: int, seconds: float
) -> tuple[float, float, float, float]:
    """msg/s, MB/s (payload), messages per fdatasync (SYNC) and process CPU µs per message."""
    from rocketq.store import PutMessageStatus

    store = make_store(root, sync)
    counts = [0] * threads
    errors = []
    stop = threading.Event()

    def worker(t: int) -> None:
        msg = make_msg(size, t % QUEUES)
        n = 0
        try:
            while not stop.is_set():
                r = store.put_message(msg)
                if r.status != PutMessageStatus.PUT_OK:
                    errors.append(r.status)
                    return
                if r.flush_future is not None and not r.flush_future.result():
                    errors.append("flush timeout")
                    return
                n += 1
        finally:
            counts[t] = n

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    c0 = time.process_time()
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0  # all threads of the process: appenders, flush, dispatch
    syncs = getattr(store.flush_service, "sync_count", 0) or 0
    store.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    if errors:
        raise RuntimeError(f"append failed: {errors[:3]}")
    n = sum(counts)
    return n / dt, n * size / dt / 1e6, (n / syncs if syncs else 0.0), cpu * 1e6 / max(n, 1)


def append_run_asyncio(root: str, size: int, coroutines: int, seconds: float) -> tuple[float, float]:
    """SYNC_FLUSH driven like the broker: one event loop, each coroutine awaits its flush future."""
    store = make_store(root, True)
    count = 0

    async def main() -> None:
        nonlocal count
        deadline = time.perf_counter() + seconds
        msgs = [make_msg(size, c % QUEUES) for c in range(coroutines)]

        async def one(c: int) -> None:
            nonlocal count
            m = msgs[c]
            while time.perf_counter() < deadline:
                r = store.put_message(m)
                ok = await asyncio.wrap_future(r.flush_future)
                if not ok:
                    raise RuntimeError("flush timeout")
                count += 1

        await asyncio.gather(*(one(c) for c in range(coroutines)))

    t0 = time.perf_counter()
    asyncio.run(main())
    dt = time.perf_counter() - t0
    store.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return count / dt, count * size / dt / 1e6


def read_run(root: str, size: int, n_msgs: int) -> tuple[float, float, float]:
    """Fill one queue, then read it back through the ConsumeQueue: (append msg/s, read msg/s, read MB/s)."""
    from rocketq.store import GetMessageStatus

    store = make_store(root, False)
    msg = make_msg(size, 0)
    t0 = time.perf_counter()
    for _ in range(n_msgs):
        store.put_message(msg)
    put_rate = n_msgs / (time.perf_counter() - t0)
    deadline = time.monotonic() + 30
    while store.get_max_offset_in_queue(TOPIC, 0) < n_msgs and time.monotonic() < deadline:
        time.sleep(0.01)  # let dispatch catch up
    off = 0
    got = 0
    t0 = time.perf_counter()
    while off < n_msgs:
        r = store.get_message("bench", TOPIC, 0, off, 32, None)
        if r.status != GetMessageStatus.FOUND:
            raise RuntimeError(f"read failed at {off}: {r.status}")
        got += r.buffer_total_size
        off = r.next_begin_offset
        r.release()
    dt = time.perf_counter() - t0
    store.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return put_rate, n_msgs / dt, got / dt / 1e6


_FILL_CHILD = r"""
import os, sys, time
sys.path.insert(0, {bench!r})
import store_bench as b
store = b.make_store({root!r}, False, seg_mib={seg})
msg = b.make_msg(1024, 0)
msgs = [b.make_msg(1024, q) for q in range(b.QUEUES)]
target = {target}
i = 0
while store.max_phy_offset < target:
    store.put_message(msgs[i % b.QUEUES]); i += 1
deadline = time.monotonic() + 60
while any(store.get_max_offset_in_queue(b.TOPIC, q) < i // b.QUEUES for q in range(b.QUEUES)) \
        and time.monotonic() < deadline:
    time.sleep(0.05)
print(i, flush=True)
time.sleep(3600)
"""


def recovery_run(root: str, target_bytes: int, seg_mib: int) -> dict[str, float]:
    code = _FILL_CHILD.format(bench=HERE, root=root, target=target_bytes, seg=seg_mib)
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    n = int(p.stdout.readline())
    fill_s = time.perf_counter() - t0
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stdout.close()
    res = {"messages": n, "fill_s": fill_s}

    def timed_start() -> tuple[float, float, object]:
        from rocketq.store import GetMessageStatus

        t = time.perf_counter()
        st = make_store(root, False, seg_mib=seg_mib)
        started = time.perf_counter() - t
        r = st.get_message("bench", TOPIC, 0, 0, 1, None)
        first = time.perf_counter() - t
        assert r.status == GetMessageStatus.FOUND, r.status
        r.release()
        return started, first, st

    res["crash_start_s"], res["crash_first_read_s"], st = timed_start()
    res["max_phy"] = st.max_phy_offset
    st.shutdown()
    res["clean_start_s"], res["clean_first_read_s"], st = timed_start()
    st.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return res


# ---------------------------------------------------------------- profile (py-spy)
def profile_target(kind: str, seconds: float) -> None:
    """The workload py-spy samples: 1 KiB appends, ASYNC with 1 thread or SYNC with 64 threads."""
    root = tempfile.mkdtemp(prefix="rocketq-prof-")
    if kind == "async":
        append_run(root, 1024, False, 1, seconds)
    else:
        append_run(root, 1024, True, 64, seconds)
    shutil.rmtree(root, ignore_errors=True)


def profile_run(kind: str, seconds: float, top: int = 12) -> list[str]:
    """Sample a profile_target child with py-spy; return lines 'share  self|incl  function (file:line)'."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(spy):
        return ["(py-spy not installed: pip install py-spy)"]
    out = tempfile.mktemp(suffix=".txt")
    cmd = [spy, "record", "--function", "--format", "raw", "-r", "200", "-o", out, "--",
           sys.executable, __file__, "--profile-target", kind, "--seconds", str(seconds)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        return [f"(py-spy failed: {r.stderr.strip()[-200:]})"]
    self_t: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    with open(out) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            if not n.isdigit():
                continue
            k = int(n)
            frames = stack.split(";")
            if any("store_bench.py" in fr and "worker" in fr for fr in frames) or kind == "sync":
                leaf = frames[-1]
                if not leaf.strip() or leaf.startswith(("Condition.wait", "Event.wait", "_worker")):
                    continue  # idle / waiting threads
                total += k
                self_t[leaf] = self_t.get(leaf, 0) + k
                for fr in set(frames):
                    incl[fr] = incl.get(fr, 0) + k
    os.remove(out)
    lines = [f"{v * 100 / max(total, 1):5.1f} % self  {name}" for name, v in
             sorted(self_t.items(), key=lambda kv: -kv[1])[:top]]  # fmt: skip
    rocketq = [(n, v) for n, v in incl.items() if "rocketq/" in n]
    lines += [f"{v * 100 / max(total, 1):5.1f} % incl  {name}" for name, v in
              sorted(rocketq, key=lambda kv: -kv[1])[:top]]  # fmt: skip
    return lines


# ---------------------------------------------------------------- report
def section(lines: list[str]) -> str:
    return "## Store\n\n" + "\n".join(lines).rstrip() + "\n"


def write_docs(text: str) -> None:
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    old = "# Benchmarks\n"
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    m = re.search(r"^## Store\n.*?(?=^## |\Z)", old, flags=re.S | re.M)
    new = (
        old[: m.start()] + text + ("\n" + old[m.end() :] if old[m.end() :] else "")
        if m
        else old.rstrip() + "\n\n" + text
    )
    with open(path, "w") as f:
        f.write(new)


def fmt(vals: list[float], spec: str = ",.0f") -> str:
    """median, with [min-max] when there were repetitions."""
    med = statistics.median(vals)
    if len(vals) == 1:
        return format(med, spec)
    return f"{med:{spec}} [{min(vals):{spec}}-{max(vals):{spec}}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes / shorter runs (~1 min)")
    ap.add_argument("--dir", default=None, help="scratch directory on the disk to measure (default: /tmp)")
    ap.add_argument(
        "--write-docs", action="store_true", help="replace the '## Store' section of docs/benchmarks.md"
    )
    ap.add_argument("--seconds", type=float, default=None, help="seconds per append cell")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3, --quick 1)")
    ap.add_argument("--skip-recovery", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also sample the append path with py-spy")
    ap.add_argument("--profile-target", choices=["async", "sync"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "src"))
    if args.profile_target:
        profile_target(args.profile_target, args.seconds or 5.0)
        return
    secs = args.seconds or (0.6 if args.quick else 1.0)
    reps = args.reps or (1 if args.quick else 3)
    base = tempfile.mkdtemp(prefix="rocketq-bench-", dir=args.dir)
    cmd = ("rocketq bench store " + " ".join(sys.argv[1:])).strip()
    out: list[str] = []

    def emit(s: str = "") -> None:
        print(s, flush=True)
        out.append(s)

    cells = [(size, sync, conc) for size in SIZES for sync in (False, True) for conc in CONCURRENCY]
    dd: list[float] = []
    fs: dict[int, list[float]] = {s: [] for s in SIZES}
    mc: dict[int, list[float]] = {s: [] for s in SIZES}
    app: dict[tuple, list[tuple[float, float, float]]] = {c: [] for c in cells}
    aio: dict[int, list[tuple[float, float]]] = {s: [] for s in SIZES}
    try:
        st = os.statvfs(base)
        emit(
            f"Command: `{cmd}` — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f} at start, scratch dir on the "
            f"{st.f_blocks * st.f_frsize / 2**30:.0f} GiB root filesystem. {reps} interleaved repetition(s): "
            "median [min-max]."
        )
        emit()
        for _rep in range(reps):  # A B C A B C: drift and neighbours' load spread over every cell
            dd.append(dd_write(base, 256 if args.quick else 1024)["mb_s"])
            for size in SIZES:
                fs[size].append(fsync_loop(base, size, 1.0))
                mc[size].append(memcpy_loop_per_s(size, 0.3))
            for cell in cells:
                app[cell].append(append_run(os.path.join(base, "a"), *cell, secs))
            for size in SIZES:
                aio[size].append(append_run_asyncio(os.path.join(base, "c"), size, 64, secs))
        emit("### Machine limits (same run)")
        emit()
        emit(f"- dd sequential write (bs=1M, conv=fdatasync): **{fmt(dd)} MB/s**")
        emit("- Python append+fdatasync loop (msg/s): " + ", ".join(f"{s} B {fmt(fs[s])}" for s in SIZES))
        emit(
            "- Python mmap slice-assign loop, no store logic (msg/s): "
            + ", ".join(f"{s} B {fmt(mc[s])}" for s in SIZES)
        )
        emit()
        emit("### Append (threads; SYNC threads wait on flush_future; payload MB/s)")
        emit()
        emit(
            "| size | flush | appenders | msg/s | MB/s | MB/s ÷ dd | msg/s ÷ fsync loop | msg/s ÷ mmap loop "
            "| msgs per fdatasync | CPU µs/msg |"
        )
        emit("|---|---|---|---|---|---|---|---|---|---|")
        for cell in cells:
            size, sync, conc = cell
            runs = app[cell]
            rates = [r[0] for r in runs]
            mm = statistics.median(r[1] for r in runs)
            # ratios per repetition (against the limits measured in the same repetition), then the median
            r_dd = statistics.median(r[1] / dd[i] for i, r in enumerate(runs))
            r_fs = statistics.median(r[0] / fs[size][i] for i, r in enumerate(runs))
            r_mc = statistics.median(r[0] / mc[size][i] for i, r in enumerate(runs))
            emit(
                f"| {size} | {'SYNC' if sync else 'ASYNC'} | {conc} | {fmt(rates)} | {mm:.1f} | "
                f"{r_dd:.3f} | {r_fs:.2f} | {r_mc:.3f} | "
                f"{f'{statistics.median(r[2] for r in runs):.1f}' if sync else '-'} | "
                f"{statistics.median(r[3] for r in runs):.1f} |"
            )
        emit()
        emit(
            "### SYNC_FLUSH driven by asyncio "
            "(64 coroutines awaiting wrap_future(flush_future), as the broker)"
        )
        emit()
        emit("| size | msg/s | MB/s | msg/s ÷ fsync loop |")
        emit("|---|---|---|---|")
        for size in SIZES:
            rates = [r[0] for r in aio[size]]
            mbm = statistics.median(r[1] for r in aio[size])
            r_fs = statistics.median(r[0] / fs[size][i] for i, r in enumerate(aio[size]))
            emit(f"| {size} | {fmt(rates)} | {mbm:.1f} | {r_fs:.2f} |")
        emit()
        emit("### Read through the ConsumeQueue (get_message, 32 per call, page cache warm)")
        emit()
        emit("| size | messages | read msg/s | read MB/s (records) |")
        emit("|---|---|---|---|")
        for size in SIZES:
            n = 20_000 if args.quick else 100_000
            _, rrate, rmb = read_run(os.path.join(base, "r"), size, n)
            emit(f"| {size} | {n:,} | {rrate:,.0f} | {rmb:.1f} |")
        emit()
        if not args.skip_recovery:
            target = (128 if args.quick else 1024) << 20
            seg = 64 if args.quick else 256
            r = recovery_run(os.path.join(base, "rec"), target, seg)
            emit(
                f"### Recovery ({target >> 20} MiB CommitLog of 1 KiB messages, {seg} MiB segments, "
                f"{r['messages']:,} messages)"
            )
            emit()
            emit(
                f"- after SIGKILL (abnormal recovery, CRC checked): start() {r['crash_start_s']:.2f} s, "
                f"first read {r['crash_first_read_s']:.2f} s"
            )
            emit(
                f"- after clean shutdown: start() {r['clean_start_s']:.2f} s, "
                f"first read {r['clean_first_read_s']:.2f} s"
            )
            emit(f"- fill time in the child: {r['fill_s']:.1f} s ({r['messages'] / r['fill_s']:,.0f} msg/s)")
            emit()
        if args.profile:
            for kind, title in (
                ("async", "ASYNC_FLUSH, 1 KiB, 1 thread"),
                ("sync", "SYNC_FLUSH, 1 KiB, 64 threads"),
            ):
                emit(f"### Where the time goes: {title} (py-spy --function, 200 Hz)")
                emit()
                emit("```")
                for line in profile_run(kind, 4.0 if args.quick else 6.0):
                    emit(line)
                emit("```")
                emit()
        emit(f"Total bench time: {time.perf_counter() - T0:.0f} s.")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.write_docs:
        write_docs(section(out))


if __name__ == "__main__":
    main()
