"""SYNC_FLUSH acknowledgements on the event loop without a thread hand-off per message.

The store reports each fdatasync round once, on the loop (MessageStore.set_loop_flush_listener: the loop
drives the rounds through native AIO, or the group-commit thread hands each over with one
call_soon_threadsafe); advance() then resolves, in offset order, every waiter that round covered. A waiter
not covered within syncFlushTimeout is answered False (the send answers FLUSH_DISK_TIMEOUT): checked after
every round, as the store's own requests are, and by one loop timer in case rounds stop coming (a stalled
disk), as RocketMQ's waiting side does.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from rocketq.remoting.channel import flush_deferred

log = logging.getLogger(__name__)

FlushCallback = Callable[[bool], None]


class FlushWaiter:
    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self._loop = loop
        self.timeout = timeout_s
        # (end offset, deadline in loop time, callback); appended in put order, so offsets ascend
        self._q: deque[tuple[int, float, FlushCallback]] = deque()
        self.flushed = 0  # highest flushed offset reported so far (loop thread)
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._q)

    # -- loop thread ------------------------------------------------------------------------------
    def add(self, end_offset: int, callback: FlushCallback) -> None:
        """callback(True) once flushed_offset >= end_offset, else callback(False) after the timeout.
        Called inline when already covered."""
        if end_offset <= self.flushed:
            callback(True)
            return
        deadline = self._loop.time() + self.timeout
        self._q.append((end_offset, deadline, callback))
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._on_timer)

    def set_timeout(self, timeout_s: float) -> None:
        """syncFlushTimeout changed at runtime (UPDATE_BROKER_CONFIG). Sends waiting now wait at most the new
        timeout from now, or their old deadline if that is sooner; clamping keeps the deadlines ascending in
        the queue, which the expiry walk relies on."""
        self.timeout = timeout_s
        latest = self._loop.time() + timeout_s
        q = self._q
        if q and q[-1][1] > latest:
            self._q = deque((end, min(d, latest), cb) for end, d, cb in q)
        if self._timer is not None:  # a timer armed for an old, later deadline would answer late
            self._timer.cancel()
            self._timer = None
        if self._q:
            self._timer = self._loop.call_at(self._q[0][1], self._on_timer)

    def advance(self, flushed_offset: int) -> None:
        if flushed_offset > self.flushed:
            self.flushed = flushed_offset
        q = self._q
        while q and q[0][0] <= flushed_offset:
            self._call(q.popleft()[2], True)
        if q:
            self._expire(self._loop.time())
        flush_deferred()  # this round's answers leave now, not after the reads the loop handles next

    def _expire(self, now: float) -> None:
        q = self._q
        while q and q[0][1] <= now:
            self._call(q.popleft()[2], False)

    def _on_timer(self) -> None:
        self._timer = None
        self._expire(self._loop.time() + 0.001)  # timers may fire up to a clock tick early
        flush_deferred()
        if self._q:
            self._timer = self._loop.call_at(self._q[0][1], self._on_timer)

    @staticmethod
    def _call(cb: FlushCallback, ok: bool) -> None:
        try:
            cb(ok)
        except Exception:
            log.exception("flush waiter callback failed")

    def close(self) -> None:
        """Answer everyone still waiting with False (the store is going away)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        q, self._q = self._q, deque()
        for _, _, cb in q:
            self._call(cb, False)
