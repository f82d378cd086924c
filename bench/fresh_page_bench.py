"""What a store into a fresh page of a file mapping costs, and how much of it populating first moves away.

    python bench/fresh_page_bench.py [--mib 256] [--record 1024] [--dir DIR] none read none read write zeros

Per mode: a new sparse file of --mib MiB is mapped, optionally populated first (read: MADV_POPULATE_READ,
write: MADV_POPULATE_WRITE, both in one madvise call; zeros: buffered pwrite of zeros in 1 MiB chunks, what
the ASYNC_FLUSH warm-ahead does, store/warm.py; none: not at all), then filled with --record-byte records in
order, as the CommitLog's writer fills a segment. Prints µs per 4 KiB page of wall time and CPU for the
populate step and for the stores, and the minor faults the stores took. Modes run in the order given, 5 s
apart (so a page freed by one mode is not simply handed to the next); --gap changes that. Linux 5.14+ for
the madvise modes.
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import time

MADV_POPULATE_READ = 22
MADV_POPULATE_WRITE = 23
PAGE = 4096


def _cpu(a: resource.struct_rusage, b: resource.struct_rusage) -> float:
    return b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime


def run(mode: str, size: int, record: int, directory: str) -> None:
    path = os.path.join(directory, f"fresh-page-{os.getpid()}.{mode}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size)
        t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        if mode == "read":
            mm.madvise(MADV_POPULATE_READ, 0, size)
        elif mode == "write":
            mm.madvise(MADV_POPULATE_WRITE, 0, size)
        elif mode == "zeros":
            zeros = bytes(1 << 20)
            for off in range(0, size, len(zeros)):
                os.pwrite(fd, zeros[: size - off], off)
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        body = os.urandom(record)
        for pos in range(0, size - record + 1, record):
            mm[pos : pos + record] = body
        t2, r2 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        pages = size // PAGE
        us = 1e6 / pages
        print(
            f"{mode:5s}  populate {us * (t1 - t0):6.2f} µs/page (CPU {us * _cpu(r0, r1):5.2f})"
            f"  stores {us * (t2 - t1):6.2f} µs/page (CPU {us * _cpu(r1, r2):5.2f}, system "
            f"{us * (r2.ru_stime - r1.ru_stime):5.2f})  minor faults "
            f"{(r2.ru_minflt - r1.ru_minflt) / pages:.2f}/page",
            flush=True,
        )
        mm.close()
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modes", nargs="*", default=["none", "read", "none", "read", "write"])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--record", type=int, default=1024)
    ap.add_argument("--dir", default=".", help="where the scratch file goes (the file system under test)")
    ap.add_argument("--gap", type=float, default=5.0, help="seconds between modes")
    a = ap.parse_args()
    for i, mode in enumerate(a.modes):
        if mode not in ("none", "read", "write", "zeros"):
            ap.error(f"unknown mode {mode!r}")
        if i:
            time.sleep(a.gap)
        run(mode, a.mib << 20, a.record, a.dir)


if __name__ == "__main__":
    main()
