"""Shared helpers for the store fault tests: a writer child process and a verifier.

The child (run as `python faultkit.py DIR MODE SEED`) opens a MessageStore on DIR, appends from several
threads and writes one line per acknowledged append to stdout: "<queue_id> <queue_offset> <token>". A line
is written only after the durability the mode promises (ASYNC: PUT_OK; SYNC: flush_future returned True).
Lines are short single os.write calls on a pipe, so they are atomic even when the child is killed mid-run.
"""

from __future__ import annotations

import os
import random
import sys
import threading

TOPIC = "FaultTopic"
QUEUES = 2
THREADS = 3


def store_config(root: str, mode: str, **extra):
    from rocketq.store import FlushDiskType, StoreConfig

    cfg = dict(
        store_path_root_dir=root,
        mapped_file_size_commitlog=256 * 1024,  # small segments: kills land during rolls too
        mapped_file_size_consume_queue=20 * 512,
        flush_disk_type=FlushDiskType.SYNC_FLUSH if mode == "SYNC" else FlushDiskType.ASYNC_FLUSH,
        flush_interval_commitlog=50,
        max_hash_slot_num=512,
        max_index_num=2048,
        # the disk is shared with other machines' work: its fill level must not make puts fail here
        disk_space_warning_level_ratio=100,
        disk_space_clean_forcibly_ratio=100,
    )
    cfg.update(extra)
    return StoreConfig(**cfg)


def open_store(root: str, mode: str = "ASYNC", **extra):
    from rocketq.store import MessageStore

    store = MessageStore(store_config(root, mode, **extra), ("127.0.0.1", 10911))
    store.start()
    return store


def make_msg(queue_id: int, token: str, rng: random.Random):
    from rocketq.store import MessageToStore

    pad = rng.randbytes(rng.randint(20, 3000))
    return MessageToStore(
        topic=TOPIC,
        queue_id=queue_id,
        body=token.encode() + b"|" + pad,
        properties={"KEYS": token, "TAGS": "t"},
        born_timestamp=0,
    )


def child_main(root: str, mode: str, seed: int) -> None:
    from rocketq.store import PutMessageStatus

    store = open_store(root, mode)
    out = sys.stdout.fileno()
    os.write(out, b"ready\n")

    def writer(tid: int) -> None:
        rng = random.Random(seed * 100 + tid)
        i = 0
        while True:
            q = (tid + i) % QUEUES
            token = f"s{seed}t{tid}n{i}"
            i += 1
            r = store.put_message(make_msg(q, token, rng))
            if r.status != PutMessageStatus.PUT_OK:
                continue
            if r.flush_future is not None and not r.flush_future.result():
                continue
            os.write(out, f"{q} {r.queue_offset} {token}\n".encode())

    for t in range(THREADS):
        threading.Thread(target=writer, args=(t,), daemon=True).start()
    threading.Event().wait()  # until SIGKILL


def child_main_loop(root: str, seed: int) -> None:
    """SYNC_FLUSH the way the broker runs it: appends on an asyncio loop in runs (hold/release), plus one
    appending thread, and the loop's native-AIO group commit (store/loop_flush.py). An append is reported
    once the flush listener, on the loop, says a round covered it."""
    import asyncio
    import heapq

    from rocketq.store import MessageStore, PutMessageStatus

    out = sys.stdout.fileno()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        waiting: list[tuple[int, str]] = []  # (end offset, ack line), a heap: the thread's appends interleave

        def flushed(offset: int) -> None:
            while waiting and waiting[0][0] <= offset:
                os.write(out, heapq.heappop(waiting)[1].encode())

        store = MessageStore(store_config(root, "SYNC"), ("127.0.0.1", 10911))
        assert store.set_loop_flush_listener(loop, flushed)
        store.start()
        assert store.flush_backend == "native-aio", store.flush_backend

        def thread_writer() -> None:  # its requests reach the loop through call_soon_threadsafe
            rng = random.Random(seed * 100 + 99)
            for i in range(10**9):
                q, token = i % QUEUES, f"s{seed}tXn{i}"
                r = store.put_message(make_msg(q, token, rng))
                if r.status == PutMessageStatus.PUT_OK:
                    item = (r.flush_offset, f"{q} {r.queue_offset} {token}\n")
                    loop.call_soon_threadsafe(heapq.heappush, waiting, item)

        os.write(out, b"ready\n")
        threading.Thread(target=thread_writer, daemon=True).start()
        rng = random.Random(seed)
        i = 0
        while True:
            store.hold_flush_wakeups()  # a run of pipelined sends, as the broker's burst hooks do
            run = []
            for _ in range(rng.randint(1, 16)):
                q, token = i % QUEUES, f"s{seed}tLn{i}"
                i += 1
                r = store.put_message(make_msg(q, token, rng))
                if r.status == PutMessageStatus.PUT_OK:
                    run.append((r.flush_offset, f"{q} {r.queue_offset} {token}\n"))
            if store.release_flush_wakeups():
                for item in run:
                    heapq.heappush(waiting, item)
            await asyncio.sleep(0.001 * rng.random())

    asyncio.run(main())


