"""SYNC_FLUSH appends go to the segment with pwrite() (not stores through the mapping): what is written is
what reads and recovery see, and a failed write acknowledges nothing and leaves no gap."""

from __future__ import annotations

import errno
import os
import threading

from store_helpers import msg, open_store

from rocketq.protocol.record import decode_record
from rocketq.store import FlushDiskType, PutMessageStatus
from rocketq.store import commit_log as commit_log_module


def _read_all(s, topic: str, queue_id: int) -> list:
    g = s.get_message("g", topic, queue_id, 0, 64, None)
    try:
        return [decode_record(b, verify_crc=True) for b in g.buffers]
    finally:
        g.release()


def test_sync_flush_records_are_written_with_pwrite_and_read_back(tmp_path, monkeypatch):
    calls: list[int] = []
    real = os.pwrite

    def counting_pwrite(fd, data, pos):
        if threading.current_thread() is threading.main_thread():  # not the warm-ahead zeros (store/warm.py)
            calls.append(len(data))
        return real(fd, data, pos)

    monkeypatch.setattr(commit_log_module.os, "pwrite", counting_pwrite)
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    try:
        r1 = s.put_message(msg(body=b"one", keys="k1"))
        r2 = s.put_messages("T", 0, [msg(body=f"b{i}".encode()) for i in range(3)])
        assert r1.ok and r2.ok
        # one write per message, one per batch, each padded with zeros to the end of its last page
        assert calls == [r.wrote_bytes + -(r.wrote_offset + r.wrote_bytes) % 4096 for r in (r1, r2)]
        ms = _read_all(s, "T", 0)
        assert [bytes(m.body) for m in ms] == [b"one", b"b0", b"b1", b"b2"]
        assert [m.queue_offset for m in ms] == [0, 1, 2, 3]
        # the bytes are in the file itself, not only in a mapping
        seg = os.path.join(str(tmp_path), "commitlog", f"{0:020d}")
        with open(seg, "rb") as f:
            f.seek(r1.wrote_offset)
            assert decode_record(f.read(r1.wrote_bytes), verify_crc=True).body == b"one"
    finally:
        s.shutdown()
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)  # recovery sees the same records
    try:
        assert [bytes(m.body) for m in _read_all(s, "T", 0)] == [b"one", b"b0", b"b1", b"b2"]
    finally:
        s.shutdown()


def test_async_flush_keeps_storing_through_the_mapping(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(commit_log_module.os, "pwrite", lambda fd, data, pos: calls.append(len(data)))
    s = open_store(tmp_path)
    try:
        assert s.put_message(msg(body=b"x")).ok
        assert calls == []
    finally:
        s.shutdown()


def test_failed_write_acknowledges_nothing_and_leaves_no_gap(tmp_path, monkeypatch):
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    real = os.pwrite
    try:
        assert s.put_message(msg(body=b"before")).ok

        def failing(fd, data, pos):
            raise OSError(errno.EIO, "injected")

        monkeypatch.setattr(commit_log_module.os, "pwrite", failing)
        bad = s.put_message(msg(body=b"lost"))
        assert bad.status is PutMessageStatus.UNKNOWN_ERROR and bad.flush_future is None
        assert s.put_messages("T", 0, [msg(body=b"lost2")]).status is PutMessageStatus.UNKNOWN_ERROR
        monkeypatch.setattr(commit_log_module.os, "pwrite", lambda fd, data, pos: real(fd, data, pos) - 1)
        assert s.put_message(msg(body=b"short")).status is PutMessageStatus.UNKNOWN_ERROR
        monkeypatch.setattr(commit_log_module.os, "pwrite", real)
        after = s.put_message(msg(body=b"after"))
        assert after.ok and after.queue_offset == 1
        ms = _read_all(s, "T", 0)
        assert [(m.queue_offset, bytes(m.body)) for m in ms] == [(0, b"before"), (1, b"after")]
    finally:
        s.shutdown()
