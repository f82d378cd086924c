"""Flushing: CommitLog (async interval flush, or SYNC_FLUSH group commit) and ConsumeQueues + checkpoint.

Flushing never takes the put lock: fdatasync runs on a snapshot of the wrote position while appends go on
(the GIL is released during the syscall).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from . import mapped_file
from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .consume_queue import BLANK_UNIT_SIZE, CQ_STORE_UNIT_SIZE
from .writeback import WritebackBehind

log = logging.getLogger(__name__)


class _ServiceThread:
    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:
                log.exception("%s failed", self._thread.name)
                time.sleep(0.1)
        try:
            self.on_stop()
        except Exception:
            log.exception("%s final flush failed", self._thread.name)

    def run_once(self) -> None:
        raise NotImplementedError

    def on_stop(self) -> None:
        pass

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(10)


class FlushRealTimeService(_ServiceThread):
    """ASYNC_FLUSH: every flushIntervalCommitLog ms flush if >= flushCommitLogLeastPages pages are dirty;
    every flushCommitLogThoroughInterval ms flush whatever is dirty."""

    # With writeback behind the writer (store/writeback.py) the thread also wakes this often to start it.
    WRITEBACK_TICK = 0.01

    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint, interval_ms: int, least_pages: int,
                 thorough_ms: int, writeback_bytes: int = 0) -> None:  # fmt: skip
        super().__init__("FlushRealTimeService")
        self.cl = commit_log
        self.checkpoint = checkpoint
        self.interval = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough = thorough_ms / 1000
        self._last_thorough = time.monotonic()
        self._last_flush = self._last_thorough
        self.flush_count = 0
        self.writeback = WritebackBehind(commit_log.mfq, writeback_bytes) if writeback_bytes > 0 else None

    def flush_once(self, least_pages: int) -> None:
        ts = self.cl.append_ts  # read before the offset: every record stamped <= ts is below `end`
        end = self.cl.max_offset
        mfq = self.cl.mfq
        before = mfq.flushed_where
        if least_pages == 0:
            mfq.flush_until(end)
        else:
            mfq.flush(least_pages)
        if mfq.flushed_where != before:
            self.flush_count += 1
        if mfq.flushed_where >= end and ts:
            self.checkpoint.physic_msg_timestamp = ts
            self.checkpoint.physic_offset = end

    def run_once(self) -> None:
        wb = self.writeback
        if wb is not None:
            self._wait(min(self.interval, self.WRITEBACK_TICK))
            wb.kick(self.cl.max_offset)
            if time.monotonic() - self._last_flush < self.interval and not self._stop.is_set():
                return
        else:
            self._wait(self.interval)
        now = self._last_flush = time.monotonic()
        least = self.least_pages
        if now - self._last_thorough >= self.thorough:
            self._last_thorough = now
            least = 0
        self.flush_once(least)

    def on_stop(self) -> None:
        self.flush_once(0)


class GroupCommitService(_ServiceThread):
    """SYNC_FLUSH: each append enqueues (end offset, future); one fdatasync covers every request queued
    before it started and completes all of them. Requests not covered within syncFlushTimeout get False.

    Cheaper variant for a caller that tracks its own waiters (the broker): request_nowait() only marks the
    log dirty (no Future, no lock when the thread is already awake) and round_listener(flushed_offset) runs
    on this thread once per round that served such requests; the caller resolves (and times out) its
    waiters from it."""

    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint, timeout_ms: int) -> None:
        super().__init__("GroupCommitService")
        self.cl = commit_log
        self.checkpoint = checkpoint
        self.timeout = timeout_ms / 1000
        self._requests: deque[tuple[int, float, Future[bool]]] = deque()
        # Set by request_nowait, cleared by the thread *before* it reads the flush target: a request whose
        # record the target misses was made after the clear, so it sets the flag again (no lost round).
        self._dirty = False
        self.round_listener: Callable[[int], None] | None = None
        # hold(): request_nowait only notes that a round is wanted; release() asks for it (appender thread)
        self._held = False
        self._held_dirty = False
        self._holder = 0
        self.sync_count = 0  # number of fdatasync rounds (tests count them)
        self.acked = 0

    def request(self, end_offset: int) -> Future[bool]:
        fut: Future[bool] = Future()
        self._requests.append((end_offset, time.monotonic() + self.timeout, fut))
        if not self._wake.is_set():
            self._wake.set()
        return fut

    def request_nowait(self, end_offset: int) -> None:
        """Ask for a round covering end_offset; completion is reported to round_listener only."""
        if self._held and threading.get_ident() == self._holder:  # another thread's append is not held
            self._held_dirty = True
            return
        self._dirty = True
        if not self._wake.is_set():
            self._wake.set()

    def hold(self) -> None:
        """Appends about to come in a run: one round for all of them (a round started after the first
        would cover only it, and the next only what arrived during that fdatasync)."""
        self._holder = threading.get_ident()
        self._held = True

    def release(self) -> None:
        self._held = False
        if self._held_dirty:
            self._held_dirty = False
            self.request_nowait(0)

    def run_once(self) -> None:
        if not self._requests and not self._dirty:
            self._wait(0.01)
        self.do_commit()

    def do_commit(self) -> None:
        reqs = self._requests
        dirty = self._dirty
        if not reqs and not dirty:
            return
        self._dirty = False
        ts = self.cl.append_ts
        target = self.cl.max_offset  # covers every request already queued (their records precede it)
        mfq = self.cl.mfq
        if mfq.flushed_where < target:
            mfq.flush_until(target)
            self.sync_count += 1
            if mfq.flushed_where >= target and ts:
                self.checkpoint.physic_msg_timestamp = ts
                self.checkpoint.physic_offset = target
        flushed = mfq.flushed_where
        if dirty:
            listener = self.round_listener
            if listener is not None:
                try:
                    listener(flushed)
                except Exception:
                    log.exception("group commit round listener failed")
        now = time.monotonic()
        while reqs:
            end, deadline, fut = reqs[0]
            if end <= flushed:
                reqs.popleft()
                self.acked += 1
                if not fut.done():
                    fut.set_result(True)
            elif now > deadline:
                reqs.popleft()
                if not fut.done():
                    fut.set_result(False)
            else:
                break

    def on_stop(self) -> None:
        self._dirty = True  # a last round, so the listener sees the final flushed offset
        self.do_commit()
        while self._requests:  # nothing can flush them any more
            _, _, fut = self._requests.popleft()
            if not fut.done():
                fut.set_result(False)


class FlushConsumeQueueService(_ServiceThread):
    """Every flushIntervalConsumeQueue ms: flush ConsumeQueues (least pages, thorough every 60 s), the index
    now and then, and the checkpoint. Also samples put statistics and retries deferred unmaps."""

    def __init__(
        self,
        queues: Callable[[], list],
        commit_log: CommitLog,
        checkpoint: StoreCheckpoint,
        interval_ms: int,
        least_pages: int,
        thorough_ms: int,
        index_flush: Callable[[], int] | None = None,
        tick: Callable[[], None] | None = None,
    ) -> None:
        super().__init__("FlushConsumeQueueService")
        self.queues = queues
        self.cl = commit_log
        self.checkpoint = checkpoint
        self.interval = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough = thorough_ms / 1000
        self.index_flush = index_flush
        self.tick = tick
        self._last_thorough = time.monotonic()
        self._last_index = time.monotonic()
        self._last_top: dict[int, int] = {}  # id(queue) -> its max offset at the last round

    def flush_once(self, thorough: bool) -> None:
        ts = self.cl.append_ts  # CQ units are written inline with the append: same watermark
        end = self.cl.max_offset  # after ts: every record below it has its units written already
        least = 0 if thorough else self.least_pages
        all_flushed = True
        # Every unit of a record below `safe` is durable: a queue left with unflushed units (fewer than
        # least pages) holds back to the record its first unflushed unit points at (units are in CommitLog
        # order), so the offset advances every round, not only at the thorough flush the timestamp waits for.
        safe = end
        idle: dict[int, int] = {}
        for cq in self.queues():
            if thorough:
                cq.flush_all()
            else:
                top = cq.mfq.get_max_offset()
                # a queue that got nothing new since the last round flushes its remainder (below least
                # pages it would otherwise wait for the thorough flush, holding `safe` back meanwhile)
                cq.flush(0 if self._last_top.get(id(cq)) == top else least)
                idle[id(cq)] = top
                flushed = cq.mfq.flushed_where
                if flushed < cq.mfq.get_max_offset():
                    all_flushed = False
                    unit = cq.get_unit(flushed // CQ_STORE_UNIT_SIZE)
                    ok = unit is not None and unit[1] != BLANK_UNIT_SIZE
                    safe = min(safe, unit[0] if ok else 0)
        self._last_top = idle
        if (thorough or all_flushed) and ts:
            self.checkpoint.logics_msg_timestamp = ts
        if safe > 0:
            self.checkpoint.logics_offset = safe
        now = time.monotonic()
        if self.index_flush is not None and (thorough or now - self._last_index >= 10):
            self._last_index = now
            its = self.index_flush()
            if its:
                self.checkpoint.index_msg_timestamp = its
        self.checkpoint.flush()

    def run_once(self) -> None:
        self._wait(self.interval)
        now = time.monotonic()
        thorough = now - self._last_thorough >= self.thorough
        if thorough:
            self._last_thorough = now
        self.flush_once(thorough)
        if self.tick is not None:
            self.tick()
        mapped_file.retry_pending_closes()

    def on_stop(self) -> None:
        pass  # MessageStore.shutdown does the final flush in order (CommitLog, queues, index, checkpoint)
