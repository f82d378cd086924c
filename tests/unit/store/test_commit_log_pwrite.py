"""SYNC_FLUSH appends go to the segment with pwrite() (not stores through the mapping): what is written is
what reads and recovery see, and a failed write acknowledges nothing and leaves no gap."""

from __future__ import annotations

import errno
import os
import threading
import time

from store_helpers import StoreClock, assert_same_store_files, msg, open_store, random_append_runs, read_all

from rocketq.protocol.record import decode_record
from rocketq.store import FlushDiskType, PutMessageStatus
from rocketq.store import commit_log as commit_log_module


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
        ms = read_all(s, "T", 0)
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
        assert [bytes(m.body) for m in read_all(s, "T", 0)] == [b"one", b"b0", b"b1", b"b2"]
    finally:
        s.shutdown()


def test_async_flush_keeps_storing_through_the_mapping(tmp_path, monkeypatch):
    real = os.pwrite
    records: list[int] = []

    def spy(fd, data, pos):  # the warm-ahead thread writes zeros ahead of the writer through pwrite too
        if any(bytes(data)):
            records.append(len(data))
        return real(fd, data, pos)

    monkeypatch.setattr(commit_log_module.os, "pwrite", spy)
    s = open_store(tmp_path)
    try:
        assert s.put_message(msg(body=b"x")).ok
        assert read_all(s, "T", 0)[0].body == b"x"
        assert records == []
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
        ms = read_all(s, "T", 0)
        assert [(m.queue_offset, bytes(m.body)) for m in ms] == [(0, b"before"), (1, b"after")]
    finally:
        s.shutdown()


def test_staged_runs_write_the_same_files_with_one_write_per_run(tmp_path, monkeypatch):
    """Runs of appends held by the broker (hold_flush_wakeups .. release) are staged and written with one
    pwrite per run: the CommitLog and ConsumeQueue files end up byte for byte what one write per append
    gives, across segment rolls, and every record reads back."""
    monkeypatch.setattr(commit_log_module, "time", StoreClock())
    calls = {"single": 0, "staged": 0}
    real = os.pwrite
    mode = ["single"]

    def counting(fd, data, pos):
        if threading.current_thread() is threading.main_thread():
            calls[mode[0]] += 1
        return real(fd, data, pos)

    monkeypatch.setattr(commit_log_module.os, "pwrite", counting)
    runs = random_append_runs(7)
    roots = {}
    for m in ("single", "staged"):
        mode[0] = m
        monkeypatch.setattr(commit_log_module, "time", StoreClock())
        root = roots[m] = tmp_path / m
        s = open_store(root, flush_disk_type=FlushDiskType.SYNC_FLUSH, warm_ahead_enable=False)
        s.set_flush_listener(lambda flushed: None)
        try:
            for _, batch in runs:
                if m == "staged":
                    s.hold_flush_wakeups()
                for qid, body in batch:
                    r = s.put_message(msg(queue_id=qid, body=body, born_timestamp=1))
                    assert r.ok
                if m == "staged":
                    s.release_flush_wakeups()
            for qid in range(3):
                got = []
                off = 0
                while True:
                    g = s.get_message("g", "T", qid, off, 64, None)
                    got += [bytes(decode_record(b, verify_crc=True).body) for b in g.buffers]
                    found = len(g.buffers)
                    g.release()
                    if not found:
                        break
                    off = g.next_begin_offset
                want = [body for _, batch in runs for q, body in batch if q == qid]
                assert got == want
        finally:
            s.shutdown()
    n = sum(k for k, _ in runs)
    assert calls["single"] >= n and calls["staged"] < calls["single"] // 3
    assert_same_store_files(roots["single"], roots["staged"])


def test_a_read_during_a_run_writes_the_run_first(tmp_path):
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    s.set_flush_listener(lambda flushed: None)
    try:
        s.hold_flush_wakeups()
        rs = [s.put_message(msg(body=f"m{i}".encode())) for i in range(3)]
        assert s.commit_log.max_offset == rs[0].wrote_offset  # staged: not visible yet
        assert [bytes(m.body) for m in read_all(s, "T", 0)] == [b"m0", b"m1", b"m2"]
        assert s.commit_log.max_offset == rs[-1].wrote_offset + rs[-1].wrote_bytes
        s.release_flush_wakeups()
    finally:
        s.shutdown()


def test_a_failed_staged_write_acknowledges_nothing_and_refuses_writes(tmp_path, monkeypatch):
    flushed: list[int] = []
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    s.set_flush_listener(flushed.append)
    real = os.pwrite
    try:
        ok = s.put_message(msg(body=b"before"))
        s.hold_flush_wakeups()
        lost = [s.put_message(msg(body=b"lost")) for _ in range(2)]

        def failing(fd, data, pos):
            if threading.current_thread() is threading.main_thread():
                raise OSError(errno.EIO, "injected")
            return real(fd, data, pos)

        monkeypatch.setattr(commit_log_module.os, "pwrite", failing)
        s.release_flush_wakeups()
        monkeypatch.setattr(commit_log_module.os, "pwrite", real)
        assert s.put_message(msg(body=b"after")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert s.commit_log.max_offset == ok.wrote_offset + ok.wrote_bytes
        s.flush_service.request_nowait(0)
        time.sleep(0.1)
        assert max(flushed, default=0) < lost[0].wrote_offset + lost[0].wrote_bytes
    finally:
        s.shutdown()
