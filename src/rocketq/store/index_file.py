# Over 600 lines: file format, crash repair and IndexService share one layout; moving repair out is planned.
"""IndexFile: an on-disk hash index from "topic#key" to CommitLog offsets (RocketMQ's layout, byte for byte).

File layout (all big-endian):
  header, 40 bytes: beginTimestamp i64, endTimestamp i64, beginPhyOffset i64, endPhyOffset i64,
                    hashSlotCount i32, indexCount i32
  hash slots, hash_slot_num x 4 bytes: i32 number of the newest entry of the slot (0 = empty)
  entries, index_num x 20 bytes: keyHash i32, phyOffset i64, timeDiff i32 (seconds since beginTimestamp),
                                 prevIndex i32 (previous entry of the same slot, 0 = end of chain)
Entry number 0 is never used (indexCount starts at 1), so 0 can mean "empty" in slots and chains.

IndexService keeps several IndexFiles in <root>/index/, named by creation time (yyyyMMddHHmmssSSS), appends
to the
newest one and opens a new one when it is full.
"""

from __future__ import annotations

import array
import logging
import mmap
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from operator import mul

from rocketq.store import faultfs

log = logging.getLogger(__name__)

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
INVALID_INDEX = 0
MAX_QUERY_NUM = 64  # RocketMQ's maxMsgsNumBatch: a query never returns more than this

_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
_INT32_MAX = 0x7FFFFFFF


_MASK32 = 0xFFFFFFFF
_POW_N = 512
# 31**k mod 2**32 for k = _POW_N-1 .. 0: its tail weights a string's code units in one C-level sum
_POW31_DESC = [pow(31, k, 1 << 32) for k in range(_POW_N - 1, -1, -1)]
_POW31 = _POW31_DESC[::-1]  # 31**k mod 2**32 for k = 0 .. _POW_N-1

