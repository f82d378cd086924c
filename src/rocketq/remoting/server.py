"""RemotingServer: accepts connections and routes each request to the processor for its code."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from .channel import Channel, DeferredReply, Dispatcher, Handler
from .hook import RPCHook
from .limits import ConnectionGuard, ServerLimits

log = logging.getLogger(__name__)


class RemotingServer:
    """``server = RemotingServer(port=0); server.register_processor(code, handler); await server.start()``.

    ``server.port`` is the bound port after ``start()``. A handler is ``async def h(channel, request)``
    (runs as its own task) or a plain ``def`` (runs inline: use it for fast, non-blocking work; it may
    return an awaitable to continue asynchronously). Returning None sends no response.

    ``limits`` bounds what peers can make the server hold before any request is processed (frame size,
    buffered partial frames, frame deadline, connection counts: remoting/limits.py); ``guard`` enforces them.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        idle_timeout_s: float = 120.0,
        max_frame_size: int | None = None,
        rpc_hook: RPCHook | None = None,
        backlog: int = 1024,
        max_tasks_per_channel: int = 10_000,
        limits: ServerLimits | None = None,
        name: str = "remoting",
    ) -> None:
        self.host = host
        self.port = port
        self.idle_timeout_s = idle_timeout_s
        limits = dataclasses.replace(limits) if limits is not None else ServerLimits()
        if max_frame_size is not None:
            limits.max_frame_size = max_frame_size
            limits.max_buffered_bytes = max(limits.max_buffered_bytes, max_frame_size)
        limits.validate()
        self.limits = limits
        self.guard = ConnectionGuard(limits, name)
        self.max_frame_size = limits.max_frame_size
        self.backlog = backlog
        self._dispatcher = Dispatcher(rpc_hook, max_tasks_per_channel=max_tasks_per_channel)
        self._open_callbacks: list[Callable[[Channel], Any]] = []
        self._channels: dict[int, Channel] = {}
        self._server: asyncio.base_events.Server | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._guard_task: asyncio.Task[None] | None = None

    # -- configuration -----------------------------------------------------------------------
    def register_processor(self, code: int, handler: Handler) -> None:
        self._dispatcher.register(code, handler)

    def register_default_processor(self, handler: Handler) -> None:
        """Handles every code without its own processor (otherwise: REQUEST_CODE_NOT_SUPPORTED)."""
        self._dispatcher.register_default(handler)

    def on_channel_close(self, callback: Callable[[Channel], Any]) -> None:
        """``callback(channel)`` after a connection closed (may be a coroutine function)."""
        self._dispatcher.on_close.append(callback)

    def on_channel_open(self, callback: Callable[[Channel], Any]) -> None:
        self._open_callbacks.append(callback)

    def set_burst_hooks(self, begin: Callable[[], None], end: Callable[[], bool | None]) -> None:
        """begin() / end() around each run of pipelined requests handled together (Dispatcher.burst_hooks);
        end() runs before the run's inline answers are sent; False from it drops them and the connection."""
        self._dispatcher.burst_hooks = (begin, end)

    @property
    def rpc_hook(self) -> RPCHook | None:
        return self._dispatcher.rpc_hook

    @rpc_hook.setter
    def rpc_hook(self, hook: RPCHook | None) -> None:
        self._dispatcher.rpc_hook = hook

    @property
    def channels(self) -> list[Channel]:
        return list(self._channels.values())

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------------
    def _make_channel(self) -> Channel:
        ch = Channel(
            self._dispatcher,
            max_frame_size=self.max_frame_size,
            on_lost=self._lost,
            pause_reading_on_backpressure=True,
            guard=self.guard,
        )
        self._channels[ch.id] = ch
        for cb in self._open_callbacks:
            try:
                cb(ch)
            except Exception:
                log.exception("on_channel_open callback failed")
        return ch

    def _lost(self, ch: Channel) -> None:
        self._channels.pop(ch.id, None)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.guard.fit_fd_limit()
        self._server = await loop.create_server(
            self._make_channel, self.host, self.port, backlog=self.backlog, reuse_address=True
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        if self.idle_timeout_s and self.idle_timeout_s > 0:
            self._idle_task = loop.create_task(self._idle_scan())
        self._guard_task = loop.create_task(self._guard_scan())

    async def _guard_scan(self) -> None:
        """Frame deadlines (closes half frames older than the limit) and the guard's summary log line."""
        loop = asyncio.get_running_loop()
        guard = self.guard
        period = min(1.0, max(0.02, guard.limits.frame_timeout_s / 4))
        while True:
            await asyncio.sleep(period)
            guard.expire_frames(loop.time())
            guard.events.flush_if_due()

    async def _idle_scan(self) -> None:
        loop = asyncio.get_running_loop()
        period = max(0.05, min(self.idle_timeout_s / 4, 10.0))
        while True:
            await asyncio.sleep(period)
            deadline = loop.time() - self.idle_timeout_s
            for ch in list(self._channels.values()):
                if ch.last_active < deadline and ch.pending_count == 0 and not ch._tasks:
                    log.info("closing idle connection %s", ch.remote_addr)
                    ch.close()

    async def close(self, grace_s: float = 1.0) -> None:
        """Stop accepting, let in-flight handlers finish for up to ``grace_s``, close every connection."""
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        if self._guard_task is not None:
            self._guard_task.cancel()
            self._guard_task = None
            self.guard.events.flush()
        if self._server is not None:
            self._server.close()
        channels = list(self._channels.values())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        tasks = [t for ch in channels for t in ch._tasks if t.__class__ is not DeferredReply]
        if tasks and grace_s > 0:
            await asyncio.wait(tasks, timeout=grace_s)
        # answers still to come from the loop itself (SYNC_FLUSH sends waiting for their round)
        while loop.time() < deadline and any(
            t.__class__ is DeferredReply for ch in channels for t in ch._tasks
        ):
            await asyncio.sleep(0.01)
        for ch in channels:
            await ch.cancel_tasks()
            ch.close()
        if channels:
            await asyncio.wait([asyncio.ensure_future(ch.wait_closed()) for ch in channels], timeout=1.0)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> RemotingServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
