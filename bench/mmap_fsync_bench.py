"""How fdatasync cost depends on the write path: mmap stores vs write()/pwrite() into the same kind of file,
and pwrite() into blocks already written with zeros (the SYNC_FLUSH warm-ahead, store/warm.py).

Each mode writes into a fresh file: single-message rounds (write 1 message, fdatasync), then a 40 MB burst of
grouped rounds (40 messages per fdatasync, like SYNC_FLUSH with 64 in flight), then single-message rounds
again.
Prints the median and p90 fdatasync time per phase in microseconds. Run pinned, e.g.
`taskset -c 1 .venv/bin/python bench/mmap_fsync_bench.py`.
"""

from __future__ import annotations

import mmap
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

SEGMENT = 1 << 30
WARM_BYTES = 128 << 20  # > every phase together
PHASES = [("4 KiB single", 4300, 2000, 1), ("1 KiB single", 1200, 2000, 1),
          ("1 KiB x40 burst", 1200, 35000, 40), ("4 KiB single after", 4300, 2000, 1),
          ("1 KiB single after", 1200, 2000, 1)]  # fmt: skip


def run(mode: str, path: str) -> list[tuple[str, int, int]]:
    flags = os.O_RDWR | os.O_CREAT | (os.O_APPEND if mode == "append" else 0)
    fd = os.open(path, flags, 0o644)
    if mode in ("mmap", "pwrite", "pwrite-warm"):
        os.posix_fallocate(fd, 0, SEGMENT)  # as the CommitLog preallocates its segments
    if mode == "pwrite-warm":  # what store/warm.py does ahead of the writer: zeros via O_DIRECT, synced
        zeros = mmap.mmap(-1, 1 << 20)
        dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
        for off in range(0, WARM_BYTES, 1 << 20):
            os.pwrite(dfd, zeros, off)
        os.fdatasync(dfd)
        os.close(dfd)
    mm = mmap.mmap(fd, SEGMENT) if mode == "mmap" else None
    pos = 0

    def put(data: bytes) -> None:
        nonlocal pos
        if mm is not None:
            mm[pos : pos + len(data)] = data
        elif mode == "pwrite":
            os.pwrite(fd, data, pos)
        elif mode == "pwrite-warm":  # padded to the page end, as the CommitLog does (no read of the block)
            os.pwrite(fd, data + bytes(-(pos + len(data)) % 4096), pos)
        else:
            os.write(fd, data)
        pos += len(data)

    out = []
    try:
        for name, size, n, group in PHASES:
            payload = os.urandom(size) * group
            times = []
            for _ in range(n // group):
                put(payload)
                t = time.perf_counter()
                os.fdatasync(fd)
                times.append(time.perf_counter() - t)
            times.sort()
            p90 = times[int(0.9 * len(times))]
            out.append((name, round(statistics.median(times) * 1e6), round(p90 * 1e6)))
    finally:
        if mm is not None:
            mm.close()
        os.close(fd)
        os.remove(path)
    return out


def main(argv: list[str]) -> int:
    d = argv[1] if len(argv) > 1 else None
    modes: dict[str, Callable[[], list[tuple[str, int, int]]]] = {}
    with tempfile.TemporaryDirectory(prefix="mmap-fsync-", dir=d) as tmp:
        for mode in ("mmap", "pwrite", "pwrite-warm", "append"):
            modes[mode] = lambda mode=mode: run(mode, os.path.join(tmp, mode))
        print("| write path | " + " | ".join(p[0] for p in PHASES) + " |")
        print("|---" * (len(PHASES) + 1) + "|")
        for mode, fn in modes.items():
            cells = " | ".join(f"{p50} / {p90}" for _, p50, p90 in fn())
            print(f"| {mode} | {cells} |", flush=True)
    print("\nfdatasync µs per round, median / p90")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
