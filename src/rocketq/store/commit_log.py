"""CommitLog: every message of the broker, appended as 17-field records to one MappedFileQueue.

Appends hold ``lock``; the per-message work under it is: pick the segment (rolling with a blank record when
the record does not fit), one header pack_into, one body copy, tail writes, one dict update for the queue
offset, and the inline ConsumeQueue unit. CRC and the property string are computed before taking the lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from rocketq.protocol import sysflag as sf
from rocketq.protocol.message_id import offset_msg_id_encoder
from rocketq.protocol.properties import TRANS_HALF_TOPIC
from rocketq.protocol.record import (
    BLANK,
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_SIZE,
    _ip_cache,
    encode_record_into,
    ip4_bytes,
)

from . import faultfs
from .config import FlushDiskType, StoreConfig
from .mapped_file import OS_PAGE_SIZE, MappedFile
from .mapped_file_queue import AllocateMappedFileService, MappedFileQueue
from .types import MessageToStore, PutMessageStatus

log = logging.getLogger(__name__)

_ZEROS = memoryview(bytes(OS_PAGE_SIZE))

_STAGE_BYTES = 1 << 20  # a run that outgrows it is written in pieces

# (phys_offset, size, tags_code, queue_offset, topic, queue_id, store_timestamp) -> None, under the lock
CQDispatch = Callable[[int, int, int, int, str, int, int], None]


class CommitLog:
    def __init__(
        self, config: StoreConfig, store_host: tuple[str, int], allocator: AllocateMappedFileService | None
    ) -> None:
        self.config = config
        self.file_size = config.mapped_file_size_commitlog
        self.mfq = MappedFileQueue(config.commitlog_dir, self.file_size, allocator)
        self.topic_queue_table: dict[tuple[str, int], int] = {}  # next queue offset per topic-queue
        self.lock = threading.Lock()
        self.store_host = store_host
        self.store_ip4 = ip4_bytes(store_host[0])
        self.store_port = store_host[1]
        self.msg_id = offset_msg_id_encoder(store_host[0], store_host[1])  # phys offset -> offsetMsgId
        self.max_message_size = config.max_message_size
        self.append_ts = 0  # store timestamp of the newest appended record
        # SYNC_FLUSH writes records with pwrite() into the segment instead of storing through the mapping:
        # after a burst of stores through a mapping, every later fdatasync of the file costs 2-4x more here
        # (bench/mmap_fsync_bench.py), and fdatasync is on the acknowledgement path. Reads still go through
        # the mapping (same page cache). ASYNC_FLUSH keeps the zero-syscall store into the mapping unless
        # commitLogAsyncWritebackBytes asks for pwrite with writeback behind the writer (store/writeback.py;
        # a store through the mapping can fault on the event loop on pages a flush write-protected again).
        sync = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._pwrite = sync or config.async_writeback_bytes > 0
        # SYNC_FLUSH pads each write with zeros to the next page boundary: a partial write into a page that is
        # not cached makes the kernel read the block first when it is already written on disk (as the
        # warm-ahead zeros make it, store/warm.py); a write that covers the page to its end never needs that
        # read. ASYNC_FLUSH has no zeros ahead: its blocks ahead are unwritten, which reads as zeros for free.
        self._pad = sync
        self._scratch = bytearray(self.max_message_size + OS_PAGE_SIZE) if self._pwrite else bytearray()
        # A run of pwrite appends (begin_stage .. flush_stage, one run of pipelined sends): the records
        # are encoded one after another into _stage and written with one pwrite at its end instead of one
        # each. wrote_position (what readers, the index thread and the group commit see) moves only then;
        # readers on the appending thread flush first (flush_stage), as does anything that rolls a segment.
        self._staging = False
        self._stage_owner = 0  # thread id of the appender that stages; others write the run out first
        self._stage = bytearray(_STAGE_BYTES + OS_PAGE_SIZE) if self._pwrite else bytearray()
        self._stage_mf: MappedFile | None = None
        self._stage_pos = 0  # segment position of _stage[0]
        self._stage_len = 0
        self.stage_failed = False  # a staged write failed: the store refuses writes from then on
        self.confirm_offset = -1
        self._tail: MappedFile | None = None
        # ConsumeQueues, written inline under the put lock (set by MessageStore)
        self.cq_table: dict = {}
        self.cq_create: Callable = lambda topic, qid: None
        # fn(end offset), called under the lock right after a single record's pwrite (not a staged run's):
        # SYNC_FLUSH on the loop asks for its fdatasync there, so the device works while the appender
        # finishes the record's queue unit and answer (set by MessageStore)
        self.on_written: Callable[[int], None] | None = None
        self.flush_asked_to = -1  # the end offset on_written was last called with (put_message asks no more)

    # --- offsets ---
    @property
    def max_offset(self) -> int:
        return self.mfq.get_max_offset()

    @property
    def min_offset(self) -> int:
        first = self.mfq.first()
        return first.file_from_offset if first is not None else 0

    @property
    def appended_end(self) -> int:
        """End of the newest appended record, staged or written (exact on the appending thread)."""
        n = self._stage_len
        mf = self._stage_mf
        if n and mf is not None:
            return mf.file_from_offset + self._stage_pos + n
        return self.mfq.get_max_offset()

    @property
    def writes_with_pwrite(self) -> bool:
        return self._pwrite

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # --- append (caller passes precomputed pieces; see MessageStore.put_message) ---
    def _segment_for(self, size: int) -> MappedFile:
        """Segment with room for size bytes + a blank record; ends the current one if needed. Under lock."""
        if self._stage_len:
            self._flush_stage_locked()
        mf = self._tail
        if mf is None or mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            if mf is None:
                mf = self.mfq.get_last_mapped_file(0)
            if mf is not None and mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
                pos = mf.wrote_position
                if pos < self.file_size:
                    if pos + BLANK.size > mf.warm_limit:
                        mf.warm_claim(pos + BLANK.size)
                    BLANK.pack_into(mf.mm, pos, self.file_size - pos, BLANK_MAGIC_CODE)
                    mf.wrote_position = self.file_size
                mf = self.mfq.get_last_mapped_file(0)
                if faultfs.CRASH_AT is not None:  # blank written, new segment taken, still empty
                    faultfs.crash_point("commitlog.roll")
            if mf is None:
                raise OSError("no commitlog segment")
            self._tail = mf
        return mf

    def append_one(
        self,
        topic: str,
        qid: int,
        body: bytes,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        reconsume_times: int,
        prepared_transaction_offset: int,
        tb: bytes,
        pb: bytes,
        crc: int,
        tags_code: int | None,
        schedule_tags: Callable[[int], int] | None,
    ) -> tuple[int, int, int, int] | PutMessageStatus:
        """Append one record and its CQ unit; returns (phys_offset, size, queue_offset, store_timestamp) or
        a status. The hot path: everything below is inlined on purpose, and the message comes as its fields
        (MessageToStore's, positional) so that a caller needs no object for it."""
        size = FIXED_SIZE + len(body) + len(tb) + len(pb)
        if size > self.max_message_size or size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        born_ip4 = _ip_cache.get(born_host[0]) or ip4_bytes(born_host[0])
        consumable = (sys_flag & 0x4) == 0 or topic == TRANS_HALF_TOPIC  # not PREPARED (0x4) / ROLLBACK (0xC)
        key = (topic, qid)
        with self.lock:
            mf = self._tail
            staged = self._stage_len
            staging = self._staging and threading.get_ident() == self._stage_owner
            if staged and not staging:  # another thread's run is staged: its records go first
                if not self._flush_stage_locked():
                    return PutMessageStatus.UNKNOWN_ERROR
                staged = 0
            pos = self._stage_pos + staged if staged else (mf.wrote_position if mf is not None else 0)
            if mf is None or pos + size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
                try:
                    mf = self._segment_for(size)  # writes out the staged run first
                except OSError as e:
                    log.error("commitlog: cannot create segment: %s", e)
                    return PutMessageStatus.CREATE_MAPEDFILE_FAILED
                staged = 0
                pos = mf.wrote_position
            elif staged + size > _STAGE_BYTES:
                if not self._flush_stage_locked():
                    return PutMessageStatus.UNKNOWN_ERROR
                staged = 0
            store_ts = time.time_ns() // 1_000_000
            qoff = self.topic_queue_table.get(key, 0) if consumable else 0
            phys = mf.file_from_offset + pos
            pw = self._pwrite
            if staging:
                buf, at = self._stage, staged
            elif pw:
                buf, at = self._scratch, 0
            else:
                buf, at = mf.mm, pos
                if pos + size > mf.warm_limit:  # zeros may be on their way there (store/warm.py)
                    mf.warm_claim(pos + size)
            encode_record_into(
                buf, at, body, tb, pb, qid, flag, qoff, phys, sys_flag, born_timestamp, born_ip4,
                born_host[1], store_ts, self.store_ip4, self.store_port, reconsume_times,
                prepared_transaction_offset, crc,
            )  # fmt: skip
            if staging:
                if not staged:
                    self._stage_mf = mf
                    self._stage_pos = pos
                self._stage_len = staged + size
            elif pw:
                end = pos + size
                pad = min(-end % OS_PAGE_SIZE, self.file_size - end) if self._pad else 0
                if pad:
                    buf[size : size + pad] = _ZEROS[:pad]
                if end + pad > mf.warm_limit:
                    mf.warm_claim(end + pad)
                if not self._write_at(mf, memoryview(buf)[: size + pad], pos):
                    return PutMessageStatus.UNKNOWN_ERROR
                mf.wrote_position = end
                mf.store_timestamp = store_ts
                self.append_ts = store_ts
                written = self.on_written
                if written is not None:
                    self.flush_asked_to = phys + size
                    written(phys + size)
            else:
                mf.wrote_position = pos + size
            mf.store_timestamp = store_ts
            self.append_ts = store_ts
            if faultfs.CRASH_AT is not None:
                faultfs.crash_point("commitlog.after_append")
            if consumable:
                self.topic_queue_table[key] = qoff + 1
                if tags_code is None:
                    tags_code = schedule_tags(store_ts) if schedule_tags is not None else 0
                cq = self.cq_table.get(key) or self.cq_create(topic, qid)
                if not cq.put(phys, size, tags_code, qoff):
                    log.error("consume queue %s/%d: cannot write unit %d", topic, qid, qoff)
        return phys, size, qoff, store_ts

    def append_batch(
        self,
        topic: str,
        queue_id: int,
        tb: bytes,
        items: list[tuple[MessageToStore, bytes, int, int]],
        cq_dispatch: CQDispatch,
    ) -> tuple[int, int, int, int, list[int]] | PutMessageStatus:
        """Append records for one queue with consecutive offsets, contiguously in one segment.
        items: (msg, props_bytes, crc, tags_code). Returns (first_phys, total_size, first_qoff, store_ts,
        phys offsets)."""
        sizes = [FIXED_SIZE + len(m.body) + len(tb) + len(pb) for m, pb, _, _ in items]
        total = sum(sizes)
        if max(sizes) > self.max_message_size or total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        store_ip4, store_port = self.store_ip4, self.store_port
        phys_list: list[int] = []
        with self.lock:
            try:
                mf = self._segment_for(total)
            except OSError as e:
                log.error("commitlog: cannot create segment: %s", e)
                return PutMessageStatus.CREATE_MAPEDFILE_FAILED
            store_ts = time.time_ns() // 1_000_000
            key = (topic, queue_id)
            first_qoff = qoff = self.topic_queue_table.get(key, 0)
            pos = mf.wrote_position
            first_phys = mf.file_from_offset + pos
            # SYNC_FLUSH: encode the whole batch into one buffer and pwrite it once (see __init__)
            pad = min(-(pos + total) % OS_PAGE_SIZE, self.file_size - pos - total) if self._pad else 0
            buf = bytearray(total + pad) if self._pwrite else mf.mm  # zero padding: see __init__
            at = 0 if self._pwrite else pos
            if not self._pwrite and pos + total > mf.warm_limit:  # see append_one
                mf.warm_claim(pos + total)
            host: tuple[str, int] | None = None
            born_ip4 = b""
            for (m, pb, crc, _), size in zip(items, sizes, strict=True):
                phys = mf.file_from_offset + pos
                if m.born_host is not host:  # a batch comes from one host
                    host = m.born_host
                    born_ip4 = _ip_cache.get(host[0]) or ip4_bytes(host[0])
                encode_record_into(
                    buf, at, m.body, tb, pb, queue_id, m.flag, qoff, phys, m.sys_flag, m.born_timestamp,
                    born_ip4, m.born_host[1], store_ts, store_ip4, store_port,
                    m.reconsume_times, m.prepared_transaction_offset, crc,
                )  # fmt: skip
                phys_list.append(phys)
                pos += size
                at += size
                qoff += 1
            if self._pwrite:
                if pos + pad > mf.warm_limit:
                    mf.warm_claim(pos + pad)
                if not self._write_at(mf, buf, mf.wrote_position):
                    return PutMessageStatus.UNKNOWN_ERROR
            mf.wrote_position = pos
            mf.store_timestamp = store_ts
            self.append_ts = store_ts
            self.topic_queue_table[key] = qoff
            for (_, _, _, tags_code), size, phys, q in zip(
                items, sizes, phys_list, range(first_qoff, qoff), strict=True
            ):
                cq_dispatch(phys, size, tags_code, q, topic, queue_id, store_ts)
        return first_phys, total, first_qoff, store_ts, phys_list

    # --- staged runs (pwrite) ---
    def begin_stage(self) -> None:
        """From now on append_one stages this thread's records instead of writing each (pwrite only)."""
        if self._pwrite and not self.stage_failed:
            self._stage_owner = threading.get_ident()
            self._staging = True

    def end_stage(self) -> bool:
        """Write the staged run and stop staging; False if the write failed."""
        with self.lock:
            self._staging = False
            return self._flush_stage_locked()

    def flush_stage(self) -> None:
        """Readers of the CommitLog on the appending thread call this first: nothing staged stays unseen."""
        if self._stage_len:
            with self.lock:
                self._flush_stage_locked()

    def _flush_stage_locked(self) -> bool:
        n = self._stage_len
        if not n:
            return True
        mf = self._stage_mf
        assert mf is not None
        pos = self._stage_pos
        end = pos + n
        pad = min(-end % OS_PAGE_SIZE, self.file_size - end) if self._pad else 0  # see __init__
        buf = self._stage
        if pad:
            buf[n : n + pad] = _ZEROS[:pad]
        if end + pad > mf.warm_limit:
            mf.warm_claim(end + pad)
        self._stage_len = 0
        self._stage_mf = None
        if not self._write_at(mf, memoryview(buf)[: n + pad], pos):
            # The run's ConsumeQueue units already point at these records; with the records unwritten (and
            # never acknowledged: the group commit covers only wrote_position) the store stops taking writes
            # so nothing else lands on their offsets. Recovery drops the units past the end at restart.
            self.stage_failed = True
            self._staging = False
            log.error("commitlog: a staged run of %d bytes at %d was not written; refusing writes", n, pos)
            return False
        mf.wrote_position = end
        return True

    @staticmethod
    def _write_at(mf: MappedFile, data: memoryview | bytearray, pos: int) -> bool:
        """pwrite data at pos of the segment; False on failure (the caller then acknowledges nothing and
        leaves the wrote position where it was)."""
        try:
            n = os.pwrite(mf.fd, data, pos)
        except OSError as e:
            log.error("commitlog: write to %s at %d failed: %s", mf.path, pos, e)
            return False
        if n != len(data):
            log.error("commitlog: short write to %s at %d (%d of %d bytes)", mf.path, pos, n, len(data))
            return False
        return True

    # --- read ---
    def get_data(self, phys_offset: int, size: int) -> memoryview | None:
        self.flush_stage()
        mf = self.mfq.find_mapped_file_by_offset(phys_offset)
        if mf is None:
            return None
        return mf.slice(phys_offset - mf.file_from_offset, size)

    def get_record(self, phys_offset: int) -> memoryview | None:
        """One whole record by its offset (size read from the record), or None."""
        self.flush_stage()
        mf = self.mfq.find_mapped_file_by_offset(phys_offset)
        if mf is None:
            return None
        pos = phys_offset - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        size, magic = BLANK.unpack_from(mf.view, pos)
        if magic == BLANK_MAGIC_CODE or size < FIXED_SIZE:
            return None
        return mf.slice(pos, size)

    def pick_store_timestamp(self, phys_offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at phys_offset, -1 if it is gone."""
        mf = self.mfq.find_mapped_file_by_offset(phys_offset)
        if mf is None:
            return -1
        pos = phys_offset - mf.file_from_offset
        if pos + FIXED_SIZE > mf.wrote_position:
            return -1
        sys_flag = int.from_bytes(mf.view[pos + 36 : pos + 40], "big", signed=True)
        at = pos + (56 if not sys_flag & sf.BORNHOST_V6_FLAG else 68)
        return int.from_bytes(mf.view[at : at + 8], "big", signed=True)

    # --- lifecycle ---
    def reset_tail(self) -> None:
        self._tail = None

    def shutdown(self) -> None:
        self.end_stage()
        self.mfq.flush_until(self.mfq.get_max_offset())
        self.mfq.shutdown()
