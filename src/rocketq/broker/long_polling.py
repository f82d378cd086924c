"""Held pull requests (long polling): answered when a message arrives in their queue or at their deadline.

The store's arrival listener may run on a store thread; it only marks the queue and schedules one
wake-up on the event loop (call_soon_threadsafe), so the append path stays cheap.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import Channel

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class HeldPull:
    channel: Channel
    request: RemotingCommand
    offset: int
    deadline: float
    future: asyncio.Future[RemotingCommand | None]
    timer: asyncio.TimerHandle | None = None


# (channel, request) -> response, without suspending again
Repull = Callable[[Channel, RemotingCommand], RemotingCommand | None]


class PullRequestHoldService:
    def __init__(self, repull: Repull, max_offset: Callable[[str, int], int]) -> None:
        self._repull = repull
        self._max_offset = max_offset
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._pending: set[tuple[str, int]] = set()
        self._pending_lock = threading.Lock()
        self._wake_scheduled = False
        self._scan_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._scan_task = self._loop.create_task(self._scan())

    def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
        for reqs in self._held.values():
            for h in reqs:
                if h.timer is not None:
                    h.timer.cancel()
                if not h.future.done():
                    h.future.set_result(None)
        self._held.clear()

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self._held.values())

    async def hold(
        self,
        topic: str,
        queue_id: int,
        channel: Channel,
        request: RemotingCommand,
        offset: int,
        timeout_s: float,
    ) -> RemotingCommand | None:
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand | None] = loop.create_future()
        held = HeldPull(channel, request, offset, loop.time() + timeout_s, fut)
        key = (topic, queue_id)
        self._held.setdefault(key, []).append(held)
        held.timer = loop.call_later(timeout_s, self._expire, key, held)
        # a message may have landed between the store read and now
        if self._max_offset(topic, queue_id) > offset:
            self._wake_key(key)
        return await fut

    # -- wake-ups ----------------------------------------------------------------------------
    def arrival_listener(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Store callback (any thread)."""
        if not self._held:
            return
        key = (topic, queue_id)
        loop = self._loop
        if loop is None:
            return
        with self._pending_lock:
            self._pending.add(key)
            if self._wake_scheduled:
                return
            self._wake_scheduled = True
        if threading.get_ident() == self._loop_thread:
            loop.call_soon(self._drain_pending)
        else:
            try:
                loop.call_soon_threadsafe(self._drain_pending)
            except RuntimeError:  # loop closed during shutdown
                pass

    def _drain_pending(self) -> None:
        with self._pending_lock:
            keys, self._pending = self._pending, set()
            self._wake_scheduled = False
        for key in keys:
            self._wake_key(key)

    def _wake_key(self, key: tuple[str, int]) -> None:
        reqs = self._held.get(key)
        if not reqs:
            return
        max_off = self._max_offset(*key)
        keep: list[HeldPull] = []
        for h in reqs:
            if h.future.done():
                continue
            if max_off > h.offset:
                self._answer(h)
            else:
                keep.append(h)
        if keep:
            self._held[key] = keep
        else:
            self._held.pop(key, None)

    def _expire(self, key: tuple[str, int], held: HeldPull) -> None:
        reqs = self._held.get(key)
        if reqs is not None:
            try:
                reqs.remove(held)
            except ValueError:
                pass
            if not reqs:
                self._held.pop(key, None)
        if not held.future.done():
            self._answer(held)

    def _answer(self, h: HeldPull) -> None:
        if h.timer is not None:
            h.timer.cancel()
            h.timer = None
        if h.channel.closed:
            h.future.set_result(None)
            return
        try:
            resp = self._repull(h.channel, h.request)
        except Exception as exc:  # answered as SYSTEM_ERROR by the channel
            h.future.set_exception(exc)
            return
        h.future.set_result(resp)

    async def _scan(self) -> None:
        """Safety net: re-check every held queue each second (lost wake-ups, closed channels)."""
        while True:
            await asyncio.sleep(1.0)
            for key in list(self._held):
                reqs = self._held.get(key)
                if reqs:
                    for h in [h for h in reqs if h.channel.closed and not h.future.done()]:
                        reqs.remove(h)
                        if h.timer is not None:
                            h.timer.cancel()
                        h.future.set_result(None)
                    self._wake_key(key)
