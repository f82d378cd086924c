"""MappedFile: one fixed-size mmap segment of a CommitLog or ConsumeQueue, named by its 20-digit start offset.

Positions (bytes from the file start):
  wrote_position   end of the data appended so far (only the appending thread moves it)
  flushed_position end of the data known durable (only the flushing thread moves it)
Readers get memoryview slices of the map. Such views pin the map: mmap.close() refuses while views exist, so
destroy() unlinks the file at once and defers the unmap until the last view is gone (retry_pending_closes()).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import threading

from . import faultfs

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096


def find_in_map(mm: mmap.mmap, needle: bytes | memoryview, start: int, end: int) -> int:
    """``mm.find(needle, start, end)`` that never searches a range ending at the end of the map.

    CPython 3.11.0-3.11.4 (Debian bookworm ships 3.11.2) reads one byte past the searched range
    (gh-105235, fixed in 3.11.5). Inside the map that byte is harmless; past its last page it is a
    segmentation fault. So the range is searched without its last byte, and a match that would end
    exactly there is checked apart, still in place."""
    n = len(needle)
    if end < len(mm) or not n:  # an empty needle reads nothing
        return mm.find(needle, start, end)
    i = mm.find(needle, start, end - 1)  # a needle longer than the range: -1 before any read
    if i >= 0:
        return i
    # A match ending at the map's end: its last byte compared here, the rest searched up to the byte
    # before it (the over-read then lands on that last byte, inside the map).
    at = end - n
    if at < start or mm[end - 1] != needle[n - 1]:
        return -1
    with memoryview(needle) as view:
        return at if mm.find(view[: n - 1], at, end - 1) == at else -1


def _libc_msync():
    try:
        fn = ctypes.CDLL(None, use_errno=True).msync
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


# msync through ctypes, which releases the GIL for the call (mmap.flush holds it throughout); None: fall
# back to fdatasync of the whole file
_msync = _libc_msync() if hasattr(mmap, "MAP_SHARED") and os.name == "posix" else None
_MS_SYNC = 4 if os.uname().sysname == "Linux" else 0x10  # Linux's value; 0x10 on the BSDs and macOS


def _map_address(mm: mmap.mmap) -> int:
    """Where the mapping starts (the ctypes view of it is dropped at once: it must not pin the map)."""
    c = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(c)
    finally:
        del c


_pending_close: list[MappedFile] = []
_pending_lock = threading.Lock()


def file_name_of(offset: int) -> str:
    return f"{offset:020d}"


def _create_segment(path: str, file_size: int, preallocate: bool) -> None:
    """Create a segment atomically: <name>.tmp sized (blocks allocated when preallocate, so a full disk
    fails here instead of SIGBUS on a later write into the map), then renamed. A crash leaves either no
    segment or a complete one; load() deletes stray .tmp files."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if preallocate:
            os.posix_fallocate(fd, 0, file_size)
        else:
            os.ftruncate(fd, file_size)
    except BaseException:
        os.close(fd)
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    os.replace(tmp, path)
    if faultfs.ACTIVE is not None:
        faultfs.ACTIVE.on_create(path, file_size)


def retry_pending_closes() -> int:
    """Unmap destroyed files whose views have been released; returns how many are still pinned."""
    with _pending_lock:
        still = [mf for mf in _pending_close if not mf._try_close()]
        _pending_close[:] = still
        return len(still)