# Java's hash of ASCII bytes b is the base-31 number whose digits are b's bytes. Split each byte c into
# c % 31 and c // 31 (both digits < 31 for c < 128), spell both as base-31 digit strings with
# bytes.translate, and int(..., 31) evaluates the polynomial in C: hash = lo + 31 * hi (mod 2**32), about
# 6x faster than a Python-level sum for 32-byte keys. _POW_N (512) stays below int()'s 640-digit minimum
# limit on str->int conversion, so no interpreter setting can make it raise.
_DIGITS31 = b"0123456789abcdefghijklmnopqrstu"
_LO31 = bytes(_DIGITS31[c % 31] for c in range(128)) + bytes(128)
_HI31 = bytes(_DIGITS31[c // 31] for c in range(128)) + bytes(128)


def _ascii_hash_u32(b: bytes) -> int:
    """Java String.hashCode mod 2**32 of ASCII bytes, 0 < len(b) <= _POW_N."""
    return (int(b.translate(_LO31), 31) + 31 * int(b.translate(_HI31), 31)) & _MASK32


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    if s.isascii():
        if 0 < len(s) <= _POW_N:
            h = _ascii_hash_u32(s.encode("ascii"))
            return h - 0x100000000 if h & 0x80000000 else h
        units: bytes | list[int] = s.encode("ascii")
    else:
        data = s.encode("utf-16-be")
        units = [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]
    n = len(units)
    if n <= _POW_N:
        h = sum(map(mul, units, _POW31_DESC[_POW_N - n :])) & _MASK32
    else:
        h = 0
        for c in units:
            h = (31 * h + c) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def index_key_hash(key: str) -> int:
    """abs(String.hashCode), with Integer.MIN_VALUE mapped to 0 as RocketMQ does."""
    h = java_string_hash(key)
    return 0 if h == -0x80000000 else abs(h)


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


_prefix_hash_cache: dict[str, int] = {}


def topic_key_hash(topic: str, key: str) -> int:
    """index_key_hash(build_key(topic, key)) without re-hashing "topic#" for every key:
    hash(p + k) = hash(p) * 31**len(k) + hash(k)  (mod 2**32), over UTF-16 code units."""
    ph = _prefix_hash_cache.get(topic)
    if ph is None:
        if len(_prefix_hash_cache) > 4096:
            _prefix_hash_cache.clear()
        ph = _prefix_hash_cache[topic] = java_string_hash(topic + "#") & _MASK32
    return _combine(ph, key)


def _combine(ph: int, key: str) -> int:
    """index hash of prefix + key, given the prefix's unsigned hash."""
    n = len(key) if key.isascii() else len(key.encode("utf-16-be")) // 2
    p31 = _POW31[n] if n < _POW_N else pow(31, n, 1 << 32)
    h = (ph * p31 + (java_string_hash(key) & _MASK32)) & _MASK32
    if h & 0x80000000:
        h -= 0x100000000
    return 0 if h == -0x80000000 else abs(h)


_raw_prefix_cache: dict[bytes, int] = {}


def _raw_prefix_hash(topic: bytes) -> int | None:
    """Unsigned hash of "topic#" for a topic as stored (UTF-8); None if it is not valid UTF-8."""
    ph = _raw_prefix_cache.get(topic)
    if ph is None:
        try:
            t = topic.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if len(_raw_prefix_cache) > 4096:
            _raw_prefix_cache.clear()
        ph = _raw_prefix_cache[topic] = java_string_hash(t + "#") & _MASK32
    return ph


def raw_key_hash(ph: int, key: bytes) -> int:
    """topic_key_hash(topic, key.decode("utf-8", "replace")) for ph = hash of "topic#"; key non-empty.
    ASCII keys (UNIQ_KEY always) are hashed as bytes, with no str made."""
    n = len(key)
    if n >= _POW_N or not key.isascii():
        return _combine(ph, key.decode("utf-8", "replace"))
    h = (ph * _POW31[n] + int(key.translate(_LO31), 31) + 31 * int(key.translate(_HI31), 31)) & _MASK32
    if h & 0x80000000:
        return 0 if h == 0x80000000 else 0x100000000 - h
    return h


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


class IndexCorruptError(Exception):
    pass


class IndexFile:
    """One mmap'ed index file. Not thread-safe by itself: IndexService serialises writers."""

    def __init__(
        self,
        path: str,
        hash_slot_num: int,
        index_num: int,
        prev_end_phy_offset: int = 0,
        prev_end_timestamp: int = 0,
        create: bool = True,
    ) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        if create:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                # allocate blocks now: a full disk must fail here, not as SIGBUS on a later write into the
                # mmap
                os.posix_fallocate(fd, 0, self.file_size)
                self._mm = mmap.mmap(fd, self.file_size)
            except BaseException:
                os.close(fd)
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
                raise
            if faultfs.ACTIVE is not None:
                faultfs.ACTIVE.on_create(path, self.file_size)
            # a new file continues where the previous one ended, so time/offset range checks stay meaningful
            self.begin_timestamp = prev_end_timestamp
            self.end_timestamp = prev_end_timestamp
            self.begin_phy_offset = prev_end_phy_offset
            self.end_phy_offset = prev_end_phy_offset
            self.hash_slot_count = 0
            self.index_count = 1
            self._write_header()
        else:
            size = os.path.getsize(path)
            if size != self.file_size:
                raise IndexCorruptError(f"{path}: size {size} != expected {self.file_size}")
            fd = os.open(path, os.O_RDWR)
            try:
                self._mm = mmap.mmap(fd, self.file_size)
            except BaseException:
                os.close(fd)
                raise
            (
                self.begin_timestamp,
                self.end_timestamp,
                self.begin_phy_offset,
                self.end_phy_offset,
                self.hash_slot_count,
                self.index_count,
            ) = _HEADER.unpack_from(self._mm, 0)
        self._flushed_count = self.index_count if not create else 0
        # kept open for flush(): fdatasync writes the mapping's dirty pages back as msync would, but
        # releases the GIL meanwhile (mmap.flush() holds it for the whole msync: tens of ms of a stalled
        # event loop for a file with scattered dirty slots)
        self._fd = fd

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self._mm,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    # ---------------------------------------------------------------- write
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Append one entry; False when the file is full."""
        count = self.index_count
        if count >= self.index_num:
            return False
        mm = self._mm
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        slot_value = _SLOT.unpack_from(mm, slot_pos)[0]
        if slot_value <= INVALID_INDEX or slot_value > count:
            slot_value = INVALID_INDEX
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        diff = (store_timestamp - self.begin_timestamp) // 1000
        if diff < 0:
            diff = 0
        elif diff > _INT32_MAX:
            diff = _INT32_MAX
        _ENTRY.pack_into(
            mm, self._entries_base + count * INDEX_ENTRY_SIZE, key_hash, phy_offset, diff, slot_value
        )
        _SLOT.pack_into(mm, slot_pos, count)
        if slot_value == INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        if store_timestamp > self.end_timestamp:
            self.end_timestamp = store_timestamp
        self._write_header()
        return True

    def put_keys(self, flat: list[int], i: int) -> int:
        """put_key for each (hash, phyOffset, storeTimestamp) triple of flat from index i on, stopping when
        the file is full; returns the index of the first triple not written. The same bytes as put_key one
        by one, with the file's state in locals and the header written once."""
        count = self.index_count
        num = self.index_num
        n = len(flat)
        if count >= num or i >= n:
            return i
        mm = self._mm
        slots = self.hash_slot_num
        base = self._entries_base
        unpack_slot = _SLOT.unpack_from
        pack_slot = _SLOT.pack_into
        pack_entry = _ENTRY.pack_into
        if count <= 1:
            self.begin_phy_offset = flat[i + 1]
            self.begin_timestamp = flat[i + 2]
        begin_ts = self.begin_timestamp
        end_ts = self.end_timestamp
        used = self.hash_slot_count
        while i < n and count < num:
            h = flat[i]
            ts = flat[i + 2]
            slot_pos = INDEX_HEADER_SIZE + (h % slots) * HASH_SLOT_SIZE
            prev = unpack_slot(mm, slot_pos)[0]
            if prev <= INVALID_INDEX or prev > count:
                prev = INVALID_INDEX
                used += 1
            diff = (ts - begin_ts) // 1000
            if diff < 0:
                diff = 0
            elif diff > _INT32_MAX:
                diff = _INT32_MAX
            pack_entry(mm, base + count * INDEX_ENTRY_SIZE, h, flat[i + 1], diff, prev)
            pack_slot(mm, slot_pos, count)
            count += 1
            if ts > end_ts:
                end_ts = ts
            i += 3
        self.index_count = count
        self.hash_slot_count = used
        self.end_phy_offset = flat[i - 2]
        self.end_timestamp = end_ts
        self._write_header()
        return i

    # ---------------------------------------------------------------- read
    def entry(self, i: int) -> tuple[int, int, int, int]:
        return _ENTRY.unpack_from(self._mm, self._entries_base + i * INDEX_ENTRY_SIZE)

    def slot(self, slot_no: int) -> int:
        return _SLOT.unpack_from(self._mm, INDEX_HEADER_SIZE + slot_no * HASH_SLOT_SIZE)[0]

    def is_time_matched(self, begin: int, end: int) -> bool:
        # the header's timestamps are exact; widen by the 1 s resolution of timeDiff
        return begin <= self.end_timestamp and end >= self.begin_timestamp - 1000

    def select_phy_offsets(self, out: list[int], key_hash: int, max_num: int, begin: int, end: int) -> None:
        """Walk the slot's chain (newest first) collecting offsets of entries with this hash in [begin, end].

        timeDiff has 1-second resolution, so an entry stands for [t, t + 999 ms]; it matches when that
        window meets
        [begin, end]. Hash collisions are possible: the caller must compare the key in the record itself.
        """
        count = self.index_count
        cur = self.slot(key_hash % self.hash_slot_num)
        if cur <= INVALID_INDEX or cur >= count:
            return
        base_ts = self.begin_timestamp
        seen = 0
        while len(out) < max_num and seen < count:
            seen += 1  # bounds the walk even if a corrupt chain loops
            h, phy, diff, prev = self.entry(cur)
            t = base_ts + diff * 1000
            if h == key_hash and t <= end and t + 999 >= begin:
                out.append(phy)
            if prev <= INVALID_INDEX or prev >= cur or t + 999 < begin:
                break
            cur = prev

    # ---------------------------------------------------------------- maintenance
    def flush(self) -> None:
        fd = self._fd
        if self._flushed_count == self.index_count or fd < 0:  # nothing new, or closed (deleted) meanwhile
            return
        os.fdatasync(fd)
        if faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_flush(self.path, 0, self.file_size)
        self._flushed_count = self.index_count

    def verify(self, full: bool = True) -> int:
        """Check the header and (full=True) every entry; return the number of the first bad entry, or
        index_count when all are good. Raises IndexCorruptError when the header itself is unusable.
        An all-zero entry is bad: it is what an entry that never reached the disk looks like."""
        n, num = self.index_count, self.index_num
        if not (1 <= n <= num):
            raise IndexCorruptError(f"{self.path}: indexCount {n} out of [1, {num}]")
        if not (0 <= self.hash_slot_count <= min(self.hash_slot_num, n - 1)):
            raise IndexCorruptError(f"{self.path}: hashSlotCount {self.hash_slot_count} inconsistent")
        if self.begin_timestamp < 0 or self.end_timestamp < self.begin_timestamp:
            raise IndexCorruptError(f"{self.path}: timestamps {self.begin_timestamp}..{self.end_timestamp}")
        if self.begin_phy_offset < 0 or self.end_phy_offset < self.begin_phy_offset:
            raise IndexCorruptError(f"{self.path}: offsets {self.begin_phy_offset}..{self.end_phy_offset}")
        if n == 1:
            return 1
        first = self.entry(1)[1]
        last = self.entry(n - 1)[1]
        if not full:
            if first != self.begin_phy_offset or last != self.end_phy_offset:
                raise IndexCorruptError(f"{self.path}: header offsets disagree with entries")
            return n
        if first != self.begin_phy_offset:
            return 1
        max_diff = (self.end_timestamp - self.begin_timestamp) // 1000
        prev_phy = self.begin_phy_offset
        base = self._entries_base
        entries = memoryview(self._mm)[base + INDEX_ENTRY_SIZE : base + n * INDEX_ENTRY_SIZE]
        try:
            for i, (h, phy, diff, prev) in enumerate(_ENTRY.iter_unpack(entries), 1):
                if h < 0 or phy < prev_phy or phy > self.end_phy_offset or not (0 <= diff <= max_diff):
                    return i
                if prev < 0 or prev >= i or (h == 0 and phy == 0 and diff == 0 and prev == 0):
                    return i
                prev_phy = phy
        finally:
            entries.release()
        return n

    def _slot_table(self) -> array.array:
        a = array.array("i")
        a.frombytes(self._mm[INDEX_HEADER_SIZE : self._entries_base])
        if sys.byteorder == "little":
            a.byteswap()
        return a

    def verify_slots(self) -> bool:
        """Every chain link and slot head is what appending the entries in order would have produced.
        Reads the entries in 1 M-entry chunks so a full 20 M-entry file needs no 400 MB copy."""
        n = self.index_count
        num = self.hash_slot_num
        expect = array.array("i", bytes(HASH_SLOT_SIZE * num))
        chunk = 1 << 20
        i = 1
        while i < n:
            j = min(n, i + chunk)
            base = self._entries_base
            words = array.array("i")
            words.frombytes(self._mm[base + i * INDEX_ENTRY_SIZE : base + j * INDEX_ENTRY_SIZE])
            if sys.byteorder == "little":
                words.byteswap()
            for k, (h, prev) in enumerate(zip(words[0::5], words[4::5], strict=True), i):
                s = h % num
                if expect[s] != prev:
                    return False
                expect[s] = k
            i = j
        return expect == self._slot_table() and sum(1 for v in expect if v) == self.hash_slot_count

    def truncate_entries(self, keep: int) -> None:
        """Keep entries [1, keep), drop the rest, and rebuild the slot table and chains from the kept entries.
        Used after corruption and when the CommitLog ends before the index does."""
        keep = max(1, min(keep, self.index_count))
        mm = self._mm
        base = self._entries_base
        mm[INDEX_HEADER_SIZE:base] = bytes(base - INDEX_HEADER_SIZE)
        if self.index_count > keep:
            start = base + keep * INDEX_ENTRY_SIZE
            end = base + self.index_count * INDEX_ENTRY_SIZE
            mm[start:end] = bytes(end - start)
        used = 0
        slots = self.hash_slot_num
        last_phy = self.begin_phy_offset
        last_diff = 0
        for i in range(1, keep):
            h, phy, diff, _ = self.entry(i)
            pos = INDEX_HEADER_SIZE + (h % slots) * HASH_SLOT_SIZE
            head = _SLOT.unpack_from(mm, pos)[0]
            if head == 0:
                used += 1
            _ENTRY.pack_into(mm, base + i * INDEX_ENTRY_SIZE, h, phy, diff, head)
            _SLOT.pack_into(mm, pos, i)
            last_phy, last_diff = phy, diff
        self.index_count = keep
        self.hash_slot_count = used
        if keep > 1:
            self.end_phy_offset = last_phy
            self.end_timestamp = min(self.end_timestamp, self.begin_timestamp + last_diff * 1000 + 999)
        else:
            self.end_phy_offset = self.begin_phy_offset
            self.end_timestamp = self.begin_timestamp
        self._write_header()
        self._flushed_count = -1

    def tail_hashes(self, phy_offset: int) -> set[int]:
        """Key hashes of the newest entries that point at phy_offset."""
        out = set()
        i = self.index_count - 1
        while i >= 1:
            h, phy, _, _ = self.entry(i)
            if phy != phy_offset:
                break
            out.add(h)
            i -= 1
        return out

    def first_entry_at_or_after(self, phy_offset: int) -> int:
        """Number of the first entry with phyOffset >= phy_offset (entries are in CommitLog order)."""
        lo, hi = 1, self.index_count
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[1] < phy_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        if faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_delete(self.path)


def _file_name_for(ms: int) -> str:
    t = time.localtime(ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


def _ms_of_file_name(name: str) -> int:
    try:
        return int(time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))) * 1000 + int(name[14:17])
    except (ValueError, OverflowError):
        return 0


class IndexService:
    """All IndexFiles of a store: build (dispatch thread), query (any thread), flush, recover, retention."""

    def __init__(
        self,
        root_dir: str,
        max_hash_slot_num: int = 5_000_000,
        max_index_num: int = 20_000_000,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.dir = os.path.join(root_dir, "index")
        self.hash_slot_num = max_hash_slot_num
        self.index_num = max_index_num
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._files: list[IndexFile] = []
        self._lock = threading.RLock()
        self._last_name_ms = 0
        # CommitLog offset from which the index must be rebuilt after load() dropped damaged files (None:
        # intact)
        self.rebuild_from_phy_offset: int | None = None

    # ---------------------------------------------------------------- lifecycle
    def load(self, last_exit_ok: bool = True) -> bool:
        """Open existing files. After an abnormal exit the newest file is fully verified (headers always):
        a bad
        tail is cut off, a file with a bad header is dropped together with every newer file.
        rebuild_from_phy_offset
        then tells recovery where to start re-dispatching into the index."""
        os.makedirs(self.dir, exist_ok=True)
        names = sorted(n for n in os.listdir(self.dir) if n.isdigit() and len(n) == 17)
        files: list[IndexFile] = []
        drop_rest = False
        self.rebuild_from_phy_offset = None
        for i, name in enumerate(names):
            path = os.path.join(self.dir, name)
            if drop_rest:
                self._remove_path(path)
                continue
            f: IndexFile | None = None
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num, create=False)
                is_last = i == len(names) - 1
                good = f.verify(full=not last_exit_ok and is_last)
                if good == f.index_count > 1 and f.entry(good - 1)[1] != f.end_phy_offset:
                    good -= 1  # header and entries disagree on the end: the newest entry is suspect
                if good < f.index_count:
                    log.warning("index %s: entry %d of %d is corrupt, truncating", name, good, f.index_count)
                    f.truncate_entries(good)
                    self._note_rebuild(f.end_phy_offset)
                elif not last_exit_ok and is_last and not f.verify_slots():
                    log.warning("index %s: slot table inconsistent, rebuilding it", name)
                    f.truncate_entries(f.index_count)
                files.append(f)
            except (IndexCorruptError, OSError, ValueError) as e:
                log.warning("index %s unusable (%s): dropping it and newer index files", name, e)
                if f is not None:
                    f.close()
                self._remove_path(path)
                self._note_rebuild(files[-1].end_phy_offset if files else 0)
                drop_rest = True
        with self._lock:
            self._files = files
            if names:
                # new names must sort after every existing one even if the clock went backwards
                self._last_name_ms = max(self._last_name_ms, _ms_of_file_name(names[-1]))
        return True

    def _note_rebuild(self, phy: int) -> None:
        if self.rebuild_from_phy_offset is None or phy < self.rebuild_from_phy_offset:
            self.rebuild_from_phy_offset = phy

    @staticmethod
    def _remove_path(path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        if faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_delete(path)

    def close(self) -> None:
        with self._lock:
            for f in self._files:
                f.flush()
                f.close()
            self._files = []

    def flush(self) -> int:
        """msync every file with unflushed entries; returns the newest flushed store timestamp (for the
        checkpoint's indexMsgTimestamp), 0 if nothing is indexed."""
        with self._lock:
            files = list(self._files)
        for f in files:
            f.flush()
        return files[-1].end_timestamp if files else 0

    # ---------------------------------------------------------------- build
    @property
    def end_phy_offset(self) -> int:
        """CommitLog offset of the newest indexed record (0 when none)."""
        with self._lock:
            return self._files[-1].end_phy_offset if self._files else 0

    def _new_file(self) -> IndexFile:
        ms = max(self._clock_ms(), self._last_name_ms + 1)
        prev = self._files[-1] if self._files else None
        while True:
            path = os.path.join(self.dir, _file_name_for(ms))
            if not os.path.exists(path):
                break
            ms += 1
        self._last_name_ms = ms
        f = IndexFile(
            path,
            self.hash_slot_num,
            self.index_num,
            prev.end_phy_offset if prev else 0,
            prev.end_timestamp if prev else 0,
        )
        self._files.append(f)
        if prev is not None:
            prev.flush()  # a full file never changes again: make it durable now
        return f

    def build_index(
        self, topic: str, keys: str | None, uniq_key: str | None, phy_offset: int, store_timestamp: int
    ) -> None:
        """Index one record under topic#UNIQ_KEY and topic#KEY for each space-separated KEYS entry. Records
        at or
        below the newest indexed offset are skipped, so recovery may re-dispatch freely."""
        if not keys and not uniq_key:
            return
        with self._lock:
            f = self._files[-1] if self._files else None
            done: set[int] = set()
            if f is not None and f.index_count > 1 and phy_offset <= f.end_phy_offset:
                if phy_offset < f.end_phy_offset:
                    return
                done = f.tail_hashes(phy_offset)  # a crash may have cut the record's keys short
            try:
                if f is None:
                    os.makedirs(self.dir, exist_ok=True)
                    f = self._new_file()
                if uniq_key:
                    f = self._put(f, topic_key_hash(topic, uniq_key), phy_offset, store_timestamp, done)
                if keys:
                    for k in keys.split(" "):
                        if k:
                            f = self._put(f, topic_key_hash(topic, k), phy_offset, store_timestamp, done)
            except OSError as e:
                # e.g. ENOSPC creating a new file: the index is derived data, so skip instead of stopping
                # dispatch
                self._note_rebuild(phy_offset)
                log.error("index: cannot index offset %d: %s", phy_offset, e)

    def build_index_raw(self, records: list[tuple[bytes, bytes | None, bytes | None, int, int]]) -> None:
        """build_index for a batch of (topic, KEYS, UNIQ_KEY, phyOffset, storeTimestamp) with the strings as
        stored (UTF-8 bytes), in CommitLog order: one lock and one header write per batch, no str per ASCII
        key. Same entries as build_index record by record; a record at or below the newest indexed offset
        (recovery replay) takes the build_index path itself."""
        with self._lock:
            f = self._files[-1] if self._files else None
            last = f.end_phy_offset if f is not None and f.index_count > 1 else -1
            flat: list[int] = []  # (hash, phyOffset, storeTimestamp) triples
            for topic, keys, uniq, phy, ts in records:
                if not keys and not uniq:
                    continue
                if phy <= last:
                    f = self._put_flat(f, flat)
                    flat = []
                    try:
                        t = topic.decode("utf-8")
                    except UnicodeDecodeError:
                        continue  # garbled record
                    self.build_index(
                        t,
                        keys.decode("utf-8", "replace") if keys else None,
                        uniq.decode("utf-8", "replace") if uniq else None,
                        phy,
                        ts,
                    )
                    f = self._files[-1] if self._files else None
                    last = f.end_phy_offset if f is not None and f.index_count > 1 else -1
                    continue
                ph = _raw_prefix_hash(topic)
                if ph is None:
                    continue  # not UTF-8: a garbled record
                if f is None:  # build_index creates the first file even for a record of blank KEYS
                    try:
                        os.makedirs(self.dir, exist_ok=True)
                        f = self._new_file()
                    except OSError as e:
                        self._note_rebuild(phy)
                        log.error("index: cannot index offset %d: %s", phy, e)
                        continue
                n0 = len(flat)
                if uniq:
                    flat += (raw_key_hash(ph, uniq), phy, ts)
                if keys:
                    if keys.isascii():
                        for k in keys.split(b" "):
                            if k:
                                flat += (raw_key_hash(ph, k), phy, ts)
                    else:
                        for ks in keys.decode("utf-8", "replace").split(" "):
                            if ks:
                                flat += (_combine(ph, ks), phy, ts)
                if len(flat) > n0:
                    last = phy
            self._put_flat(f, flat)

    def _put_flat(self, f: IndexFile | None, flat: list[int]) -> IndexFile | None:
        """Write (hash, phyOffset, storeTimestamp) triples, rolling to new files as they fill up. Caller holds
        the lock. A file that cannot be created costs its record's remaining keys, as in build_index."""
        i = 0
        n = len(flat)
        while i < n:
            try:
                if f is None:
                    os.makedirs(self.dir, exist_ok=True)
                    f = self._new_file()
                j = f.put_keys(flat, i)
                if j == i:
                    if f.index_count <= 1:
                        j += 3  # a file too small for even one entry: drop it, as put_key's False would
                    else:
                        f = self._new_file()
                i = j
            except OSError as e:
                phy = flat[i + 1]
                self._note_rebuild(phy)
                log.error("index: cannot index offset %d: %s", phy, e)
                while i < n and flat[i + 1] == phy:
                    i += 3
        return f

    def _put(self, f: IndexFile, h: int, phy_offset: int, store_timestamp: int, done: set[int]) -> IndexFile:
        if done:
            if h in done:
                return f
            done.add(h)
        if not f.put_key(h, phy_offset, store_timestamp):
            f = self._new_file()
            f.put_key(h, phy_offset, store_timestamp)
        return f

    # ---------------------------------------------------------------- query
    def query_offsets(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> tuple[list[int], int, int]:
        """Offsets of records indexed under topic#key within [begin_ts, end_ts] ms, newest first, at most
        min(max_num, 64). Also returns the newest file's end timestamp and end offset (RocketMQ's
        indexLastUpdateTimestamp / indexLastUpdatePhyoffset)."""
        max_num = min(max_num, MAX_QUERY_NUM)
        out: list[int] = []
        h = topic_key_hash(topic, key)
        with self._lock:
            files = list(self._files)
            if not files:
                return out, 0, 0
            last_ts, last_phy = files[-1].end_timestamp, files[-1].end_phy_offset
            for f in reversed(files):
                if len(out) >= max_num:
                    break
                if f.index_count > 1 and f.is_time_matched(begin_ts, end_ts):
                    f.select_phy_offsets(out, h, max_num, begin_ts, end_ts)
                if f.begin_timestamp < begin_ts:
                    break
        return out, last_ts, last_phy

    # ---------------------------------------------------------------- recovery / retention
    def truncate_after(self, phy_offset: int) -> None:
        """Drop every entry pointing at or beyond phy_offset (the CommitLog was cut there)."""
        with self._lock:
            while self._files:
                last = self._files[-1]
                if (last.index_count > 1 and last.begin_phy_offset >= phy_offset) or (
                    last.index_count <= 1 and len(self._files) > 1
                ):
                    self._files.pop().destroy()  # an empty trailing file is recreated on demand
                else:
                    break
            if self._files:
                f = self._files[-1]
                if f.index_count > 1 and f.end_phy_offset >= phy_offset:
                    f.truncate_entries(f.first_entry_at_or_after(phy_offset))
                    f.flush()

    def delete_files_before(self, min_phy_offset: int) -> int:
        """Delete files whose every entry points below min_phy_offset (never the newest file). Returns
        count."""
        removed = 0
        with self._lock:
            while len(self._files) > 1 and self._files[0].end_phy_offset < min_phy_offset:
                self._files.pop(0).destroy()
                removed += 1
        return removed

    def files(self) -> list[IndexFile]:
        with self._lock:
            return list(self._files)
