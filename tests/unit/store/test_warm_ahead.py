"""Warm-ahead (store/warm.py). SYNC_FLUSH: zeros are written ahead of the CommitLog writer so that blocks are
no longer unwritten extents when records land there. ASYNC_FLUSH: the zeros go into the page cache only, and
the interval flush leaves them there. In both, the zeros never overwrite a record."""

from __future__ import annotations

import fcntl
import os
import random
import struct
import threading
import time

import pytest
from store_helpers import msg, open_store, read_all, wait_for

from rocketq.protocol.record import decode_record
from rocketq.store import FlushDiskType
from rocketq.store import warm as warm_module

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_UNWRITTEN = 0x800
_HDR = struct.Struct("=QQIIII")
_EXT = struct.Struct("=QQQQQIIII")


def unwritten_bytes(path: str, start: int, length: int, sync: bool = True) -> int | None:
    """Bytes of [start, start+length) in unwritten (preallocated, never written) extents; None if the
    filesystem does not answer FIEMAP. sync: write dirty pages back first (FIEMAP_FLAG_SYNC); without it,
    what the device has now."""
    count = 256
    buf = bytearray(_HDR.size + count * _EXT.size)
    _HDR.pack_into(buf, 0, start, length, FIEMAP_FLAG_SYNC if sync else 0, 0, count, 0)
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
    except OSError:
        return None
    finally:
        os.close(fd)
    mapped = _HDR.unpack_from(buf, 0)[3]
    total = 0
    for i in range(mapped):
        logical, _, ext_len, _, _, flags, _, _, _ = _EXT.unpack_from(buf, _HDR.size + i * _EXT.size)
        lo, hi = max(logical, start), min(logical + ext_len, start + length)
        if hi > lo and flags & FIEMAP_EXTENT_UNWRITTEN:
            total += hi - lo
    return total


def _sync_store(tmp_path, **kw):
    base = dict(
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commitlog=16 << 20,
        max_message_size=64 << 10,
        warm_ahead_bytes=2 << 20,
    )
    base.update(kw)
    return open_store(tmp_path, **base)


def _async_store(tmp_path, **kw):
    kw.setdefault("warm_ahead_async_enable", True)
    return _sync_store(tmp_path, flush_disk_type=FlushDiskType.ASYNC_FLUSH, **kw)


def test_async_zeros_stay_in_the_page_cache_and_the_flush_leaves_them_there(tmp_path):
    s = _async_store(tmp_path, flush_interval_commitlog=3_600_000)  # flushed below, by hand
    try:
        assert s.warm_service is not None and not s.warm_service.warmer.direct
        for i in range(3000):
            assert s.put_message(msg(body=os.urandom(1000), keys=f"k{i}")).ok
        seg = s.commit_log.mfq.last()
        assert seg.range_sync
        assert wait_for(lambda: seg.warm_end - seg.wrote_position >= (2 << 20) - (1 << 20))
        s.flush_service.flush_once(0)
        assert seg.flushed_position == seg.wrote_position
        probe = unwritten_bytes(seg.path, 0, seg.file_size, sync=False)
        if probe is None or probe == 0:
            pytest.skip("the filesystem has no unwritten extents to observe (FIEMAP)")
        written_end = seg.wrote_position // 4096 * 4096  # the page the writer is in went to the device
        assert unwritten_bytes(seg.path, 0, written_end, sync=False) == 0  # the records are on the device
        # The zeros past it did not, but for those that share a page-cache folio with the writer's page
        # (writeback goes by folio): at most one chunk of them (a whole-file fdatasync would send them all)
        start = written_end + 4096
        kept = unwritten_bytes(seg.path, start, seg.warm_end - start, sync=False)
        assert kept >= seg.warm_end - start - warm_module.CHUNK, (kept, seg.warm_end - start)
        assert s.warm_service.warmer.bytes_warmed > 0
        assert [bytes(m.body) for m in read_all(s, "T", 0)][:1]  # and the records read back
    finally:
        s.shutdown()


