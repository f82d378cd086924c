"""Retention: delete old CommitLog segments, then the ConsumeQueue / IndexFile files that only point at them.

RocketMQ's rules (CleanCommitLogService + CleanConsumeQueueService), with its config names:
  - a segment expires fileReservedTime hours (72) after its last modification; the active (newest) one
  never does
  - expired segments are deleted when the hour is in deleteWhen ("04", or "04;16"), or at any hour once the
  disk
    holding the CommitLog is more than diskMaxUsedSpaceRatio (75 %) used
  - above diskSpaceCleanForciblyRatio (85 %), or when disk-full, segments are deleted even if they have not
    expired, oldest first — only with cleanFileForciblyEnable (default true, as in RocketMQ: under disk
    pressure old data goes before the broker stops accepting writes)
  - above diskSpaceWarningLevelRatio (90 %) the store is marked disk-full: put_message must refuse writes with
    PutMessageStatus.SERVICE_NOT_AVAILABLE (RocketMQ's status for "store not writeable"); the flag clears
    once usage
    drops below the level again
  - at most deleteFileBatchMax (10) segments per pass, deleteCommitLogFilesInterval (100 ms) between deletions
  - after segments went away: ConsumeQueue files whose last unit points below the new minimum CommitLog
  offset are
    deleted and each queue's min offset corrected (the store does that), IndexFiles likewise (IndexService)

The store starts CleanService as a daemon thread (check every 10 s); tests call run_once() with an injected
clock and
disk-usage function.

A forced clean (segments deleted before fileReservedTime because the disk is above
diskSpaceCleanForciblyRatio or full) deletes acknowledged messages that consumers may not have read yet. That
is RocketMQ's behaviour and stays, but never silently: each such pass logs the segments and how many messages
each queue lost, counts them (CleanupStats.forced_*: the broker's runtime info and metrics), and hands the
queues' old and new minimum offsets to on_forced_clean, where the broker works out what each consumer group
had not consumed yet.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10
HOUR_MS = 3_600_000


class StoreForCleanup(Protocol):
    """What CleanService needs from the MessageStore (all thread-safe)."""

    def commitlog_segments(self) -> list[tuple[str, int]]:
        """(path, start offset) of every CommitLog segment, oldest first; the last one is the active one."""
        ...

    def delete_commitlog_segment(self, path: str) -> bool:
        """Unmap and delete one (non-active) segment; advance min_phy_offset. False if it cannot go now."""
        ...

    @property
    def min_phy_offset(self) -> int: ...

    def delete_expired_consume_queues(self, min_phy_offset: int) -> int:
        """Delete CQ files whose units all point below min_phy_offset; correct each queue's min offset."""
        ...

    def queue_min_offsets(self) -> QueueMins:
        """(topic, queue id) -> minimum queue offset, for every queue."""
        ...


@dataclass
class CleanupStats:
    commitlog_deleted: int = 0
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    last_ratio: float = 0.0
    forced_passes: int = 0  # passes that deleted segments before they expired
    forced_segments_deleted: int = 0
    forced_messages_deleted: int = 0  # queue entries those segments held (consumed or not)


QueueMins = dict[tuple[str, int], int]
# (deleted segment paths, {(topic, queue id): (min offset before, min offset after)}) of one forced pass
ForcedCleanListener = Callable[[list[str], dict[tuple[str, int], tuple[int, int]]], None]


