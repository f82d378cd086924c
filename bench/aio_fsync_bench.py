"""What one SYNC_FLUSH acknowledgement's fdatasync costs an asyncio loop, by the way it is run.

Each operation appends 128 B with pwrite, has it made durable, and resumes a coroutine waiting for that:
  inline  fdatasync on the loop thread (the floor; never done by the broker: it blocks the loop)
  thread  a Python thread does the fdatasync and hands the completion back with call_soon_threadsafe
          (store/flush.py GroupCommitService + broker/flush_waiter.py)
  aio     io_submit(IOCB_CMD_FDSYNC) from the loop, completion read from an eventfd the loop watches
          (store/linux_aio.py, store/loop_flush.py)
One operation in flight, so every figure is a full round. Prints ops/s, wall and process CPU per op (the
kernel's worker that runs an AIO fdatasync is not part of the process), and voluntary context switches.

    python bench/aio_fsync_bench.py --ops 3000 --reps 3 --cpu 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from rocketq.store.linux_aio import FdsyncContext

PAYLOAD = b"x" * 128


async def _run(mode: str, fd: int, ops: int) -> tuple[float, float, float]:
    loop = asyncio.get_running_loop()
    off = 0
    fut: asyncio.Future | None = None
    cleanup = None
    if mode == "thread":
        wake = threading.Event()
        stop = False

        def worker() -> None:
            while True:
                wake.wait()
                wake.clear()
                if stop:
                    return
                os.fdatasync(fd)
                loop.call_soon_threadsafe(fut.set_result, None)

        t = threading.Thread(target=worker, daemon=True)
        t.start()

        def durable() -> None:
            wake.set()

        def cleanup() -> None:
            nonlocal stop
            stop = True
            wake.set()
            t.join()

    elif mode == "aio":
        ctx = FdsyncContext(1)

        def on_eventfd() -> None:
            ctx.clear_eventfd()
            for _, res in ctx.reap(0.0):
                assert res == 0, res
                fut.set_result(None)

        loop.add_reader(ctx.eventfd, on_eventfd)

        def durable() -> None:
            ctx.submit([fd], 1)

        def cleanup() -> None:
            loop.remove_reader(ctx.eventfd)
            ctx.close()

    else:

        def durable() -> None:
            os.fdatasync(fd)
            fut.set_result(None)

    async def one() -> None:
        nonlocal fut, off
        fut = loop.create_future()
        os.pwrite(fd, PAYLOAD, off)
        off += len(PAYLOAD)
        durable()
        await fut

    for _ in range(200):  # warm-up: the first rounds convert extents and fill caches
        await one()
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(ops):
        await one()
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    if cleanup is not None:
        cleanup()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return (t1 - t0) / ops, cpu / ops, (r1.ru_nvcsw - r0.ru_nvcsw) / ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (the peers bench pins the broker)")
    ap.add_argument("--dir", default=None, help="directory of the file (default: a temp dir)")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for rep in range(args.reps):
            for mode in ("inline", "thread", "aio"):  # interleaved, so drift hits every mode alike
                path = os.path.join(d, f"{mode}.dat")
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
                try:
                    os.pwrite(fd, bytes(args.ops * len(PAYLOAD) + (1 << 20)), 0)  # blocks written: no extents
                    os.fsync(fd)
                    wall, cpu, csw = asyncio.run(_run(mode, fd, args.ops))
                finally:
                    os.close(fd)
                    os.unlink(path)
                print(f"rep {rep} {mode:6s} {1 / wall:8,.0f} ops/s  {wall * 1e6:6.0f} µs/op wall  "
                      f"{cpu * 1e6:5.0f} µs/op process CPU  {csw:4.1f} voluntary switches/op")  # fmt: skip


if __name__ == "__main__":
    main()
