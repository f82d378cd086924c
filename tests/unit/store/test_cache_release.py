"""Page-cache release behind the CommitLog's flushed end (commitLogPageCacheWindow, store/cache_release.py):
pages more than the window behind the flushed end leave the page cache, pages inside it stay, nothing
unflushed is touched, and every record still reads back, before and after a restart."""

from __future__ import annotations

import ctypes
import mmap
import os
import time

from store_helpers import msg, open_store

from rocketq.protocol.record import decode_record
from rocketq.store.mapped_file import OS_PAGE_SIZE

SEG = 64 * 1024
WINDOW = 64 * 1024

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))


def resident_pages(path: str) -> list[bool]:
    """Which pages of the file are in the page cache (mincore over a mapping of our own)."""
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        mm = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    buf = (ctypes.c_char * size).from_buffer(mm)
    try:
        vec = (ctypes.c_ubyte * (size // OS_PAGE_SIZE))()
        assert _libc.mincore(ctypes.addressof(buf), size, vec) == 0, os.strerror(ctypes.get_errno())
        return [bool(v & 1) for v in vec]
    finally:
        del buf
        mm.close()


def read_bodies(s) -> list[bytes]:
    """Every body in queue T/0, page by page of get_message (each is capped in bytes and count)."""
    out: list[bytes] = []
    offset = 0
    while True:
        g = s.get_message("g", "T", 0, offset, 64, None)
        try:
            out += [bytes(decode_record(b, verify_crc=True).body) for b in g.buffers]
        finally:
            g.release()
        if g.next_begin_offset == offset:
            return out
        offset = g.next_begin_offset


def _wait_released(s, target: int) -> None:
    deadline = time.monotonic() + 10
    while s.cache_release.released < target and time.monotonic() < deadline:
        time.sleep(0.02)
    assert s.cache_release.released == target


# Page-exact accounting needs pages the writer's stores created one by one: the ASYNC warm-ahead's zeros
# (one buffered write per segment here) put a segment into a single large folio, which the kernel drops only
# whole. test_with_warm_ahead_zeros_... covers that case.
NO_WARM = {"warm_ahead_enable": False}


def test_pages_behind_the_window_leave_the_page_cache_and_every_record_still_reads(tmp_path):
    bodies = [bytes([i % 251]) * 1000 for i in range(300)]  # about 6 segments of 64 KiB
    s = open_store(tmp_path, mapped_file_size_commitlog=SEG, commitlog_page_cache_window=WINDOW, **NO_WARM)
    try:
        for b in bodies:
            assert s.put_message(msg(body=b)).ok
        s.flush_service.flush_once(0)
        flushed = s.commit_log.mfq.flushed_where
        assert flushed == s.commit_log.max_offset
        target = (flushed - WINDOW) // OS_PAGE_SIZE * OS_PAGE_SIZE
        _wait_released(s, target)
        assert s.cache_release.released_bytes == target  # from offset 0, all of it
        assert s.runtime_info()["commitLogPageCacheReleasedOffset"] == str(target)

        cached: list[bool] = []
        for mf in s.commit_log.mfq.files:
            cached += resident_pages(mf.path)
        first_kept = target // OS_PAGE_SIZE
        written_pages = -(-flushed // OS_PAGE_SIZE)
        assert not any(cached[:first_kept]), "a page behind the window is still cached"
        assert all(cached[first_kept:written_pages]), "a page inside the window was released"

        assert read_bodies(s) == bodies  # released pages read back from the file
    finally:
        s.shutdown()
    s = open_store(tmp_path, mapped_file_size_commitlog=SEG, commitlog_page_cache_window=WINDOW, **NO_WARM)
    try:
        assert read_bodies(s) == bodies
    finally:
        s.shutdown()


def test_with_warm_ahead_zeros_a_folio_that_straddled_one_release_goes_with_the_next(tmp_path):
    """Each 64 KiB segment is one folio of warm-ahead zeros: the release that ends inside a segment leaves
    it cached, and the next release (which starts before the end of the last one) drops it."""
    warm = {"warm_ahead_async_enable": True}
    s = open_store(tmp_path, mapped_file_size_commitlog=SEG, commitlog_page_cache_window=WINDOW, **warm)
    try:
        assert s.warm_service is not None and not s.warm_service.warmer.direct
        for i in range(150):  # about 2.3 segments
            assert s.put_message(msg(body=bytes([i % 251]) * 1000)).ok
        s.flush_service.flush_once(0)
        first = (s.commit_log.mfq.flushed_where - WINDOW) // OS_PAGE_SIZE * OS_PAGE_SIZE
        _wait_released(s, first)
        straddled = s.commit_log.mfq.find_mapped_file_by_offset(first - 1)
        assert first % SEG, "the first release must end inside a segment for this test"
        assert any(resident_pages(straddled.path)), "expected the straddling folio still cached"

        for i in range(150, 300):
            assert s.put_message(msg(body=bytes([i % 251]) * 1000)).ok
        s.flush_service.flush_once(0)
        second = (s.commit_log.mfq.flushed_where - WINDOW) // OS_PAGE_SIZE * OS_PAGE_SIZE
        _wait_released(s, second)
        for mf in s.commit_log.mfq.files:
            if mf.file_from_offset + SEG <= second:  # wholly behind the window now
                assert not any(resident_pages(mf.path)), f"segment {mf.file_name} is still cached"
    finally:
        s.shutdown()


def test_nothing_past_the_flushed_end_is_released(tmp_path):
    """Appends that no flush has covered yet keep their pages, however far they run past the window."""
    s = open_store(
        tmp_path,
        **NO_WARM,
        mapped_file_size_commitlog=SEG,
        commitlog_page_cache_window=WINDOW,
        flush_interval_commitlog=3_600_000,  # the periodic flush never runs in this test
        flush_commitlog_thorough_interval=3_600_000,
    )
    try:
        for i in range(300):
            assert s.put_message(msg(body=bytes([i % 251]) * 1000)).ok
        assert s.commit_log.mfq.flushed_where == 0
        time.sleep(0.3)  # several ticks of the release thread
        assert s.cache_release.released_bytes == 0
        for mf in s.commit_log.mfq.files:
            assert all(resident_pages(mf.path)[: mf.wrote_position // OS_PAGE_SIZE])
    finally:
        s.shutdown()


def test_a_window_of_zero_starts_no_release_thread(tmp_path):
    s = open_store(tmp_path, commitlog_page_cache_window=0)
    try:
        assert s.cache_release is None
    finally:
        s.shutdown()