def test_blocks_ahead_of_the_writer_are_written_and_the_rest_stays_preallocated(tmp_path):
    s = _sync_store(tmp_path)
    try:
        # past the first segment's head, which the allocator zeroed at start-up: the rest is the thread's work
        for i in range(3000):
            assert s.put_message(msg(body=os.urandom(1000), keys=f"k{i}")).ok
        seg = s.commit_log.mfq.last()
        assert wait_for(lambda: seg.warm_end - seg.wrote_position >= (2 << 20) - (1 << 20))
        probe = unwritten_bytes(seg.path, 0, seg.file_size)
        if probe is None or probe == 0:
            pytest.skip("the filesystem has no unwritten extents to observe (FIEMAP)")
        start = (seg.wrote_position + 4095) // 4096 * 4096 + (256 << 10)  # past the restart margin
        assert unwritten_bytes(seg.path, start, seg.warm_end - start) == 0
        # far beyond the zeros the segment is still only preallocated: the zeros are bounded
        far = seg.warm_end + (1 << 20)
        assert unwritten_bytes(seg.path, far, 1 << 20) == 1 << 20
        assert s.warm_service.warmer.bytes_warmed > 0
    finally:
        s.shutdown()


def test_an_empty_store_zeroes_its_first_segment_before_the_first_put(tmp_path):
    s = _sync_store(tmp_path, mapped_file_size_commitlog=4 << 20, warm_ahead_bytes=1 << 20)
    try:
        first = os.path.join(str(tmp_path), "commitlog", f"{0:020d}")
        assert wait_for(lambda: os.path.exists(first))
        assert s.commit_log.mfq.files == []  # not visible before an append takes it
        probe = unwritten_bytes(first, 1 << 20, 1 << 20)
        if probe is None or probe == 0:
            pytest.skip("the filesystem has no unwritten extents to observe (FIEMAP)")
        assert wait_for(lambda: unwritten_bytes(first, 0, 1 << 20) == 0)
        warmed = s.warm_service.warmer.bytes_warmed
        assert s.put_message(msg(body=b"x")).ok
        assert s.commit_log.mfq.files[0].path == first
        time.sleep(0.2)
        # the first put only tops the zeros up by a chunk: the head was zeroed at start-up
        assert s.warm_service.warmer.bytes_warmed - warmed <= warm_module.CHUNK
    finally:
        s.shutdown()


def test_a_store_restarted_before_its_first_put_keeps_working(tmp_path):
    kw = dict(mapped_file_size_commitlog=4 << 20, warm_ahead_bytes=1 << 20)
    s = _sync_store(tmp_path, **kw)
    second = os.path.join(str(tmp_path), "commitlog", f"{4 << 20:020d}")
    assert wait_for(lambda: os.path.exists(second))
    s.shutdown()  # two segments of zeros on disk, never appended to
    s = _sync_store(tmp_path, **kw)
    try:
        assert s.max_phy_offset == 0
        r = s.put_message(msg(body=b"first"))
        assert r.ok and r.wrote_offset == 0
        assert [m.body for m in read_all(s, "T", 0)] == [b"first"]
    finally:
        s.shutdown()
    s = _sync_store(tmp_path, **kw)
    try:
        assert [m.body for m in read_all(s, "T", 0)] == [b"first"]
    finally:
        s.shutdown()


