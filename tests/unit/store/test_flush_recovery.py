"""Flushing (async interval, SYNC_FLUSH group commit), checkpoint layout, normal and abnormal recovery."""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time

import pytest
from store_helpers import msg, open_store

from rocketq.protocol.record import decode_record
from rocketq.store import FlushDiskType, GetMessageStatus, PutMessageStatus


def read_all(s, topic, qid):
    out, off = [], s.get_min_offset_in_queue(topic, qid)
    while True:
        r = s.get_message("g", topic, qid, off, 32, None)
        if r.status is not GetMessageStatus.FOUND:
            return out, r.status
        for b in r.buffers:
            m = decode_record(b, verify_crc=True)
            out.append((m.queue_offset, bytes(m.body)))
        off = r.next_begin_offset
        r.release()


class FsyncCounter:
    def __init__(self, monkeypatch, delay=0.0):
        self.calls = 0
        self._real = os.fdatasync
        self.delay = delay
        monkeypatch.setattr(os, "fdatasync", self)

    def __call__(self, fd):
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        self._real(fd)


def test_sync_flush_group_commit_acks_many_appends_with_few_fsyncs(tmp_path, monkeypatch):
    counter = FsyncCounter(monkeypatch, delay=0.005)  # a slowish disk: requests pile up behind each sync
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    try:
        results = []
        lock = threading.Lock()

        def producer(q):
            for i in range(500):
                r = s.put_message(msg(queue_id=q, body=b"%d" % i))
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=producer, args=(q,)) for q in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 2000 and all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert all(r.flush_future.result(10) is True for r in results)
        end = max(r.wrote_offset + r.wrote_bytes for r in results)
        assert s.flushed_phy_offset >= end
        rounds = s.flush_service.sync_count
        assert 1 <= rounds < 200, rounds  # 2000 acks, each fsync covered many of them
        assert counter.calls < 400  # commitlog rounds (+ a segment roll each) + CQ/checkpoint flushes
        assert s.runtime_info()["groupCommitSyncCount"] == str(rounds)
    finally:
        s.shutdown()


def test_sync_flush_future_resolves_only_after_the_data_is_flushed(tmp_path):
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    try:
        for _ in range(50):
            r = s.put_message(msg(body=b"x" * 100))
            assert r.flush_future.result(5) is True
            assert s.flushed_phy_offset >= r.wrote_offset + r.wrote_bytes
    finally:
        s.shutdown()


def test_sync_flush_timeout_resolves_false(tmp_path, monkeypatch):
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=100)
    try:
        FsyncCounter(monkeypatch, delay=0.4)  # the disk stalls longer than syncFlushTimeout
        futures = [s.put_message(msg()).flush_future for _ in range(3)]
        time.sleep(0.05)
        futures += [s.put_message(msg()).flush_future for _ in range(3)]
        outcomes = [f.result(5) for f in futures]
        assert False in outcomes  # requests queued behind the stall timed out (-> FLUSH_DISK_TIMEOUT)
        assert s.put_message(msg()).flush_future is not None
    finally:
        monkeypatch.undo()
        s.shutdown()


def test_async_flush_least_pages_then_thorough(tmp_path):
    s = open_store(
        tmp_path, flush_interval_commitlog=20, flush_commitlog_least_pages=4,
        flush_commitlog_thorough_interval=600_000,
    )  # fmt: skip
    try:
        r = s.put_message(msg(body=b"small"))
        assert r.flush_future is None
        time.sleep(0.2)
        assert s.flushed_phy_offset == 0  # fewer than 4 dirty pages: not yet
        for _ in range(6):
            s.put_message(msg(body=b"x" * 3000))
        deadline = time.monotonic() + 3
        while s.flushed_phy_offset == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.flushed_phy_offset > 4 * 4096 - 3000
    finally:
        s.shutdown()
    s = open_store(tmp_path, flush_interval_commitlog=20, flush_commitlog_thorough_interval=100)
    try:
        r = s.put_message(msg(body=b"small"))
        deadline = time.monotonic() + 3
        while s.flushed_phy_offset < r.wrote_offset + r.wrote_bytes and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.flushed_phy_offset == r.wrote_offset + r.wrote_bytes  # thorough flush ignores least pages
    finally:
        s.shutdown()


def test_checkpoint_file_layout_and_abort_file(tmp_path):
    s = open_store(tmp_path)
    assert (tmp_path / "abort").exists()
    try:
        last = [s.put_message(msg()) for _ in range(5)][-1]
    finally:
        s.shutdown()
    assert not (tmp_path / "abort").exists()
    raw = (tmp_path / "checkpoint").read_bytes()
    assert len(raw) == 4096
    physic, logics, index = struct.unpack(">qqq", raw[:24])
    assert physic == logics == last.store_timestamp
    assert index >= last.store_timestamp - 1000 or index == 0


