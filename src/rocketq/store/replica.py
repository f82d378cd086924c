"""Appending a replica stream: CommitLog bytes a master already encoded, written at the offsets it gave.

A slave's CommitLog is a byte copy of its master's. The HA stream (ha/) hands this module chunks of raw
CommitLog bytes with their physical offset; chunks follow each other without gaps, never cross a segment end,
and may end in the middle of a record (Apache RocketMQ's master cuts them at 32 KiB, not at records).

Each chunk is written where it belongs in its segment (pwrite), then every record it completes is checked
(magic, size, PHYSICALOFFSET equal to its position, consistent field lengths, body CRC) and dispatched as the
master's own appends dispatch it: the ConsumeQueue unit and the queue offset inline, the IndexFile through
IndexDispatchService (which follows the wrote position), held pulls through the arrival listener. The wrote
position — max_offset, what readers, the flush services and the slave's acknowledgements go by — moves over
whole valid records only. The bytes of a record not complete yet lie past it (``pending``); they are kept for
the next chunk and dropped when the stream restarts, which then resumes at max_offset.

A chunk that does not fit (wrong offset, crossing a segment, a record that does not check) raises
ReplicaError and changes nothing past the last valid record; the records before it in the chunk are kept.
Single writer: the caller appends from one thread (the broker's event loop); puts are refused on a slave.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketq.protocol import sysflag as sf
from rocketq.protocol.crc import crc32
from rocketq.protocol.properties import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketq.protocol.record import BLANK_MAGIC_CODE, FIXED_SIZE, MAGIC_CODE_V1, MAGIC_CODE_V2

from . import faultfs
from .dispatch import DispatchRequest, read_dispatch_request, tag_hash_code

if TYPE_CHECKING:
    from .mapped_file import MappedFile

log = logging.getLogger(__name__)

# size magic crc qid flag qoff phys sysflag (offsets 0..40) of a record
_HEAD = struct.Struct(">iiiiiqqi")
# the same, then the store timestamp (56) and the body length (84), for a record with IPv4 hosts
_REC_V4 = struct.Struct(">iiiiiqqi16xq20xi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_SIZE_MAGIC = struct.Struct(">ii")
_TAGS = b"TAGS\x01"
_V6 = sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG


class ReplicaError(Exception):
    """A chunk the store refuses. ``kind``: "offset" (not where the log ends), "segment" (crosses a segment
    end or a blank record of the wrong size: the two sides' mapedFileSizeCommitLog differ), "record" (a record
    that does not check), "io" (the write failed, e.g. disk full), "state" (the store is not running)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _space_hint(path: str) -> str:
    try:
        du = shutil.disk_usage(path)
    except OSError:
        return ""
    return f" (disk full: {du.free} bytes free)" if du.free < max(du.total // 100, 1 << 20) else ""


class ReplicaAppender:
    def __init__(self, store: Any) -> None:  # a MessageStore (which creates this: no import back)
        self.store = store
        self.cl = store.commit_log
        self.file_size = self.cl.file_size
        self.pending = 0  # bytes past max_offset received but not yet forming a whole record
        self.appended_bytes = 0
        self.appended_records = 0
        self._topics: dict[bytes, str] = {}
        self._tag_codes: dict[bytes, int] = {}  # a TAGS value as stored -> its hash code
        self._arrived: dict[tuple[str, int], int] = {}  # queue -> next offset, of the chunk being appended
        self.on_appended: Callable[[int], None] | None = None  # fn(new max_offset), after each chunk

    @property
    def max_offset(self) -> int:
        """End of the valid, dispatched records (what a slave acknowledges)."""
        return self.cl.max_offset

    @property
    def received_end(self) -> int:
        """Where the next chunk must start."""
        return self.cl.max_offset + self.pending

    def drop_pending(self) -> None:
        """The stream restarts: forget the partial record (its bytes past max_offset get overwritten)."""
        self.pending = 0

    def append(self, phys_offset: int, data: bytes | bytearray | memoryview) -> int:
        """Write one chunk at phys_offset and dispatch the records it completes; returns max_offset."""
        store = self.store
        if not store._running:
            raise ReplicaError("state", "the store is not running")
        n = len(data)
        cl = self.cl
        with cl.lock:
            mf = self._segment_for(phys_offset, n)
            pos = phys_offset - mf.file_from_offset
            if n:
                if store.clean is not None and store.clean.disk_full:
                    raise ReplicaError("io", "the CommitLog disk is full (diskSpaceWarningLevelRatio)")
                end = pos + n
                if end > mf.warm_limit:
                    mf.warm_claim(end)
                try:
                    written = os.pwrite(mf.fd, data, pos)
                except OSError as e:
                    raise ReplicaError("io", f"write to {mf.path} at {pos} failed: {e}") from None
                if written != n:
                    raise ReplicaError("io", f"short write to {mf.path} at {pos} ({written} of {n} bytes)")
                self.pending += n
            before = cl.max_offset
            try:
                self._dispatch_segment(mf)
            finally:
                after = cl.max_offset
                if after != before:
                    self.appended_bytes += after - before
                    if store._sync and store.flush_service is not None:
                        store.flush_service.request_nowait(after)  # durability follows; the ack does not wait
        if after != before:
            listener = store._listener
            if listener is not None:  # held pulls of the queues this chunk extended
                for (topic, qid), next_offset in self._arrived.items():
                    listener(topic, qid, next_offset)
            self._arrived.clear()
            d = store.index_dispatcher
            if d is not None and d.idle:
                d.wakeup()
            hook = self.on_appended
            if hook is not None:
                hook(after)
        return after

    def _segment_for(self, phys_offset: int, n: int) -> MappedFile:
        cl = self.cl
        mfq = cl.mfq
        size = self.file_size
        expected = self.received_end
        last = mfq.last()
        if last is None:
            # an empty log starts where the master's stream does: at a segment boundary
            if phys_offset % size:
                raise ReplicaError(
                    "offset", f"an empty CommitLog starts at a segment boundary, not at {phys_offset}"
                )
        elif phys_offset != expected:
            raise ReplicaError("offset", f"chunk at {phys_offset}, the CommitLog ends at {expected}")
        at = phys_offset % size
        if at + n > size:
            raise ReplicaError(
                "segment",
                f"chunk [{phys_offset}, {phys_offset + n}) crosses a segment end: "
                f"is the master's mapedFileSizeCommitLog {size} too?",
            )
        if last is not None and phys_offset < last.file_end_offset:
            return last
        try:
            mf = mfq.get_last_mapped_file(phys_offset)
        except OSError as e:
            raise ReplicaError("io", f"cannot create the CommitLog segment at {phys_offset}: {e}") from None
        if mf is None or mf.file_from_offset != phys_offset - at:
            raise ReplicaError("segment", f"no CommitLog segment for offset {phys_offset}")
        cl.reset_tail()
        return mf

    def _dispatch_segment(self, mf: MappedFile) -> None:
        """Validate and dispatch the whole records in [wrote_position, wrote_position + pending)."""
        view = mf.view
        base = mf.file_from_offset
        file_size = self.file_size
        pos = mf.wrote_position
        limit = pos + self.pending
        mm = mf.mm
        mm_find = mm.find
        tag_codes = self._tag_codes
        unpack_head = _HEAD.unpack_from
        unpack_v4 = _REC_V4.unpack_from
        unpack_sm = _SIZE_MAGIC.unpack_from
        store = self.store
        cq_table = store.consume_queue_table
        queue_table = self.cl.topic_queue_table
        topics = self._topics
        delay_table = store._delay_table
        cq_of = store._cq
        arrived = self._arrived
        done = 0
        error: ReplicaError | None = None
        store_ts = 0
        while limit - pos >= 8:
            size, magic = unpack_sm(view, pos)
            if magic == BLANK_MAGIC_CODE:
                if size != file_size - pos:
                    error = ReplicaError(
                        "segment",
                        f"blank record of {size} bytes at {base + pos}, {file_size - pos} left in the "
                        f"segment: the master's mapedFileSizeCommitLog differs from {file_size}",
                    )
                    break
                if limit < file_size:
                    break  # the rest of the segment (the blank's bytes) is still coming
                pos = file_size
                break
            if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
                error = ReplicaError("record", f"bad magic {magic:#x} at {base + pos}")
                break
            if size < FIXED_SIZE or size > file_size - pos:
                error = ReplicaError("record", f"bad record size {size} at {base + pos}")
                break
            if size > limit - pos:
                break  # a partial record: wait for the rest
            if magic == MAGIC_CODE_V1 and not view[pos + 39] & _V6:  # IPv4 hosts: one unpack for the head
                _, _, crc, qid, _, qoff, phys, sys_flag, ts, blen = unpack_v4(view, pos)
                p = pos + _REC_V4.size
            else:
                _, _, crc, qid, _, qoff, phys, sys_flag = unpack_head(view, pos)
                p = pos + 48 + (20 if sys_flag & sf.BORNHOST_V6_FLAG else 8)
                store_host = 20 if sys_flag & sf.STOREHOST_ADDRESS_V6_FLAG else 8
                if p + 8 + store_host + 16 + 3 > pos + size:  # IPv6 flags longer than the record itself
                    error = ReplicaError("record", f"record at {base + pos} too short for its host flags")
                    break
                ts = _I64.unpack_from(view, p)[0]
                p += 8 + store_host + 12
                blen = _I32.unpack_from(view, p)[0]
                p += 4
            if phys != base + pos:
                error = ReplicaError("record", f"record at {base + pos} says it is at {phys}")
                break
            rec_end = pos + size
            if blen < 0 or p + blen + 3 > rec_end:
                error = ReplicaError("record", f"bad body length {blen} in the record at {base + pos}")
                break
            if crc32(view[p : p + blen]) & 0x7FFFFFFF != crc:
                error = ReplicaError("record", f"body CRC mismatch in the record at {base + pos}")
                break
            p += blen
            if magic == MAGIC_CODE_V1:
                tlen = view[p]
                p += 1
            else:
                tlen = _I16.unpack_from(view, p)[0]
                p += 2
            if tlen <= 0 or p + tlen + 2 > rec_end:
                error = ReplicaError("record", f"bad topic length {tlen} in the record at {base + pos}")
                break
            tb = mm[p : p + tlen]  # bytes straight from the map: the key of the topic cache
            p += tlen
            plen = _I16.unpack_from(view, p)[0]
            p += 2
            if plen < 0 or p + plen != rec_end:
                error = ReplicaError("record", f"bad properties length {plen} in the record at {base + pos}")
                break
            topic = topics.get(tb)
            if topic is None:
                try:
                    topic = tb.decode("utf-8")
                except UnicodeDecodeError:
                    error = ReplicaError("record", f"topic is not UTF-8 in the record at {base + pos}")
                    break
                if len(topics) > 100_000:
                    topics.clear()
                topics[tb] = topic
            t = sys_flag & sf.TRANSACTION_TYPE_MASK  # goes_to_consume_queue, inlined
            if t == sf.TRANSACTION_NOT_TYPE or t == sf.TRANSACTION_COMMIT_TYPE or topic == TRANS_HALF_TOPIC:
                if topic == SCHEDULE_TOPIC:
                    req = read_dispatch_request(view, pos, base + pos, False, delay_table, rec_end)
                    tags_code = req.tags_code if isinstance(req, DispatchRequest) else 0
                elif plen:
                    # TAGS found in the map, its value's hash cached by its bytes (a record ends at least
                    # 8 bytes before its segment's end: no search here reaches the end of the map)
                    end = p + plen
                    i = mm_find(_TAGS, p, end)
                    while i > p and mm[i - 1] != 2:  # must start a key\x01value pair
                        i = mm_find(_TAGS, i + 1, end)
                    if i < 0:
                        tags_code = 0
                    else:
                        j = mm_find(b"\x02", i + 5, end)
                        raw = mm[i + 5 : j if j >= 0 else end]
                        cached = tag_codes.get(raw)
                        if cached is None:
                            tags_code = tag_hash_code(raw.decode("utf-8", "replace")) if raw else 0
                            if len(tag_codes) > 65536:
                                tag_codes.clear()
                            tag_codes[raw] = tags_code
                        else:
                            tags_code = cached
                else:
                    tags_code = 0
                # the queue unit (inline, before the wrote position moves at the end: nothing reads in
                # between, readers run on this thread and the index thread reads below it). A record whose
                # unit cannot be written (no room for a new ConsumeQueue file) is not committed, nor what
                # follows; the stream resumes there (units already written are skipped then).
                key = (topic, qid)
                try:
                    cq = cq_table.get(key) or cq_of(topic, qid)
                    ok = cq.put(base + pos, size, tags_code, qoff)
                except OSError:
                    ok = False
                if not ok:
                    why = _space_hint(store.config.store_path_root_dir)
                    error = ReplicaError(
                        "io", f"cannot write unit {qoff} of consume queue {topic}/{qid}{why}"
                    )
                    break
                if qoff >= queue_table.get(key, 0):
                    queue_table[key] = qoff + 1
                arrived[key] = qoff + 1
                done += 1
            store_ts = ts
            pos = rec_end
        self.appended_records += done
        committed = pos - mf.wrote_position
        if committed:
            mf.wrote_position = pos
            if store_ts and error is None:  # (after a cut the newest timestamp is not known: keep the older)
                mf.store_timestamp = store_ts
                self.cl.append_ts = store_ts
            if faultfs.CRASH_AT is not None:
                faultfs.crash_point("replica.after_append")
        self.pending = 0 if error is not None else self.pending - committed
        if error is not None:
            raise error
