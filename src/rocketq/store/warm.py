"""Warm-ahead: keep the CommitLog's blocks ahead of the append position written with zeros.

SYNC_FLUSH (direct zeros). A preallocated segment's blocks are *unwritten* extents (ext4, xfs). The fdatasync
that covers the first write into such a block must also convert the extent and commit the filesystem
journal: on the reference machine a 4 KiB round costs ~200 us instead of ~95 us, a 44 KB round ~240 us
instead of ~110 us (bench/mmap_fsync_bench.py, mode pwrite-warm). SYNC_FLUSH pays one fdatasync per
acknowledgement round, so this thread writes zeros a few MiB ahead of the writer and syncs them; the group
commit then overwrites blocks that are already written and its fdatasync flushes data only. RocketMQ's
warmMapedFileEnable zeroes a whole new segment at creation for the same reason; here the zeros stay a bounded
distance ahead instead. Cost: each CommitLog byte reaches the device twice (zeros, then data). The zeros go
through O_DIRECT on a separate descriptor, so they never sit as dirty page-cache pages for an
acknowledgement's fdatasync to write back.

ASYNC_FLUSH (page-cache zeros). The writer stores records through the mapping, and the first store into a
page the file does not have in the page cache yet faults; the kernel allocates and zeroes the page in that
fault. On the reference VM that costs 5.3-8.8 µs per 4 KiB page, nearly all of it system time, while a
buffered write() of zeros puts the same page in the page cache for 0.8 µs, and stores into it afterwards take
0.05-0.11 µs of system time per page (bench/fresh_page_bench.py none zeros). So here the thread writes the
zeros through the page cache (plain pwrite, no sync), off the event loop and with the GIL released, and the
writer's stores land in pages that are already there. The
zeros are dirty pages, so the interval flush syncs only the written range (MappedFile.flush), not the whole
file: zeros the writer overwrites before the kernel's own writeback never reach the device.

Safety (the zeros must never land on a record): a writer may store below ``mf.warm_limit`` freely. Beyond
it, the writer takes ``mf.warm_lock`` (waiting out a chunk in flight) and raises ``mf.warm_writer_end``;
the filler picks each chunk under the same lock, never below ``warm_writer_end``, publishes the chunk start
as the new limit *before* writing, and the chunk end after. A segment is adopted under the CommitLog's put
lock, so no write is in flight while its bookkeeping starts.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
import time
from collections.abc import Callable

from .commit_log import CommitLog
from .flush import _ServiceThread
from .mapped_file import OS_PAGE_SIZE, MappedFile

log = logging.getLogger(__name__)

CHUNK = 1 << 20  # zeros per write
JUMP_MARGIN = 256 << 10  # when the writer is ahead of the zeros, restart this far beyond it


def _align_up(n: int) -> int:
    return (n + OS_PAGE_SIZE - 1) // OS_PAGE_SIZE * OS_PAGE_SIZE


class SegmentWarmer:
    """Writes zero chunks into one segment at a time: direct (O_DIRECT, then synced: SYNC_FLUSH) or into
    the page cache (buffered, never synced here: ASYNC_FLUSH)."""

    def __init__(self, direct: bool = True) -> None:
        self.direct = direct
        self._zeros = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT needs
        self._mf: MappedFile | None = None
        self._fd = -1
        self.bytes_warmed = 0
        self.disabled = False  # O_DIRECT unsupported here (e.g. some tmpfs): warming is a no-op

    def _open(self, mf: MappedFile) -> bool:
        if self._mf is mf:
            return self._fd >= 0
        self.close()
        self._mf = mf
        if not self.direct:  # its flushes must now leave our zeros alone (MappedFile.flush)
            mf.range_sync = True
        try:
            self._fd = os.open(mf.path, os.O_WRONLY | (os.O_DIRECT if self.direct else 0))
        except OSError as e:
            if e.errno == errno.EINVAL:  # the filesystem has no O_DIRECT
                log.info("commitlog warm-ahead disabled: %s does not support O_DIRECT", mf.path)
                self.disabled = True
            return False
        return True

    def prewarm(self, mf: MappedFile, nbytes: int) -> None:
        """Zero the first nbytes of a segment nobody writes yet (the allocator's next segment)."""
        if self.disabled or not self._open(mf):
            return
        end = min(nbytes, mf.file_size) // OS_PAGE_SIZE * OS_PAGE_SIZE
        pos = 0
        try:
            while pos < end:
                n = min(CHUNK, end - pos)
                os.pwrite(self._fd, memoryview(self._zeros)[:n], pos)
                pos += n
            if self.direct:
                os.fdatasync(self._fd)
        except OSError as e:
            log.warning("commitlog warm-ahead: zeroing %s failed: %s", mf.path, e)
            pos = 0
        self.bytes_warmed += pos
        mf.warm_lock = threading.Lock()
        mf.warm_writer_end = 0
        mf.warm_end = mf.warm_limit = pos
        self.close()

    def fill_one(self, mf: MappedFile, ahead: int) -> bool:
        """Zero the next chunk of an adopted segment if the zeros are less than `ahead` bytes in front of
        the writer; False when there is nothing to do."""
        if self.disabled or not self._open(mf):
            return False
        lock = mf.warm_lock
        if lock is None:
            return False
        with lock:
            start = mf.warm_end
            if mf.warm_writer_end > start:  # the writer overtook the zeros: restart beyond it
                start = _align_up(mf.warm_writer_end + JUMP_MARGIN)
            if start - mf.wrote_position >= ahead:
                return False
            n = min(CHUNK, mf.file_size - start) // OS_PAGE_SIZE * OS_PAGE_SIZE
            if n <= 0:
                return False
            mf.warm_limit = start  # writers below start need no lock while this chunk is written
            try:
                os.pwrite(self._fd, memoryview(self._zeros)[:n], start)
            except OSError as e:
                log.warning("commitlog warm-ahead: writing %s at %d failed: %s", mf.path, start, e)
                mf.warm_end = mf.warm_limit = mf.file_size  # never touch this segment again
                return False
            mf.warm_end = mf.warm_limit = start + n
            self.bytes_warmed += n
        if not self.direct:
            return True
        # Commit the extent conversion now, not inside the next acknowledgement's fdatasync.
        try:
            os.fdatasync(self._fd)
        except OSError as e:
            log.warning("commitlog warm-ahead: fdatasync of %s failed: %s", mf.path, e)
        return True

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = -1
        self._mf = None


def adopt(mf: MappedFile, put_lock: threading.Lock) -> None:
    """Start warm bookkeeping for a segment the writer may already be appending to."""
    if mf.warm_lock is not None:
        return
    with put_lock:  # no append in flight: wrote_position is where the writer really is
        w = mf.wrote_position
        mf.warm_writer_end = w
        mf.warm_end = 0  # below the writer: the first chunk restarts JUMP_MARGIN beyond it, page-aligned
        mf.warm_limit = w  # from here on writes past w coordinate with the filler
        mf.warm_lock = threading.Lock()


class WarmAheadService(_ServiceThread):
    """Keeps zeros `ahead` bytes in front of the CommitLog's append position.

    Direct (SYNC_FLUSH): the zeros buy cheaper fdatasync rounds with device bandwidth (every byte is written
    twice). While the writer appends faster than `max_rate` bytes/s, its rounds are large, the extent
    conversion is a small part of each, and the device's bandwidth is what bounds it: warming pauses (the
    writer overtakes the zeros and fill_one restarts beyond it once the rate drops). 0: never pause.
    Buffered (ASYNC_FLUSH): the zeros cost no device bandwidth, so they never pause."""

    RATE_WINDOW_S = 0.1

    def __init__(self, commit_log: CommitLog, ahead: int, max_rate: int = 0, direct: bool = True) -> None:
        super().__init__("WarmAheadService")
        self.cl = commit_log
        self.ahead = ahead
        self.max_rate = max_rate if direct else 0
        self.warmer = SegmentWarmer(direct)
        self._t0 = time.monotonic()
        self._off0 = commit_log.max_offset
        self.writer_fast = False

    def _check_rate(self) -> bool:
        now = time.monotonic()
        dt = now - self._t0
        if dt >= self.RATE_WINDOW_S:
            off = self.cl.max_offset
            self.writer_fast = (off - self._off0) > self.max_rate * dt
            self._t0, self._off0 = now, off
        return self.writer_fast

    def run_once(self) -> None:
        mf = self.cl.mfq.last()
        if mf is None or mf.closed or self.warmer.disabled:
            self._wait(0.01)
            return
        adopt(mf, self.cl.lock)
        if self.max_rate and self._check_rate():
            self._wait(0.01)
            return
        if not self.warmer.fill_one(mf, self.ahead):
            self._wait(0.01)  # the writer needs > ahead/10 ms to use up the zeros

    def on_stop(self) -> None:
        self.warmer.close()


def prewarm_new_segment(ahead: int, direct: bool = True) -> Callable[[MappedFile], None]:
    """The allocator's hook: zero the head of each new segment before the writer rolls onto it."""

    def hook(mf: MappedFile) -> None:
        warmer = SegmentWarmer(direct)
        warmer.prewarm(mf, ahead)

    return hook
