"""RemotingClient: one shared connection per address, request/response by opaque."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from rocketq.protocol.frame import MAX_FRAME_SIZE, RemotingCommand

from .channel import Channel, Dispatcher, Handler
from .errors import RemotingConnectError
from .hook import RPCHook

log = logging.getLogger(__name__)


def split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RemotingConnectError(addr, "address must be HOST:PORT")
    return host.strip("[]"), int(port)


class RemotingClient:
    """``client = RemotingClient(); resp = await client.invoke("127.0.0.1:9876", request, 3.0)``.

    Connections are opened lazily, shared by all callers, and re-opened on the next call after they
    failed or closed. Requests the server sends to us are answered by processors registered here.
    """

    def __init__(
        self,
        rpc_hook: RPCHook | None = None,
        *,
        connect_timeout_s: float = 3.0,
        max_frame_size: int = MAX_FRAME_SIZE,
        coalesce_writes: bool = True,
    ) -> None:
        self.rpc_hook = rpc_hook
        # Batch the requests many tasks send in one loop turn into one send() (costs one loop turn).
        self.coalesce_writes = coalesce_writes
        self.connect_timeout_s = connect_timeout_s
        self.max_frame_size = max_frame_size
        # Processors for server-initiated requests. The hook is a client-side concern here, so the
        # dispatcher gets none.
        self._dispatcher = Dispatcher()
        self._channels: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Future[Channel]] = {}
        self._closed = False

    def register_processor(self, code: int, handler: Handler) -> None:
        self._dispatcher.register(code, handler)

    def register_default_processor(self, handler: Handler) -> None:
        self._dispatcher.register_default(handler)

    def on_channel_close(self, callback: Callable[[Channel], Any]) -> None:
        self._dispatcher.on_close.append(callback)

    # -- connections -------------------------------------------------------------------------
    async def get_channel(self, addr: str, timeout_s: float | None = None) -> Channel:
        ch = self._channels.get(addr)
        if ch is not None and not ch.closed:
            return ch
        if self._closed:
            raise RemotingConnectError(addr, "client closed")
        fut = self._connecting.get(addr)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._connecting[addr] = fut
            try:
                ch = await self._connect(addr, self.connect_timeout_s if timeout_s is None else timeout_s)
            except BaseException as exc:
                self._connecting.pop(addr, None)
                if not fut.done():
                    fut.set_exception(
                        exc if isinstance(exc, Exception) else RemotingConnectError(addr, "cancelled")
                    )
                    fut.exception()  # mark retrieved: nobody else may be waiting
                raise
            self._connecting.pop(addr, None)
            self._channels[addr] = ch
            fut.set_result(ch)
            return ch
        return await asyncio.shield(fut)

    async def _connect(self, addr: str, timeout_s: float) -> Channel:
        host, port = split_addr(addr)
        loop = asyncio.get_running_loop()

        def factory() -> Channel:
            return Channel(
                self._dispatcher,
                max_frame_size=self.max_frame_size,
                on_lost=self._lost,
                coalesce_writes=self.coalesce_writes,
            )

        try:
            _, ch = await asyncio.wait_for(loop.create_connection(factory, host, port), timeout_s)
        except TimeoutError:
            raise RemotingConnectError(addr, f"timed out after {timeout_s:g} s") from None
        except OSError as exc:
            raise RemotingConnectError(addr, exc.strerror or str(exc)) from None
        if self._closed:
            ch.close()
            raise RemotingConnectError(addr, "client closed")
        ch.attrs["addr"] = addr
        return ch

    def _lost(self, ch: Channel) -> None:
        addr = ch.attrs.get("addr")
        if addr is not None and self._channels.get(addr) is ch:
            del self._channels[addr]

    def close_channel(self, addr: str) -> None:
        ch = self._channels.pop(addr, None)
        if ch is not None:
            ch.close()

    # -- requests ----------------------------------------------------------------------------
    def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float = 3.0
    ) -> Coroutine[Any, Any, RemotingCommand]:
        """Send ``request`` and return the response (await the result); raises RemotingTimeoutError,
        RemotingConnectError or RemotingSendRequestError."""
        ch = self._channels.get(addr)
        if ch is not None and not ch.closed and self.rpc_hook is None:
            # the connection's own coroutine: one coroutine less per request than awaiting it in _invoke
            return ch.invoke(request, timeout_s)
        return self._invoke(addr, request, timeout_s)

    async def _invoke(self, addr: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        ch = self._channels.get(addr)
        if ch is None or ch.closed:
            loop = asyncio.get_running_loop()
            start = loop.time()
            ch = await self.get_channel(addr, min(self.connect_timeout_s, timeout_s))
            timeout_s = max(0.001, timeout_s - (loop.time() - start))
        hook = self.rpc_hook
        if hook is None:
            return await ch.invoke(request, timeout_s)
        hook.do_before_request(addr, request)
        response = await ch.invoke(request, timeout_s)
        hook.do_after_response(addr, request, response)
        return response

    def start_invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float = 3.0
    ) -> Awaitable[RemotingCommand]:
        """invoke() whose request leaves now when the connection is up (Channel.send_request), so the
        caller can work until it awaits the answer; otherwise (connecting) the same as invoke()."""
        ch = self._channels.get(addr)
        if ch is None or ch.closed:
            return asyncio.ensure_future(self.invoke(addr, request, timeout_s))
        hook = self.rpc_hook
        if hook is None:
            return ch.send_request(request, timeout_s)
        hook.do_before_request(addr, request)
        fut = ch.send_request(request, timeout_s)

        async def after() -> RemotingCommand:
            response = await fut
            hook.do_after_response(addr, request, response)
            return response

        return asyncio.ensure_future(after())

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        ch = self._channels.get(addr)
        if ch is None or ch.closed:
            ch = await self.get_channel(addr)
        if self.rpc_hook is not None:
            self.rpc_hook.do_before_request(addr, request)
        ch.invoke_oneway(request)

    async def close(self) -> None:
        self._closed = True
        channels = list(self._channels.values())
        self._channels.clear()
        for ch in channels:
            ch.close()
        for ch in channels:
            await ch.cancel_tasks()
        if channels:
            await asyncio.wait([asyncio.ensure_future(ch.wait_closed()) for ch in channels], timeout=1.0)

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
