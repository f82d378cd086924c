"""Body CRC of stored records: checked where records are served, counted and logged when they fail.

Every record carries BODYCRC (CRC-32 of the body, masked to 31 bits). Recovery always checked it; a clean
restart used to cut the CommitLog at the first mismatch and zero what followed, so one flipped bit in an old
body destroyed every acknowledged message after it. A bit flip in a body whose record is otherwise intact
(magic, size, position, lengths all agree) is media corruption, not a torn write: recovery now keeps the
log and the record (counted, logged), and the read paths (pull, view by id, query, send-back) never serve a
record whose body does not match its CRC. A torn tail after a crash is still cut, as RocketMQ does with
checkCRCOnRecover.

A consumer never receives the corrupt record: a pull skips it (its queue offset is passed over, like a
record filtered out), a lookup by offset answers as if it were gone. The record stays on disk for
inspection until retention deletes its segment.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
import zlib

from rocketq.protocol import sysflag as sf
from rocketq.protocol.crc import crc32

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_V6 = sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG
_FIXED = 91  # record.FIXED_SIZE (header + topic length + properties length)
BODY_LEN_POS_V4 = 84  # BODYLEN of a record with IPv4 hosts; the body follows it
# isal's crc32 (protocol.crc) is the faster one from about 512 bytes on; below, zlib's call costs less
# (about 100 ns less per 128-byte body, bench/read_crc_bench.py)
SMALL_BODY = 512
small_crc32 = zlib.crc32
_LOGGED_MAX = 4096  # distinct records logged one by one; beyond, a summary now and then
_SUMMARY_EVERY_S = 60.0


def body_span(view, pos: int, size: int) -> tuple[int, int] | None:
    """(start, length) of the body of the record at view[pos:pos+size], or None if the lengths are off."""
    sys_flag = _I32.unpack_from(view, pos + 36)[0]
    at = pos + BODY_LEN_POS_V4
    if sys_flag & _V6:
        at += 12 if sys_flag & sf.BORNHOST_V6_FLAG else 0
        at += 12 if sys_flag & sf.STOREHOST_ADDRESS_V6_FLAG else 0
    if at + 4 > pos + size:
        return None
    blen = _I32.unpack_from(view, at)[0]
    start = at + 4
    if blen < 0 or start + blen + 3 > pos + size:
        return None
    return start, blen


def body_crc_ok(view, pos: int, size: int) -> bool:
    """Does the body of the record at view[pos:pos+size] match its BODYCRC?"""
    if size < _FIXED or pos + size > len(view):
        return False
    span = body_span(view, pos, size)
    if span is None:
        return False
    start, blen = span
    fn = small_crc32 if blen < SMALL_BODY else crc32
    return (fn(view[start : start + blen]) & 0x7FFFFFFF) == _I32.unpack_from(view, pos + 8)[0]


class CorruptionLog:
    """Counters for the broker's runtime info (and a metrics exporter) and a log that names each corrupt
    record once (up to _LOGGED_MAX of them) instead of once per read: a corrupt record is met again by every
    group and every retry. Thread-safe (pulls run on the loop, recovery and lookups on other threads)."""

    def __init__(self) -> None:
        self.skipped_on_read = 0  # reads that passed over a corrupt record (every group, every time)
        self.kept_on_recover = 0  # corrupt bodies a clean restart found and kept the log going past
        self._logged: set[int] = set()
        self._unlogged = 0
        self._last_summary = 0.0
        self._lock = threading.Lock()

    @property
    def distinct(self) -> int:
        """Corrupt records found so far (by CommitLog offset; saturates at _LOGGED_MAX)."""
        return len(self._logged)

    def on_read(self, phys: int, where: str) -> None:
        with self._lock:
            self.skipped_on_read += 1
            self._report(phys, f"{where}: record at CommitLog offset {phys}: body does not match its CRC; "
                               "not served (skipped)")  # fmt: skip

    def on_recover(self, phys: int) -> None:
        with self._lock:
            self.kept_on_recover += 1
            self._report(phys, f"recovery: record at CommitLog offset {phys}: body does not match its CRC "
                               "(media corruption); kept in the log, never served")  # fmt: skip

    def _report(self, phys: int, text: str) -> None:
        if phys in self._logged:
            return
        if len(self._logged) < _LOGGED_MAX:
            self._logged.add(phys)
            log.error(text)
            return
        self._unlogged += 1
        now = time.monotonic()
        if now - self._last_summary >= _SUMMARY_EVERY_S:
            self._last_summary = now
            log.error("%d more reads met corrupt records (body CRC mismatch) not logged one by one; "
                      "skipped on read so far: %d", self._unlogged, self.skipped_on_read)  # fmt: skip
            self._unlogged = 0

    def table(self) -> dict[str, str]:
        return {
            "bodyCrcMismatchSkipped": str(self.skipped_on_read),
            "bodyCrcMismatchRecovered": str(self.kept_on_recover),
            "bodyCrcMismatchRecords": str(self.distinct),
        }