def parse_acks(data: bytes) -> dict[tuple[int, int], str]:
    acks = {}
    for line in data.decode().splitlines():
        parts = line.split()
        if len(parts) == 3:
            acks[(int(parts[0]), int(parts[1]))] = parts[2]
    return acks


def read_queue(store, queue_id: int, skipped: set[int] | None = None) -> dict[int, object]:
    """Every record of the queue from min to max offset, CRC-checked, each at its own queue offset.
    Offsets must be gapless; with `skipped` given, offsets the store leaves out (damaged records it refuses to
    serve) are collected there instead of failing."""
    from rocketq.protocol.record import decode_record
    from rocketq.store import GetMessageStatus

    lo = store.get_min_offset_in_queue(TOPIC, queue_id)
    hi = store.get_max_offset_in_queue(TOPIC, queue_id)
    got = {}
    off = lo
    while off < hi:
        res = store.get_message("g", TOPIC, queue_id, off, 32, None)
        if skipped is not None and (res.status != GetMessageStatus.FOUND or not res.buffers):
            nxt = max(off + 1, res.next_begin_offset)
            skipped.update(range(off, nxt))
            off = nxt
            res.release()
            continue
        assert res.status == GetMessageStatus.FOUND, (queue_id, off, hi, res.status)
        assert res.buffers, (queue_id, off)
        for buf in res.buffers:
            m = decode_record(buf, verify_crc=True)
            assert m.topic == TOPIC and m.queue_id == queue_id
            if skipped is not None and m.queue_offset > off:
                skipped.update(range(off, m.queue_offset))
                off = m.queue_offset
            assert m.queue_offset == off, f"gap/misorder in queue {queue_id}: {m.queue_offset} != {off}"
            body = bytes(m.body)
            got[off] = body.split(b"|", 1)[0].decode()
            off += 1
        if skipped is not None and res.next_begin_offset > off:
            skipped.update(range(off, res.next_begin_offset))
            off = res.next_begin_offset
        assert res.next_begin_offset == off, (
            f"queue {queue_id}: read to {off}, next_begin_offset={res.next_begin_offset} (units skipped)"
        )
        res.release()
    return got


def check_index(store, acks: dict[tuple[int, int], str], sample: int = 25) -> None:
    """A sample of acknowledged messages is found by key (the IndexFile was recovered / rebuilt)."""
    import time

    from rocketq.protocol.record import decode_record

    deadline = time.monotonic() + 30
    while store.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    items = sorted(acks.items())
    step = max(1, len(items) // sample)
    for (q, off), token in items[::step]:
        res = store.query_message(TOPIC, token, 32, 0, 2**62)
        found = [decode_record(b, verify_crc=True) for b in res.buffers]
        assert any(m.queue_id == q and m.queue_offset == off for m in found), f"{token} not found by key"


def verify_store(root: str, acks: dict[tuple[int, int], str], mode: str = "ASYNC", **extra) -> dict:
    """Open the store (recovering it) and check: every ack readable at its offset, no gaps, CRCs valid."""
    store = open_store(root, mode, **extra)
    try:
        total = 0
        for q in range(QUEUES):
            got = read_queue(store, q)
            total += len(got)
            for (aq, off), token in acks.items():
                if aq == q:
                    assert got.get(off) == token, (
                        f"acked {token} at {q}/{off} lost or replaced: {got.get(off)}"
                    )
            for token in got.values():
                assert token.startswith("s") and "t" in token, f"phantom record {token!r}"
        check_index(store, acks)
        return {"records": total, "max_phy": store.max_phy_offset}
    finally:
        store.shutdown()


if __name__ == "__main__":
    if sys.argv[2] == "SYNC_LOOP":
        child_main_loop(sys.argv[1], int(sys.argv[3]))
    else:
        child_main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
