"""autoBatch (RocketMQ 5's ProduceAccumulator) for the asyncio Producer.

With ``Producer(auto_batch=True)``, single-message sends to one topic (and one queue, when the caller names
it) that are issued close together travel as one SEND_BATCH_MESSAGE request; every caller still gets its own
SendResult (its own msg_id, offset_msg_id and queue offset), or the request's error. A batch leaves when its
encoded size reaches ``batch_max_bytes``, or when the event loop has run every callback that was ready when
the batch was opened (``batch_max_delay_ms=0``, the default: the sends a burst of acknowledgements just woke
ride together, and a lone send waits one loop turn), or ``batch_max_delay_ms`` after it was opened. Java's
default hold is 10 ms because its senders are blocked threads; an event loop knows when its burst is over.

What RocketMQ does not batch is sent as before: delayed and timed messages, retry topics, messages that
carry a producer group, transactional and reply messages, ordered sends through a selector, one-way sends,
and bodies large enough to be compressed (a batch is never compressed). While ``total_batch_max_bytes`` are
held in open or in-flight batches, further sends also go alone.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from rocketq.protocol import properties as _props

from .codec import UNIQ_IDS, encode_batch_item, properties_to_string
from .message import (
    PROPERTY_MSG_TYPE,
    PROPERTY_TRAN_MSG,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    RETRY_GROUP_TOPIC_PREFIX,
    Message,
    MessageQueue,
    MQClientError,
    SendResult,
)

if TYPE_CHECKING:
    from .trace import TraceDispatcher

DEFAULT_BATCH_MAX_DELAY_MS = 0
DEFAULT_BATCH_MAX_BYTES = 32 * 1024  # RocketMQ's holdSize
DEFAULT_TOTAL_BATCH_MAX_BYTES = 32 * 1024 * 1024  # RocketMQ's totalHoldSize
MAX_BATCH_MAX_BYTES = 2 * 1024 * 1024
MAX_BATCH_MAX_DELAY_MS = 30_000

# Properties that keep a message out of a batch (RocketMQ's canBatch, plus what our batch path cannot carry).
_ALONE = frozenset(
    {
        _props.PROPERTY_PRODUCER_GROUP,
        _props.PROPERTY_TIMER_DELIVER_MS,
        _props.PROPERTY_TIMER_DELAY_SEC,
        _props.PROPERTY_TIMER_DELAY_MS,
        _props.PROPERTY_START_DELIVER_TIME,
        PROPERTY_TRAN_MSG,
        PROPERTY_MSG_TYPE,
    }
)


def check_batch_settings(max_delay_ms: int, max_bytes: int, total_max_bytes: int) -> None:
    """RocketMQ's bounds (its delay starts at 1 ms; 0 here means the end of the loop turn)."""
    if not 0 <= max_delay_ms <= MAX_BATCH_MAX_DELAY_MS:
        raise ValueError(f"batch_max_delay_ms expects 0 ms to 30 s, got {max_delay_ms}")
    if not 0 < max_bytes <= MAX_BATCH_MAX_BYTES:
        raise ValueError(f"batch_max_bytes expects 1 B to 2 MiB, got {max_bytes}")
    if total_max_bytes <= 0:
        raise ValueError(f"total_batch_max_bytes must be positive, got {total_max_bytes}")


class EncodedBatch:
    """Messages already encoded as one batch body: what Producer._build_request sends as it is."""

    __slots__ = ("body", "ids", "topic", "wait")

    def __init__(self, topic: str, body: bytes, ids: str, wait: bool) -> None:
        self.topic = topic
        self.body = body
        self.ids = ids  # the messages' UNIQ_KEYs, comma-joined (the batch's msg_id)
        self.wait = wait  # waitStoreMsgOK of every message in it


class _Open:
    """A batch still taking messages (or in flight, once dispatched)."""

    __slots__ = ("futs", "ids", "msgs", "parts", "size", "timeout_s", "timer", "wait")

    def __init__(self, timeout_s: float, wait: bool) -> None:
        self.msgs: list[Message] = []
        self.futs: list[asyncio.Future[SendResult]] = []
        self.parts: list[bytes] = []
        self.ids: list[str] = []
        self.size = 0
        self.timeout_s = timeout_s
        self.timer: asyncio.Handle | None = None
        self.wait = wait


class BatchSender(Protocol):
    """What the accumulator needs of the Producer that owns it (producer.py imports this module)."""

    compress_msg_body_over_howmuch: int
    _trace: TraceDispatcher | None

    async def _send_batched(
        self, msgs: Message | EncodedBatch, topic: str, queue: MessageQueue | None, timeout_s: float
    ) -> SendResult: ...


