"""ASYNC_FLUSH with writeback behind the writer (asyncWritebackBytes > 0, store/writeback.py): records go to
the segment with pwrite (runs staged into one write), byte for byte what the store through the mapping
writes; writeback is started for whole pages behind the writer; nothing is acknowledged before it is in the
file; a thread appending while another's run is staged keeps the log in order."""

from __future__ import annotations

import errno
import itertools
import os
import threading

from store_helpers import StoreClock, assert_same_store_files, msg, open_store, random_append_runs, read_all

from rocketq.protocol.record import decode_record
from rocketq.store import commit_log as commit_log_module
from rocketq.store import writeback as writeback_module
from rocketq.store.flush import FlushRealTimeService
from rocketq.store.mapped_file import OS_PAGE_SIZE
from rocketq.store.writeback import WritebackBehind

WB = 16 * 1024


def _counting_pwrite(monkeypatch) -> list[int]:
    """Sizes of the main thread's pwrites into CommitLog segments (os.pwrite is patched process-wide)."""
    calls: list[int] = []
    real = os.pwrite

    def counting(fd, data, pos):
        in_commitlog = f"{os.sep}commitlog{os.sep}" in os.readlink(f"/proc/self/fd/{fd}")
        if in_commitlog and threading.current_thread() is threading.main_thread():
            calls.append(len(data))
        return real(fd, data, pos)

    monkeypatch.setattr(commit_log_module.os, "pwrite", counting)
    return calls


def test_records_are_written_with_pwrite_unpadded_and_survive_restart(tmp_path, monkeypatch):
    calls = _counting_pwrite(monkeypatch)
    s = open_store(tmp_path, async_writeback_bytes=WB)
    try:
        assert s.stages_runs
        r1 = s.put_message(msg(body=b"one", keys="k1"))
        r2 = s.put_messages("T", 0, [msg(body=f"b{i}".encode()) for i in range(3)])
        assert r1.ok and r2.ok
        assert calls == [r1.wrote_bytes, r2.wrote_bytes]  # one write each, no zero padding (no warm zeros)
        assert [bytes(m.body) for m in read_all(s, "T", 0)] == [b"one", b"b0", b"b1", b"b2"]
        seg = os.path.join(str(tmp_path), "commitlog", f"{0:020d}")
        with open(seg, "rb") as f:  # in the file itself, right away (no flush has run)
            f.seek(r1.wrote_offset)
            assert decode_record(f.read(r1.wrote_bytes), verify_crc=True).body == b"one"
    finally:
        s.shutdown()
    s = open_store(tmp_path, async_writeback_bytes=WB)
    try:
        assert [bytes(m.body) for m in read_all(s, "T", 0)] == [b"one", b"b0", b"b1", b"b2"]
    finally:
        s.shutdown()


def test_staged_runs_write_what_the_mapping_writes(tmp_path, monkeypatch):
    """The same appends, once stored through the mapping (asyncWritebackBytes=0) and once staged in runs and
    written with pwrite: identical CommitLog and ConsumeQueue files across segment rolls, far fewer writes."""
    calls = _counting_pwrite(monkeypatch)
    runs = random_append_runs(11)
    roots = {}
    for mode in ("mapping", "staged"):
        monkeypatch.setattr(commit_log_module, "time", StoreClock())
        root = roots[mode] = tmp_path / mode
        s = open_store(root, async_writeback_bytes=0 if mode == "mapping" else WB)
        try:
            for _, batch in runs:
                s.hold_flush_wakeups()
                for qid, body in batch:
                    assert s.put_message(msg(queue_id=qid, body=body, born_timestamp=1)).ok
                assert s.release_flush_wakeups()
        finally:
            s.shutdown()
        if mode == "mapping":
            assert calls == []
    assert 0 < len(calls) < sum(k for k, _ in runs) // 3
    assert_same_store_files(roots["mapping"], roots["staged"])


