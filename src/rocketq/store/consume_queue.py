"""ConsumeQueue: the index of one topic-queue, <root>/consumequeue/<topic>/<queueId>/<20-digit byte offset>.

Each unit is 20 bytes, big-endian: int64 CommitLog offset, int32 record size, int64 tag hash code; unit n
(the message with queue offset n) sits at logical byte n * 20. 300 000 units per file by default.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from . import faultfs
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue

CQ_STORE_UNIT_SIZE = 20
CQ_UNIT = struct.Struct(">qiq")
BLANK_UNIT_SIZE = 0x7FFFFFFF  # size of a filler unit (RocketMQ's fillPreBlank): never a real record


class ConsumeQueue:
    __slots__ = (
        "_tail",
        "file_size",
        "max_phys_end",
        "max_store_timestamp",
        "mfq",
        "min_logic_offset",
        "queue_id",
        "store_path",
        "topic",
    )

    def __init__(
        self, topic: str, queue_id: int, root_dir: str, file_size: int, preallocate: bool = True
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size - file_size % CQ_STORE_UNIT_SIZE
        self.store_path = os.path.join(root_dir, topic, str(queue_id))
        self.mfq = MappedFileQueue(self.store_path, self.file_size, None, preallocate)
        self.max_phys_end = -1  # CommitLog offset just past the newest record indexed here
        self.min_logic_offset = 0  # logical bytes; moves forward when retention deletes CommitLog files
        self.max_store_timestamp = 0  # store timestamp of the newest unit dispatched (for the checkpoint)
        self._tail: MappedFile | None = None

    # --- load / recover ---
    def load(self) -> bool:
        return self.mfq.load()

    def recover(self, max_phys: int = 1 << 62, max_unit_size: int = 1 << 30, all_files: bool = False) -> None:
        """Find the end of valid units. A unit is valid if its CommitLog offset is past the previous unit's
        record, its size is sane (or a filler) and it points below the CommitLog's end max_phys; the first
        invalid unit ends the queue (torn tails hold garbage). A clean restart scans from the third-last file
        (everything was flushed on shutdown); after a crash (all_files) every file is scanned: CQ files are
        flushed lazily, so after a power cut any file past the last flush may be torn, an older one included,
        while newer ones reached the disk (write-back order is arbitrary)."""
        files = self.mfq.files
        if not files:
            return
        idx = 0 if all_files else max(0, len(files) - 3)
        end = files[idx].file_from_offset
        max_phys_end = -1
        prev_end = 0
        unit = CQ_STORE_UNIT_SIZE
        for mf in files[idx:]:
            pos = 0
            for off, size, _ in CQ_UNIT.iter_unpack(mf.view[: self.file_size]):
                if off < 0 or size <= 0:
                    break
                if size != BLANK_UNIT_SIZE:
                    if size > max_unit_size or off < prev_end or off + size > max_phys:
                        break
                    max_phys_end = prev_end = off + size
                pos += unit
            end = mf.file_from_offset + pos
            if pos < self.file_size:
                break
        self.max_phys_end = max_phys_end
        self.mfq.truncate_dirty_files(end)
        self.mfq.flushed_where = end
        self._zero_tail_garbage()
        self._tail = None
        first = self.mfq.first()
        if first is not None and self.min_logic_offset < first.file_from_offset:
            self.min_logic_offset = first.file_from_offset

    def _zero_tail_garbage(self) -> None:
        last = self.mfq.last()
        if last is not None and last.wrote_position < last.file_size:
            stop = last.last_nonzero_end(last.wrote_position)
            if stop > last.wrote_position:
                last.zero_range(last.wrote_position, stop)

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop units whose record ends past phy_offset (the CommitLog was cut there), and invalid units
        (offset < 0 or size <= 0: zeros a power cut left) at the end."""
        while True:
            last = self.mfq.last()
            if last is None:
                break
            view = last.view
            pos = last.wrote_position - CQ_STORE_UNIT_SIZE
            found_keep = False
            new_wrote = 0
            while pos >= 0:
                off, size, _ = CQ_UNIT.unpack_from(view, pos)
                if size == BLANK_UNIT_SIZE or (off >= 0 and size > 0 and off + size <= phy_offset):
                    found_keep = True
                    new_wrote = pos + CQ_STORE_UNIT_SIZE
                    break
                pos -= CQ_STORE_UNIT_SIZE
            if found_keep:
                if new_wrote < last.wrote_position:
                    last.zero_range(new_wrote, last.wrote_position)
                    last.set_positions(new_wrote)
                break
            if len(self.mfq.files) == 1:
                last.zero_range(0, last.wrote_position)
                last.set_positions(0)
                break
            self.mfq.delete_last_mapped_file()
        self._tail = None
        self.max_phys_end = self._scan_max_phys_end()
        end = self.mfq.get_max_offset()
        if self.mfq.flushed_where > end:
            self.mfq.flushed_where = end

    def truncate_to_offset(self, queue_offset: int) -> None:
        """Drop units at queue_offset and later (recovery found them inconsistent with the CommitLog)."""
        logical = queue_offset * CQ_STORE_UNIT_SIZE
        self.mfq.truncate_dirty_files(logical)
        last = self.mfq.last()
        if last is not None and last.wrote_position < last.file_size:
            stop = last.last_nonzero_end(last.wrote_position)
            if stop > last.wrote_position:
                last.zero_range(last.wrote_position, stop)
        self._tail = None
        self.max_phys_end = self._scan_max_phys_end()

    def _scan_max_phys_end(self) -> int:
        last = self.mfq.last()
        if last is None:
            return -1
        pos = last.wrote_position - CQ_STORE_UNIT_SIZE
        while pos >= 0:
            off, size, _ = CQ_UNIT.unpack_from(last.view, pos)
            if size != BLANK_UNIT_SIZE:
                return off + size
            pos -= CQ_STORE_UNIT_SIZE
        return -1

    # --- write (dispatch thread) ---
    def put(self, phys_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Add the unit for queue_offset. Units already present (re-dispatch after a crash) are skipped;
        a hole before queue_offset is padded with filler units."""
        if phys_offset + size <= self.max_phys_end:
            return True
        expected = queue_offset * CQ_STORE_UNIT_SIZE
        mf = self._tail
        if mf is None or mf.wrote_position >= self.file_size:
            try:
                mf = self.mfq.get_last_mapped_file(expected)
            except OSError:  # disk full creating the next file: the caller logs; recovery re-dispatches
                return False
            if mf is None:
                return False
            self._tail = mf
            if mf.first_create_in_queue and queue_offset != 0 and mf.wrote_position == 0:
                # a queue that starts beyond 0 (retention, or re-created after delete): pad up to it
                self.min_logic_offset = expected
                self.mfq.flushed_where = expected
                self._fill_blank(mf, expected)
                mf.flushed_position = mf.wrote_position
                mf.first_create_in_queue = False
        current = mf.file_from_offset + mf.wrote_position
        if expected != current:
            if expected < current:
                return True  # already there
            try:
                self._fill_blank_to(expected)
                mf = self._tail
                if mf is not None and mf.wrote_position >= self.file_size:
                    # the filler ended exactly at a file boundary: the unit goes into the next file
                    mf = self._tail = self.mfq.get_last_mapped_file(expected)
            except OSError:
                return False
            if mf is None or mf.file_from_offset + mf.wrote_position != expected:
                return False
        CQ_UNIT.pack_into(mf.mm, mf.wrote_position, phys_offset, size, tags_code)
        mf.wrote_position += CQ_STORE_UNIT_SIZE
        self.max_phys_end = phys_offset + size
        if faultfs.CRASH_AT is not None:
            faultfs.crash_point("cq.after_put")
        return True

    def _fill_blank(self, mf: MappedFile, until_logical: int) -> None:
        while mf.file_from_offset + mf.wrote_position < until_logical and mf.wrote_position < self.file_size:
            CQ_UNIT.pack_into(mf.mm, mf.wrote_position, 0, BLANK_UNIT_SIZE, 0)
            mf.wrote_position += CQ_STORE_UNIT_SIZE

    def _fill_blank_to(self, expected: int) -> None:
        while True:
            mf = self.mfq.get_last_mapped_file(expected)
            if mf is None:
                self._tail = None
                return
            self._tail = mf
            self._fill_blank(mf, expected)
            if mf.file_from_offset + mf.wrote_position >= expected:
                return

    # --- read ---
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.mfq.get_max_offset() // CQ_STORE_UNIT_SIZE

    def get_units(self, start_index: int) -> memoryview | None:
        """Units from start_index to the end of the file holding it (a whole number of units)."""
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.slice_from(offset - mf.file_from_offset)

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        offset = index * CQ_STORE_UNIT_SIZE
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + CQ_STORE_UNIT_SIZE > mf.wrote_position:
            return None
        return CQ_UNIT.unpack_from(mf.view, pos)

    def get_offset_in_queue_by_time(self, timestamp: int, store_time_of: Callable[[int, int], int]) -> int:
        """First queue offset whose record was stored at or after timestamp (max offset if none).
        Binary search over the units; store_time_of(phys, size) reads the CommitLog (-1 if gone)."""
        lo = self.get_min_offset_in_queue()
        hi = self.get_max_offset_in_queue()
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            if unit is None:
                break
            off, size, _ = unit
            ts = -1 if size == BLANK_UNIT_SIZE else store_time_of(off, size)
            if ts < timestamp:  # includes records already deleted (-1): they are older
                lo = mid + 1
            else:
                hi = mid
        return lo

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """After CommitLog retention: the first unit still pointing into the CommitLog becomes the minimum.
        A filler unit is judged by the nearest real unit before it (none: a leading filler, skipped), so the
        minimum never jumps over real units when fillers sit in the middle (a hole padded on recovery)."""
        floor = lo = self.min_logic_offset // CQ_STORE_UNIT_SIZE
        hi = self.get_max_offset_in_queue()
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            if unit is None:
                break
            if unit[1] == BLANK_UNIT_SIZE:
                j = self._prev_real_unit(mid, floor)
                unit = self.get_unit(j) if j is not None else None
            if unit is None or unit[0] < phy_min_offset:
                lo = mid + 1
            else:
                hi = mid
        if lo * CQ_STORE_UNIT_SIZE > self.min_logic_offset:
            self.min_logic_offset = lo * CQ_STORE_UNIT_SIZE

    def _prev_real_unit(self, index: int, floor: int) -> int | None:
        """Index of the nearest non-filler unit in [floor, index], or None. Fillers are found with C-speed
        strided slices of the size field (0x7fffffff), not unit by unit."""
        while index >= floor:
            mf = self.mfq.find_mapped_file_by_offset(index * CQ_STORE_UNIT_SIZE)
            if mf is None:
                return None
            base = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            start = max(floor, base)
            data = bytes(
                mf.view[(start - base) * CQ_STORE_UNIT_SIZE : (index - base + 1) * CQ_STORE_UNIT_SIZE]
            )
            n = len(data) // CQ_STORE_UNIT_SIZE
            blanks = min(
                n - len(data[8::CQ_STORE_UNIT_SIZE].rstrip(b"\x7f")),
                n - len(data[9::CQ_STORE_UNIT_SIZE].rstrip(b"\xff")),
                n - len(data[10::CQ_STORE_UNIT_SIZE].rstrip(b"\xff")),
                n - len(data[11::CQ_STORE_UNIT_SIZE].rstrip(b"\xff")),
            )
            if blanks < n:
                return index - blanks
            index = start - 1
        return None

    def delete_expired_file(self, phy_min_offset: int) -> int:
        """Delete leading files whose last unit points below phy_min_offset; returns how many."""
        count = 0
        files = self.mfq.files
        for mf in files[:-1]:
            if mf.wrote_position < CQ_STORE_UNIT_SIZE:
                break
            off, size, _ = CQ_UNIT.unpack_from(mf.view, mf.wrote_position - CQ_STORE_UNIT_SIZE)
            if size != BLANK_UNIT_SIZE and off >= phy_min_offset:
                break
            count += 1
        deleted = self.mfq.delete_first_files(count)
        self.correct_min_offset(phy_min_offset)
        return len(deleted)

    # --- flush / lifecycle ---
    def flush(self, least_pages: int = 0) -> bool:
        return self.mfq.flush(least_pages)

    def flush_all(self) -> None:
        self.mfq.flush_until(self.mfq.get_max_offset())

    def shutdown(self) -> None:
        self.flush_all()
        self.mfq.shutdown()

    def destroy(self) -> None:
        self._tail = None
        self.mfq.destroy()
        self.max_phys_end = -1
        self.min_logic_offset = 0
