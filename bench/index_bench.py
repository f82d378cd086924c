"""Index dispatch microbenchmark: µs per message for IndexDispatchService + IndexService (one thread).

    taskset -c 1 .venv/bin/python bench/index_bench.py [--n N] [--size B] [--keys K] [--batch B] [--reps R]
        [--slots S] [--index-num I] [--dir DIR] [--profile]

Builds a CommitLog of N messages (the client's properties: UNIQ_KEY, WAIT, TAGS, plus K space-separated KEYS)
through the store API with messageIndexEnable=false, then R times: a fresh IndexService, and the
dispatcher walks the whole log calling do_dispatch(B) until caught up (B=40 is what the broker's
thread sees per 2 ms wake-up at ~19k msg/s; B=0 means one call). Prints wall and thread-CPU µs per message
(median, min, max over reps). Which implementation runs is whatever `rocketq` PYTHONPATH resolves to, so
old vs new is two processes with different PYTHONPATHs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time


def build_log(root: str, n: int, size: int, keys: int, seg_mib: int):
    from rocketq.store import MessageStore, MessageToStore, StoreConfig

    cfg = StoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commitlog=seg_mib << 20,
        message_index_enable=False,
    )
    store = MessageStore(cfg, ("127.0.0.1", 10911))
    store.start()
    body = os.urandom(size)
    pid = os.getpid() & 0xFFFF
    for i in range(n):
        # UNIQ_KEY shaped like the client's (32 hex digits: ip, pid, class hash, time, counter)
        props = {"UNIQ_KEY": f"7F000001{pid:04X}1B2C3D4E{i:016X}", "WAIT": "true", "TAGS": "TagA"}
        if keys:
            props["KEYS"] = " ".join(f"order-{i}-{k}" for k in range(keys))
        store.put_message(
            MessageToStore(topic=f"BenchTopic{i % 4}", queue_id=i % 4, body=body, properties=props)
        )
    return store


def one_pass(
    store, idx_root: str, batch: int, slots: int, index_num: int
) -> tuple[float, float, int, tuple[int, ...]]:
    from rocketq.store.dispatch import IndexDispatchService
    from rocketq.store.index_file import IndexService

    idx = IndexService(idx_root, slots, index_num)
    idx.load()
    d = IndexDispatchService(store.commit_log, idx, store.commit_log.mfq.get_min_offset(), [])
    end = store.commit_log.max_offset
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    w0, c0 = time.perf_counter(), time.thread_time()
    if batch:
        while d.do_dispatch(batch):
            pass
    else:
        d.do_dispatch()
    c1, w1 = time.thread_time(), time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    # page faults and context switches: wall - cpu is mostly faulting in the index file's pages
    faults = (r1.ru_minflt - r0.ru_minflt, r1.ru_majflt - r0.ru_majflt, r1.ru_nvcsw - r0.ru_nvcsw)
    assert d.next_offset == end, (d.next_offset, end)
    entries = sum(f.index_count - 1 for f in idx.files())
    idx.close()
    shutil.rmtree(idx_root, ignore_errors=True)
    return w1 - w0, c1 - c0, entries, faults


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--keys", type=int, default=1, help="KEYS entries per message (0: UNIQ_KEY only)")
    ap.add_argument("--batch", type=int, default=40, help="records per do_dispatch call (0: all in one)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--slots", type=int, default=5_000_000, help="hash slots per file (broker default)")
    ap.add_argument("--index-num", type=int, default=20_000_000, help="entries per file (broker default)")
    ap.add_argument("--dir", default=None, help="scratch directory (deleted afterwards)")
    ap.add_argument("--profile", action="store_true", help="pyinstrument one extra pass")
    a = ap.parse_args()

    import rocketq

    tmp = tempfile.mkdtemp(prefix="index_bench_", dir=a.dir)
    try:
        t0 = time.perf_counter()
        store = build_log(os.path.join(tmp, "store"), a.n, a.size, a.keys, 256)
        build_s = time.perf_counter() - t0
        walls, cpus = [], []
        entries = 0
        for r in range(a.reps):
            w, c, entries, faults = one_pass(
                store, os.path.join(tmp, f"idx{r}"), a.batch, a.slots, a.index_num
            )
            walls.append(w * 1e6 / a.n)
            cpus.append(c * 1e6 / a.n)
            us = f"wall {w * 1e6 / a.n:.2f}, cpu {c * 1e6 / a.n:.2f} us/msg"
            print(f"rep {r}: {us}, minflt/majflt/vcsw={faults}")
        if a.profile:
            from pyinstrument import Profiler

            p = Profiler(interval=0.0005)
            p.start()
            one_pass(store, os.path.join(tmp, "idxp"), a.batch, a.slots, a.index_num)
            p.stop()
            print(p.output_text(unicode=False, color=False, show_all=False))
        store.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def fmt(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"

    print(
        f"impl={os.path.dirname(rocketq.__file__)} n={a.n} size={a.size} keys={a.keys} batch={a.batch} "
        f"entries={entries} build={build_s:.1f}s  wall us/msg {fmt(walls)}  cpu us/msg {fmt(cpus)}",
        file=sys.stdout,
    )


if __name__ == "__main__":
    main()