def test_another_threads_append_writes_the_staged_run_first(tmp_path):
    s = open_store(tmp_path, async_writeback_bytes=WB)
    try:
        s.hold_flush_wakeups()  # this (main) thread stages from here on
        staged = [s.put_message(msg(body=f"m{i}".encode())) for i in range(3)]
        assert s.commit_log.max_offset == staged[0].wrote_offset  # not in the file yet
        other: list = []
        t = threading.Thread(target=lambda: other.append(s.put_message(msg(body=b"other"))))
        t.start()
        t.join(10)
        # the other thread's record lands after the run, and the run was written out before it
        assert other[0].ok and other[0].wrote_offset == staged[-1].wrote_offset + staged[-1].wrote_bytes
        assert s.commit_log.max_offset == other[0].wrote_offset + other[0].wrote_bytes
        after = s.put_message(msg(body=b"after"))  # staging goes on for this thread
        assert s.commit_log.max_offset == after.wrote_offset
        assert s.release_flush_wakeups()
        seg = os.path.join(str(tmp_path), "commitlog", f"{0:020d}")
        with open(seg, "rb") as f:
            data = f.read(s.commit_log.max_offset)
        bodies = []
        for r in [*staged, other[0], after]:
            bodies.append(
                decode_record(data[r.wrote_offset : r.wrote_offset + r.wrote_bytes], verify_crc=True).body
            )
        assert bodies == [b"m0", b"m1", b"m2", b"other", b"after"]
        assert [r.queue_offset for r in [*staged, other[0], after]] == [0, 1, 2, 3, 4]
    finally:
        s.shutdown()


def test_a_failed_run_write_reports_false_and_refuses_writes(tmp_path, monkeypatch):
    s = open_store(tmp_path, async_writeback_bytes=WB)
    try:
        assert s.put_message(msg(body=b"before")).ok
        s.hold_flush_wakeups()
        assert s.put_message(msg(body=b"lost")).ok  # staged; its answer must wait for the run's write

        def failing(fd, data, pos):
            raise OSError(errno.EIO, "injected")

        monkeypatch.setattr(commit_log_module.os, "pwrite", failing)
        assert s.release_flush_wakeups() is False
        monkeypatch.undo()
        assert not s.put_message(msg(body=b"refused")).ok
    finally:
        s.shutdown()


def test_writeback_is_started_for_whole_pages_behind_the_writer(tmp_path, monkeypatch):
    ranges: list[tuple[int, int, int]] = []
    real = writeback_module.start_writeback

    def recording(fd, offset, nbytes):
        if threading.current_thread() is threading.main_thread():  # not the flush thread's own calls
            ranges.append((fd, offset, nbytes))
        return real(fd, offset, nbytes)

    monkeypatch.setattr(writeback_module, "start_writeback", recording)
    s = open_store(tmp_path, async_writeback_bytes=WB)
    try:
        fs = s.flush_service
        assert isinstance(fs, FlushRealTimeService) and fs.writeback is not None  # the thread kicks too
        wb = WritebackBehind(s.commit_log.mfq, WB)
        body = b"x" * 3000
        while s.commit_log.max_offset < 3 * 64 * 1024:  # crosses two segment ends (64 KiB segments)
            assert s.put_message(msg(body=body)).ok
        top = s.commit_log.max_offset
        wb.kick(top)
        assert ranges, "no writeback was started"
        assert wb.supported and wb.started == top - top % OS_PAGE_SIZE
        for _, offset, nbytes in ranges:
            assert offset % OS_PAGE_SIZE == 0 and nbytes > 0 and offset + nbytes <= 64 * 1024
        # the ranges tile the log from where the thread first saw it, segment by segment, with no gap
        segs = sorted(s.commit_log.mfq.files, key=lambda m: m.file_from_offset)
        by_fd = {m.fd: m.file_from_offset for m in segs}
        spans = sorted((by_fd[fd] + off, by_fd[fd] + off + n) for fd, off, n in ranges)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        assert spans[-1][1] == wb.started
        n = len(ranges)
        wb.kick(top)  # nothing new: no call
        assert len(ranges) == n
        assert s.put_message(msg(body=b"y" * 100)).ok
        wb.kick(s.commit_log.max_offset)  # less than a step new: still nothing
        assert len(ranges) == n
    finally:
        s.shutdown()


def test_writeback_turns_itself_off_where_unsupported(tmp_path, monkeypatch):
    monkeypatch.setattr(writeback_module, "start_writeback", lambda fd, off, n: errno.ENOSYS)
    s = open_store(tmp_path, async_writeback_bytes=WB)
    try:
        wb = s.flush_service.writeback
        while s.commit_log.max_offset < 2 * WB:
            assert s.put_message(msg(body=b"z" * 2000)).ok
        wb.kick(s.commit_log.max_offset)
        assert not wb.supported
        assert s.put_message(msg(body=b"still")).ok  # the store goes on without it
    finally:
        s.shutdown()


def test_real_sync_file_range_call_succeeds_on_a_file(tmp_path):
    p = tmp_path / "f"
    with open(p, "wb") as f:
        f.write(b"a" * (4 * OS_PAGE_SIZE))
        f.flush()
        assert writeback_module.start_writeback(f.fileno(), 0, 4 * OS_PAGE_SIZE) == 0
    assert writeback_module.start_writeback(-1, 0, OS_PAGE_SIZE) == errno.EBADF
