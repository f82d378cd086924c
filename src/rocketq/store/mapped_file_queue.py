"""MappedFileQueue: the ordered segments of one log (CommitLog, or one ConsumeQueue).

Segment i covers [from_i, from_i + file_size); names are 20-digit start offsets. The CommitLog's next segment
is created ahead of time by an AllocateMappedFileService thread so a roll on the append path only swaps in a
ready map.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from .mapped_file import MappedFile, file_name_of

log = logging.getLogger(__name__)


class AllocateMappedFileService:
    """Creates (and preallocates) the next segment in a background thread."""

    def __init__(self, preallocate: bool = True) -> None:
        self.preallocate = preallocate
        self.on_created: Callable[[MappedFile], None] | None = None  # runs on the allocator thread
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="AllocateMappedFile")
        self._requests: dict[str, Future[MappedFile]] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def request(self, path: str, file_size: int) -> None:
        with self._lock:
            if self._stopped or path in self._requests:
                return
            self._requests[path] = self._pool.submit(self._make, path, file_size)

    def _make(self, path: str, file_size: int) -> MappedFile:
        mf = MappedFile(path, file_size, self.preallocate)
        hook = self.on_created
        if hook is not None:
            try:
                hook(mf)
            except Exception:  # an optimisation only: the segment is usable without it
                log.exception("after creating %s", path)
        return mf

    def take(self, path: str, file_size: int) -> MappedFile:
        """The file at path: the preallocated one if requested (waits if in progress), else a new one."""
        with self._lock:
            fut = self._requests.pop(path, None)
        if fut is not None:
            try:
                return fut.result()
            except OSError:
                log.warning("preallocation of %s failed; retrying inline", path)
        return MappedFile(path, file_size, self.preallocate)

    def shutdown(self) -> None:
        with self._lock:
            self._stopped = True
            pending = list(self._requests.values())
            self._requests.clear()
        self._pool.shutdown(wait=True)
        for fut in pending:  # keep the empty file (recovery ignores it); just unmap
            try:
                fut.result().close()
            except Exception:
                pass


class MappedFileQueue:
    def __init__(
        self,
        store_path: str,
        file_size: int,
        allocator: AllocateMappedFileService | None = None,
        preallocate: bool = True,
    ) -> None:
        self.store_path = store_path
        self.preallocate = preallocate
        self.file_size = file_size
        self.allocator = allocator
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._lock = threading.Lock()  # guards the list shape (append / delete) against readers' snapshots

    # --- load ---
    def load(self) -> bool:
        """Map existing segments (recovery then sets the positions). Stray .tmp files (a crash while creating
        a segment) are removed; a short *last* segment is extended with zeros. False on any other size
        mismatch (nothing is mapped then)."""
        if not os.path.isdir(self.store_path):
            return True
        entries = os.listdir(self.store_path)
        for n in entries:
            if n.endswith(".tmp"):
                try:
                    os.remove(os.path.join(self.store_path, n))
                except OSError:
                    pass
        names = sorted(n for n in entries if len(n) == 20 and n.isdigit())
        files: list[MappedFile] = []
        for i, n in enumerate(names):
            path = os.path.join(self.store_path, n)
            size = os.path.getsize(path)
            if size != self.file_size and not (size < self.file_size and self._only_empty_after(names, i)):
                log.error("%s: size %d, expected %d", path, size, self.file_size)
                for f in files:
                    f.close()
                return False
            if size < self.file_size:
                log.warning("%s: short last segment (%d bytes), extending with zeros", path, size)
            mf = MappedFile(path, self.file_size)
            mf.set_positions(self.file_size)
            files.append(mf)
        for a, b in itertools.pairwise(files):
            if b.file_from_offset != a.file_from_offset + self.file_size:
                log.error("%s: segment missing before %s", self.store_path, b.file_name)
                for f in files:
                    f.close()
                return False
        self.files = files
        return True

    def _only_empty_after(self, names: list[str], i: int) -> bool:
        """Segments after names[i] hold nothing (e.g. the preallocated next one)."""
        for n in names[i + 1 :]:
            with open(os.path.join(self.store_path, n), "rb") as f:
                if f.read(8).strip(b"\0"):
                    return False
        return True

    # --- lookup ---
    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = True) -> MappedFile | None:
        """The last segment if it has room; else a new one (at start_offset's segment if empty)."""
        files = self.files
        last = files[-1] if files else None
        if last is not None and not last.is_full():
            return last
        if not need_create:
            return last
        if last is None:
            create_from = start_offset - start_offset % self.file_size
        else:
            create_from = last.file_from_offset + self.file_size
        return self._create(create_from, first=last is None)

    def _create(self, from_offset: int, first: bool) -> MappedFile:
        os.makedirs(self.store_path, exist_ok=True)
        path = os.path.join(self.store_path, file_name_of(from_offset))
        if self.allocator is not None:
            mf = self.allocator.take(path, self.file_size)
            nxt = os.path.join(self.store_path, file_name_of(from_offset + self.file_size))
            self.allocator.request(nxt, self.file_size)
        else:
            mf = MappedFile(path, self.file_size, self.preallocate)
        mf.first_create_in_queue = first
        with self._lock:
            self.files = [*self.files, mf]  # copy-on-write: readers iterate a stable list without locking
        return mf

    def request_first_segments(self) -> None:
        """An empty queue: have the allocator create the first two segments now (running its on_created hook,
        e.g. the SYNC_FLUSH warm-ahead's zeros), not when the first append needs them. The first append then
        takes the first one ready; the files stay invisible to readers until it does."""
        if self.files or self.allocator is None:
            return
        os.makedirs(self.store_path, exist_ok=True)
        for off in (0, self.file_size):
            self.allocator.request(os.path.join(self.store_path, file_name_of(off)), self.file_size)

    def find_mapped_file_by_offset(
        self, offset: int, return_first_on_not_found: bool = False
    ) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0]
        idx = offset // self.file_size - first.file_from_offset // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        for mf in files:  # gaps after deletions: fall back to a scan
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return first if return_first_on_not_found else None

    # --- offsets ---
    def get_min_offset(self) -> int:
        files = self.files
        return files[0].file_from_offset if files else -1

    def get_max_offset(self) -> int:
        """End of written data (wrote position of the last segment)."""
        files = self.files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.wrote_position

    def how_much_fall_behind(self) -> int:
        return self.get_max_offset() - self.flushed_where

    # --- flush ---
    def flush(self, least_pages: int = 0) -> bool:
        """Flush the segment holding flushed_where; True if nothing was left to flush."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        pos = mf.flush(least_pages)
        where = mf.file_from_offset + pos
        result = where == self.flushed_where
        if where > self.flushed_where:
            self.flushed_where = where
        return result

    def flush_until(self, target: int) -> None:
        """Flush segment after segment until flushed_where >= target (group commit, shutdown)."""
        while self.flushed_where < target:
            before = self.flushed_where
            self.flush(0)
            if self.flushed_where == before:
                break

    # --- truncation / deletion ---
    def truncate_dirty_files(self, offset: int) -> None:
        """Drop everything at or after offset: later segments are deleted, the one holding offset is cut."""
        keep: list[MappedFile] = []
        for mf in self.files:
            end = mf.file_from_offset + self.file_size
            if end > offset:
                if offset >= mf.file_from_offset:
                    mf.set_positions(offset % self.file_size)
                    keep.append(mf)
                else:
                    mf.destroy()
            else:
                keep.append(mf)
        with self._lock:
            self.files = keep
        if self.flushed_where > offset:
            self.flushed_where = offset

    def delete_last_mapped_file(self) -> None:
        if self.files:
            with self._lock:
                mf = self.files[-1]
                self.files = self.files[:-1]
            mf.destroy()

    def delete_first_files(self, count: int) -> list[MappedFile]:
        """Remove the first count segments (never the last one); returns them destroyed."""
        with self._lock:
            count = min(count, len(self.files) - 1)
            if count <= 0:
                return []
            gone = self.files[:count]
            self.files = self.files[count:]
        for mf in gone:
            mf.destroy()
        return gone

    def delete_expired_file_by_time(
        self, expired_ms: int, delete_files_interval_ms: int = 0, clean_immediately: bool = False,
        max_batch: int = 10,
    ) -> int:  # fmt: skip
        """Delete leading segments last modified more than expired_ms ago (never the last one)."""
        now = time.time()
        count = 0
        for mf in self.files[:-1]:
            try:
                mtime = os.path.getmtime(mf.path)
            except OSError:
                mtime = 0
            if not clean_immediately and (now - mtime) * 1000 < expired_ms:
                break
            count += 1
            if count >= max_batch:
                break
        n = len(self.delete_first_files(count))
        if n and delete_files_interval_ms:
            time.sleep(delete_files_interval_ms / 1000)
        return n

    def shutdown(self) -> None:
        for mf in self.files:
            mf.close()

    def destroy(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for mf in files:
            mf.destroy()
        self.flushed_where = 0
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass
