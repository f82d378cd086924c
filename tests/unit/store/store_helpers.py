"""Helpers for the store-core tests (real files in tmp dirs, no mocks)."""

from __future__ import annotations

import os
import random
import time

from rocketq.protocol.record import decode_record
from rocketq.store import FlushDiskType, MessageStore, MessageToStore, StoreConfig

HOST = ("127.0.0.1", 10911)


def config(root, **kw) -> StoreConfig:
    base = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commitlog=64 * 1024,
        mapped_file_size_consume_queue=20 * 100,
        max_message_size=16 * 1024,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        max_hash_slot_num=1024,
        max_index_num=4096,
        # the disk is shared with other machines' work: its fill level must not make puts fail here
        disk_space_warning_level_ratio=100,
        disk_space_clean_forcibly_ratio=100,
    )
    base.update(kw)
    return StoreConfig(**base)


def wait_for(pred, timeout: float = 10.0) -> bool:
    """Poll pred every 10 ms until it holds or timeout s pass; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def open_store(root, **kw) -> MessageStore:
    s = MessageStore(config(root, **kw), HOST)
    s.start()
    return s


def msg(topic="T", queue_id=0, body=b"body", tags=None, keys=None, **kw) -> MessageToStore:
    props = dict(kw.pop("properties", {}))
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    return MessageToStore(topic=topic, queue_id=queue_id, body=body, properties=props, **kw)


class Tags:
    """MessageFilter matching a set of tag hash codes (what the broker's subscription filter does)."""

    def __init__(self, *tags: str) -> None:
        from rocketq.store.dispatch import tag_hash_code

        self.codes = {tag_hash_code(t) for t in tags}

    def is_matched_by_consume_queue(self, tags_code):
        return tags_code in self.codes

    def is_matched_by_commit_log(self, record):
        return True


# --- byte-for-byte comparisons of two stores given the same appends (the pwrite tests) ---


def read_all(s, topic: str, queue_id: int) -> list:
    g = s.get_message("g", topic, queue_id, 0, 64, None)
    try:
        return [decode_record(b, verify_crc=True) for b in g.buffers]
    finally:
        g.release()


_CLOCK_START = (time.time_ns() // 10**9) * 10**9  # near now: retention must not see old files


class StoreClock:
    """Deterministic store timestamps, so two stores given the same appends write the same bytes (every
    instance starts at the same instant: one taken per instance would differ when a second ends between)."""

    def __init__(self) -> None:
        self.t = _CLOCK_START

    def time_ns(self) -> int:
        self.t += 1_000_000
        return self.t


def store_files(root, sub: str) -> dict[str, bytes]:
    out = {}
    base = os.path.join(str(root), sub)
    for dirpath, _, names in os.walk(base):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, base)] = f.read()
    return out


def assert_same_store_files(root_a, root_b) -> None:
    """The two stores' CommitLog and ConsumeQueue files are byte for byte the same (at least 2 each)."""
    for sub in ("commitlog", "consumequeue"):
        a, b = store_files(root_a, sub), store_files(root_b, sub)
        assert a.keys() == b.keys() and len(a) >= 2
        for name in a:
            assert a[name] == b[name], f"{sub}/{name} differs"


def random_append_runs(seed: int) -> list[tuple[int, list]]:
    """(run length, messages) runs: sizes up to ~5 KiB in 64 KiB segments, so runs cross segment ends."""
    rnd = random.Random(seed)
    runs = []
    for _ in range(40):
        k = rnd.choice((1, 1, 2, 5, 16, 30))
        runs.append(
            (k, [(rnd.randrange(3), rnd.randbytes(rnd.choice((10, 300, 1024, 5000)))) for _ in range(k)])
        )
    return runs