def test_normal_restart_keeps_everything(tmp_path):
    s = open_store(tmp_path)
    expect = {}
    try:
        for i in range(300):
            q = i % 3
            r = s.put_message(msg(topic=f"T{i % 2}", queue_id=q, body=b"m%d" % i, tags="A"))
            expect.setdefault((f"T{i % 2}", q), []).append((r.queue_offset, b"m%d" % i))
    finally:
        s.shutdown()
    s = open_store(tmp_path)
    try:
        assert not s.recovered_abnormally
        for (topic, q), msgs in expect.items():
            got, status = read_all(s, topic, q)
            assert got == msgs and status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        r = s.put_message(msg(topic="T0", queue_id=0))
        assert r.queue_offset == len(expect[("T0", 0)])
        assert r.wrote_offset == s.max_phy_offset - r.wrote_bytes
    finally:
        s.shutdown()


def crash_image(s, dst):
    """What a kill -9 leaves behind: the files as they are in the page cache, abort file included."""
    shutil.copytree(s.config.store_path_root_dir, dst, ignore=shutil.ignore_patterns("*.tmp"))
    return dst


def test_abnormal_restart_truncates_a_torn_tail(tmp_path):
    s = open_store(tmp_path / "live")
    try:
        rs = [s.put_message(msg(queue_id=i % 2, body=b"m%d" % i, keys=f"k{i}")) for i in range(120)]
        img = crash_image(s, tmp_path / "img")
    finally:
        s.shutdown()
    last = rs[-1]
    seg = 64 * 1024
    path = img / "commitlog" / f"{last.wrote_offset - last.wrote_offset % seg:020d}"
    with open(path, "r+b") as f:  # torn write: only the first sector part of the last record made it
        f.seek(last.wrote_offset % seg + 40)
        f.write(bytes(last.wrote_bytes - 40))
    prev = rs[-2]
    with open(path, "r+b") as f:  # and the record before it has a damaged body (CRC mismatch)
        f.seek(prev.wrote_offset % seg + 88)
        f.write(b"?")
    last = prev
    s = open_store(img)
    try:
        assert s.recovered_abnormally
        assert s.max_phy_offset == last.wrote_offset
        for q in range(2):
            got, _ = read_all(s, "T", q)
            want = [(r.queue_offset, b"m%d" % i) for i, r in enumerate(rs[:-2]) if i % 2 == q]
            assert got == want
        r = s.put_message(msg(queue_id=1))
        assert r.queue_offset == rs[-1].queue_offset  # the lost records' offsets are reused, no gap
        assert r.wrote_offset == last.wrote_offset
    finally:
        s.shutdown()


def test_abnormal_restart_rebuilds_lost_consume_queue_tail(tmp_path):
    s = open_store(tmp_path / "live")
    try:
        rs = [s.put_message(msg(body=b"m%d" % i)) for i in range(60)]
        img = crash_image(s, tmp_path / "img")
    finally:
        s.shutdown()
    cq = img / "consumequeue" / "T" / "0" / "00000000000000000000"
    with open(cq, "r+b") as f:  # the CQ page never reached the disk after unit 20
        f.seek(20 * 20)
        f.write(bytes(40 * 20))
    s = open_store(img)
    try:
        got, _ = read_all(s, "T", 0)
        assert got == [(r.queue_offset, b"m%d" % i) for i, r in enumerate(rs)]
    finally:
        s.shutdown()


def test_consume_queue_units_past_the_commitlog_end_are_dropped(tmp_path):
    s = open_store(tmp_path / "live")
    try:
        rs = [s.put_message(msg(body=b"m%d" % i)) for i in range(30)]
        img = crash_image(s, tmp_path / "img")
    finally:
        s.shutdown()
    cut = rs[25].wrote_offset
    with open(img / "commitlog" / "00000000000000000000", "r+b") as f:  # CommitLog lost its tail, CQ did not
        f.seek(cut)
        f.write(bytes(64 * 1024 - cut))
    s = open_store(img)
    try:
        assert s.max_phy_offset == cut
        assert s.get_max_offset_in_queue("T", 0) == 25
        got, _ = read_all(s, "T", 0)
        assert [o for o, _ in got] == list(range(25))
    finally:
        s.shutdown()


@pytest.mark.parametrize("abort", [False, True])
def test_consume_queues_and_index_rebuilt_from_commitlog_alone(tmp_path, abort):
    s = open_store(tmp_path)
    try:
        rs = [s.put_message(msg(queue_id=i % 3, body=b"m%d" % i, keys=f"key{i}")) for i in range(200)]
    finally:
        s.shutdown()
    shutil.rmtree(tmp_path / "consumequeue")
    shutil.rmtree(tmp_path / "index")
    if abort:
        (tmp_path / "abort").touch()
    s = open_store(tmp_path)
    try:
        for q in range(3):
            got, _ = read_all(s, "T", q)
            assert got == [(r.queue_offset, b"m%d" % i) for i, r in enumerate(rs) if i % 3 == q]
        deadline = time.monotonic() + 10
        while s.dispatch_behind_bytes() > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        for i in (0, 77, 199):
            q = s.query_message("T", f"key{i}", 32, 0, 2**62)
            assert [decode_record(b).commit_log_offset for b in q.buffers] == [rs[i].wrote_offset]
            q.release()
    finally:
        s.shutdown()


