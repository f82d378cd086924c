"""From CommitLog records to ConsumeQueue units and IndexFile entries.

Two paths feed the same structures:
  * inline: MessageStore.put_* writes the CQ unit right after the append, under the put lock, so a message
    is pullable as soon as put returns; the arrival listener then runs on the putting thread.
  * from the CommitLog alone: read_dispatch_request() decodes what a record needs (recovery re-dispatch, and
    IndexDispatchService, the background thread that feeds the IndexFile service the way RocketMQ's
    ReputMessageService does; index building is kept off the append path).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable
from typing import Protocol

from rocketq.filter.tags import tag_hash_code
from rocketq.protocol import sysflag as sf
from rocketq.protocol.crc import crc32
from rocketq.protocol.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    decode_properties,
)
from rocketq.protocol.record import (
    BLANK_MAGIC_CODE,
    FIXED_SIZE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
)

log = logging.getLogger(__name__)

# Fields needed by dispatch, read in one go (IPv4 born host; the V6 variants go through the slow path).
_HEAD = struct.Struct(">iiiiiqqiq")
_BLANK_HEAD = struct.Struct(">ii")  # size magic crc qid flag qoff phys sysflag born_ts
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def compute_tags_code(topic: str, props: dict[str, str], store_timestamp: int, delay_table: list[int]) -> int:
    """CQ tag code: tag hash, or for SCHEDULE_TOPIC_XXXX the delivery time (store time + level delay)."""
    if topic == SCHEDULE_TOPIC:
        level = props.get(PROPERTY_DELAY_TIME_LEVEL)
        if level and level.lstrip("-").isdigit() and delay_table:
            n = min(int(level), len(delay_table))
            if n > 0:
                return store_timestamp + delay_table[n - 1]
    return tag_hash_code(props.get(PROPERTY_TAGS))


class DispatchRequest:
    """What dispatch needs from one record. The property string is parsed only on demand (recovery mostly
    meets records its queues already hold and never looks at it)."""

    __slots__ = (
        "_delay_table",
        "_props",
        "_props_raw",
        "commit_log_offset",
        "consume_queue_offset",
        "msg_size",
        "prepared_transaction_offset",
        "queue_id",
        "store_timestamp",
        "sys_flag",
        "topic",
    )

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            raw = self._props_raw
            self._props = decode_properties(raw) if len(raw) else {}
        return self._props

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def tags_code(self) -> int:
        return compute_tags_code(self.topic, self.properties, self.store_timestamp, self._delay_table)

    def __repr__(self) -> str:
        return (
            f"DispatchRequest({self.topic!r}, q={self.queue_id}, qoff={self.consume_queue_offset}, "
            f"phys={self.commit_log_offset}, size={self.msg_size})"
        )


# Outcomes of reading at a position (besides a DispatchRequest)
END_OF_FILE = 0  # blank magic: continue at the next file
INVALID = -1  # torn / corrupt: the log ends here


def read_dispatch_request(
    view: memoryview,
    pos: int,
    phys_offset: int,
    check_crc: bool,
    delay_table: list[int],
    limit: int | None = None,
) -> DispatchRequest | int:
    """Validate the record at view[pos:] (which sits at CommitLog offset phys_offset) and describe it.

    Returns END_OF_FILE for a blank record, INVALID for anything not a complete, self-consistent record:
    bad magic, size out of bounds, PHYSICALOFFSET != its position (stale bytes from before a truncation),
    inconsistent lengths, or (check_crc) a body CRC mismatch.
    """
    end = len(view) if limit is None else limit
    if end - pos < 8:
        return INVALID
    size, magic = struct.unpack_from(">ii", view, pos)
    if magic == BLANK_MAGIC_CODE:
        return END_OF_FILE if size == end - pos or size >= 8 else INVALID
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        return INVALID
    if size < FIXED_SIZE or size > end - pos:
        return INVALID
    _, _, crc, qid, _flag, qoff, phys, sys_flag, _born = _HEAD.unpack_from(view, pos)
    if phys != phys_offset:
        return INVALID
    p = pos + 48 + (20 if sys_flag & sf.BORNHOST_V6_FLAG else 8)
    store_ts = _I64.unpack_from(view, p)[0]
    p += 8 + (20 if sys_flag & sf.STOREHOST_ADDRESS_V6_FLAG else 8)
    rec_end = pos + size
    if p + 16 > rec_end:  # IPv6 hosts: the fixed part is longer than FIXED_SIZE
        return INVALID
    _reconsume, prep, blen = struct.unpack_from(">iqi", view, p)
    p += 16
    if blen < 0 or p + blen + 3 > rec_end:
        return INVALID
    body_at = p
    p += blen
    if magic == MAGIC_CODE_V1:
        tlen = view[p]
        p += 1
    else:
        tlen = _I16.unpack_from(view, p)[0]
        p += 2
    if tlen <= 0 or p + tlen + 2 > rec_end:
        return INVALID
    try:
        topic = str(view[p : p + tlen], "utf-8")
    except UnicodeDecodeError:
        return INVALID
    p += tlen
    plen = _I16.unpack_from(view, p)[0]
    p += 2
    if plen < 0 or p + plen != rec_end:
        return INVALID
    if check_crc and (crc32(view[body_at : body_at + blen]) & 0x7FFFFFFF) != crc:
        return INVALID
    r = DispatchRequest()
    r.topic = topic
    r.queue_id = qid
    r.commit_log_offset = phys
    r.msg_size = size
    r.store_timestamp = store_ts
    r.consume_queue_offset = qoff
    r.sys_flag = sys_flag
    r.prepared_transaction_offset = prep
    r._props_raw = view[p : p + plen]
    r._props = None
    r._delay_table = delay_table
    return r


def goes_to_consume_queue(sys_flag: int, topic: str) -> bool:
    """Prepared and rollback transaction records are not consumable (RocketMQ: no CQ unit, queue offset 0).
    Exception: half messages in RMQ_SYS_TRANS_HALF_TOPIC are indexed even if the broker kept the PREPARED
    flag (RocketMQ resets it to NOT_TYPE before storing them; the transaction checker reads that queue)."""
    t = sys_flag & sf.TRANSACTION_TYPE_MASK
    return t == sf.TRANSACTION_NOT_TYPE or t == sf.TRANSACTION_COMMIT_TYPE or topic == TRANS_HALF_TOPIC


def _prop_value(props: bytes, name: bytes) -> bytes | None:
    """Value of property `name` (given as b"NAME\x01") in a stored property string, as stored (UTF-8 bytes),
    found without parsing the whole string; None if absent."""
    i = props.find(name)
    while i > 0 and props[i - 1] != 2:  # must start a key\x01value segment
        i = props.find(name, i + 1)
    if i < 0:
        return None
    v = i + len(name)
    j = props.find(b"\x02", v)
    return props[v:] if j < 0 else props[v:j]


# sysflag, store timestamp and body length of a record whose hosts are IPv4 (offsets 36, 56, 84)
_REC_V4 = struct.Struct(">36xi16xq20xi")
_HOST_V6 = sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG


def _index_fields_raw(
    mm, view: memoryview, pos: int, rec_end: int, magic: int
) -> tuple[bytes, bytes | None, bytes | None, int] | None:
    """(topic, KEYS, UNIQ_KEY, store timestamp) of a complete record, strings as stored (UTF-8 bytes);
    None if it has neither key, is a rolled-back transaction record, or is garbled. Only the property
    string is searched, not the body."""
    try:
        sys_flag, store_ts, blen = _REC_V4.unpack_from(view, pos)
        if (sys_flag & sf.TRANSACTION_TYPE_MASK) == sf.TRANSACTION_ROLLBACK_TYPE:
            return None
        if sys_flag & _HOST_V6:
            p = pos + 48 + (20 if sys_flag & sf.BORNHOST_V6_FLAG else 8)
            store_ts = _I64.unpack_from(view, p)[0]
            p += 8 + (20 if sys_flag & sf.STOREHOST_ADDRESS_V6_FLAG else 8) + 12
            blen = _I32.unpack_from(view, p)[0]
            p += 4 + blen
        else:
            p = pos + 88 + blen
        if magic == MAGIC_CODE_V2:
            tlen = _I16.unpack_from(view, p)[0]
            p += 2
        else:
            tlen = view[p]
            p += 1
        t = p
        p += tlen
        plen = _I16.unpack_from(view, p)[0]
    except (struct.error, IndexError):
        return None
    p += 2
    end = p + plen
    if plen <= 0 or end > rec_end:
        return None
    # One copy of the property string (tens of bytes), searched as bytes: cheaper than searching the map
    # in place, which needs find_in_map's care where a record ends at the map's end.
    props = mm[p:end]
    keys = _prop_value(props, b"KEYS\x01")
    uniq = _prop_value(props, b"UNIQ_KEY\x01")
    if not keys and not uniq:
        return None
    return mm[t : t + tlen], keys, uniq, store_ts


class IndexHook(Protocol):
    """What the store needs from the IndexFile service (rocketq.store.index_file.IndexService)."""

    def build_index(
        self, topic: str, keys: str | None, uniq_key: str | None, phy_offset: int, store_timestamp: int
    ) -> None: ...

    def build_index_raw(self, records: list[tuple[bytes, bytes | None, bytes | None, int, int]]) -> None: ...

    @property
    def end_phy_offset(self) -> int: ...


class IndexDispatchService:
    """Background thread that follows the CommitLog and feeds every record to the index hook.

    It reads records straight from the mapped files (from a position recovery gives it) so the index can
    always be rebuilt from the CommitLog alone; records are only read below the CommitLog's wrote position,
    which the appender advances after a record is completely written.
    """

    def __init__(
        self,
        commit_log,
        index: IndexHook,
        start_offset: int,
        delay_table: list[int],
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self.commit_log = commit_log
        self.index = index
        self.next_offset = start_offset
        self.delay_table = delay_table
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.idle = False
        # put_* call wakeup() at most once per MIN_WAKE_S (an Event.set is a lock + notify per put otherwise);
        # between wake-ups the thread's own 10 ms poll still picks records up
        self._next_wake = 0.0
        self._thread = threading.Thread(target=self._run, name="IndexDispatchService", daemon=True)
        self._on_error = on_error

    def start(self) -> None:
        self._thread.start()

    MIN_WAKE_S = 0.002
    BATCH_WAIT_S = 0.002
    BATCH_BYTES = 4 << 20

    def wakeup(self) -> None:
        now = time.monotonic()
        if now >= self._next_wake:
            self._next_wake = now + self.MIN_WAKE_S
            if not self._wake.is_set():
                self._wake.set()

    def behind(self) -> int:
        return self.commit_log.max_offset - self.next_offset

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                progressed = self.do_dispatch(10_000)
            except Exception as e:  # keep the thread alive; the index is derived data
                log.exception("index dispatch failed at %d", self.next_offset)
                if self._on_error:
                    self._on_error(e)
                progressed = False
            if not progressed:
                self.idle = True
                self._wake.wait(0.01)
                self._wake.clear()
                self.idle = False
            elif self.behind() < self.BATCH_BYTES:
                # Caught up under load: let records pile up for a moment instead of chasing every append
                # (each pass is a GIL hand-off with the loop thread, which the broker shares one CPU with).
                self._stop.wait(self.BATCH_WAIT_S)

    def do_dispatch(self, max_records: int = 1 << 62) -> bool:
        """Index records from next_offset up to the CommitLog end; True if anything was consumed.
        The inner loop walks one segment's records with local variables only (it is per-record work)."""
        mfq = self.commit_log.mfq
        build = self.index.build_index_raw
        fields = _index_fields_raw
        unpack = _BLANK_HEAD.unpack_from
        progressed = False
        n = 0
        while n < max_records:
            off = self.next_offset
            first = mfq.get_min_offset()
            if off < first:
                off = self.next_offset = first
            mf = mfq.find_mapped_file_by_offset(off)
            if mf is None:
                break
            base = mf.file_from_offset
            pos = off - base
            wrote = mf.wrote_position
            view = mf.view
            mm = mf.mm
            batch: list[tuple[bytes, bytes | None, bytes | None, int, int]] = []
            while pos < wrote and n < max_records:
                size, magic = unpack(view, pos)
                if magic == BLANK_MAGIC_CODE:
                    pos = wrote = mf.file_size
                    break
                rec_end = pos + size
                if size <= 0 or rec_end > wrote:
                    log.error("index dispatch: unreadable record at %d, skipping to the end", base + pos)
                    pos = wrote
                    break
                r = fields(mm, view, pos, rec_end, magic)
                if r is not None:
                    batch.append((r[0], r[1], r[2], base + pos, r[3]))
                    if len(batch) >= 1024:  # bounds how long a query waits for the index lock
                        build(batch)
                        batch = []
                pos = rec_end
                n += 1
            if batch:
                build(batch)  # before next_offset moves: a failed batch is re-read (replay skips the done)
            if base + pos != off:
                progressed = True
            self.next_offset = base + pos
            if pos < mf.file_size or mf.wrote_position < mf.file_size:
                break  # caught up with the appender (or the last segment)
        return progressed

    def shutdown(self, drain: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if drain:
            try:
                self.do_dispatch()
            except Exception:
                log.exception("index dispatch drain failed")
