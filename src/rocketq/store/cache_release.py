"""Page-cache release behind the CommitLog's flushed end (commitLogPageCacheWindow; 0 turns it off).

Why: every record lands in a page the kernel has to allocate. On a VM whose balloon reports free memory back
to the host (virtio-balloon free page reporting) a page that has sat free for a few seconds is no longer
backed, and the first store into it costs the guest a host fault: about 10 µs per 4 KiB page on the reference
machine, against about 1 µs for a page freed moments before. A young broker
with free memory therefore pays the slow price for every page it writes until the page cache fills RAM and
the kernel's own reclaim starts recycling pages. Releasing the CommitLog's pages once they are flushed and
more than a window behind the writer frees memory at the rate new pages are needed, so the allocator hands
the writer pages that are still backed (bench/peers/NOTES.md has the numbers).

What it costs: a reader more than the window behind the writer (a lagging consumer, a slave catching up)
reads from disk instead of memory. RocketMQ's own accessMessageInMemoryMaxRatio already treats such reads as
disk reads. Only flushed (clean) pages are released, so nothing waits for writeback and no data is at risk:
dropping a clean page of a shared file mapping only means the next access reads the file again.
"""

from __future__ import annotations

import mmap
import os

from .flush import _ServiceThread
from .mapped_file import OS_PAGE_SIZE
from .mapped_file_queue import MappedFileQueue

_ADVISE = hasattr(mmap, "MADV_DONTNEED") and hasattr(os, "posix_fadvise")
# The largest page-cache folio (a PMD: 2 MiB with 4 KiB pages). Buffered writes of large chunks (the ASYNC
# warm-ahead zeros, store/warm.py) put the file into folios that large.
FOLIO_SLACK = 2 << 20


def release_pages(mm: mmap.mmap, fd: int, start: int, end: int) -> None:
    """Drop [start, end) of one segment (page-aligned) from this process's mapping and the page cache.
    The mapping has to let go first: the kernel keeps a page cache page that any process still maps."""
    if end <= start:
        return
    mm.madvise(mmap.MADV_DONTNEED, start, end - start)
    os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)


class CacheReleaseService(_ServiceThread):
    """A thread that, every ``tick`` seconds, releases whole pages of the CommitLog between what it released
    last and ``window`` bytes behind the flushed end, once at least ``step`` bytes have accumulated (4 MiB,
    or a quarter of a smaller window: few calls, and freed memory is reused well before the balloon would
    report it, which waits for blocks that stay free for seconds)."""

    def __init__(self, mfq: MappedFileQueue, window: int, tick: float = 0.05) -> None:
        super().__init__("CacheReleaseService")
        self.mfq = mfq
        self.window = window
        self.step = max(OS_PAGE_SIZE, min(4 << 20, window // 4))
        self.tick = tick
        self.released = max(0, mfq.get_min_offset())  # log offset below which pages were released
        self.released_bytes = 0  # bytes released since the start

    @staticmethod
    def supported() -> bool:
        return _ADVISE

    def run_once(self) -> None:
        self._wait(self.tick)
        if not self._stop.is_set():
            self.release_once()

    def release_once(self) -> int:
        """Release what is due now; returns the bytes released."""
        target = (self.mfq.flushed_where - self.window) // OS_PAGE_SIZE * OS_PAGE_SIZE
        if target - self.released < self.step:
            return 0
        done = 0
        size = self.mfq.file_size
        for mf in self.mfq.files:  # a copy-on-write snapshot: segments rolled or deleted meanwhile are safe
            start = mf.file_from_offset
            lo = max(self.released, start)
            hi = min(target, start + size)
            # A segment deleted between this check and the call only costs the advice on a reused descriptor:
            # clean pages are re-read later, no data is touched.
            if hi <= lo or mf.closed:
                continue
            # The kernel drops a large folio only when the range covers all of it, so one that straddled the
            # last call's end is still cached: start FOLIO_SLACK earlier (pages dropped before cost nothing).
            again = max(lo - FOLIO_SLACK, start)
            try:
                release_pages(mf.mm, mf.fd, again - start, hi - start)
            except (ValueError, OSError):  # deleted (unmapped) meanwhile: nothing left to release
                continue
            done += hi - lo
        self.released = target
        self.released_bytes += done
        return done
