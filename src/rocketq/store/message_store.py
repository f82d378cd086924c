# Over 600 lines: the store's one facade (put, read, query, threads); split by path is a planned follow-up.
"""MessageStore: the facade the broker drives (docs/architecture.md). Synchronous, thread-safe for puts
(one put lock) and reads (lock-free: readers see positions that only move after data is written).

Threads: AllocateMappedFile (next CommitLog segment), FlushRealTimeService or GroupCommitService (CommitLog),
FlushConsumeQueueService (CQs, index, checkpoint, stats), IndexDispatchService (IndexFile building).
The arrival listener runs on the thread that called put_*, right after the put lock is released.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import struct
import tempfile
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from rocketq.protocol.crc import body_crc, crc32
from rocketq.protocol.properties import (
    MAX_PROPERTIES_LENGTH,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SCHEDULE_TOPIC,
    decode_properties,
    properties_to_string,
)
from rocketq.protocol.record import FIXED_SIZE, MAGIC_CODE_V1, MAGIC_CODE_V2
from rocketq.protocol.record import decode_record as _decode_record

from . import faultfs, linux_aio, loop_flush, mapped_file
from .cache_release import CacheReleaseService
from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .config import BrokerRole, FlushDiskType, StoreConfig
from .consume_queue import BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE, CQ_UNIT, ConsumeQueue
from .dispatch import (
    DispatchRequest,
    IndexDispatchService,
    compute_tags_code,
    goes_to_consume_queue,
    tag_hash_code,
)
from .flush import FlushConsumeQueueService, FlushRealTimeService, GroupCommitService
from .integrity import BODY_LEN_POS_V4, SMALL_BODY, CorruptionLog, body_crc_ok, small_crc32
from .linux_aio import FdsyncContext
from .loop_flush import LoopGroupCommit
from .mapped_file_queue import AllocateMappedFileService
from .recovery import recover_commit_log
from .types import (
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

log = logging.getLogger(__name__)

_PUT_OK = PutMessageStatus.PUT_OK  # a module constant: an enum member lookup costs ~50 ns per put

_MAX_TOPIC_BYTES = 127
_CHECK = struct.Struct(">iiiiiq")  # size, magic, crc, queue id, flag, queue offset
# ... and sysflag, and BODYLEN where IPv4 hosts put it: the body CRC costs no second unpack
_CHECK_PULL = struct.Struct(">iiiiiq8xi44xi")
_V6_HOSTS = 0x10 | 0x20  # BORNHOST_V6_FLAG | STOREHOST_ADDRESS_V6_FLAG: the body sits further on
_BODY_AT = BODY_LEN_POS_V4 + 4
_MAGICS = (MAGIC_CODE_V1, MAGIC_CODE_V2)


def _record_header_ok(buf: memoryview, size: int, queue_id: int, queue_offset: int) -> bool:
    """Cheap per-record check before serving: the header must agree with the CQ unit (a bit flip in either
    must not hand out a wrong or garbled record; the body CRC does not cover the header)."""
    if size < FIXED_SIZE or len(buf) < size:
        return False
    rsize, magic, _, qid, _, qoff = _CHECK.unpack_from(buf, 0)
    return (
        rsize == size
        and (magic in (MAGIC_CODE_V1, MAGIC_CODE_V2))
        and qid == queue_id
        and qoff == queue_offset
    )


class MessageStore:
    def __init__(self, config: StoreConfig, store_host: tuple[str, int], index_service=None) -> None:
        self.config = config
        self.store_host = store_host
        self.allocator = AllocateMappedFileService(config.preallocate_commitlog)
        self.commit_log = CommitLog(config, store_host, self.allocator)
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self.commit_log.cq_table = self.consume_queue_table
        self.commit_log.cq_create = self._cq
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service = index_service
        self.index_dispatcher: IndexDispatchService | None = None
        self.flush_service: FlushRealTimeService | GroupCommitService | LoopGroupCommit | None = None
        self.cq_flush_service: FlushConsumeQueueService | None = None
        self.warm_service = None  # WarmAheadService under SYNC_FLUSH (store/warm.py)
        self.cache_release: CacheReleaseService | None = None  # commitLogPageCacheWindow > 0
        self._listener: Callable[[str, int, int], None] | None = None
        self._flush_listener: Callable[[int], None] | None = None
        self._flush_loop: asyncio.AbstractEventLoop | None = None  # set_loop_flush_listener
        self.flush_backend = ""  # SYNC_FLUSH: "native-aio" or "thread", once started
        self._flush_nowait = False  # SYNC_FLUSH and a flush listener: puts return flush_offset, no Future
        self._running = False
        self._writable = False  # running and not a slave: the put fast path checks only this
        self._shutdown = False
        self._delay_table = config.delay_level_table_ms()
        self._sync = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._topic_bytes: dict[str, bytes] = {}
        self.recovered_abnormally = False
        self._rebuild_all = False
        self._recover_expect: dict[tuple[str, int], int] = {}
        self._recover_create = False
        self.clean = None
        self.integrity = CorruptionLog()  # body CRC mismatches met on recovery and on read
        self._replica = None  # replica_appender()
        # stats
        self.put_count = 0
        self.put_bytes = 0
        self.put_failures = 0
        self.get_count = 0
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=90)
        self._started_at = time.time()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        cfg = self.config
        os.makedirs(cfg.store_path_root_dir, exist_ok=True)
        abnormal = os.path.exists(cfg.abort_path)
        self.recovered_abnormally = abnormal
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        if not self.commit_log.mfq.load():
            raise RuntimeError("commitlog segments have unexpected sizes (mapedFileSizeCommitLog changed?)")
        self._load_consume_queues()
        if self.index_service is None and cfg.message_index_enable:
            from .index_file import IndexService

            self.index_service = IndexService(
                cfg.store_path_root_dir, cfg.max_hash_slot_num, cfg.max_index_num
            )
        if self.index_service is not None:
            if abnormal:
                self._drop_unflushed_index_files()
            self.index_service.load(last_exit_ok=not abnormal)
        self._recover_create = abnormal or self._rebuild_all
        cl_files = self.commit_log.mfq.files
        cl_end_bound = cl_files[-1].file_end_offset if cl_files else 0
        for cq in self.consume_queue_table.values():
            cq.recover(cl_end_bound, cfg.max_message_size + 1024, all_files=self._recover_create)
            self._drop_unmatched_tail(cq)
        end = recover_commit_log(
            self.commit_log,
            self.checkpoint,
            abnormal or self._rebuild_all,
            cfg.check_crc_on_recover,
            self._delay_table,
            False,  # the index is rebuilt by its dispatch thread, not by this scan
            self._redispatch,
            full_scan=self._rebuild_all,
            resume_hint=self._newest_indexed_record(),
            verify=self._verify_indexed,
            on_corrupt=self.integrity.on_recover if cfg.check_crc_on_recover else None,
        )
        self._recover_expect.clear()
        cl_min = self.commit_log.min_offset
        for key, cq in self.consume_queue_table.items():
            cq.truncate_dirty_logic_files(end)
            cq.correct_min_offset(cl_min)
            self.commit_log.topic_queue_table[key] = cq.get_max_offset_in_queue()
        if self.commit_log.mfq.files:
            self.commit_log.append_ts = max(mf.store_timestamp for mf in self.commit_log.mfq.files[-3:])
        self.commit_log.confirm_offset = end
        if self.index_service is not None:
            idx = self.index_service
            idx.truncate_after(end)
            start_at = idx.end_phy_offset
            rebuild = getattr(idx, "rebuild_from_phy_offset", None)
            if rebuild is not None:
                start_at = min(start_at, rebuild)
            if start_at < cl_min or start_at > end:
                start_at = cl_min if start_at < cl_min else end
            if idx.end_phy_offset == 0 and not self._index_has_entries():
                start_at = cl_min
            self.index_dispatcher = IndexDispatchService(self.commit_log, idx, start_at, self._delay_table)
        self._create_abort_file()
        if self._sync:
            self.flush_service = self._group_commit_service()
            if isinstance(self.flush_service, LoopGroupCommit):
                # a single record's fdatasync is asked for right after its pwrite, before its queue unit
                self.commit_log.on_written = self.flush_service.request_nowait
        else:
            self.flush_service = FlushRealTimeService(
                self.commit_log,
                self.checkpoint,
                cfg.flush_interval_commitlog,
                cfg.flush_commitlog_least_pages,
                cfg.flush_commitlog_thorough_interval,
                cfg.async_writeback_bytes,
            )
        self.cq_flush_service = FlushConsumeQueueService(
            lambda: list(self.consume_queue_table.values()),
            self.commit_log,
            self.checkpoint,
            cfg.flush_interval_consume_queue,
            cfg.flush_consume_queue_least_pages,
            cfg.flush_consume_queue_thorough_interval,
            self.index_service.flush if self.index_service is not None else None,
            self._sample_stats,
        )
        from . import cleanup

        self.clean = cleanup.for_message_store(self)
        # SYNC_FLUSH: zeros on the device (cheaper fdatasync rounds); ASYNC_FLUSH storing through the
        # mapping: zeros in the page cache (cheaper first stores into each page). store/warm.py says why.
        warm_direct = self._sync
        warm_async = cfg.warm_ahead_async_enable and not self.stages_runs
        if cfg.warm_ahead_enable and cfg.warm_ahead_bytes > 0 and (warm_direct or warm_async):
            from .warm import WarmAheadService, prewarm_new_segment

            self.allocator.on_created = prewarm_new_segment(cfg.warm_ahead_bytes, warm_direct)
            self.warm_service = WarmAheadService(
                self.commit_log, cfg.warm_ahead_bytes, cfg.warm_ahead_max_rate, warm_direct
            )
            self.warm_service.start()
        if cfg.broker_role is not BrokerRole.SLAVE:
            # An empty store's first segment and its successor, created by the allocator thread now rather
            # than by the first append on the event loop (preallocation can take seconds where the filesystem
            # has no fallocate and glibc writes every block), and under SYNC_FLUSH zeroed now rather than
            # while the first messages are acknowledged (2 x warm_ahead_bytes of O_DIRECT writes and their
            # fdatasyncs). A slave's log starts at its master's offset: it creates its first segment then.
            self.commit_log.mfq.request_first_segments()
        if cfg.commitlog_page_cache_window > 0 and CacheReleaseService.supported():
            self.cache_release = CacheReleaseService(self.commit_log.mfq, cfg.commitlog_page_cache_window)
            self.cache_release.start()
        self.flush_service.start()
        self.cq_flush_service.start()
        self.clean.start()
        if self.index_dispatcher is not None:
            self.index_dispatcher.start()
        self._running = True
        self._writable = cfg.broker_role is not BrokerRole.SLAVE

    def _verify_indexed(self, topic: str, qid: int, qoff: int, phys: int, size: int, sys_flag: int) -> bool:
        """Clean restart: a record before the newest indexed one must be where its ConsumeQueue says."""
        if not goes_to_consume_queue(sys_flag, topic):
            return True
        cq = self.consume_queue_table.get((topic, qid))
        if cq is None or not cq.get_max_offset_in_queue():
            return True  # deleted topic
        first = cq.get_unit(cq.get_min_offset_in_queue())
        if first is not None and first[1] != BLANK_UNIT_SIZE and phys < first[0]:
            return True  # older than the queue (topic re-created)
        unit = cq.get_unit(qoff) if qoff >= 0 else None
        if unit is None:
            return False
        if unit[0] == phys and unit[1] == size:
            return True
        return unit[0] > phys and unit[1] != BLANK_UNIT_SIZE and self._unit_matches(unit, qid, qoff)

    def _newest_indexed_record(self) -> int | None:
        """CommitLog offset of the newest record any ConsumeQueue points at (a record boundary), or None."""
        best = None
        for cq in self.consume_queue_table.values():
            n = cq.get_max_offset_in_queue()
            unit = cq.get_unit(n - 1) if n > cq.get_min_offset_in_queue() else None
            if unit is not None and unit[1] != BLANK_UNIT_SIZE and (best is None or unit[0] > best):
                best = unit[0]
        return best

    def _drop_unflushed_index_files(self) -> None:
        """After a crash, an IndexFile that changed after the checkpoint's indexMsgTimestamp may hold a header
        newer than its entries (torn, never msync'ed): delete it (as RocketMQ does); the dispatcher rebuilds
        it from the CommitLog."""
        d = self.config.index_dir
        if not os.path.isdir(d):
            return
        limit = self.checkpoint.index_msg_timestamp if self.checkpoint is not None else 0
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not (name.isdigit() and len(name) == 17):
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(16)
                end_ts = struct.unpack(">q", head[8:16])[0] if len(head) == 16 else 1 << 62
            except OSError:
                continue
            if end_ts > limit:
                log.warning("index %s was not flushed before the crash: rebuilding it", name)
                try:
                    os.remove(path)
                except OSError:
                    continue
                if faultfs.ACTIVE is not None:
                    faultfs.ACTIVE.on_delete(path)

    def _index_has_entries(self) -> bool:
        files = getattr(self.index_service, "files", None)
        if files is None:
            return True
        return any(f.index_count > 1 for f in files())

    def _create_abort_file(self) -> None:
        path = self.config.abort_path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_file_synced(path)

    def _load_consume_queues(self) -> None:
        """Map every queue found on disk. A queue whose files are unusable (wrong size, a file missing) or
        whose head is missing while the CommitLog still starts at 0 is deleted and rebuilt from the CommitLog
        (it is derived data): that forces a full recovery scan."""
        root = self.config.consume_queue_dir
        if not os.path.isdir(root) or not os.listdir(root):
            if self.commit_log.mfq.files:  # all queues gone but messages exist: rebuild them all
                log.warning("no consume queues on disk: rebuilding them from the CommitLog")
                self._rebuild_all = True
            return
        cl_starts_at_zero = (
            bool(self.commit_log.mfq.files) and self.commit_log.mfq.files[0].file_from_offset == 0
        )
        for topic in os.listdir(root):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for q in os.listdir(tdir):
                if not q.isdigit():
                    continue
                cq = ConsumeQueue(topic, int(q), root, self.config.consume_queue_file_size)
                ok = cq.load()
                first = cq.mfq.first()
                if ok and cl_starts_at_zero and first is not None and first.file_from_offset > 0:
                    ok = False
                if not ok:
                    log.error("consume queue %s/%s is damaged: rebuilding it from the CommitLog", topic, q)
                    cq.mfq.shutdown()
                    shutil.rmtree(cq.store_path, ignore_errors=True)
                    self._rebuild_all = True
                    continue
                self.consume_queue_table[(topic, int(q))] = cq

    def _redispatch(self, req: DispatchRequest) -> bool:
        """Recovery: check a (CRC-valid) scanned record against its ConsumeQueue and add the unit if missing.
        False = the record's header is damaged: the CommitLog ends before it (spec: cut at the first invalid
        record, which keeps queue offsets gapless).

        The body CRC does not cover the header, so queue offsets are cross-checked: within the scan a queue's
        offsets must be consecutive (or restart at 0: topic re-created); a record may not claim the offset of
        another real record, nor jump further than the records that could fit before it. Queue units that
        do not describe a real record (torn CQ pages) are the CQ's fault: they are dropped and rebuilt from
        here. Records older than the queue's first unit (a topic deleted and re-created) are left alone."""
        if not goes_to_consume_queue(req.sys_flag, req.topic):
            return True
        qoff = req.consume_queue_offset
        phys = req.commit_log_offset
        key = (req.topic, req.queue_id)
        if qoff < 0:
            return False
        cq = self.consume_queue_table.get(key)
        if cq is None and not self._recover_create:
            return True  # clean shutdown: a missing queue was deleted on purpose (delete_topics)
        if cq is not None and cq.get_max_offset_in_queue():
            lo = cq.get_min_offset_in_queue()
            first = cq.get_unit(lo)
            if (
                first is not None
                and first[1] != BLANK_UNIT_SIZE
                and phys < first[0]
                and self._unit_matches(first, req.queue_id, lo)  # a torn first unit proves nothing
            ):
                return True  # older than the queue: a previous incarnation of the topic
        expect = self._recover_expect.get(key)
        if expect is not None and qoff != expect and qoff != 0:
            log.error("recovery: record at %d has queue offset %d, expected %d", phys, qoff, expect)
            return False
        if cq is not None:
            max_off = cq.get_max_offset_in_queue()
            if qoff < max_off:
                unit = cq.get_unit(qoff)
                if unit is None or (unit[0] == phys and unit[1] == req.msg_size):
                    self._recover_expect[key] = qoff + 1
                    return True  # already indexed
                if unit[1] != BLANK_UNIT_SIZE and self._unit_matches(unit, req.queue_id, qoff):
                    if unit[0] > phys:
                        return True  # a newer record reused the offset (topic re-created)
                    log.error("recovery: record at %d claims queue offset %d of another record", phys, qoff)
                    return False
                log.warning("%s/%d: units from %d do not match the CommitLog; rebuilding", *key, qoff)
                cq.truncate_to_offset(qoff)
            elif qoff > max_off and (qoff - max_off) * 91 > phys - max(cq.max_phys_end, 0):
                log.error(
                    "recovery: record at %d jumps to queue offset %d (queue ends at %d)", phys, qoff, max_off
                )
                return False
        self._recover_expect[key] = qoff + 1
        self._cq(req.topic, req.queue_id).put(phys, req.msg_size, req.tags_code, qoff)
        return True

    def _drop_unmatched_tail(self, cq: ConsumeQueue) -> None:
        """A torn CQ page can end in units that look sane but describe no record: walk back from the end to
        the newest unit that matches a record header (CommitLog as mapped, before its own recovery)."""
        lo = cq.get_min_offset_in_queue()
        off = cq.get_max_offset_in_queue()
        while off > lo:
            unit = cq.get_unit(off - 1)
            if unit is None or unit[1] == BLANK_UNIT_SIZE or self._unit_matches(unit, cq.queue_id, off - 1):
                break
            off -= 1
        if off < cq.get_max_offset_in_queue():
            log.warning(
                "%s/%d: dropping %d torn units at the end",
                cq.topic,
                cq.queue_id,
                cq.get_max_offset_in_queue() - off,
            )
            cq.truncate_to_offset(off)

    def _unit_matches(self, unit: tuple[int, int, int], queue_id: int, queue_offset: int) -> bool:
        """Does the CQ unit describe a real record (size, magic, queue id and offset agree)?"""
        buf = self._get_data(unit[0], unit[1])
        if buf is None:
            return False
        try:
            return _record_header_ok(buf, unit[1], queue_id, queue_offset)
        finally:
            buf.release()

    def _get_data(self, phys: int, size: int) -> memoryview | None:
        try:
            return self.commit_log.get_data(phys, size)
        except ValueError:  # the segment was unmapped concurrently (retention)
            return None

    def shutdown(self) -> None:
        """Stop threads, flush everything, write the checkpoint, remove the abort file."""
        if self._shutdown:
            return
        self._shutdown = True
        self._running = False
        self._writable = False
        if self.clean is not None:
            self.clean.shutdown()
        if self.index_dispatcher is not None:
            self.index_dispatcher.shutdown(drain=True)
        if self.warm_service is not None:
            self.warm_service.shutdown()
        if self.cache_release is not None:
            self.cache_release.shutdown()
        if self.flush_service is not None:
            self.flush_service.shutdown()
        if self.cq_flush_service is not None:
            self.cq_flush_service.shutdown()
        self.allocator.shutdown()
        ts = self.commit_log.append_ts
        end = self.commit_log.max_offset
        self.commit_log.shutdown()
        for cq in list(self.consume_queue_table.values()):
            cq.shutdown()
        if self.checkpoint is not None:
            if ts:
                self.checkpoint.physic_msg_timestamp = ts
                self.checkpoint.logics_msg_timestamp = ts
                self.checkpoint.physic_offset = self.checkpoint.logics_offset = end
            if self.index_service is not None:
                its = self.index_service.flush()
                if its:
                    self.checkpoint.index_msg_timestamp = its
                self.index_service.close()
            self.checkpoint.shutdown()
        try:
            os.remove(self.config.abort_path)
        except FileNotFoundError:
            pass
        if faultfs.ACTIVE is not None:
            faultfs.ACTIVE.on_delete(self.config.abort_path)
        mapped_file.retry_pending_closes()

    # ------------------------------------------------------------------ consume queues
    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.consume_queue_table.get(key)
        if cq is None:
            cq = ConsumeQueue(
                topic, queue_id, self.config.consume_queue_dir, self.config.consume_queue_file_size
            )
            self.consume_queue_table[key] = cq
        return cq

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queue_table.get((topic, queue_id))

    def _cq_dispatch(
        self, phys: int, size: int, tags_code: int, qoff: int, topic: str, qid: int, ts: int
    ) -> None:
        cq = self.consume_queue_table.get((topic, qid))
        if cq is None:
            cq = self._cq(topic, qid)
        if not cq.put(phys, size, tags_code, qoff):
            log.error("consume queue %s/%d: cannot write unit %d", topic, qid, qoff)

    # ------------------------------------------------------------------ put
    def _check(self, topic: str) -> PutMessageStatus | bytes:
        if not self._running:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.clean is not None and self.clean.disk_full:
            log.warning("put refused: the CommitLog disk is full")
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.config.broker_role is BrokerRole.SLAVE:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.commit_log.stage_failed:
            log.warning("put refused: a CommitLog write failed (restart the broker)")
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        tb = self._topic_bytes.get(topic)
        if tb is None:
            tb = topic.encode()
            if not tb or len(tb) > _MAX_TOPIC_BYTES:
                return PutMessageStatus.MESSAGE_ILLEGAL
            if len(self._topic_bytes) > 100_000:
                self._topic_bytes.clear()
            self._topic_bytes[topic] = tb
        return tb

    def _fail(self, status: PutMessageStatus) -> PutMessageResult:
        self.put_failures += 1
        return PutMessageResult(status)

    def _schedule_tags(self, props: dict[str, str]) -> Callable[[int], int]:
        table = self._delay_table
        return lambda store_ts: compute_tags_code(SCHEDULE_TOPIC, props, store_ts, table)

    def _request_flush(self, end: int) -> tuple[Future[bool] | None, int]:
        """SYNC_FLUSH: ask for a group-commit round covering end. With a flush listener the caller waits for
        end itself (returns (None, end)); otherwise it gets the store's Future (returns (future, 0))."""
        if self._flush_nowait:
            self.flush_service.request_nowait(end)  # type: ignore[union-attr]
            return None, end
        return self.flush_service.request(end), 0  # type: ignore[union-attr]

    def put_message(self, msg: MessageToStore) -> PutMessageResult:
        tb = self._topic_bytes.get(msg.topic) if self._writable else None
        if tb is None or self.clean.disk_full:
            tb = self._check(msg.topic)
            if tb.__class__ is not bytes:
                return self._fail(tb)  # type: ignore[arg-type]
        pb = msg.properties_raw
        if pb is not None:
            if len(pb) > MAX_PROPERTIES_LENGTH:
                return self._fail(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
            props = decode_properties(pb) if msg.tags_code is None else None  # only for the tags code
        else:
            props = msg.properties
            if props:
                pb = properties_to_string(props).encode()
                if len(pb) > MAX_PROPERTIES_LENGTH:
                    return self._fail(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
            else:
                pb = b""
        tags_code = msg.tags_code
        schedule = None
        if tags_code is None:
            if msg.topic == SCHEDULE_TOPIC:
                schedule = self._schedule_tags(props or {})
            else:
                tags = props.get(PROPERTY_TAGS) if props else None
                tags_code = tag_hash_code(tags) if tags else 0
        crc = crc32(msg.body) & 0x7FFFFFFF  # body_crc, inline
        commit_log = self.commit_log
        r = commit_log.append_one(
            msg.topic, msg.queue_id, msg.body, msg.flag, msg.sys_flag, msg.born_timestamp, msg.born_host,
            msg.reconsume_times, msg.prepared_transaction_offset, tb, pb, crc, tags_code, schedule,  # type: ignore[arg-type]
        )  # fmt: skip
        if r.__class__ is not tuple:
            return self._fail(r)  # type: ignore[arg-type]
        phys, size, qoff, store_ts = r  # type: ignore[misc]
        self.put_count += 1
        self.put_bytes += size
        if self._sync:
            end = phys + size
            if commit_log.flush_asked_to == end:  # asked for at the write (CommitLog.on_written): done
                fut = None
            else:
                fut, end = self._request_flush(end)
        else:
            fut, end = None, 0
        listener = self._listener
        if listener is not None:
            listener(msg.topic, msg.queue_id, qoff + 1)
        d = self.index_dispatcher
        if d is not None and d.idle:
            d.wakeup()
        return PutMessageResult(_PUT_OK, phys, size, [commit_log.msg_id(phys)], qoff, 1, store_ts, fut, end)

    def put_plain(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        reconsume_times: int,
        tags_code: int,
        properties_raw: bytes,
    ) -> tuple[str, int] | PutMessageResult:
        """put_message of MessageToStore(topic, queue_id, body, flag, {}, sys_flag, born_timestamp, born_host,
        reconsume_times, 0, tags_code, properties_raw), for the broker's send path. Under ASYNC_FLUSH a stored
        message gives (offsetMsgId, queue offset) and no objects (the result and the message are most of a
        small put's cost beside the record itself); anything else gives put_message's result."""
        tb = self._topic_bytes.get(topic) if self._writable else None
        if (
            tb is not None
            and not self._sync
            and len(properties_raw) <= MAX_PROPERTIES_LENGTH
            and not self.clean.disk_full
        ):
            commit_log = self.commit_log
            r = commit_log.append_one(
                topic, queue_id, body, flag, sys_flag, born_timestamp, born_host, reconsume_times, 0,
                tb, properties_raw, crc32(body) & 0x7FFFFFFF, tags_code, None,
            )  # fmt: skip
            if r.__class__ is not tuple:
                return self._fail(r)  # type: ignore[arg-type]
            phys, size, qoff, _ = r  # type: ignore[misc]
            # put_message's bookkeeping, inlined as there (a shared helper is one more call per put)
            self.put_count += 1
            self.put_bytes += size
            listener = self._listener
            if listener is not None:
                listener(topic, queue_id, qoff + 1)
            d = self.index_dispatcher
            if d is not None and d.idle:
                d.wakeup()
            return commit_log.msg_id(phys), qoff
        msg = MessageToStore(
            topic, queue_id, body, flag, {}, sys_flag, born_timestamp, born_host, reconsume_times, 0,
            tags_code, properties_raw,
        )  # fmt: skip
        return self.put_message(msg)

    def put_messages(self, topic: str, queue_id: int, messages: list[MessageToStore]) -> PutMessageResult:
        """Batch: one queue, consecutive offsets, written contiguously (one segment)."""
        if not messages:
            return self._fail(PutMessageStatus.MESSAGE_ILLEGAL)
        tb = self._check(topic)
        if tb.__class__ is not bytes:
            return self._fail(tb)  # type: ignore[arg-type]
        items = []
        for m in messages:
            pb = m.properties_raw
            if pb is not None:
                props = decode_properties(pb) if m.tags_code is None else None
            else:
                props = m.properties
                pb = properties_to_string(props).encode() if props else b""
            if len(pb) > MAX_PROPERTIES_LENGTH:
                return self._fail(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
            tc = m.tags_code
            if tc is None:
                tc = tag_hash_code(props.get(PROPERTY_TAGS)) if props else 0
            items.append((m, pb, body_crc(m.body), tc))
        r = self.commit_log.append_batch(topic, queue_id, tb, items, self._cq_dispatch)  # type: ignore[arg-type]
        if r.__class__ is not tuple:
            return self._fail(r)  # type: ignore[arg-type]
        first_phys, total, first_qoff, store_ts, phys_list = r  # type: ignore[misc]
        self.put_count += len(messages)
        self.put_bytes += total
        fut, end = self._request_flush(first_phys + total) if self._sync else (None, 0)
        listener = self._listener
        if listener is not None:
            listener(topic, queue_id, first_qoff + len(messages))
        d = self.index_dispatcher
        if d is not None and d.idle:
            d.wakeup()
        msg_id = self.commit_log.msg_id
        return PutMessageResult(
            PutMessageStatus.PUT_OK, first_phys, total, [msg_id(p) for p in phys_list], first_qoff,
            len(messages), store_ts, fut, end,
        )  # fmt: skip

    # ------------------------------------------------------------------ get
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
    ) -> GetMessageResult:
        """Pull semantics of spec §8 / RocketMQ's GetMessageStatus. Returned buffers are views of the mapped
        files (call release() when done)."""
        self.get_count += 1
        self.commit_log.flush_stage()  # a run of appends on this thread may still be staged: written first
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            # RocketMQ creates an empty queue here; an empty queue answers NO_MESSAGE_IN_QUEUE
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        min_off = cq.get_min_offset_in_queue()
        max_off = cq.get_max_offset_in_queue()
        if max_off == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
        if offset < min_off:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_off, min_off, max_off)
        if offset == max_off:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_off, min_off, max_off)
        try:
            units = cq.get_units(offset)
        except ValueError:  # its file was unmapped concurrently (retention)
            units = None
        if units is None:
            nxt = cq.get_max_offset_in_queue() if offset < min_off else (
                (offset * CQ_STORE_UNIT_SIZE // cq.file_size + 1) * cq.file_size // CQ_STORE_UNIT_SIZE
            )  # fmt: skip
            return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, min(nxt, max_off), min_off, max_off)
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        buffers = result.buffers
        qoffs = result.queue_offsets
        max_msg_nums = max(1, max_msg_nums)
        max_bytes = self.config.max_transfer_bytes_on_message_in_memory
        max_count = self.config.max_transfer_count_on_message_in_memory
        scan_limit = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
        n_units = min(len(units) // CQ_STORE_UNIT_SIZE, scan_limit)
        cl = self.commit_log
        cl_min = cl.min_offset
        find_file = cl.mfq.find_mapped_file_by_offset
        check = _CHECK_PULL.unpack_from
        check_crc = self.config.check_crc_on_read
        big_crc, small_crc, small, body_at = crc32, small_crc32, SMALL_BODY, _BODY_AT  # locals: per message
        v6, fixed = _V6_HOSTS, FIXED_SIZE
        # The mapped file of the previous record: consecutive units almost always point into the same
        # CommitLog file, so the file lookup and the bounds of MappedFile.slice are done once per file.
        mf = None
        mf_from = mf_end = 0
        view: memoryview | None = None
        total = 0
        count = 0
        i = 0
        removing = False
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        for phys, size, tags_code in CQ_UNIT.iter_unpack(units[: n_units * CQ_STORE_UNIT_SIZE]):
            if count >= max_msg_nums:
                break
            if count and (total + size > max_bytes or count + 1 > max_count):
                break
            i += 1
            if size == BLANK_UNIT_SIZE:
                continue
            if phys < cl_min:
                removing = True
                continue
            if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                continue
            if not mf_from <= phys < mf_end:
                mf = find_file(phys)
                if mf is None:
                    removing = True
                    continue
                mf_from = mf.file_from_offset
                mf_end = mf_from + mf.file_size
                view = mf.view
            assert mf is not None and view is not None
            pos = phys - mf_from
            if pos + size > mf.wrote_position or mf._closed:
                removing = True
                continue
            try:
                # header check before slicing (as _record_header_ok), on the file's view
                buf = None
                crc_ok = True
                if size >= FIXED_SIZE:
                    rsize, magic, crc, qid, _, qoff, sys_flag, blen = check(view, pos)
                    if rsize == size and magic in _MAGICS and qid == queue_id and qoff == offset + i - 1:
                        buf = view[pos : pos + size]
                        if check_crc:  # the body CRC: a flipped bit is never handed to a consumer
                            if sys_flag & v6:
                                crc_ok = body_crc_ok(view, pos, size)
                            elif 0 <= blen <= size - fixed:
                                b = pos + body_at
                                crc_ok = crc == (
                                    (small_crc if blen < small else big_crc)(view[b : b + blen]) & 0x7FFFFFFF
                                )
                            else:
                                crc_ok = False
            except ValueError:  # the file was unmapped concurrently (retention)
                removing = True
                mf_from = mf_end = 0
                continue
            if buf is None:
                log.error("%s/%d: record at %d does not match its queue unit; skipped", topic, queue_id, phys)
                continue
            if not crc_ok:
                buf.release()
                self.integrity.on_read(phys, f"pull {topic}/{queue_id} offset {offset + i - 1}")
                continue
            if message_filter is not None and not message_filter.is_matched_by_commit_log(buf):
                buf.release()
                continue
            buffers.append(buf)
            qoffs.append(offset + i - 1)
            total += size
            count += 1
        units.release()
        if count:
            status = GetMessageStatus.FOUND
        elif removing:
            status = GetMessageStatus.MESSAGE_WAS_REMOVING
        result.status = status
        result.next_begin_offset = offset + i
        result.message_count = count
        result.buffer_total_size = total
        return result

    # ------------------------------------------------------------------ offsets / lookups
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        return cq.get_min_offset_in_queue() if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset stored at or after timestamp_ms (the max offset if none is)."""
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp_ms, self.commit_log.pick_store_timestamp)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return -1
        unit = cq.get_unit(queue_offset)
        if unit is None or unit[1] == BLANK_UNIT_SIZE:
            return -1
        return self.commit_log.pick_store_timestamp(unit[0], unit[1])

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        unit = cq.get_unit(queue_offset) if cq is not None else None
        return unit[0] if unit is not None else -1

    def look_message_by_offset(self, commit_log_offset: int) -> memoryview | None:
        """The whole record starting at commit_log_offset (a view; None if there is none, or if its body
        fails its CRC)."""
        try:
            buf = self.commit_log.get_record(commit_log_offset)
        except ValueError:
            return None
        if buf is not None and not self._servable(buf, commit_log_offset, "lookup by offset"):
            return None
        return buf

    def _servable(self, buf: memoryview, phys: int, where: str) -> bool:
        """False (and buf released, the mismatch counted) when the record's body fails its CRC."""
        if not self.config.check_crc_on_read or body_crc_ok(buf, 0, len(buf)):
            return True
        buf.release()
        self.integrity.on_read(phys, where)
        return False

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult:
        """Messages of topic whose KEYS or UNIQ_KEY contain key, via the IndexFile service."""
        result = QueryMessageResult()
        if self.index_service is None:
            return result
        offsets, last_ts, last_phy = self.index_service.query_offsets(topic, key, max_num, begin_ts, end_ts)
        result.index_last_update_timestamp = last_ts
        result.index_last_update_phyoffset = last_phy
        for phys in offsets:
            try:
                buf = self.commit_log.get_record(phys)
            except ValueError:
                buf = None
            if buf is None or not self._servable(buf, phys, f"query {topic} by key"):
                continue
            try:
                m = _decode_record(buf)
            except ValueError:
                buf.release()
                continue
            props = m.properties
            keys = (props.get(PROPERTY_KEYS) or "").split(" ")
            if m.topic != topic or (
                key not in keys and props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != key
            ):
                buf.release()  # hash collision
                continue
            result.buffers.append(buf)
        return result

    def delete_topics(self, topics: set[str]) -> None:
        """Drop the consume queues (and queue offsets) of these topics; CommitLog data ages out normally."""
        with self.commit_log.lock:
            for key in [k for k in self.consume_queue_table if k[0] in topics]:
                cq = self.consume_queue_table.pop(key)
                cq.destroy()
                self.commit_log.topic_queue_table.pop(key, None)
        for t in topics:
            d = os.path.join(self.config.consume_queue_dir, t)
            if os.path.realpath(d).startswith(os.path.realpath(self.config.consume_queue_dir) + os.sep):
                shutil.rmtree(d, ignore_errors=True)

    def set_arrival_listener(self, fn: Callable[[str, int, int], None] | None) -> None:
        """fn(topic, queue_id, max_offset) runs on the putting thread after the CQ unit is visible; it must be
        quick and must not block (the broker's loop thread: schedule work, do not do it)."""
        self._listener = fn

    def set_flush_listener(self, fn: Callable[[int], None] | None) -> bool:
        """SYNC_FLUSH: fn(flushed_offset) runs on the group-commit thread once per fdatasync round; from then
        on put_* return result.flush_offset (await flushed_offset >= it) instead of a flush_future, and the
        caller owns waiting and syncFlushTimeout. Call before start(). False (and no effect) under
        ASYNC_FLUSH."""
        if not self._sync:
            return False
        self._flush_listener = fn
        if isinstance(self.flush_service, GroupCommitService):
            self.flush_service.round_listener = fn  # before puts stop creating futures
        self._flush_nowait = fn is not None
        return True

    def set_loop_flush_listener(self, loop: asyncio.AbstractEventLoop, fn: Callable[[int], None]) -> bool:
        """set_flush_listener, for a caller living on an asyncio loop: fn(flushed_offset) runs on the loop's
        thread. With sync_flush_native_aio (and a kernel that takes it) the loop itself drives the rounds
        (store/loop_flush.py); otherwise the group-commit thread hands each round over to the loop."""
        if not self.set_flush_listener(fn):
            return False
        self._flush_loop = loop
        return True

    def _group_commit_service(self) -> GroupCommitService | LoopGroupCommit:
        cfg = self.config
        loop, fn = self._flush_loop, self._flush_listener
        if loop is not None and fn is not None:
            ctx = self._native_aio() if cfg.sync_flush_native_aio else None
            if ctx is not None:
                self.flush_backend = "native-aio"
                return LoopGroupCommit(self.commit_log, self.checkpoint, loop, fn, ctx)  # type: ignore[arg-type]

            on_loop = fn

            def on_round(flushed: int) -> None:
                try:
                    loop.call_soon_threadsafe(on_loop, flushed)
                except RuntimeError:  # loop closed (shutdown): nobody is waiting any more
                    pass

            fn = on_round
        self.flush_backend = "thread"
        svc = GroupCommitService(self.commit_log, self.checkpoint, cfg.sync_flush_timeout)
        svc.round_listener = fn
        return svc

    def _native_aio(self) -> FdsyncContext | None:
        """An AIO context for the group commit, if an fdatasync through it works on this store's disk."""
        try:  # on the CommitLog's file system; a .tmp left by a crash right here is removed at load
            os.makedirs(self.config.commitlog_dir, exist_ok=True)
            fd, path = tempfile.mkstemp(prefix=".aio-probe-", suffix=".tmp", dir=self.config.commitlog_dir)
        except OSError as e:
            log.warning("SYNC_FLUSH: native AIO not probed (%s); fdatasync runs in a thread", e)
            return None
        try:
            os.unlink(path)
            os.write(fd, b"\0")
            why = linux_aio.probe(fd)
        finally:
            os.close(fd)
        if why is None:
            try:
                return linux_aio.FdsyncContext(loop_flush.AIO_SLOTS)
            except OSError as e:
                why = str(e)
        log.warning("SYNC_FLUSH: native AIO unavailable (%s); fdatasync runs in a thread", why)
        return None

    def hold_flush_wakeups(self) -> None:
        """SYNC_FLUSH with a flush listener: until release_flush_wakeups(), appends do not wake the
        group-commit thread (the caller releases after a run of appends, which one round then covers).
        Same thread as the appends."""
        fs = self.flush_service
        if self._flush_nowait and isinstance(fs, (GroupCommitService, LoopGroupCommit)):
            fs.hold()
            # the run's records are also written with one pwrite at its end (CommitLog.begin_stage)
            self.commit_log.begin_stage()
        elif not self._sync:
            # ASYNC_FLUSH writing with pwrite: one write for the run; the caller sends no answer before
            # release_flush_wakeups() (an acknowledged record must be in the page cache)
            self.commit_log.begin_stage()

    def release_flush_wakeups(self) -> bool:
        """End of the run: write its staged records; False if that failed (then nothing of the run may be
        acknowledged, and the store refuses writes from now on)."""
        ok = self.commit_log.end_stage()
        if not ok:
            self._writable = False  # the put fast path: every put takes _check (which refuses) now
        fs = self.flush_service
        if isinstance(fs, (GroupCommitService, LoopGroupCommit)):
            fs.release()
        return ok

    @property
    def stages_runs(self) -> bool:
        """Appends go to the file with pwrite, so a run of them can be staged into one write (the broker
        then brackets each run of pipelined requests with hold_ / release_flush_wakeups)."""
        return self.commit_log.writes_with_pwrite

    def replica_appender(self):
        """The raw-append API of a slave: CommitLog bytes from its master's HA stream (store/replica.py)."""
        if self._replica is None:
            from .replica import ReplicaAppender

            self._replica = ReplicaAppender(self)
        return self._replica

    def get_topic_queue_table(self) -> dict[tuple[str, int], int]:
        return dict(self.commit_log.topic_queue_table)

    # ------------------------------------------------------------------ properties / stats
    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def confirm_offset(self) -> int:
        # no HA yet: everything written is confirmed
        return self.commit_log.max_offset

    @property
    def flushed_phy_offset(self) -> int:
        return self.commit_log.mfq.flushed_where

    def dispatch_behind_bytes(self) -> int:
        return self.index_dispatcher.behind() if self.index_dispatcher is not None else 0

    def _sample_stats(self) -> None:
        self._samples.append((time.monotonic(), self.put_count, self.put_bytes))

    def _tps(self, window: float) -> tuple[float, float]:
        s = self._samples
        if not s:
            return 0.0, 0.0
        now = time.monotonic()
        cur = (now, self.put_count, self.put_bytes)
        old = s[0]
        for sample in s:
            if now - sample[0] <= window:
                old = sample
                break
        dt = cur[0] - old[0]
        if dt <= 0:
            return 0.0, 0.0
        return (cur[1] - old[1]) / dt, (cur[2] - old[2]) / dt

    def runtime_info(self) -> dict[str, str]:
        tps10, bps10 = self._tps(10)
        tps60, bps60 = self._tps(60)
        info = {
            "putMessageTimesTotal": str(self.put_count),
            "putMessageSizeTotal": str(self.put_bytes),
            "putMessageFailedTimes": str(self.put_failures),
            "getMessageTimesTotal": str(self.get_count),
            "putTps": f"{tps10:.2f} {tps60:.2f}",
            "putBytesPerSecond": f"{bps10:.2f} {bps60:.2f}",
            "commitLogMinOffset": str(self.min_phy_offset),
            "commitLogMaxOffset": str(self.max_phy_offset),
            "commitLogFlushedOffset": str(self.flushed_phy_offset),
            "dispatchBehindBytes": str(self.dispatch_behind_bytes()),
            "consumeQueueCount": str(len(self.consume_queue_table)),
            "bootTimestamp": str(int(self._started_at * 1000)),
            "recoveredAbnormally": str(self.recovered_abnormally).lower(),
            **self.integrity.table(),
        }
        if self.clean is not None:  # segments deleted before they expired: acknowledged messages gone
            st = self.clean.stats
            info["forcedCleanPasses"] = str(st.forced_passes)
            info["forcedCleanSegments"] = str(st.forced_segments_deleted)
            info["forcedCleanMessages"] = str(st.forced_messages_deleted)
        try:
            du = shutil.disk_usage(self.config.commitlog_dir if os.path.isdir(self.config.commitlog_dir)
                                   else self.config.store_path_root_dir)  # fmt: skip
            info["commitLogDiskRatio"] = f"{du.used / du.total:.4f}"
        except OSError:
            pass
        if self._sync and isinstance(self.flush_service, (GroupCommitService, LoopGroupCommit)):
            info["groupCommitSyncCount"] = str(self.flush_service.sync_count)
            info["groupCommitBackend"] = self.flush_backend
        if self.cache_release is not None:
            info["commitLogPageCacheReleasedOffset"] = str(self.cache_release.released)
        return info


def decode_store_properties(raw) -> dict[str, str]:
    return decode_properties(raw)