class MappedFile:
    __slots__ = (
        "_addr",
        "_closed",
        "_fd",
        "file_from_offset",
        "file_name",
        "file_size",
        "first_create_in_queue",
        "flushed_position",
        "mm",
        "path",
        "range_sync",
        "store_timestamp",
        "view",
        "warm_end",
        "warm_limit",
        "warm_lock",
        "warm_writer_end",
        "wrote_position",
    )

    def __init__(self, path: str, file_size: int, preallocate: bool = False) -> None:
        self.path = path
        self.file_name = os.path.basename(path)
        self.file_from_offset = int(self.file_name)
        self.file_size = file_size
        self.first_create_in_queue = False
        self.store_timestamp = 0  # store timestamp of the last record appended (CommitLog only)
        created = not os.path.exists(path)
        if created:
            _create_segment(path, file_size, preallocate)
        fd = os.open(path, os.O_RDWR)
        try:
            st = os.fstat(fd)
            if st.st_size < file_size:  # a short last segment (cut copy, old crash): extend with zeros
                os.ftruncate(fd, file_size)
            elif st.st_size > file_size:
                raise OSError(f"{path}: size {st.st_size} != {file_size}")
            self.mm = mmap.mmap(fd, file_size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._closed = False
        self._addr = _map_address(self.mm) if _msync is not None else 0
        self.range_sync = False  # flush syncs [flushed, wrote) only (set by the ASYNC_FLUSH warm-ahead)
        self.view = memoryview(self.mm)
        self.wrote_position = 0
        self.flushed_position = 0
        # Warm-ahead bookkeeping (store/warm.py): a writer stores below warm_limit without coordination;
        # the default (the file size) means no warmer owns this segment.
        self.warm_limit = file_size
        self.warm_end = 0
        self.warm_writer_end = 0
        self.warm_lock: threading.Lock | None = None

    def warm_claim(self, end: int) -> None:
        """The writer is about to store up to end, past warm_limit: wait out a zero chunk in flight and
        keep later chunks beyond end (see store/warm.py)."""
        lock = self.warm_lock
        if lock is None:
            return
        with lock:
            if end > self.warm_writer_end:
                self.warm_writer_end = end

    @property
    def fd(self) -> int:
        """The segment's file descriptor (SYNC_FLUSH appends pwrite through it)."""
        return self._fd

    # --- positions ---
    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def set_positions(self, pos: int) -> None:
        self.wrote_position = pos
        self.flushed_position = pos

    # --- read ---
    def slice(self, pos: int, size: int) -> memoryview | None:
        """View of [pos, pos+size) if it lies within the written data."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position or self._closed:
            return None
        return self.view[pos : pos + size]

    def slice_from(self, pos: int) -> memoryview | None:
        """View of everything written from pos on."""
        wrote = self.wrote_position
        if pos < 0 or pos > wrote or self._closed:
            return None
        return self.view[pos:wrote]

    # --- flush ---
    def dirty_pages(self) -> int:
        return self.wrote_position // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE

    def flush(self, least_pages: int = 0) -> int:
        """Make [flushed, wrote) durable if at least least_pages pages are dirty (always when the file is
        full). The sync releases the GIL, so appends continue meanwhile. Returns the flushed position."""
        wrote = self.wrote_position
        flushed = self.flushed_position
        if wrote <= flushed:
            return flushed
        if (
            least_pages > 0
            and wrote < self.file_size
            and (wrote // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE) < least_pages
        ):
            return flushed
        if self._closed:
            return flushed
        # range_sync: page-cache zeros ahead of the writer (ASYNC_FLUSH warm-ahead, store/warm.py) are dirty
        # too, and fdatasync of the whole file would send them to the device before the records overwrite
        # them. msync(MS_SYNC) of a range of a shared file mapping is fdatasync of just that range (the
        # data, the metadata needed to read it, the device cache), however the pages were dirtied.
        if self.range_sync and _msync is not None:
            lo = flushed // OS_PAGE_SIZE * OS_PAGE_SIZE
            if _msync(self._addr + lo, wrote - lo, _MS_SYNC) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"msync {self.path}: {os.strerror(err)}")
        else:
            os.fdatasync(self._fd)
        if faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_flush(self.path, flushed, wrote)
        self.flushed_position = wrote
        return wrote

    # --- lifecycle ---
    def _try_close(self) -> bool:
        try:
            self.view.release()
            self.mm.close()
        except BufferError:
            return False
        return True

    def close(self) -> None:
        """Unmap now, or as soon as the last exported view is released."""
        if self._closed:
            return
        self._closed = True
        try:
            os.close(self._fd)
        except OSError:
            pass
        if not self._try_close():
            with _pending_lock:
                _pending_close.append(self)

    def destroy(self) -> None:
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        if faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_delete(self.path)

    def zero_range(self, start: int, end: int) -> None:
        """Overwrite [start, end) with zeros (garbage past a truncation point)."""
        chunk = 1 << 20
        zeros = bytes(chunk)
        pos = start
        while pos < end:
            n = min(chunk, end - pos)
            self.mm[pos : pos + n] = zeros[:n] if n < chunk else zeros
            pos += n

    def last_nonzero_end(self, start: int = 0) -> int:
        """End of the last non-zero byte at or after start (start if the rest is all zero).
        Only the file's data ranges are read: a preallocated segment is mostly unwritten extents, and
        reading those through the map would fault in (and zero) page cache for the whole rest of the file
        — seconds for a 1 GiB segment when a crashed broker restarts."""
        chunk = 1 << 20
        zeros = memoryview(bytes(chunk))  # sliced without copies
        mm = self.mm
        for lo_range, end in reversed(self.data_ranges(start)):
            while end > lo_range:
                lo = max(lo_range, end - chunk)
                # a needle as long as the range can only match at lo: one compare in place, no copy
                if find_in_map(mm, zeros[: end - lo], lo, end) != lo:
                    return lo + len(mm[lo:end].rstrip(b"\0"))
                end = lo
        return start

    def data_ranges(self, start: int = 0) -> list[tuple[int, int]]:
        """[lo, hi) ranges at or after start that may hold non-zero bytes, from lseek SEEK_DATA / SEEK_HOLE.
        A hole (unwritten preallocation included, unless the page cache holds data for it) reads as zeros,
        so skipping it is exact. Where the filesystem cannot tell, the whole rest is one range."""
        size = self.file_size
        ranges: list[tuple[int, int]] = []
        pos = start
        try:
            while pos < size:
                lo = os.lseek(self._fd, pos, os.SEEK_DATA)
                if lo >= size:
                    break
                hi = min(os.lseek(self._fd, lo, os.SEEK_HOLE), size)
                ranges.append((lo, hi))
                pos = hi
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no data at or after pos
                return [(start, size)] if start < size else []
        return ranges

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"MappedFile({self.path}, wrote={self.wrote_position}, flushed={self.flushed_position})"