class ProduceAccumulator:
    def __init__(
        self, producer: BatchSender, max_delay_ms: int, max_bytes: int, total_max_bytes: int
    ) -> None:
        check_batch_settings(max_delay_ms, max_bytes, total_max_bytes)
        self._producer = producer
        self.max_delay_ms = max_delay_ms
        self.max_bytes = max_bytes
        self.total_max_bytes = total_max_bytes
        self.held_bytes = 0  # encoded bytes in open and in-flight batches
        self._open: dict[tuple[str, MessageQueue | None, bool], _Open] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the open batches wait on

    @property
    def idle(self) -> bool:
        """Nothing open and nothing in flight."""
        return not self._open and not self._tasks

    def batchable(self, msg: Message) -> bool:
        return (
            msg.delay_level <= 0
            and len(msg.body) < self._producer.compress_msg_body_over_howmuch
            and not msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
            and (not msg.properties or _ALONE.isdisjoint(msg.properties))
            and self.held_bytes < self.total_max_bytes
        )

    def add(self, msg: Message, queue: MessageQueue | None, timeout_s: float) -> asyncio.Future[SendResult]:
        """Queue a checked, batchable message; its SendResult (or the batch's error) arrives on the future."""
        props = msg.wire_properties()
        uid = props.get(PROPERTY_UNIQ_KEY)
        if uid is None:
            uid = props[PROPERTY_UNIQ_KEY] = msg.properties[PROPERTY_UNIQ_KEY] = UNIQ_IDS.next_id()
        wait = props.setdefault(PROPERTY_WAIT, "true") != "false"
        item = encode_batch_item(msg.body, msg.flag, properties_to_string(props))
        key = (msg.topic, queue, wait)
        b = self._open.get(key)
        if b is not None and b.size + len(item) > self.max_bytes:
            self._dispatch(key, b)
            b = None
        loop = self._loop = asyncio.get_running_loop()
        if b is None:
            b = self._open[key] = _Open(timeout_s, wait)
            if self.max_delay_ms:
                b.timer = loop.call_later(self.max_delay_ms / 1000, self._dispatch, key, b)
            else:
                b.timer = loop.call_soon(self._dispatch, key, b)
        fut: asyncio.Future[SendResult] = loop.create_future()
        b.msgs.append(msg)
        b.futs.append(fut)
        b.parts.append(item)
        b.ids.append(uid)
        b.size += len(item)
        self.held_bytes += len(item)
        if timeout_s < b.timeout_s:
            b.timeout_s = timeout_s
        if b.size >= self.max_bytes:
            self._dispatch(key, b)
        return fut

    def flush_all(self) -> None:
        """Dispatch every open batch now (shutdown, auto_batch switched off). From another thread (the
        synchronous facade's setter) it is handed to the batches' loop."""
        if not self._open or self._loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._loop:
            self._loop.call_soon_threadsafe(self.flush_all)
            return
        for key, b in list(self._open.items()):
            self._dispatch(key, b)

    async def drain(self) -> None:
        """Wait for every dispatched batch to be answered."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _dispatch(self, key: tuple[str, MessageQueue | None, bool], b: _Open) -> None:
        if self._open.get(key) is not b:
            return  # already dispatched (full, flushed, or its timer fired after that)
        del self._open[key]
        if b.timer is not None:
            b.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._send(key[0], key[1], b))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, topic: str, queue: MessageQueue | None, b: _Open) -> None:
        p = self._producer
        t0 = time.monotonic()
        results: list[SendResult] | None = None
        error: BaseException | None = None
        try:
            if len(b.msgs) == 1:  # nothing joined it: a plain send (SEND_MESSAGE_V2)
                r = await p._send_batched(b.msgs[0], topic, queue, b.timeout_s)
                results = [r]
            else:
                enc = EncodedBatch(topic, b"".join(b.parts), ",".join(b.ids), b.wait)
                results = split_result(await p._send_batched(enc, topic, queue, b.timeout_s), b.ids)
        except BaseException as exc:  # every caller gets the request's error, whatever it is
            error = exc
        finally:
            self.held_bytes -= b.size
            if error is None and results is None:
                error = MQClientError(-1, "the batch send was cancelled")
            _settle(b.futs, results, error)
        trace = p._trace
        if trace is not None:
            ms = int((time.monotonic() - t0) * 1000)
            for i, m in enumerate(b.msgs):
                trace.on_send(m, results[i] if results else None, ms, results is not None)
        if isinstance(error, asyncio.CancelledError):
            raise error


def split_result(r: SendResult, ids: list[str]) -> list[SendResult]:
    """One SendResult per message of a batch: its own id, offset id and queue offset (RocketMQ 5's
    splitSendResults; a broker that answers one offset id for the whole batch gives every message that)."""
    n = len(ids)
    offs = r.offset_msg_id.split(",")
    if len(offs) != n:
        offs = [r.offset_msg_id] * n
    s, q, qo, tx, region, trace_on = (
        r.status,
        r.queue,
        r.queue_offset,
        r.transaction_id,
        r.region_id,
        r.trace_on,
    )
    return [SendResult(s, ids[i], offs[i], q, qo + i, tx, region, trace_on) for i in range(n)]


def _settle(
    futs: list[asyncio.Future[SendResult]], results: list[SendResult] | None, error: BaseException | None
) -> None:
    for i, fut in enumerate(futs):
        if fut.done():  # its caller gave up (cancelled)
            continue
        if results is not None:
            fut.set_result(results[i])
        else:
            fut.set_exception(error if isinstance(error, Exception) else MQClientError(-1, repr(error)))
