# Over 600 lines on purpose: one connection's hot path (decode, dispatch, replies) stays in one module.
"""One remoting connection (either side): frame decoding, request dispatch, pending-response futures.

Both the server and the client use :class:`Channel`; the only difference is who created the transport
and which :class:`Dispatcher` answers the peer's requests. Either side can therefore issue requests on
the same connection (the broker calls CHECK_TRANSACTION_STATE etc. on a client's channel).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Union

from rocketq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode, SerializeType
from rocketq.protocol.frame import MAX_FRAME_SIZE, FrameDecoder, ProtocolError, RemotingCommand

from .errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from .hook import RPCHook
from .limits import _BACKLOG, _WRITE, ConnectionGuard, EventSummary

log = logging.getLogger(__name__)
# malformed frames on connections without a server's guard (the client side): one line per minute at most
_client_events = EventSummary(60.0, "remoting client")

HandlerResult = Union[RemotingCommand, None, Awaitable[RemotingCommand | None]]  # noqa: UP007
# async def handler(channel, request) -> RemotingCommand | None, or a plain def (run inline) that returns
# a response, None, or an awaitable for a slow path (scheduled as a task).
Handler = Callable[["Channel", RemotingCommand], HandlerResult]

_channel_ids = itertools.count(1)
_JOIN_LIMIT = 64 * 1024
# A read holding many pipelined requests answers them in chunks of this many frames, not all at the end:
# a closed-loop client then works on the first answers while we handle the rest (one send per 64 answers
# made the two ends take turns, each idle while the other worked through the whole window).
# Requests coalesced in one loop turn leave at least every this many buffers (16 frames with a body): a peer
# that handles pipelined requests in runs can start on the first ones while the rest are still being issued.
_WQ_FLUSH_PARTS = 32
_BURST_FRAMES = 16  # pipelined requests handled per loop turn
_BACKLOG_PAUSE = 4096  # frames waiting for their turn before the connection stops being read


def _error(request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    """An error response: always a JSON header (clients that sent ROCKETMQ headers still parse it)."""
    resp = request.response(code, remark)
    resp.serialize_type = SerializeType.JSON
    return resp


def _send(transport: Any, parts: list[Any]) -> None:
    # Many small frames: one joined write is cheaper than writelines over them. Large bodies (mapped
    # file slices) keep their zero-copy path.
    if len(parts) > 1 and sum(map(len, parts)) <= _JOIN_LIMIT:
        transport.write(b"".join(parts))
    else:
        transport.writelines(parts)


_INF = float("inf")


# Channels whose coalesced answers wait in _wq for the end of the loop turn; flush_deferred() sends them
# earlier (loop thread only).
_coalescing: set[Channel] = set()
_UNSET: Any = object()


def flush_deferred() -> None:
    """Send every channel's coalesced answers now instead of at the end of the loop turn: called after a
    batch of DeferredReply.resolve() calls (a SYNC_FLUSH round), so that they do not wait behind the read
    events the loop handles before that turn ends."""
    chs = list(_coalescing)
    _coalescing.clear()
    for ch in chs:
        ch._flush_wq()


class DeferredReply:
    """What a handler returns when its answer comes later from the loop thread (a SYNC_FLUSH send is
    answered when its fdatasync round is reported). resolve() queues the answer at once — an
    asyncio.Future's done callbacks would run a loop turn later, after the loop has handled whatever
    pipelined requests arrived meanwhile — and flush_deferred() sends the queued answers."""

    __slots__ = ("_channel", "_request", "_response", "cancelled")

    def __init__(self) -> None:
        self._channel: Channel | None = None
        self._request: RemotingCommand | None = None
        self._response: RemotingCommand | None = _UNSET
        self.cancelled = False

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    def resolve(self, response: RemotingCommand | None) -> None:
        ch = self._channel
        if ch is None:  # answered before the handler returned: the channel replies when it gets it
            self._response = response
        elif not self.cancelled:
            ch._deferred_done(self, response)


def _fmt_addr(sockaddr: Any) -> str:
    if isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
        return f"{sockaddr[0]}:{sockaddr[1]}"
    return str(sockaddr) if sockaddr else ""


class Dispatcher:
    """Maps request codes to handlers. Coroutine functions run as their own task (so a held
    long-poll never delays later requests on the connection); plain functions run inline."""

    __slots__ = ("_default", "_processors", "burst_hooks", "max_tasks_per_channel", "on_close", "rpc_hook")

    def __init__(self, rpc_hook: RPCHook | None = None, *, max_tasks_per_channel: int = 10_000) -> None:
        self._processors: dict[int, tuple[Handler, bool]] = {}
        self._default: tuple[Handler, bool] | None = None
        self.rpc_hook = rpc_hook
        self.on_close: list[Callable[[Channel], Any]] = []
        # (begin, end) called around each run of pipelined requests handled in one go (up to _BURST_FRAMES
        # of one read): the broker stages the run's records into one write made in end(), before any of
        # the run's answers leaves, and holds its group-commit wake-ups until then, so a SYNC_FLUSH round
        # covers the run instead of racing the appends one message at a time.
        self.burst_hooks: tuple[Callable[[], None], Callable[[], bool | None]] | None = None
        # Bounds what one peer can make us hold (long polls, slow handlers): beyond it, SYSTEM_BUSY.
        self.max_tasks_per_channel = max_tasks_per_channel

    def register(self, code: int, handler: Handler) -> None:
        self._processors[int(code)] = (handler, inspect.iscoroutinefunction(handler))

    def register_default(self, handler: Handler) -> None:
        self._default = (handler, inspect.iscoroutinefunction(handler))

    def lookup(self, code: int) -> tuple[Handler, bool] | None:
        return self._processors.get(code, self._default)


class Channel(asyncio.Protocol):
    """A connection. Public: ``id``, ``remote_addr``, ``local_addr``, ``closed``, ``attrs`` (free-form
    per-connection state for the application), ``invoke``, ``invoke_oneway``, ``write_command``, ``close``."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        on_lost: Callable[[Channel], None] | None = None,
        coalesce_writes: bool = False,
        pause_reading_on_backpressure: bool = False,
        guard: ConnectionGuard | None = None,
    ) -> None:
        self.id = next(_channel_ids)
        # Server side: stop reading a peer that does not read our responses, so its requests cannot
        # grow our write buffer without bound. (Never on the client side: both pausing could deadlock.)
        self._pause_reading = pause_reading_on_backpressure
        self.remote_addr = ""
        self.local_addr = ""
        self.closed = False
        self.attrs: dict[str, Any] = {}
        self.last_active = 0.0
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_frame_size)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        # opaque -> (future, deadline). One timer per channel, armed for the earliest deadline, expires
        # them: cheaper than a timer handle per request.
        self._pending: dict[int, tuple[asyncio.Future[RemotingCommand], float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = _INF
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_opaque = itertools.count(1)
        self._on_lost = on_lost
        self._closed_fut: asyncio.Future[None] = self._loop.create_future()
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._cork: list[Any] | None = None  # set while handling one read's frames
        self._backlog: deque[RemotingCommand] | None = None  # frames of earlier reads not handled yet
        # server side: the limits of the server (buffered bytes, frame deadline, connection counts)
        self._guard = guard
        self._held = 0  # bytes of a partial frame, as last reported to the guard
        self._host = ""
        self._admitted = False
        self._read_block = 0  # limits._WRITE | _BACKLOG | _BUDGET: why reading is paused (0: it is not)
        self._wq: list[Any] | None = None  # outgoing requests waiting for the end of this loop turn
        self.coalesce_writes = coalesce_writes

    def __repr__(self) -> str:
        return (
            f"Channel(id={self.id} {self.local_addr}->{self.remote_addr}{' closed' if self.closed else ''})"
        )

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        self.remote_addr = _fmt_addr(transport.get_extra_info("peername"))
        self.local_addr = _fmt_addr(transport.get_extra_info("sockname"))
        self.last_active = self._loop.time()
        guard = self._guard
        if guard is not None:
            peer = transport.get_extra_info("peername")
            self._host = str(peer[0]) if isinstance(peer, tuple) and peer else self.remote_addr
            if not guard.admit(self, self._host):
                self.closed = True
                transport.abort()
                return
            self._admitted = True

    def data_received(self, data: bytes) -> None:
        self.last_active = now = self._loop.time()
        try:
            commands = self._decoder.feed(data)
        except ProtocolError as exc:
            (self._guard.events if self._guard is not None else _client_events).note(
                "closed: malformed frame", self.remote_addr, str(exc)
            )
            self.close()
            return
        guard = self._guard
        if guard is not None:
            held = len(self._decoder._buf)
            if held != self._held:
                guard.held_changed(self, held, bool(commands), now)
                if self.closed:
                    return
        if not commands:  # the start of a frame: the rest comes with a later read
            return
        backlog = self._backlog
        if backlog is not None:  # earlier frames are still waiting for their turn: keep the order
            backlog.extend(commands)
            if len(backlog) > _BACKLOG_PAUSE and not self._read_block & _BACKLOG:
                self._block_reading(_BACKLOG)
            return
        if len(commands) == 1:
            self._handle(commands[0])
            return
        if len(commands) <= _BURST_FRAMES:
            self._handle_burst(commands)
            return
        # A long read of pipelined requests is handled _BURST_FRAMES per loop turn: in between, the loop
        # answers what completed meanwhile (SYNC_FLUSH rounds), so that the peer gets the first answers
        # while the rest is still being handled instead of all of them at the end (the two sides would
        # take turns, each idle while the other works through the whole window).
        self._backlog = deque(commands)
        self._drain_backlog()

    def _drain_backlog(self) -> None:
        backlog = self._backlog
        if backlog is None:
            return
        if self.closed:
            self._backlog = None
            return
        pop = backlog.popleft
        self._handle_burst([pop() for _ in range(min(_BURST_FRAMES, len(backlog)))])
        if backlog and not self.closed:
            self._loop.call_soon(self._drain_backlog)
            return
        self._backlog = None
        if self._read_block & _BACKLOG:
            self._unblock_reading(_BACKLOG)

    def _handle_burst(self, commands: list[RemotingCommand]) -> None:
        # Several frames in one read (pipelined requests, at most _BURST_FRAMES): cork, so that the inline
        # responses leave in one send syscall instead of one each. The end hook runs before that send:
        # the store writes a staged run of records there, and none may be acknowledged before it is written.
        hooks = self._dispatcher.burst_hooks
        if hooks is not None:
            hooks[0]()
        self._cork = cork = []
        dispatch = self._dispatch
        try:
            for cmd in commands:
                if cmd.flag & FLAG_RESPONSE:
                    self._handle(cmd)
                else:
                    dispatch(cmd)  # _handle's request branch, one call less per pipelined request
                if self.closed:
                    return
        finally:
            self._cork = None
            if hooks is not None and hooks[1]() is False:
                # the store could not write the run: answer none of it (the peer sees the connection
                # drop and retries) rather than acknowledge records that are not there
                log.error("closing %s: the store failed to write a run of requests", self.remote_addr)
                cork.clear()
                self.close()
            if cork and not self.closed:
                _send(self._transport, cork)

    def _handle(self, cmd: RemotingCommand) -> None:
        if cmd.flag & FLAG_RESPONSE:
            entry = self._pending.pop(cmd.opaque, None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(cmd)
        else:
            self._dispatch(cmd)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._transport = None
        if self._admitted:
            self._admitted = False
            self._guard.release(self, self._host)  # type: ignore[union-attr]
        pending, self._pending = self._pending, {}
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fut, _ in pending.values():
            if not fut.done():
                fut.set_exception(RemotingConnectError(self.remote_addr, "connection closed"))
        self._wake_drain_waiters()
        if not self._closed_fut.done():
            self._closed_fut.set_result(None)
        if self._on_lost is not None:
            self._on_lost(self)
        for cb in self._dispatcher.on_close:
            try:
                res = cb(self)
                if inspect.isawaitable(res):
                    self._spawn(res)
            except Exception:
                log.exception("on_channel_close callback failed for %r", self)

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._pause_reading:
            self._block_reading(_WRITE)

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._pause_reading:
            self._unblock_reading(_WRITE)
        self._wake_drain_waiters()

    def _block_reading(self, reason: int) -> None:
        """Stop reading the peer for ``reason`` (reasons add up: reading resumes once none is left)."""
        if not self._read_block and self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()
        self._read_block |= reason

    def _unblock_reading(self, reason: int) -> None:
        if not self._read_block & reason:
            return
        self._read_block &= ~reason
        if not self._read_block and self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # -- request dispatch ------------------------------------------------------------------
    def _dispatch(self, request: RemotingCommand) -> None:
        dispatcher = self._dispatcher
        entry = dispatcher._processors.get(request.code, dispatcher._default)  # Dispatcher.lookup, inline
        if entry is None:
            if not request.flag & FLAG_ONEWAY:
                remark = f"request type {request.code} not supported"
                self._reply(request, _error(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark))
            return
        handler, is_async = entry
        if is_async:
            if len(self._tasks) >= dispatcher.max_tasks_per_channel:
                self._busy(request)
                return
            self._spawn(self._run_handler(handler, request))
            return
        hook = dispatcher.rpc_hook
        try:
            if hook is not None:
                hook.do_before_request(self.remote_addr, request)
            result = handler(self, request)
        except Exception as exc:
            self._reply_error(request, exc)
            return
        if result is None or isinstance(result, RemotingCommand):
            if hook is not None:
                self._after_hook(hook, request, result)
            self._reply(request, result)
        elif result.__class__ is DeferredReply:
            resp = result._response
            if resp is not _UNSET:  # resolved before it got here
                if hook is not None:
                    self._after_hook(hook, request, resp)
                self._reply(request, resp)
            else:  # the work is done (e.g. the message stored): never answered SYSTEM_BUSY
                result._channel = self
                result._request = request
                self._tasks.add(result)  # type: ignore[arg-type]  # counted and cancelled like a task
        elif len(self._tasks) >= self._dispatcher.max_tasks_per_channel:
            if inspect.iscoroutine(result):
                result.close()
            self._busy(request)
        elif isinstance(result, asyncio.Future):
            # A future the handler completes later (e.g. a SYNC_FLUSH send waiting for its fdatasync round):
            # a done callback answers it, cheaper than a Task around an await.
            self._tasks.add(result)  # type: ignore[arg-type]  # counted and cancelled like a task
            result.add_done_callback(functools.partial(self._future_done, request))
        else:  # the handler chose its slow path
            self._spawn(self._await_result(result, request))

    def _future_done(self, request: RemotingCommand, fut: asyncio.Future[RemotingCommand | None]) -> None:
        self._tasks.discard(fut)  # type: ignore[arg-type]
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self._reply_error(request, exc)
            return
        result = fut.result()
        hook = self._dispatcher.rpc_hook
        if hook is not None:
            self._after_hook(hook, request, result)
        self._reply(request, result, coalesce=True)

    def _deferred_done(self, d: DeferredReply, response: RemotingCommand | None) -> None:
        self._tasks.discard(d)  # type: ignore[arg-type]
        hook = self._dispatcher.rpc_hook
        if hook is not None:
            self._after_hook(hook, d._request, response)  # type: ignore[arg-type]
        self._reply(d._request, response, coalesce=True)  # type: ignore[arg-type]

    def _busy(self, request: RemotingCommand) -> None:
        if not request.flag & FLAG_ONEWAY:
            limit = self._dispatcher.max_tasks_per_channel
            remark = f"too many requests in flight on this connection (max {limit})"
            self._reply(request, _error(request, ResponseCode.SYSTEM_BUSY, remark))

    def _after_hook(self, hook: RPCHook, request: RemotingCommand, response: RemotingCommand | None) -> None:
        try:
            hook.do_after_response(self.remote_addr, request, response)
        except Exception:
            log.exception("rpc hook do_after_response failed")

    async def _await_result(
        self, awaitable: Awaitable[RemotingCommand | None], request: RemotingCommand
    ) -> None:
        try:
            result = await awaitable
        except Exception as exc:
            self._reply_error(request, exc)
            return
        hook = self._dispatcher.rpc_hook
        if hook is not None:
            self._after_hook(hook, request, result)
        self._reply(request, result)

    async def _run_handler(self, handler: Handler, request: RemotingCommand) -> None:
        hook = self._dispatcher.rpc_hook
        try:
            if hook is not None:
                hook.do_before_request(self.remote_addr, request)
            result = handler(self, request)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            self._reply_error(request, exc)
            return
        if hook is not None:
            self._after_hook(hook, request, result)
        self._reply(request, result)

    def _spawn(self, aw: Awaitable[Any]) -> None:
        task = self._loop.create_task(aw)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _reply_error(self, request: RemotingCommand, exc: BaseException) -> None:
        # Bad input (ValueError, incl. ProtocolError) and refused requests (PermissionError: ACL) are the
        # peer's problem: keep them out of the log unless debugging; anything else is our bug.
        level = logging.DEBUG if isinstance(exc, ValueError | PermissionError) else logging.WARNING
        log.log(level, "processor for code %s failed on %s: %r", request.code, self.remote_addr, exc)
        if not request.flag & FLAG_ONEWAY:
            text = str(exc) or type(exc).__name__
            self._reply(request, _error(request, ResponseCode.SYSTEM_ERROR, text))

    def _reply(
        self, request: RemotingCommand, response: RemotingCommand | None, coalesce: bool = False
    ) -> None:
        if response is None or request.flag & FLAG_ONEWAY or self.closed:
            return
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        try:
            parts = response.frame_parts()
        except ProtocolError as exc:  # e.g. a response body over the frame limit
            parts = _error(request, ResponseCode.SYSTEM_ERROR, str(exc)).frame_parts()
        cork = self._cork
        if cork is not None:
            cork.extend(parts)
        elif coalesce:
            # Deferred answers tend to complete together (one group-commit round answers many sends):
            # those of one loop turn leave in one send at the end of it.
            if self._wq is None:
                self._wq = list(parts)
                self._loop.call_soon(self._flush_wq)
                _coalescing.add(self)
            else:
                self._wq.extend(parts)
        else:
            self._transport.writelines(parts)

    # -- outgoing --------------------------------------------------------------------------
    def write_command(self, cmd: RemotingCommand) -> None:
        """Write one command as is (no opaque/flag handling)."""
        transport = self._transport
        if transport is None or transport.is_closing():
            raise RemotingSendRequestError(self.remote_addr, "channel closed")
        parts = cmd.frame_parts()
        if self._cork is not None:
            self._cork.extend(parts)
        elif not self.coalesce_writes or (self._wq is None and len(self._pending) <= 1):
            # Nothing else in flight (a lone round trip): send now, a loop turn of delay buys nothing.
            transport.writelines(parts)
        elif self._wq is None:
            # Requests issued by many tasks in the same loop turn go out in one send at the end of it.
            self._wq = parts
            self._loop.call_soon(self._flush_wq)
        else:
            wq = self._wq
            wq.extend(parts)
            if len(wq) >= _WQ_FLUSH_PARTS:
                _send(self._transport, wq)
                self._wq = []  # the pending _flush_wq sends what follows

    def _flush_wq(self) -> None:
        _coalescing.discard(self)  # sent at the turn's end (an ASYNC_FLUSH broker never calls flush_deferred)
        q, self._wq = self._wq, None
        if q and not self.closed:
            _send(self._transport, q)

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if self._write_paused and not self.closed:
            fut = self._loop.create_future()
            self._drain_waiters.append(fut)
            await fut

    def _expect_answer(
        self, request: RemotingCommand, timeout_s: float
    ) -> tuple[int, asyncio.Future[RemotingCommand], float]:
        """Number the request and register the future its answer completes (opaque, future, deadline)."""
        opaque = next(self._next_opaque) & 0x7FFFFFFF
        request.opaque = opaque
        request.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        loop = self._loop
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        deadline = loop.time() + timeout_s
        self._pending[opaque] = (fut, deadline)
        return opaque, fut, deadline

    async def invoke(self, request: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        """Send a request on this connection and wait for its response."""
        opaque, fut, deadline = self._expect_answer(request, timeout_s)
        try:
            self.write_command(request)
        except BaseException:
            self._pending.pop(opaque, None)
            raise
        if deadline < self._timer_at:
            self._arm(deadline)
        try:
            return await fut
        except TimeoutError:
            raise RemotingTimeoutError(self.remote_addr, timeout_s) from None
        finally:
            self._pending.pop(opaque, None)

    def send_request(
        self, request: RemotingCommand, timeout_s: float = 3.0
    ) -> asyncio.Future[RemotingCommand]:
        """invoke() without the await, and written now rather than at the end of the loop turn: the caller
        does other work (decoding the previous answer) while this one is on its way. The future fails with
        RemotingTimeoutError or RemotingConnectError."""
        transport = self._transport
        if transport is None or transport.is_closing():
            raise RemotingSendRequestError(self.remote_addr, "channel closed")
        opaque, fut, deadline = self._expect_answer(request, timeout_s)
        try:
            parts = request.frame_parts()  # after the numbering: the frame carries the opaque
        except BaseException:
            self._pending.pop(opaque, None)
            raise
        if self._wq:  # requests coalesced earlier in this turn go first
            self._flush_wq()
        transport.writelines(parts)
        if deadline < self._timer_at:
            self._arm(deadline)
        out: asyncio.Future[RemotingCommand] = self._loop.create_future()
        fut.add_done_callback(functools.partial(self._request_done, opaque, out, timeout_s))
        return out

    def _request_done(
        self, opaque: int, out: asyncio.Future[RemotingCommand], timeout_s: float, fut: asyncio.Future
    ) -> None:
        self._pending.pop(opaque, None)
        if fut.cancelled():
            out.cancel()
            return
        exc = fut.exception()  # retrieved even when nobody waits any more (no "never retrieved" log)
        if out.done():
            return
        if exc is None:
            out.set_result(fut.result())
        elif isinstance(exc, TimeoutError):
            out.set_exception(RemotingTimeoutError(self.remote_addr, timeout_s))
        else:
            out.set_exception(exc)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._expire_pending)

    def _expire_pending(self) -> None:
        self._timer, self._timer_at = None, _INF
        now = self._loop.time()
        nearest = _INF
        for fut, deadline in list(self._pending.values()):
            if deadline <= now + 0.001:  # timers may fire up to a clock tick early
                if not fut.done():
                    fut.set_exception(TimeoutError())
            elif deadline < nearest:
                nearest = deadline
        if nearest < _INF:
            self._arm(nearest)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a request flagged ONEWAY; the peer never answers it."""
        request.opaque = next(self._next_opaque) & 0x7FFFFFFF
        request.flag = (request.flag | FLAG_ONEWAY) & ~FLAG_RESPONSE
        self.write_command(request)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        """Close after writing what is queued (asyncio flushes the transport buffer first)."""
        if self._transport is not None and not self._transport.is_closing():
            if self._wq:
                self._flush_wq()
            self._transport.close()
        self.closed = True

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()
        self.closed = True

    close_now = abort  # what the server's guard calls: the peer is not owed the queued writes

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed_fut)

    async def cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        waitable = [t for t in tasks if t.__class__ is not DeferredReply]
        if waitable:
            await asyncio.gather(*waitable, return_exceptions=True)