def test_the_allocator_zeroes_the_head_of_the_next_segment(tmp_path):
    s = _sync_store(tmp_path, mapped_file_size_commitlog=4 << 20, warm_ahead_bytes=1 << 20)
    try:
        assert s.put_message(msg(body=b"x")).ok
        nxt = os.path.join(str(tmp_path), "commitlog", f"{4 << 20:020d}")
        assert wait_for(lambda: os.path.exists(nxt))
        s.allocator.take(nxt, 4 << 20).close()  # waits for the allocator's work on it
        probe = unwritten_bytes(nxt, 1 << 20, 1 << 20)
        if probe is None or probe == 0:
            pytest.skip("the filesystem has no unwritten extents to observe (FIEMAP)")
        assert unwritten_bytes(nxt, 0, 1 << 20) == 0
    finally:
        s.shutdown()


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_zeros_never_land_on_records_while_writers_race_the_filler(tmp_path, monkeypatch, flush):
    # Tiny chunks and distance so the filler runs right next to the writers, rolling across segments.
    # SYNC_FLUSH writes records with pwrite and the zeros with O_DIRECT; ASYNC_FLUSH stores records through
    # the mapping and writes the zeros through the page cache.
    monkeypatch.setattr(warm_module, "CHUNK", 4096)
    monkeypatch.setattr(warm_module, "JUMP_MARGIN", 0)
    s = _sync_store(
        tmp_path,
        flush_disk_type=flush,
        mapped_file_size_commitlog=1 << 20,
        warm_ahead_bytes=3 * 4096,
        warm_ahead_async_enable=flush is FlushDiskType.ASYNC_FLUSH,
    )
    rng = random.Random(7)
    sent: dict[tuple[int, int], bytes] = {}
    lock = threading.Lock()

    def writer(qid: int) -> None:
        for i in range(400):
            body = rng.randbytes(rng.choice((10, 300, 1500, 5000, 9000)))
            r = s.put_message(msg(queue_id=qid, body=body))
            assert r.ok
            with lock:
                sent[(qid, r.queue_offset)] = body
            if i % 10 == 9:
                time.sleep(0.001)  # let the filler in on a busy machine (it must race, not starve)

    try:
        assert s.put_message(msg(queue_id=4, body=b"first")).ok  # the filler adopts this segment
        assert wait_for(lambda: s.warm_service.warmer.bytes_warmed > 0)
        before = s.warm_service.warmer.bytes_warmed
        threads = [threading.Thread(target=writer, args=(q,)) for q in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert s.warm_service.warmer.bytes_warmed > before  # it did run between the writers
        for qid in range(4):
            got: list[bytes] = []
            while True:
                g = s.get_message("g", "T", qid, len(got), 32, None)
                if not g.buffers:
                    g.release()
                    break
                got.extend(bytes(decode_record(b, verify_crc=True).body) for b in g.buffers)
                g.release()
            assert got == [sent[(qid, i)] for i in range(400)]
    finally:
        s.shutdown()


def test_warming_pauses_while_the_writer_outruns_max_rate_and_resumes_after(tmp_path):
    # 1 MB/s: any sustained SYNC_FLUSH writing of 60 KiB records is faster than that
    s = _sync_store(tmp_path, mapped_file_size_commitlog=256 << 20, warm_ahead_max_rate=1_000_000)
    try:
        assert s.put_message(msg(body=b"first")).ok
        seg = s.commit_log.mfq.last()
        svc = s.warm_service
        assert wait_for(lambda: seg.warm_end - seg.wrote_position >= 1 << 20)  # idle writer: warmed
        body = os.urandom(60 << 10)
        deadline = time.monotonic() + 10
        while not svc.writer_fast and time.monotonic() < deadline:
            assert s.put_message(msg(body=body)).ok
        assert svc.writer_fast
        w1 = svc.warmer.bytes_warmed
        wrote1 = seg.wrote_position
        t_end = time.monotonic() + 0.4
        while time.monotonic() < t_end:
            assert s.put_message(msg(body=body)).ok
        assert seg.wrote_position - wrote1 > 4 << 20  # the writer moved on ...
        assert svc.warmer.bytes_warmed - w1 <= warm_module.CHUNK  # ... the zeros did not follow
        # the writer stops: the rate drops, and the zeros get ahead of it again (in whichever segment it
        # is in by now)
        assert wait_for(lambda: not svc.writer_fast)
        last = s.commit_log.mfq.last
        assert wait_for(lambda: last().warm_end - last().wrote_position >= 1 << 20), (
            last().file_from_offset,
            last().wrote_position,
            last().warm_end,
        )
    finally:
        s.shutdown()


def test_without_max_rate_the_zeros_follow_a_fast_writer(tmp_path):
    s = _sync_store(tmp_path, mapped_file_size_commitlog=256 << 20)
    try:
        assert s.put_message(msg(body=b"first")).ok
        svc = s.warm_service
        w0 = svc.warmer.bytes_warmed
        body = os.urandom(60 << 10)
        t_end = time.monotonic() + 0.5
        while time.monotonic() < t_end:
            assert s.put_message(msg(body=body)).ok
        assert not svc.writer_fast
        assert svc.warmer.bytes_warmed - w0 > 2 * warm_module.CHUNK
    finally:
        s.shutdown()


def test_async_zeros_are_opt_in(tmp_path):
    s = _sync_store(tmp_path, flush_disk_type=FlushDiskType.ASYNC_FLUSH)
    try:
        assert s.warm_service is None  # commitLogWarmAheadAsyncEnable defaults to false
        assert all(not mf.range_sync for mf in s.commit_log.mfq.files)
    finally:
        s.shutdown()
