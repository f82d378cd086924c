"""Writeback behind the writer (ASYNC_FLUSH with commitLogAsyncWritebackBytes > 0; off by default).

Why: under ASYNC_FLUSH an acknowledged record only has to reach the page cache, but pages the kernel does not
write back before the periodic flush pile up (a 64 KiB burst written with pwrite filled GBs before the dirty
limit throttled the writer, then stalled it for seconds), and the periodic fdatasync then writes hundreds of
MB at once. Starting writeback of every ``step`` new bytes right behind the writer (sync_file_range with
SYNC_FILE_RANGE_WRITE, as RocksDB's bytes_per_sync does) puts the device to work from the first byte. The call
only queues I/O, never waits for it, and ctypes releases the GIL around it. What it changed on the reference
machine, and why it is not the default: bench/peers/NOTES.md, item 7.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
from collections.abc import Callable

from .mapped_file import OS_PAGE_SIZE
from .mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

SYNC_FILE_RANGE_WRITE = 2


def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_sync_file_range = _load_sync_file_range()


def start_writeback(fd: int, offset: int, nbytes: int) -> int:
    """Queue writeback of the dirty pages of fd in [offset, offset + nbytes); 0 or the errno."""
    if _sync_file_range is None:
        return errno.ENOSYS
    if _sync_file_range(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) != 0:
        return ctypes.get_errno() or errno.EIO
    return 0


class WritebackBehind:
    """Tracks how far writeback was started in a MappedFileQueue and starts it for whole pages written since,
    once at least ``step`` bytes have accumulated (flush thread only)."""

    def __init__(self, mfq: MappedFileQueue, step: int) -> None:
        self.mfq = mfq
        self.step = max(OS_PAGE_SIZE, step)
        self.started = -1  # log offset up to which writeback was started; -1: not yet known
        self.supported = _sync_file_range is not None

    def kick(self, written: int) -> None:
        """Start writeback of [started, written) rounded down to a page, if that is at least one step."""
        if not self.supported:
            return
        if self.started < 0 or self.started > written:  # first call, or the log was truncated / reset
            self.started = max(self.mfq.flushed_where, 0)
        end = written - written % OS_PAGE_SIZE  # the partial tail page is still being written
        while end - self.started >= self.step:
            at = self.started
            mf = self.mfq.find_mapped_file_by_offset(at, False)
            if mf is None:
                self.started = end
                return
            seg_end = min(end, mf.file_from_offset + mf.file_size)
            fd = mf.fd
            err = 0 if mf.closed else start_writeback(fd, at - mf.file_from_offset, seg_end - at)
            if err in (errno.ENOSYS, errno.EINVAL, errno.ESPIPE):  # not on this kernel / filesystem
                log.info("writeback behind the writer is off: sync_file_range: %s", os.strerror(err))
                self.supported = False
                return
            if err:  # a segment deleted meanwhile (EBADF) or an I/O error the next fdatasync reports
                log.debug("sync_file_range on %s: %s", mf.path, os.strerror(err))
            self.started = seg_end