def disk_usage_ratio(path: str) -> float:
    """Used fraction of the filesystem holding path (as df computes it: used / (used + available))."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    avail = st.f_bavail * st.f_frsize
    total = used + avail
    return used / total if total else 0.0


def parse_delete_when(spec: str) -> set[int]:
    hours = set()
    for part in spec.replace(",", ";").split(";"):
        part = part.strip()
        if part:
            h = int(part)
            if not 0 <= h <= 23:
                raise ValueError(f"deleteWhen hour out of range: {part}")
            hours.add(h)
    return hours


class CleanService:
    def __init__(
        self,
        store: StoreForCleanup,
        config: Any,
        *,
        clock_ms: Callable[[], int] | None = None,
        disk_usage: Callable[[str], float] = disk_usage_ratio,
        sleep: Callable[[float], None] = time.sleep,
        index_service: Any = None,
        commitlog_dir: str | None = None,
        check_interval_s: float = 10.0,
    ) -> None:
        self.store = store
        self.cfg = config
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._disk_usage = disk_usage
        self._sleep = sleep
        self.index_service = (
            index_service if index_service is not None else getattr(store, "index_service", None)
        )
        self.commitlog_dir = commitlog_dir or _commitlog_dir(config)
        self.check_interval_s = check_interval_s
        self.stats = CleanupStats()
        self.disk_full = False  # read by put_message without a lock (a plain bool is atomic enough)
        self.manual_delete_requests = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_min_phy = -1
        self.on_forced_clean: ForcedCleanListener | None = None

    # ---------------------------------------------------------------- config (RocketMQ names and defaults)
    def _opt(self, name: str, default: Any) -> Any:
        return getattr(self.cfg, name, default)

    @property
    def delete_hours(self) -> set[int]:
        return parse_delete_when(self._opt("delete_when", "04"))

    # ---------------------------------------------------------------- thread
    def start(self) -> None:
        self.check_disk()  # a store opened on an already-full disk refuses writes from its first put
        self._thread = threading.Thread(target=self._run, name="CleanService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.check_interval_s):
            try:
                self.run_once()
            except Exception:  # keep the service alive; a failed pass is retried next time
                log.exception("clean service pass failed")

    def request_delete(self) -> None:
        """Admin "deleteExpiredCommitLog": run the next passes regardless of deleteWhen (RocketMQ: 20
        passes)."""
        self.manual_delete_requests = 20

    # ---------------------------------------------------------------- one pass
    def check_disk(self) -> float:
        """Update disk_full; return the used ratio of the CommitLog disk (0..1)."""
        try:
            ratio = self._disk_usage(self.commitlog_dir)
        except OSError:
            ratio = 0.0
        root = getattr(self.cfg, "store_path_root_dir", None)
        if root and os.path.realpath(root) != os.path.realpath(self.commitlog_dir):
            try:
                ratio = max(ratio, self._disk_usage(root))
            except OSError:
                pass
        self.stats.last_ratio = ratio
        warn = self._opt("disk_space_warning_level_ratio", 90) / 100
        full = ratio > warn
        if full != self.disk_full:
            if full:
                log.error(
                    "disk %.1f%% used (> %.0f%%): store refuses writes until space returns",
                    ratio * 100,
                    warn * 100,
                )
            else:
                log.warning("disk %.1f%% used: store writeable again", ratio * 100)
            self.disk_full = full
        return ratio

    def run_once(self) -> int:
        """One retention pass; returns the number of CommitLog segments deleted."""
        ratio = self.check_disk()
        now = self._clock_ms()
        hour = time.localtime(now / 1000).tm_hour
        time_up = hour in self.delete_hours
        space_to_delete = ratio > self._opt("disk_max_used_space_ratio", 75) / 100
        # RocketMQ: cleanFileForciblyEnable gates deleting unexpired segments, also when the disk is full
        clean_immediately = self._opt("clean_file_forcibly_enable", True) and (
            ratio > self._opt("disk_space_clean_forcibly_ratio", 85) / 100 or self.disk_full
        )
        manual = self.manual_delete_requests > 0
        if manual:
            self.manual_delete_requests -= 1
        deleted = 0
        forced: list[str] = []
        before: QueueMins = {}
        if time_up or space_to_delete or manual:
            reserved_ms = int(self._opt("file_reserved_time", 72) * HOUR_MS)
            if clean_immediately:
                before = self._queue_mins()
            deleted = self._delete_segments(now, reserved_ms, clean_immediately, forced)
        self._clean_derived()
        if forced:
            self._report_forced(forced, before, ratio)
        if deleted:
            self.check_disk()
        return deleted

    def _queue_mins(self) -> QueueMins:
        fn = getattr(self.store, "queue_min_offsets", None)
        return fn() if fn is not None else {}

    def _report_forced(self, paths: list[str], before: QueueMins, ratio: float) -> None:
        after = self._queue_mins()
        lost = {k: (lo, after.get(k, lo)) for k, lo in before.items() if after.get(k, lo) > lo}
        messages = sum(hi - lo for lo, hi in lost.values())
        st = self.stats
        st.forced_passes += 1
        st.forced_segments_deleted += len(paths)
        st.forced_messages_deleted += messages
        worst = sorted(lost.items(), key=lambda kv: kv[1][0] - kv[1][1])[:10]
        log.warning(
            "forced clean: disk %.1f%% used (diskSpaceCleanForciblyRatio %s%%): deleted %d CommitLog "
            "segment(s) before fileReservedTime expired (%s); the pass removed %d messages from %d queues%s",
            ratio * 100, self._opt("disk_space_clean_forcibly_ratio", 85), len(paths),
            ", ".join(os.path.basename(p) for p in paths), messages, len(lost),
            "; most: " + ", ".join(f"{t}/{q} {hi - lo}" for (t, q), (lo, hi) in worst) if worst else "",
        )  # fmt: skip
        listener = self.on_forced_clean
        if listener is not None and lost:
            try:
                listener(paths, lost)
            except Exception:
                log.exception("forced clean listener failed")

    def _delete_segments(
        self, now: int, reserved_ms: int, at_once: bool, forced: list[str] | None = None
    ) -> int:
        segments = self.store.commitlog_segments()
        interval_s = self._opt("delete_commit_log_files_interval", 100) / 1000
        batch_max = self._opt("delete_file_batch_max", DELETE_FILES_BATCH_MAX)
        deleted = 0
        for path, _start in segments[:-1]:  # never the active segment
            if deleted >= batch_max:
                break
            try:
                mtime_ms = int(os.path.getmtime(path) * 1000)
            except FileNotFoundError:
                continue
            if now < mtime_ms + reserved_ms and not at_once:
                break  # segments are in age order: the rest are younger
            if not self.store.delete_commitlog_segment(path):
                break  # in use; keep order (never leave a hole in the CommitLog)
            deleted += 1
            if now < mtime_ms + reserved_ms:  # deleted only because the disk is (nearly) full
                if forced is not None:
                    forced.append(path)
                log.warning("retention: deleted unexpired CommitLog segment %s (forced clean)", path)
            else:
                log.info("retention: deleted CommitLog segment %s", path)
            if interval_s > 0 and deleted < batch_max:
                self._sleep(interval_s)
        self.stats.commitlog_deleted += deleted
        return deleted

    def _clean_derived(self) -> None:
        min_phy = self.store.min_phy_offset
        if min_phy == self._last_min_phy:
            return
        n = self.store.delete_expired_consume_queues(min_phy)
        self.stats.consume_queue_files_deleted += n or 0
        if self.index_service is not None:
            self.stats.index_files_deleted += self.index_service.delete_files_before(min_phy)
        self._last_min_phy = min_phy


class MessageStoreAdapter:
    """StoreForCleanup over rocketq.store.MessageStore's parts (commit_log.mfq, consume_queue_table)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def commitlog_segments(self) -> list[tuple[str, int]]:
        return [(mf.path, mf.file_from_offset) for mf in list(self.store.commit_log.mfq.files)]

    def delete_commitlog_segment(self, path: str) -> bool:
        mfq = self.store.commit_log.mfq
        files = mfq.files
        if len(files) < 2 or files[0].path != path:
            return False  # only ever the oldest, never the active one
        return len(mfq.delete_first_files(1)) == 1

    @property
    def min_phy_offset(self) -> int:
        return self.store.min_phy_offset

    def delete_expired_consume_queues(self, min_phy_offset: int) -> int:
        n = 0
        for cq in list(self.store.consume_queue_table.values()):
            n += cq.delete_expired_file(min_phy_offset)
            first = cq.mfq.first()
            if first is not None and cq.min_logic_offset < first.file_from_offset:
                # the queue's minimum may not point into a deleted file (notes-store-faults.md §5.7)
                cq.min_logic_offset = first.file_from_offset
                cq.correct_min_offset(min_phy_offset)
        return n

    def queue_min_offsets(self) -> QueueMins:
        return {k: cq.get_min_offset_in_queue() for k, cq in list(self.store.consume_queue_table.items())}


def for_message_store(store: Any, **kwargs: Any) -> CleanService:
    """The CleanService a MessageStore starts: `self.clean = cleanup.for_message_store(self)`."""
    kwargs.setdefault("index_service", getattr(store, "index_service", None))
    interval_ms = getattr(store.config, "clean_resource_interval", 10_000)
    kwargs.setdefault("check_interval_s", max(interval_ms, 100) / 1000)
    return CleanService(MessageStoreAdapter(store), store.config, **kwargs)


def _commitlog_dir(config: Any) -> str:
    d = getattr(config, "commitlog_dir", None)
    if d:
        return d
    return getattr(config, "store_path_commitlog", None) or os.path.join(
        config.store_path_root_dir, "commitlog"
    )
