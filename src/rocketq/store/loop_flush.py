"""SYNC_FLUSH group commit run by the broker's event loop: each round is an fdatasync submitted through native
AIO (linux_aio.py) and completed on the loop when its eventfd turns readable.

It replaces GroupCommitService (a Python thread) when the broker waits for rounds on its loop anyway
(MessageStore.set_loop_flush_listener): the loop thread submits a round, the kernel runs the fdatasync,
the loop resolves the round's waiters. No Python thread, so no GIL hand-off or thread wake-up per round.

Grouping: with no round in flight, a request starts one at once: the fdatasync then runs while the loop
finishes the request (its queue entry, its reply bookkeeping) instead of after the loop turn. Requests made
while a round is in flight are served by the next one, started as soon as it completes (one round in flight
at a time, like the thread it replaces), so under load every round covers what arrived during the last one.
A run of appends on the loop thread (a read of pipelined sends) holds its request until the run is written
(hold/release), so it shares one round.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
from collections.abc import Callable

from . import faultfs
from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .linux_aio import FdsyncContext
from .mapped_file import MappedFile

log = logging.getLogger(__name__)

# A round may span segments (rolls since the last round); the context's slots bound how many one round
# syncs (the rest wait for the next round). More than a couple means rounds stopped for a long while.
AIO_SLOTS = 8
RETRY_AFTER_FAILURE_S = 0.1
# A round of at most this many new bytes yields the CPU to the kernel worker it woke (hand_over): its
# writeback is issued in a few tens of µs and the loop gets the CPU back while the device works. A larger
# round's writeback keeps the worker busy for longer while the loop has requests waiting (64 KiB sends, 64 in
# flight, bench/thread_probe.py: 8.3-8.75 k msg/s without the yield, 7.95 k with it on every round, 8.55 k
# with this bound).
HAND_OVER_MAX_BYTES = 256 << 10


def _file_from_offset(mf: MappedFile) -> int:
    return mf.file_from_offset


class _Round:
    __slots__ = ("failed", "files", "pending", "target", "ts")

    def __init__(self, files: list[tuple[MappedFile, int, int]], target: int, ts: int) -> None:
        self.files = files  # (segment, flushed position before, wrote position it covers)
        self.pending = len(files)
        self.target = target
        self.ts = ts
        self.failed = False


class LoopGroupCommit:
    def __init__(
        self,
        commit_log: CommitLog,
        checkpoint: StoreCheckpoint,
        loop: asyncio.AbstractEventLoop,
        listener: Callable[[int], None],
        ctx: FdsyncContext,
    ) -> None:
        self.cl = commit_log
        self.checkpoint = checkpoint
        self.loop = loop
        self.listener = listener  # fn(flushed offset), on the loop thread, once per round
        self._ctx = ctx
        self._loop_thread = 0  # known once attached
        self._want = 0  # highest end offset asked for (loop thread)
        self._round: _Round | None = None
        self._scheduled = False
        self._retry: asyncio.TimerHandle | None = None
        self._held = False
        self._held_want = 0
        self._holder = 0
        self._stopped = False
        self._lock = threading.Lock()  # the loop's reaping against shutdown's
        self.sync_count = 0  # fdatasync rounds completed (tests and runtime stats count them)
        self.failed_rounds = 0

    # -- any thread ----------------------------------------------------------------------------
    def start(self) -> None:
        self.loop.call_soon_threadsafe(self._attach)

    def request_nowait(self, end_offset: int) -> None:
        """Ask for a round covering end_offset; the listener hears of it."""
        tid = threading.get_ident()
        if tid == self._loop_thread:
            if self._held and tid == self._holder:
                if end_offset > self._held_want:
                    self._held_want = end_offset
                return
            self._ask(end_offset)
        else:
            try:
                self.loop.call_soon_threadsafe(self._ask, end_offset)
            except RuntimeError:  # loop closed: the store is shutting down; its final flush covers it
                pass

    def hold(self) -> None:
        """A run of appends on this thread follows: ask once, at release() (as GroupCommitService.hold)."""
        self._holder = threading.get_ident()
        self._held = True

    def release(self) -> None:
        self._held = False
        if self._held_want:
            end, self._held_want = self._held_want, 0
            self.request_nowait(end)

    def shutdown(self) -> None:
        """Wait for the round in flight, flush the rest synchronously, report it, detach from the loop."""
        if self._stopped:
            return
        self._stopped = True
        with self._lock:
            try:
                events = self._ctx.reap(10.0) if self._ctx.in_flight else []
            except OSError as e:
                log.error("group commit: reaping the last round failed: %s", e)
                events = []
            self._complete(events)
        mfq = self.cl.mfq
        try:
            mfq.flush_until(self.cl.max_offset)
        except OSError as e:
            log.error("group commit: final flush failed: %s", e)
        self._notify(mfq.flushed_where)
        try:
            self.loop.call_soon_threadsafe(self._detach)
        except RuntimeError:  # loop already closed: nothing is registered any more
            self._ctx.close()

    # -- loop thread --------------------------------------------------------------------------
    def _attach(self) -> None:
        self._loop_thread = threading.get_ident()
        if self._stopped:
            return
        self.loop.add_reader(self._ctx.eventfd, self._on_eventfd)
        if self._want > self.cl.mfq.flushed_where:
            self._schedule()

    def _detach(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        self.loop.remove_reader(self._ctx.eventfd)
        self._ctx.close()

    def _ask(self, end_offset: int) -> None:
        if end_offset > self._want:
            self._want = end_offset
        if self._round is None and not self._scheduled and self._retry is None:
            # Idle: start the round now; under a W=1 load the rest of the loop turn before io_submit was time
            # the device sat idle. Locked: a round's completion (or shutdown) is running: after it, then.
            lock = self._lock
            if lock.acquire(blocking=False):
                try:
                    self._submit_round()
                finally:
                    lock.release()
            else:
                self._schedule()

    def _schedule(self) -> None:
        self._scheduled = True
        self.loop.call_soon(self._start_round)

    def _start_round(self) -> None:
        self._scheduled = False
        with self._lock:
            self._submit_round()

    def _submit_round(self) -> None:
        """Under _lock: shutdown (another thread) reaps and flushes under it too."""
        if self._round is not None or self._stopped:
            return
        ts = self.cl.append_ts  # read before the positions: every record stamped <= ts is below them
        mfq = self.cl.mfq
        flushed = mfq.flushed_where
        files = mfq.files  # one snapshot (the queue replaces the list when segments come and go)
        first = max(0, bisect.bisect_right(files, flushed, key=_file_from_offset) - 1)
        todo: list[tuple[MappedFile, int, int]] = []
        target = flushed
        for seg in files[first:]:
            wrote, before = seg.wrote_position, seg.flushed_position
            if seg.closed or len(todo) == self._ctx.slots:
                break
            target = seg.file_from_offset + wrote
            if wrote > before:
                todo.append((seg, before, wrote))
            if wrote < seg.file_size:
                break
        if not todo:
            if target > flushed:
                mfq.flushed_where = target
            self._notify(mfq.flushed_where)
            return
        rnd = _Round(todo, target, ts)
        try:
            self._ctx.submit([seg.fd for seg, _, _ in todo], 1)
        except OSError as e:
            # What the kernel took still completes (and is reaped); the round reports nothing and is retried.
            rnd.pending = self._ctx.in_flight
            rnd.failed = True
            log.error("group commit: io_submit failed: %s", e)
        if rnd.pending:
            self._round = rnd
            if not rnd.failed and target - flushed <= HAND_OVER_MAX_BYTES:
                self._ctx.hand_over()  # the fdatasync starts now, not when the loop next blocks
        else:
            self._after_failure()

    def _on_eventfd(self) -> None:
        self._ctx.clear_eventfd()
        with self._lock:
            if self._stopped:
                return
            events = self._ctx.reap(0.0)
            self._complete(events)

    def _complete(self, events: list[tuple[int, int]]) -> None:
        """Account for reaped completions; when the round in flight has all of them, publish it."""
        rnd = self._round
        if rnd is None or not events:
            return
        for _, res in events:
            rnd.pending -= 1
            if res < 0:
                rnd.failed = True
                log.error("group commit: fdatasync failed: errno %d", -res)
        if rnd.pending > 0:
            return
        self._round = None
        if rnd.failed:
            self._after_failure()
            return
        active = faultfs.ACTIVE
        for seg, before, wrote in rnd.files:
            if active is not None:
                active.on_flush(seg.path, before, wrote)
            if wrote > seg.flushed_position:
                seg.flushed_position = wrote
        mfq = self.cl.mfq
        if rnd.target > mfq.flushed_where:
            mfq.flushed_where = rnd.target
        self.sync_count += 1
        if rnd.ts:
            self.checkpoint.physic_msg_timestamp = rnd.ts
            self.checkpoint.physic_offset = rnd.target
        self._notify(mfq.flushed_where)
        if not self._stopped and self._want > mfq.flushed_where and self.cl.max_offset > mfq.flushed_where:
            self._submit_round()  # what came in during this round: its own round, now

    def _after_failure(self) -> None:
        """A failed round acknowledges nothing (waiters time out: FLUSH_DISK_TIMEOUT); try again shortly."""
        self.failed_rounds += 1
        if self._stopped or self._retry is not None:
            return

        def retry() -> None:
            self._retry = None
            if self._want > self.cl.mfq.flushed_where:
                self._schedule()

        self._retry = self.loop.call_later(RETRY_AFTER_FAILURE_S, retry)

    def _notify(self, flushed: int) -> None:
        if threading.get_ident() == self._loop_thread:
            try:
                self.listener(flushed)
            except Exception:
                log.exception("group commit round listener failed")
            return
        try:
            self.loop.call_soon_threadsafe(self.listener, flushed)
        except RuntimeError:  # loop closed: nobody is waiting any more
            pass
