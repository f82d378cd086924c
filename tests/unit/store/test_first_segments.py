"""An empty store's first CommitLog segments are created by the allocator thread at start-up, under either
flush type, so that the first append does not preallocate a segment on the caller's thread (the broker's
event loop). A slave creates none up front: its log starts at its master's offset."""

from __future__ import annotations

import os
import threading
import time

from store_helpers import msg, open_store, read_all, wait_for

from rocketq.store import FlushDiskType
from rocketq.store import mapped_file_queue as mfq_module
from rocketq.store.config import BrokerRole

SEG = 4 << 20


def _segment(root, offset: int) -> str:
    return os.path.join(str(root), "commitlog", f"{offset:020d}")


def test_async_store_creates_its_first_segments_off_the_appending_thread(tmp_path, monkeypatch):
    created_on: dict[str, str] = {}
    real = mfq_module.MappedFile

    def recording(path, *a, **kw):
        created_on[path] = threading.current_thread().name  # ConsumeQueue files share the names
        return real(path, *a, **kw)

    monkeypatch.setattr(mfq_module, "MappedFile", recording)
    s = open_store(
        tmp_path,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        mapped_file_size_commitlog=SEG,
        max_message_size=64 << 10,
    )
    try:
        assert wait_for(
            lambda: os.path.exists(_segment(tmp_path, 0)) and os.path.exists(_segment(tmp_path, SEG))
        )
        assert s.commit_log.mfq.files == []  # not visible before an append takes it
        assert s.put_message(msg(body=b"first")).ok
        assert s.commit_log.mfq.files[0].path == _segment(tmp_path, 0)
        me = threading.current_thread().name
        assert created_on[_segment(tmp_path, 0)] != me and created_on[_segment(tmp_path, 0)].startswith(
            "AllocateMappedFile"
        )
        assert created_on[_segment(tmp_path, SEG)].startswith("AllocateMappedFile")
        # filling the first segment rolls onto the second, already made, and asks for the third
        body = os.urandom(60 << 10)
        while len(s.commit_log.mfq.files) < 2:
            assert s.put_message(msg(body=body)).ok
        assert created_on[_segment(tmp_path, SEG)] != me
        assert wait_for(lambda: _segment(tmp_path, 2 * SEG) in created_on)
        assert created_on[_segment(tmp_path, 2 * SEG)].startswith("AllocateMappedFile")
    finally:
        s.shutdown()


def test_async_store_restarted_before_its_first_put_keeps_working(tmp_path):
    kw = dict(flush_disk_type=FlushDiskType.ASYNC_FLUSH, mapped_file_size_commitlog=SEG)
    s = open_store(tmp_path, **kw)
    assert wait_for(lambda: os.path.exists(_segment(tmp_path, SEG)))
    s.shutdown()  # two preallocated segments on disk, never appended to
    s = open_store(tmp_path, **kw)
    try:
        assert s.max_phy_offset == 0
        r = s.put_message(msg(body=b"first"))
        assert r.ok and r.wrote_offset == 0
    finally:
        s.shutdown()
    s = open_store(tmp_path, **kw)
    try:
        assert [m.body for m in read_all(s, "T", 0)] == [b"first"]
        assert s.max_phy_offset == r.wrote_offset + r.wrote_bytes
    finally:
        s.shutdown()


def test_a_slave_creates_no_segment_up_front(tmp_path):
    s = open_store(tmp_path, broker_role=BrokerRole.SLAVE, mapped_file_size_commitlog=SEG)
    try:
        time.sleep(0.3)  # what the allocator would have needed to create one
        d = os.path.join(str(tmp_path), "commitlog")
        assert not os.path.isdir(d) or os.listdir(d) == []
    finally:
        s.shutdown()
