# Over 600 lines: one public class (every send form, auto-batch); moving request building out is planned.
"""Producer (DefaultMQProducer) — asyncio core. The synchronous facade in rocketq.sync wraps it."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingError

from . import metrics as client_metrics
from .accumulator import (
    DEFAULT_BATCH_MAX_BYTES,
    DEFAULT_BATCH_MAX_DELAY_MS,
    DEFAULT_TOTAL_BATCH_MAX_BYTES,
    EncodedBatch,
    ProduceAccumulator,
    check_batch_settings,
)
from .codec import (
    SYSFLAG_COMPRESSED,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_ZLIB,
    UNIQ_IDS,
    batch_item_size,
    compress_body,
    encode_batch,
    properties_to_string,
)
from .instance import (
    DEFAULT_INSTANCE_NAME,
    ClientConfig,
    MQClientInstance,
    acquire_instance_for_group,
    parse_namesrv,
    release_instance,
)
from .message import (
    DEFAULT_TOPIC,
    PROPERTY_CORRELATION_ID,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_MSG_TYPE,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_REPLY_TO_CLIENT,
    PROPERTY_TRAN_MSG,
    PROPERTY_TTL,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    REPLY_MESSAGE_FLAG,
    RETRY_GROUP_TOPIC_PREFIX,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    SendResult,
    SendStatus,
    invoke_send_callback,
)
from .route import LatencyFaultTolerance, TopicPublishInfo, TopicRouteData, topic_route_to_publish_info
from .send_request import SendTemplate, send_request
from .trace import TraceDispatcher
from .validators import check_group, check_topic

log = logging.getLogger(__name__)

Selector = Callable[[list[MessageQueue], Message, Any], MessageQueue]

RETRY_RESPONSE_CODES = frozenset({17, 14, 1, 16, 204, 205})
MAX_BATCH_BYTES = 4 * 1024 * 1024
_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    10: SendStatus.FLUSH_DISK_TIMEOUT,
    12: SendStatus.FLUSH_SLAVE_TIMEOUT,
    11: SendStatus.SLAVE_NOT_AVAILABLE,
}


class Producer:
    """``async with Producer("PG", namesrv="127.0.0.1:9876") as p: await p.send(Message(...))``."""

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv: str | Sequence[str] | None = None,
        *,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        send_msg_timeout: int = 3000,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_msg_body_over_howmuch: int = 4096,
        max_message_size: int = 4 * 1024 * 1024,
        send_latency_fault_enable: bool = False,
        create_topic_key: str = DEFAULT_TOPIC,
        default_topic_queue_nums: int = 4,
        client_config: ClientConfig | None = None,
        enable_msg_trace: bool = False,
        customized_trace_topic: str | None = None,
        auto_batch: bool = False,
        batch_max_delay_ms: int = DEFAULT_BATCH_MAX_DELAY_MS,
        batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES,
        total_batch_max_bytes: int = DEFAULT_TOTAL_BATCH_MAX_BYTES,
        _instance: MQClientInstance | None = None,
    ) -> None:
        self.group = group
        self.namesrv_addrs = parse_namesrv(namesrv)
        self.instance_name = instance_name
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.max_message_size = max_message_size
        # RocketMQ's sendLatencyFaultEnable, off by default as there: a retry still avoids the broker that
        # failed last (TopicPublishInfo.select_one); on, brokers that failed or answered slowly are also
        # skipped for a while (the latency table in route.py), at about 1 µs of client CPU per send
        self.send_latency_fault_enable = send_latency_fault_enable
        self.create_topic_key = create_topic_key
        self.default_topic_queue_nums = default_topic_queue_nums
        self.client_config = client_config
        self._instance = _instance
        self._inner = _instance is not None
        self._publish: dict[str, TopicPublishInfo] = {}
        self._fault = LatencyFaultTolerance()
        self._header_cache: dict[tuple[str, int, bool, str, str, int], SendTemplate] = {}
        self._started = False
        self._pending: set[asyncio.Task[Any]] = set()
        self.enable_msg_trace = enable_msg_trace
        self.customized_trace_topic = customized_trace_topic
        self._trace: TraceDispatcher | None = None
        self._meter: Any = None  # rocketq.client.metrics.ClientMeter when metrics were enabled at start
        check_batch_settings(batch_max_delay_ms, batch_max_bytes, total_batch_max_bytes)
        self._batch_settings = (batch_max_delay_ms, batch_max_bytes, total_batch_max_bytes)
        self._accumulator: ProduceAccumulator | None = None
        self._retired: list[ProduceAccumulator] = []  # switched off while holding or sending messages
        self.auto_batch = auto_batch

    # -- autoBatch (accumulator.py) ----------------------------------------------------------------
    @property
    def auto_batch(self) -> bool:
        """RocketMQ 5's autoBatch: concurrent single sends to one topic travel as batch requests."""
        return self._accumulator is not None

    @auto_batch.setter
    def auto_batch(self, on: bool) -> None:
        if on and self._accumulator is None:
            self._accumulator = ProduceAccumulator(self, *self._batch_settings)
        elif not on and self._accumulator is not None:
            self._accumulator.flush_all()  # what it holds still leaves (and is drained at shutdown)
            self._retired = [a for a in self._retired if not a.idle] + [self._accumulator]
            self._accumulator = None

    def _batch_setting(self, i: int, value: int) -> None:
        settings = list(self._batch_settings)
        settings[i] = value
        check_batch_settings(*settings)
        self._batch_settings = (settings[0], settings[1], settings[2])
        acc = self._accumulator
        if acc is not None:
            acc.max_delay_ms, acc.max_bytes, acc.total_max_bytes = self._batch_settings

    @property
    def batch_max_delay_ms(self) -> int:
        return self._batch_settings[0]

    @batch_max_delay_ms.setter
    def batch_max_delay_ms(self, value: int) -> None:
        self._batch_setting(0, value)

    @property
    def batch_max_bytes(self) -> int:
        return self._batch_settings[1]

    @batch_max_bytes.setter
    def batch_max_bytes(self, value: int) -> None:
        self._batch_setting(1, value)

    @property
    def total_batch_max_bytes(self) -> int:
        return self._batch_settings[2]

    @total_batch_max_bytes.setter
    def total_batch_max_bytes(self, value: int) -> None:
        self._batch_setting(2, value)

    def _accumulate(
        self, msg: Message, queue: MessageQueue | None, selector: Selector | None, timeout_s: float
    ) -> asyncio.Future[SendResult] | None:
        """The future of a send the accumulator took, or None if this one goes alone."""
        acc = self._accumulator
        if acc is None or selector is not None or not acc.batchable(msg):
            return None
        if queue is not None and queue.topic != msg.topic:
            raise MQClientError(-1, "message's topic not equal mq's topic")
        return acc.add(msg, queue, timeout_s)

    async def _send_batched(
        self, msgs: Message | EncodedBatch, topic: str, queue: MessageQueue | None, timeout_s: float
    ) -> SendResult:
        """The accumulator's request: to the caller's queue as send(msg, queue) does (no retry), else
        through the retry loop of a synchronous send."""
        if queue is not None:
            r = await self._send_to_queue(msgs, queue, timeout_s)
        else:
            r = await self._send_default(msgs, topic, 1 + self.retry_times_when_send_failed, timeout_s)
        assert r is not None  # not one-way
        return r

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        check_group(self.group)
        if not self._inner:
            inst = acquire_instance_for_group(
                self.namesrv_addrs, self.instance_name, self.group, "producer", self.client_config
            )
            inst.register_producer(self.group, self)
            self._instance = inst
            await inst.start()
            await inst.send_heartbeat_all()
        self._started = True
        self._meter = client_metrics.current()
        if self.enable_msg_trace and self._instance is not None:
            self._trace = TraceDispatcher(self._instance, self.group, self.customized_trace_topic)
            await self._trace.start()

    async def shutdown(self) -> None:
        if not self._started:
            return
        for acc in (self._accumulator, *self._retired):
            if acc is not None:  # what is still held leaves now, while the producer can send
                acc.flush_all()
                await acc.drain()
        self._retired = []
        self._started = False
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        if self._trace is not None:
            await self._trace.shutdown()
            self._trace = None
        inst = self._instance
        if inst is not None and not self._inner:
            await inst.unregister_producer(self.group)
            await release_instance(inst)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def instance(self) -> MQClientInstance:
        if self._instance is None or not self._started:
            raise MQClientError(-1, "The producer service state not OK, maybe started once or not started")
        return self._instance

    # -- callbacks from the instance -------------------------------------------------------------
    def publish_topics(self) -> list[str]:
        return list(self._publish)

    def update_publish_info(self, topic: str, route: TopicRouteData) -> None:
        if topic in self._publish:
            self._publish[topic] = topic_route_to_publish_info(topic, route)

    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        info = self._publish.get(topic)
        if info is not None and info.ok():
            return info
        inst = self.instance
        found = await inst.update_topic_route(topic)
        route = inst.routes.get(topic) if found else None
        if route is not None:
            info = topic_route_to_publish_info(topic, route)
        # unknown topic: send through TBW102's brokers, the broker creates it if allowed
        if (info is None or not info.ok()) and await inst.update_topic_route(
            topic, use_default=True, default_queue_nums=self.default_topic_queue_nums
        ):
            route = inst.routes.get(topic)
            if route is not None:
                info = topic_route_to_publish_info(topic, route)
        if info is None or not info.ok():
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"No route info of this topic: {topic}")
        self._publish[topic] = info
        return info

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return list((await self._publish_info(topic)).queues)

    # -- validation and encoding -----------------------------------------------------------------
    def _check_message(self, msg: Message) -> None:
        if msg is None:
            raise MQClientError(13, "the message is null")
        check_topic(msg.topic)
        if not msg.body:
            raise MQClientError(13, "the message body length is zero")
        if len(msg.body) > self.max_message_size:
            raise MQClientError(13, f"the message body size over max value, MAX: {self.max_message_size}")

    def _encode_single(self, msg: Message) -> tuple[bytes, int, dict[str, str]]:
        props = msg.wire_properties()
        if PROPERTY_UNIQ_KEY not in props:
            uid = UNIQ_IDS.next_id()
            msg.properties[PROPERTY_UNIQ_KEY] = uid
            props[PROPERTY_UNIQ_KEY] = uid
        props.setdefault(PROPERTY_WAIT, "true")
        body = msg.body
        sys_flag = 0
        if len(body) >= self.compress_msg_body_over_howmuch:
            body = compress_body(body)
            sys_flag |= SYSFLAG_COMPRESSED | SYSFLAG_ZLIB
        if props.get(PROPERTY_TRAN_MSG) == "true":
            sys_flag |= SYSFLAG_TRANSACTION_PREPARED
        return body, sys_flag, props

    def _template(self, topic: str, queue_id: int, batch: bool) -> SendTemplate:
        # The per-(topic, queue) part of SendMessageRequestHeaderV2 is built once; a send fills in the
        # per-message fields (sysFlag, bornTimestamp, flag, properties).
        key = (topic, queue_id, batch, self.group, self.create_topic_key, self.default_topic_queue_nums)
        template = self._header_cache.get(key)
        if template is None:
            if len(self._header_cache) >= 4096:
                self._header_cache.clear()
            template = self._header_cache[key] = SendTemplate(
                {
                    "a": self.group,
                    "b": topic,
                    "c": self.create_topic_key,
                    "d": str(self.default_topic_queue_nums),
                    "e": str(queue_id),
                    "f": "0",
                    "g": "",
                    "h": "0",
                    "i": "",
                    "j": "0",
                    "k": "false",
                    "m": "true" if batch else "false",
                }
            )
        return template

    def _header(
        self, topic: str, queue_id: int, sys_flag: int, flag: int, props: dict[str, str], batch: bool
    ) -> dict[str, str]:
        ext = self._template(topic, queue_id, batch).ext.copy()
        if sys_flag:
            ext["f"] = str(sys_flag)
        ext["g"] = str(time.time_ns() // 1_000_000)
        if flag:
            ext["h"] = str(flag)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            rt = props.pop(PROPERTY_RECONSUME_TIME, None)
            if rt is not None:
                ext["j"] = rt
            mrt = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
            if mrt is not None:
                ext["l"] = mrt
        ext["i"] = properties_to_string(props)
        return ext

    def _build_request(
        self, msgs: Message | list[Message] | EncodedBatch, mq: MessageQueue
    ) -> tuple[RemotingCommand, str]:
        if type(msgs) is EncodedBatch:
            ext = self._header(
                mq.topic, mq.queue_id, 0, 0, {PROPERTY_WAIT: "true" if msgs.wait else "false"}, True
            )
            return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, msgs.body), msgs.ids
        if isinstance(msgs, list):
            prop_strings = []
            ids = []
            for m in msgs:
                props = m.wire_properties()
                if PROPERTY_UNIQ_KEY not in props:
                    uid = UNIQ_IDS.next_id()
                    m.properties[PROPERTY_UNIQ_KEY] = uid
                    props[PROPERTY_UNIQ_KEY] = uid
                props.setdefault(PROPERTY_WAIT, "true")
                ids.append(props[PROPERTY_UNIQ_KEY])
                prop_strings.append(properties_to_string(props))
            body = encode_batch(msgs, prop_strings)
            ext = self._header(mq.topic, mq.queue_id, 0, 0, {PROPERTY_WAIT: "true"}, True)
            return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body), ",".join(ids)
        topic = mq.topic
        if (
            not msgs.properties
            and len(msgs.body) < self.compress_msg_body_over_howmuch
            and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        ):
            # No user properties (so no transaction, reply or retry fields), nothing to compress: the
            # property string straight from the message's fields, no dict to build and join
            uid = UNIQ_IDS.next_id()
            msgs.properties[PROPERTY_UNIQ_KEY] = uid
            request = send_request(
                RequestCode.SEND_MESSAGE_V2, self._template(topic, mq.queue_id, False), 0,
                time.time_ns() // 1_000_000, msgs.flag, msgs.plain_wire_properties(uid), msgs.body,
            )  # fmt: skip
            return request, uid
        return self._build_single_request(msgs, mq)

    def _build_single_request(self, msgs: Message, mq: MessageQueue) -> tuple[RemotingCommand, str]:
        """Any single message (_build_request's general case)."""
        body, sys_flag, props = self._encode_single(msgs)
        code = RequestCode.SEND_MESSAGE_V2
        if msgs.properties.get(PROPERTY_MSG_TYPE) == REPLY_MESSAGE_FLAG:
            code = RequestCode.SEND_REPLY_MESSAGE_V2
        topic = mq.topic
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # (a retry topic moves properties to j and l)
            # _header's fields, formatted into the template's JSON when the request is written
            request = send_request(
                code, self._template(topic, mq.queue_id, False), sys_flag, time.time_ns() // 1_000_000,
                msgs.flag, properties_to_string(props), body,
            )  # fmt: skip
            return request, props[PROPERTY_UNIQ_KEY]
        ext = self._header(topic, mq.queue_id, sys_flag, msgs.flag, props, False)
        return RemotingCommand.request(code, ext, body), props[PROPERTY_UNIQ_KEY]

    # -- sending ---------------------------------------------------------------------------------
    async def _send_to_queue(
        self,
        msgs: Message | list[Message] | EncodedBatch,
        mq: MessageQueue,
        timeout_s: float,
        oneway: bool = False,
    ) -> SendResult | None:
        inst = self.instance
        addr = inst.find_broker_addr(mq.broker_name)  # known broker: no coroutine
        if addr is None:
            addr = await inst.find_broker_addr_or_refresh(mq.broker_name, mq.topic)
        request, uniq = self._build_request(msgs, mq)
        if oneway:
            await inst.remoting.invoke_oneway(addr, request)
            return None
        resp = await inst.remoting.invoke(addr, request, timeout_s)
        status = _STATUS_BY_CODE.get(resp.code)
        if status is None:
            raise MQBrokerError(resp.code, resp.remark, addr)
        get = resp.ext_fields.get
        qid = int(get("queueId", mq.queue_id))
        queue = mq if qid == mq.queue_id else MessageQueue(mq.topic, mq.broker_name, qid)
        # positional, in SendResult's field order (keywords cost a third of the call): status, msg_id,
        # offset_msg_id, queue, queue_offset, transaction_id, region_id, trace_on
        return SendResult(
            status, uniq, get("msgId", ""), queue, int(get("queueOffset", -1)), get("transactionId"),
            get("MSG_REGION", "DefaultRegion"), get("TRACE_ON", "true") != "false",
        )  # fmt: skip

    def _select_queue(self, info: TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        if self.send_latency_fault_enable:
            return self._fault.select(info, last_broker)
        return info.select_one(last_broker)

    async def _send_default(
        self,
        msgs: Message | list[Message] | EncodedBatch,
        topic: str,
        times_total: int,
        timeout_s: float,
        oneway: bool = False,
        same_broker: bool = False,
    ) -> SendResult | None:
        """Retry loop. Sync sends move to another broker on retry; async sends retry on the same
        broker (retryTimesWhenSendAsyncFailed, as RocketMQ does)."""
        # time.monotonic, not loop.time(): asyncio.get_running_loop() makes a getpid() system call on
        # Python 3.11, one per send
        clock = time.monotonic
        begin = clock()
        info = self._publish.get(topic)  # known route: no coroutine
        if info is None or not info.queues:
            info = await self._publish_info(topic)
        last_broker: str | None = None
        last_exc: Exception | None = None
        last_result: SendResult | None = None
        mq: MessageQueue | None = None
        for _attempt in range(times_total):
            if mq is None or not same_broker:
                mq = self._select_queue(info, last_broker)
            last_broker = mq.broker_name
            remaining = timeout_s - (clock() - begin)
            if remaining <= 0:
                break
            t0 = clock()
            try:
                result = await self._send_to_queue(msgs, mq, remaining, oneway)
            except (RemotingError, MQClientError, OSError) as exc:
                self._update_fault(mq.broker_name, t0, isolation=True)
                last_exc = exc
                log.debug("send to %s failed: %s", mq, exc)
                # the route may have changed (broker gone, restarted elsewhere)
                info = await self._refresh_publish_info(topic, info)
                continue
            except MQBrokerError as exc:
                self._update_fault(mq.broker_name, t0, isolation=True)
                last_exc = exc
                if exc.code in RETRY_RESPONSE_CODES:
                    continue
                raise
            self._update_fault(mq.broker_name, t0, isolation=False)
            if (
                result is not None
                and result.status is not SendStatus.SEND_OK
                and self.retry_another_broker_when_not_store_ok
            ):
                last_result = result  # stored short of the promise (SLAVE_NOT_AVAILABLE...): try another
                continue
            return result
        if last_result is not None:  # every attempt stored it short of the promise: the last answer
            return last_result
        if last_exc is None:
            raise MQClientError(-1, f"send timed out after {timeout_s:g} s")
        if isinstance(last_exc, MQBrokerError):
            raise last_exc
        raise MQClientError(-1, f"Send [{times_total}] times, still failed: {last_exc}") from last_exc

    async def _refresh_publish_info(self, topic: str, info: TopicPublishInfo) -> TopicPublishInfo:
        try:
            self._publish.pop(topic, None)
            return await self._publish_info(topic)
        except Exception:
            self._publish[topic] = info
            return info

    def _update_fault(self, broker: str, t0: float, isolation: bool) -> None:
        """t0: time.monotonic() when the attempt began."""
        if self.send_latency_fault_enable:
            self._fault.update(broker, int((time.monotonic() - t0) * 1000), isolation)

    def _split_batch(self, msgs: list[Message]) -> list[list[Message]]:
        topic = msgs[0].topic
        out: list[list[Message]] = []
        cur: list[Message] = []
        size = 0
        for m in msgs:
            if m.topic != topic:
                raise MQClientError(-1, "The topic of the messages in one batch should be the same")
            if m.delay_level > 0:
                raise MQClientError(-1, "TimeDelayLevel is not supported for batching")
            if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MQClientError(-1, "Retry Group is not supported for batching")
            self._check_message(m)
            item = batch_item_size(len(m.body), properties_to_string(m.wire_properties())) + len(topic) + 80
            if cur and size + item > MAX_BATCH_BYTES:
                out.append(cur)
                cur, size = [], 0
            cur.append(m)
            size += item
        if cur:
            out.append(cur)
        return out

    async def send(
        self,
        msg: Message | Sequence[Message],
        queue: MessageQueue | None = None,
        selector: Selector | None = None,
        arg: Any = None,
        timeout: int | None = None,
    ) -> SendResult:
        """Send synchronously. A list is a batch (same topic; split into ≤ 4 MiB requests; the result of the
        last request is returned, ``msg_id`` joining every message's id)."""
        timeout_s = (timeout if timeout is not None else self.send_msg_timeout) / 1000.0
        if not isinstance(msg, Message) and isinstance(msg, Sequence):  # the ABC check is the slow one
            msgs = list(msg)
            if not msgs:
                raise MQClientError(-1, "the batch is empty")
            results = []
            for part in self._split_batch(msgs):
                r = await self._send_one_or_batch(part, part[0].topic, queue, selector, arg, timeout_s)
                results.append(r)
            if len(results) == 1:
                return results[0]
            first = results[0]
            return SendResult(
                first.status,
                ",".join(r.msg_id for r in results),
                ",".join(r.offset_msg_id for r in results),
                first.queue,
                first.queue_offset,
            )
        self._check_message(msg)
        if (
            self._accumulator is not None
            and (fut := self._accumulate(msg, queue, selector, timeout_s)) is not None
        ):
            return await fut
        if queue is None and selector is None and self._trace is None and self._meter is None:
            # what _send_traced -> _send_one_or_batch do for this case, two coroutines fewer per send
            total = 1 + self.retry_times_when_send_failed
            return await self._send_default(msg, msg.topic, total, timeout_s)  # type: ignore[return-value]
        return await self._send_traced(msg, msg.topic, queue, selector, arg, timeout_s)

    async def _send_one_or_batch(
        self,
        msg: Message | list[Message],
        topic: str,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_s: float,
        oneway: bool = False,
        times_total: int | None = None,
        same_broker: bool = False,
    ) -> Any:
        if queue is not None:
            if queue.topic != topic:
                raise MQClientError(-1, "message's topic not equal mq's topic")
            return await asyncio.wait_for(self._send_to_queue(msg, queue, timeout_s, oneway), timeout_s + 0.5)
        if selector is not None:
            info = await self._publish_info(topic)
            sample = msg[0] if isinstance(msg, list) else msg
            mq = selector(list(info.queues), sample, arg)
            if mq is None:
                raise MQClientError(-1, "select message queue return null.")
            return await self._send_to_queue(msg, mq, timeout_s, oneway)
        total = times_total if times_total is not None else 1 + self.retry_times_when_send_failed
        return await self._send_default(msg, topic, total, timeout_s, oneway, same_broker)

    async def _send_traced(
        self,
        msg: Message | list[Message],
        topic: str,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_s: float,
        oneway: bool = False,
        times_total: int | None = None,
        same_broker: bool = False,
    ) -> Any:
        meter = self._meter
        if meter is None or oneway:
            return await self._send_with_trace(
                msg, topic, queue, selector, arg, timeout_s, oneway, times_total, same_broker
            )
        client_id = self._instance.client_id if self._instance is not None else ""
        t0 = time.monotonic()
        try:
            result = await self._send_with_trace(
                msg, topic, queue, selector, arg, timeout_s, oneway, times_total, same_broker
            )
        except Exception:
            meter.sent(topic, client_id, time.monotonic() - t0, False)  # rocketmq_send_cost_time
            raise
        meter.sent(topic, client_id, time.monotonic() - t0, True)
        return result

    async def _send_with_trace(
        self,
        msg: Message | list[Message],
        topic: str,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_s: float,
        oneway: bool = False,
        times_total: int | None = None,
        same_broker: bool = False,
    ) -> Any:
        trace = self._trace
        if trace is None or isinstance(msg, list):
            return await self._send_one_or_batch(
                msg, topic, queue, selector, arg, timeout_s, oneway, times_total, same_broker
            )
        t0 = time.monotonic()
        try:
            result = await self._send_one_or_batch(
                msg, topic, queue, selector, arg, timeout_s, oneway, times_total, same_broker
            )
        except Exception:
            trace.on_send(msg, None, int((time.monotonic() - t0) * 1000), False)
            raise
        trace.on_send(msg, result, int((time.monotonic() - t0) * 1000), True)
        return result

    def send_async(
        self,
        msg: Message | Sequence[Message],
        queue: MessageQueue | None = None,
        selector: Selector | None = None,
        arg: Any = None,
        timeout: int | None = None,
        callback: Any = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send in the background; returns the task (an awaitable future of SendResult)."""
        timeout_s = (timeout if timeout is not None else self.send_msg_timeout) / 1000.0

        async def run() -> SendResult:
            if isinstance(msg, Sequence) and not isinstance(msg, Message):
                return await self.send(msg, queue, selector, arg, timeout)
            self._check_message(msg)
            if (
                self._accumulator is not None
                and (fut := self._accumulate(msg, queue, selector, timeout_s)) is not None
            ):
                return await fut
            return await self._send_traced(
                msg,
                msg.topic,
                queue,
                selector,
                arg,
                timeout_s,
                times_total=1 + self.retry_times_when_send_async_failed,
                same_broker=True,
            )

        task = asyncio.get_running_loop().create_task(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        if callback is not None:

            def done(t: asyncio.Task[SendResult]) -> None:
                if t.cancelled():
                    invoke_send_callback(callback, None, asyncio.CancelledError())
                elif t.exception() is not None:
                    invoke_send_callback(callback, None, t.exception())
                else:
                    invoke_send_callback(callback, t.result(), None)

            task.add_done_callback(done)
        return task

    async def send_oneway(
        self,
        msg: Message,
        queue: MessageQueue | None = None,
        selector: Selector | None = None,
        arg: Any = None,
    ) -> None:
        """Fire and forget: no response, no retry."""
        self._check_message(msg)
        await self._send_one_or_batch(
            msg, msg.topic, queue, selector, arg, self.send_msg_timeout / 1000.0, oneway=True, times_total=1
        )

    async def request(
        self,
        msg: Message,
        timeout: int | None = None,
        queue: MessageQueue | None = None,
        selector: Selector | None = None,
        arg: Any = None,
    ) -> MessageExt:
        """Request–reply: send ``msg`` and wait for the responder's reply (create_reply_message + send)."""
        timeout_ms = timeout if timeout is not None else self.send_msg_timeout
        inst = self.instance
        self._check_message(msg)
        correlation_id = uuid.uuid4().hex
        msg.properties[PROPERTY_CORRELATION_ID] = correlation_id
        msg.properties[PROPERTY_REPLY_TO_CLIENT] = inst.client_id
        msg.properties[PROPERTY_TTL] = str(timeout_ms)
        fut = inst.expect_reply(correlation_id)
        loop = asyncio.get_running_loop()
        begin = loop.time()
        try:
            await self._publish_info(msg.topic)
            if inst.all_broker_addrs() - inst.heartbeat_addrs:
                await inst.send_heartbeat_all()  # the broker finds us among its producer channels
            await self.send(msg, queue=queue, selector=selector, arg=arg, timeout=timeout_ms)
            left = timeout_ms / 1000.0 - (loop.time() - begin)
            try:
                return await asyncio.wait_for(fut, max(left, 0.001))
            except TimeoutError:
                what = f"send request message to <{msg.topic}> OK, but wait reply message timeout"
                raise MQClientError(10006, f"{what}, {timeout_ms} ms.") from None
        finally:
            inst.forget_reply(correlation_id)
