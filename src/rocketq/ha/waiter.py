"""SYNC_MASTER acknowledgements: sends wait, on the event loop, until enough slaves acknowledged their bytes.

Grouped like the SYNC_FLUSH group commit (broker/flush_waiter.py): waiters queue in put order (ascending end
offsets) and every slave report walks the queue once, releasing each send its acknowledgements cover. A send
needs ``needed`` slaves whose acknowledged offset reached its end (RocketMQ's GroupTransferService counts
acks per connection the same way). A waiter not released within slaveTimeout is answered False
(FLUSH_SLAVE_TIMEOUT), by the walk after a report or by one loop timer when reports stop coming.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from rocketq.remoting.channel import flush_deferred

log = logging.getLogger(__name__)

ReplicaCallback = Callable[[bool], None]


class ReplicaWaiter:
    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self._loop = loop
        self.timeout = timeout_s
        # (end offset, slaves needed, deadline, callback), in put order
        self._q: deque[tuple[int, int, float, ReplicaCallback]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self.released = 0
        self.timed_out = 0

    def __len__(self) -> int:
        return len(self._q)

    def add(self, end_offset: int, needed: int, acks: list[int], callback: ReplicaCallback) -> None:
        """callback(True) once ``needed`` of the acks reach end_offset (at once if they already do)."""
        if _covered(end_offset, needed, acks):
            self.released += 1
            callback(True)
            return
        deadline = self._loop.time() + self.timeout
        self._q.append((end_offset, needed, deadline, callback))
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._on_timer)

    def advance(self, acks: list[int]) -> None:
        """The slaves' acknowledged offsets changed: release what they cover, in order."""
        q = self._q
        if not q:
            return
        best = max(acks, default=-1)
        while q:
            end, needed, _, cb = q[0]
            if end > best or not _covered(end, needed, acks):
                break
            q.popleft()
            self.released += 1
            _call(cb, True)
        if q:
            self._expire(self._loop.time())
        flush_deferred()  # the answers released here leave now, not after the reads the loop handles next

    def set_timeout(self, timeout_s: float) -> None:
        self.timeout = timeout_s

    def _expire(self, now: float) -> None:
        q = self._q
        while q and q[0][2] <= now:
            cb = q.popleft()[3]
            self.timed_out += 1
            _call(cb, False)

    def _on_timer(self) -> None:
        self._timer = None
        self._expire(self._loop.time() + 0.001)  # timers may fire up to a clock tick early
        flush_deferred()
        if self._q:
            self._timer = self._loop.call_at(self._q[0][2], self._on_timer)

    def close(self) -> None:
        """Answer everyone still waiting with False (the broker is going away)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        q, self._q = self._q, deque()
        for _, _, _, cb in q:
            _call(cb, False)


def _covered(end: int, needed: int, acks: list[int]) -> bool:
    n = 0
    for a in acks:
        if a >= end:
            n += 1
            if n >= needed:
                return True
    return False


def _call(cb: ReplicaCallback, ok: bool) -> None:
    try:
        cb(ok)
    except Exception:
        log.exception("replica waiter callback failed")
