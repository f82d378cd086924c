"""Message trace (RocketMQ's AsyncTraceDispatcher): opt-in records of sends and consumption written to
RMQ_SYS_TRACE_TOPIC in RocketMQ's text format, so RocketMQ's tools (and mqadmin queryMsgTraceById-style
lookups by message id) can read them. Fields are joined by \\u0001, records end with \\u0002."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .message import PROPERTY_DELAY, PROPERTY_TRAN_MSG, Message, MessageExt, SendResult

if TYPE_CHECKING:
    from .instance import MQClientInstance

log = logging.getLogger(__name__)

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRACE_PRODUCER_GROUP_PREFIX = "_INNER_TRACE_PRODUCER-"
C = "\x01"  # CONTENT_SPLITOR
F = "\x02"  # FIELD_SPLITOR
REGION = "DefaultRegion"
MAX_BATCH = 100
FLUSH_INTERVAL_S = 0.5
MAX_QUEUED = 20000

# MessageType ordinals
NORMAL_MSG, TRANS_MSG_HALF, DELAY_MSG = 0, 1, 3
# ConsumeReturnType ordinals (the contextCode of SubAfter)
CR_SUCCESS, CR_EXCEPTION, CR_RETURN_NULL, CR_FAILED = 0, 2, 3, 4


def _b(v: bool) -> str:
    return "true" if v else "false"


def encode_pub(
    group: str, msg: Message, result: SendResult | None, cost_ms: int, ok: bool, now_ms: int
) -> str:
    props = msg.properties
    if props.get(PROPERTY_TRAN_MSG) == "true":
        mtype = TRANS_MSG_HALF
    elif msg.delay_level > 0 or PROPERTY_DELAY in props:
        mtype = DELAY_MSG
    else:
        mtype = NORMAL_MSG
    msg_id = result.msg_id if result else props.get("UNIQ_KEY", "")
    offset_id = result.offset_msg_id if result else ""
    fields = (
        "Pub",
        str(now_ms),
        REGION,
        group,
        msg.topic,
        msg_id,
        msg.tags or "",
        " ".join(msg.keys),
        "",  # storeHost: the broker address is not known to the facade here
        str(len(msg.body)),
        str(cost_ms),
        str(mtype),
        offset_id,
        _b(ok),
    )
    return C.join(fields) + F


def encode_sub_before(group: str, request_id: str, msgs: Sequence[MessageExt], now_ms: int) -> str:
    return "".join(
        C.join(
            (
                "SubBefore",
                str(now_ms),
                REGION,
                group,
                request_id,
                m.msg_id,
                str(m.reconsume_times),
                " ".join(m.keys),
            )
        )
        + F
        for m in msgs
    )


def encode_sub_after(
    group: str, request_id: str, msgs: Sequence[MessageExt], cost_ms: int, ok: bool, code: int, now_ms: int
) -> str:
    return "".join(
        C.join(
            (
                "SubAfter",
                request_id,
                m.msg_id,
                str(cost_ms),
                _b(ok),
                " ".join(m.keys),
                str(code),
                str(now_ms),
                group,
            )
        )
        + F
        for m in msgs
    )


class TraceDispatcher:
    """Buffers trace records and sends them in batches from a background task; never blocks or fails the
    traced send/consume (records are dropped when the buffer is full)."""

    def __init__(self, instance: MQClientInstance, group: str, trace_topic: str | None = None) -> None:
        self.instance = instance
        self.group = group
        self.topic = trace_topic or TRACE_TOPIC
        self._queue: asyncio.Queue[tuple[str, list[str]] | None] = asyncio.Queue(MAX_QUEUED)
        self._task: asyncio.Task[None] | None = None
        self._producer: Any = None

    async def start(self) -> None:
        self._producer = self.instance.new_producer(
            TRACE_PRODUCER_GROUP_PREFIX + self.group, send_latency_fault_enable=False
        )
        await self._producer.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def append(self, data: str, keys: list[str]) -> None:
        if self._task is None or self._queue.qsize() >= MAX_QUEUED - 1:
            return  # stopped, or full: drop rather than slow the traced call down
        self._queue.put_nowait((data, keys))

    async def _run(self) -> None:
        stop = False
        while not stop:
            item = await self._queue.get()
            batch: list[tuple[str, list[str]]] = []
            deadline = time.monotonic() + FLUSH_INTERVAL_S
            while True:
                if item is None:  # shutdown: flush what we have and stop
                    stop = True
                    break
                batch.append(item)
                if len(batch) >= MAX_BATCH:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    async with asyncio.timeout(left):  # not wait_for: it can swallow a cancel on 3.11
                        item = await self._queue.get()
                except TimeoutError:
                    break
            for i in range(0, len(batch), MAX_BATCH):
                await self._flush(batch[i : i + MAX_BATCH])

    async def _flush(self, batch: list[tuple[str, list[str]]]) -> None:
        keys: list[str] = []
        for _, k in batch:
            for key in k:
                if key and key not in keys:
                    keys.append(key)
        msg = Message(self.topic, "".join(d for d, _ in batch).encode(), keys=keys)
        try:
            await self._producer.send(msg)
        except Exception as exc:
            log.debug("trace send failed: %s", exc)

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._queue.put_nowait(None)  # a slot is always free for the sentinel: see append
            try:
                await asyncio.wait_for(task, 5.0)
            except BaseException:
                task.cancel()
        if self._producer is not None:
            await self._producer.shutdown()

    # -- hooks -------------------------------------------------------------------------------------
    def on_send(self, msg: Message, result: SendResult | None, cost_ms: int, ok: bool) -> None:
        if msg.topic == self.topic:
            return
        now = int(time.time() * 1000)
        msg_id = result.msg_id if result else msg.properties.get("UNIQ_KEY", "")
        self.append(encode_pub(self.group, msg, result, cost_ms, ok, now), [msg_id, *msg.keys])

    def before_consume(self, msgs: Sequence[MessageExt]) -> str:
        request_id = uuid.uuid4().hex
        now = int(time.time() * 1000)
        keys = [k for m in msgs for k in (m.msg_id, *m.keys)]
        self.append(encode_sub_before(self.group, request_id, msgs, now), keys)
        return request_id

    def after_consume(
        self, request_id: str, msgs: Sequence[MessageExt], cost_ms: int, result: Any, exc: bool
    ) -> None:
        from .consume import is_success

        ok = is_success(result) and not exc
        code = (
            CR_EXCEPTION if exc else (CR_RETURN_NULL if result is None else (CR_SUCCESS if ok else CR_FAILED))
        )
        now = int(time.time() * 1000)
        keys = [k for m in msgs for k in (m.msg_id, *m.keys)]
        self.append(encode_sub_after(self.group, request_id, msgs, cost_ms, ok, code, now), keys)