def test_stray_tmp_and_short_last_segment_are_tolerated(tmp_path):
    s = open_store(tmp_path)
    try:
        rs = [s.put_message(msg(body=b"m%d" % i)) for i in range(10)]
    finally:
        s.shutdown()
    cl = tmp_path / "commitlog"
    (cl / "00000000000000065536.tmp").write_bytes(b"partial")  # a crash while creating the next segment
    end = rs[-1].wrote_offset + rs[-1].wrote_bytes
    os.truncate(cl / "00000000000000000000", end + 10)  # last segment cut short
    s = open_store(tmp_path)
    try:
        assert not (cl / "00000000000000065536.tmp").exists()
        got, _ = read_all(s, "T", 0)
        assert len(got) == 10
        assert s.put_message(msg()).queue_offset == 10
    finally:
        s.shutdown()


def test_garbage_checkpoint_falls_back_to_a_full_scan(tmp_path):
    s = open_store(tmp_path / "live")
    try:
        rs = [s.put_message(msg(body=b"m%d" % i + bytes(3000))) for i in range(50)]
        img = crash_image(s, tmp_path / "img")
    finally:
        s.shutdown()
    assert len(os.listdir(img / "commitlog")) >= 3
    with open(img / "checkpoint", "r+b") as f:  # torn checkpoint: timestamps from the far future
        f.write(struct.pack(">qqq", 2**62, 2**62, -5))
    shutil.rmtree(img / "consumequeue" / "T" / "0")  # and the queue never reached the disk
    (img / "consumequeue" / "T" / "1").mkdir(parents=True)
    s = open_store(img)
    try:
        assert s.checkpoint.physic_msg_timestamp == 0
        got, _ = read_all(s, "T", 0)
        assert got == [(r.queue_offset, b"m%d" % i + bytes(3000)) for i, r in enumerate(rs)]
    finally:
        s.shutdown()


def test_sync_flush_listener_rounds_cover_nowait_puts(tmp_path):
    """set_flush_listener: puts return flush_offset (no Future) and every round reports the flushed offset,
    which must already be on disk when reported."""
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    rounds: list[tuple[int, int]] = []
    done = threading.Event()
    want = [0]

    def listener(flushed):
        rounds.append((flushed, s.flushed_phy_offset))
        if want[0] and flushed >= want[0]:
            done.set()

    try:
        assert s.set_flush_listener(listener) is True
        results = [s.put_message(msg(body=b"y" * 100)) for _ in range(200)]
        assert all(r.flush_future is None for r in results)
        ends = [r.flush_offset for r in results]
        assert ends == [r.wrote_offset + r.wrote_bytes for r in results]
        want[0] = ends[-1]
        s.flush_service.request_nowait(ends[-1])  # a round even if the last one already ran
        assert done.wait(5)
        assert all(reported <= on_disk for reported, on_disk in rounds)
        assert max(f for f, _ in rounds) >= ends[-1]
        assert len(rounds) < 200  # rounds are shared (one report per fdatasync round, not per put)
        # the Future API keeps working for other callers after the listener is removed
        s.set_flush_listener(None)
        r = s.put_message(msg())
        assert r.flush_offset == 0 and r.flush_future.result(5) is True
    finally:
        s.shutdown()


def test_group_commit_request_nowait_wakes_an_idle_thread(tmp_path):
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    seen = threading.Event()
    try:
        s.set_flush_listener(lambda flushed: seen.set())
        time.sleep(0.05)  # the thread is idle, waiting on its event
        r = s.put_message(msg())
        assert seen.wait(2)
        assert s.flushed_phy_offset >= r.flush_offset
    finally:
        s.shutdown()


def test_held_flush_wakeups_give_one_round_for_a_run_of_appends(tmp_path):
    """hold_flush_wakeups(): appends do not start rounds; release_flush_wakeups() starts one that covers
    all of them (the broker holds around a run of pipelined sends)."""
    s = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    rounds: list[int] = []
    covered = threading.Event()
    try:
        s.set_flush_listener(lambda flushed: (rounds.append(flushed), covered.set()))
        time.sleep(0.05)  # idle
        syncs = s.flush_service.sync_count
        s.hold_flush_wakeups()
        results = [s.put_message(msg()) for _ in range(20)]
        time.sleep(0.05)  # longer than the thread's own 10 ms poll: nothing was asked for
        assert rounds == [] and s.flush_service.sync_count == syncs
        s.release_flush_wakeups()
        assert covered.wait(2)
        assert rounds[0] >= results[-1].flush_offset  # the first round covers the whole run
        assert s.flush_service.sync_count == syncs + 1
        s.release_flush_wakeups()  # nothing held: no round
        time.sleep(0.05)
        assert len(rounds) == 1
    finally:
        s.shutdown()


def test_set_flush_listener_is_refused_under_async_flush(tmp_path):
    s = open_store(tmp_path)
    try:
        assert s.set_flush_listener(lambda f: None) is False
        r = s.put_message(msg())
        assert r.flush_offset == 0 and r.flush_future is None
    finally:
        s.shutdown()
