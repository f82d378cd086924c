# Over 600 lines: lifecycle, rebalance and the pull loop of PushConsumer; moving the pull loop out is planned.
"""PushConsumer (DefaultMQPushConsumer) — asyncio core: rebalance, long-polling pull loop per queue,
flow control, concurrent or orderly consumption, retry via send-back, offset commit."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from rocketq.protocol.frame import RemotingCommand

from . import metrics as client_metrics
from .allocate import Strategy, resolve_strategy
from .consume import (
    ConcurrentConsumeMixin,
    ConsumeConcurrentlyContext,
    is_success,
    wants_context,
)
from .consume_orderly import OrderlyConsumeMixin
from .instance import (
    DEFAULT_INSTANCE_NAME,
    ClientConfig,
    MQClientInstance,
    acquire_instance_for_group,
    parse_namesrv,
    release_instance,
)
from .message import (
    ConsumeFromWhere,
    MessageExt,
    MessageModel,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    retry_topic,
)
from .offset_store import LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from .process_queue import ProcessQueue
from .pull import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullStatus,
    build_pull_request,
    process_pull_response,
)
from .subscription import EXPRESSION_TAG, MessageSelector, SubscriptionData
from .trace import TraceDispatcher
from .validators import check_consumer, log_missing_topic

log = logging.getLogger(__name__)

Listener = Callable[[list[MessageExt]], Any]

PULL_DELAY_ON_EXCEPTION_S = 3.0
RETRY_REBALANCE_S = 1.0  # queues whose start offset could not be read are tried again this soon
PULL_DELAY_ON_FLOW_CONTROL_S = 0.05


def _parse_consume_timestamp(ts: str | int | float | datetime | None) -> int:
    """consumeTimestamp: "yyyyMMddHHmmss" (Java), epoch ms, or a datetime; default now - 30 min."""
    if ts is None:
        return int((time.time() - 1800) * 1000)
    if isinstance(ts, datetime):
        return int(ts.timestamp() * 1000)
    if isinstance(ts, int | float):
        return int(ts)
    return int(datetime.strptime(ts, "%Y%m%d%H%M%S").timestamp() * 1000)


def _forget(aw: Awaitable[Any]) -> None:
    """A pull sent ahead that nobody will read (queue dropped, consumer stopping, an error before it)."""
    fut = asyncio.ensure_future(aw)
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())


class PushConsumer(ConcurrentConsumeMixin, OrderlyConsumeMixin):
    """``c = PushConsumer("CG", namesrv=...); c.subscribe("T", "TagA || TagB"); c.register_listener(fn);
    await c.start()``. ``fn(msgs)`` may be a plain function (run in a pool of ``consume_thread_max``
    threads) or a coroutine function (run on the event loop)."""

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | int | float | datetime | None = None,
        allocate_strategy: str | Strategy | None = None,
        max_reconsume_times: int = 16,
        consume_thread_min: int = 20,
        consume_thread_max: int = 20,
        pull_batch_size: int = 32,
        pull_interval: int = 0,
        consume_message_batch_max_size: int = 1,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        consume_concurrently_max_span: int = 2000,
        suspend_current_queue_time_millis: int = 1000,
        broker_suspend_max_time_millis: int = 15000,
        consumer_timeout_millis_when_suspend: int = 30000,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        offset_store_dir: str | None = None,
        client_config: ClientConfig | None = None,
        enable_msg_trace: bool = False,
        customized_trace_topic: str | None = None,
        consume_timeout: float = 15,
    ) -> None:
        if not group:
            raise MQClientError(-1, "consumerGroup is null")
        self.group = group
        self.namesrv_addrs = parse_namesrv(namesrv)
        self.message_model = MessageModel(message_model)
        self.consume_from_where = ConsumeFromWhere(consume_from_where)
        self.consume_timestamp = _parse_consume_timestamp(consume_timestamp)
        self.allocate_strategy = resolve_strategy(allocate_strategy)
        self.max_reconsume_times = max_reconsume_times
        self.consume_thread_min = consume_thread_min
        self.consume_thread_max = max(consume_thread_max, 1)
        self.pull_batch_size = pull_batch_size
        self.pull_interval = pull_interval
        self.consume_message_batch_max_size = max(consume_message_batch_max_size, 1)
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.suspend_current_queue_time_millis = suspend_current_queue_time_millis
        self.broker_suspend_max_time_millis = broker_suspend_max_time_millis
        self.consumer_timeout_millis_when_suspend = consumer_timeout_millis_when_suspend
        self.instance_name = instance_name
        self.offset_store_dir = offset_store_dir
        self.client_config = client_config

        self._subs: dict[str, SubscriptionData] = {}
        self._sub_info: dict[str, set[MessageQueue]] = {}
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._orderly_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._orderly_wakeups: dict[MessageQueue, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[Any]] = set()  # consumption in progress
        self._bg_tasks: set[asyncio.Task[Any]] = set()  # loops and delayed retries
        self._listener: Listener | None = None
        self._listener_is_async = False
        self._listener_wants_context = False
        self.orderly = False
        self._instance: MQClientInstance | None = None
        self.offset_store: OffsetStore | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        # concurrent consumption: pending (msgs, process queue, queue) and the workers serving them
        self._consume_requests: collections.deque[tuple[list[MessageExt], ProcessQueue, MessageQueue]] = (
            collections.deque()
        )
        self._n_workers = 0
        self._helper_pending = False
        self._running = False
        self._paused = False
        self._rebalance_lock = asyncio.Lock()
        self.enable_msg_trace = enable_msg_trace
        self.consume_timeout = consume_timeout  # minutes, like consumeTimeout
        self.customized_trace_topic = customized_trace_topic
        self._trace: TraceDispatcher | None = None
        self._meter: Any = None  # rocketq.client.metrics.ClientMeter when metrics were enabled at start
        self.corrupt_messages = 0  # pulled records left out, their body failing its CRC (check_crc)
        self._corrupt_logged_at = 0.0

    # -- configuration ---------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """``expression``: "*", "TagA || TagB", or a MessageSelector (by_tag / by_sql)."""
        self._subs[topic] = SubscriptionData.build(topic, expression)
        if self._running and self._instance is not None:
            self._spawn(self._after_subscription_change(), background=True)

    def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)

    def register_listener(self, listener: Listener, orderly: bool = False) -> None:
        """A MessageListenerConcurrently (default) or, with ``orderly=True``, a MessageListenerOrderly."""
        self._listener = listener
        self._listener_is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            getattr(listener, "__call__", None)  # noqa: B004
        )
        self.orderly = orderly
        self._listener_wants_context = wants_context(listener)

    register_message_listener = register_listener

    def register_listener_orderly(self, listener: Listener) -> None:
        self.register_listener(listener, orderly=True)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        if self._listener is None:
            raise MQClientError(-1, "messageListener is null")
        if not self._subs:
            raise MQClientError(-1, "no subscription")
        check_consumer(self.group, self._subs)
        if self.message_model is MessageModel.CLUSTERING:
            self._subs.setdefault(
                retry_topic(self.group), SubscriptionData.build(retry_topic(self.group), "*")
            )
        inst = await self._attach_instance()
        if not self._listener_is_async:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self.consume_thread_max, thread_name_prefix=f"ConsumeMessageThread_{self.group}"
            )
        self._consume_requests.clear()
        self._n_workers = 0  # workers cancelled before their first step never ran their finally
        self._helper_pending = False
        self._running = True
        inst.register_consumer(self.group, self)
        await inst.start()
        for topic in list(self._subs):
            try:
                if not await inst.update_topic_route(topic):
                    log_missing_topic(self.group, topic, inst.namesrv_addrs)
            except Exception as exc:
                log.warning("route of %s: %s", topic, exc)
        await self._check_filters()
        self._meter = client_metrics.current()
        if self._meter is not None:
            self._meter.attach(self)
        if self.enable_msg_trace:
            self._trace = TraceDispatcher(inst, self.group, self.customized_trace_topic)
            await self._trace.start()
        await inst.send_heartbeat_all()
        if self._needs_locks:
            self._spawn(self._lock_loop(), background=True)
        if self.consume_timeout > 0:
            self._spawn(self._clean_expired_loop(), background=True)
        inst.rebalance_immediately()

    async def _attach_instance(self) -> MQClientInstance:
        """Join the group's client instance and load the offsets (broadcasting: local file, else broker)."""
        inst = acquire_instance_for_group(
            self.namesrv_addrs, self.instance_name, self.group, "consumer", self.client_config
        )
        self._instance = inst
        if self.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(inst.client_id, self.group, self.offset_store_dir)
        else:
            self.offset_store = RemoteBrokerOffsetStore(self._query_offset, self._update_offset)
        await self.offset_store.load()
        return inst

    async def _detach_instance(self, inst: MQClientInstance | None) -> None:
        """Drop every process queue and leave the client instance."""
        for pq in self._pqs.values():
            pq.dropped = True
        self._pqs.clear()
        self._pull_tasks.clear()
        if inst is not None:
            await inst.unregister_consumer(self.group)
            await release_instance(inst)

    async def _check_filters(self) -> None:
        """SQL92 subscriptions: ask every broker of the topic whether it can filter (checkClientInBroker)."""
        inst = self.instance
        for topic, sub in self._subs.items():
            if sub.expression_type == EXPRESSION_TAG:
                continue
            route = inst.routes.get(topic)
            for bd in route.broker_datas if route else ():
                addr = bd.broker_addrs.get("0")
                if addr is None:
                    continue
                try:
                    await inst.api.check_client_config(addr, self.group, inst.client_id, sub.to_json())
                except MQBrokerError as exc:
                    await self.shutdown()
                    raise MQClientError(
                        exc.code,
                        f"check client in broker error, maybe because you use {sub.expression_type} "
                        f"filter, but server has not been upgraded/enabled: {exc.remark}",
                    ) from exc

    async def _after_subscription_change(self) -> None:
        inst = self._instance
        if inst is None:
            return
        for topic in list(self._subs):
            with contextlib.suppress(Exception):
                await inst.update_topic_route(topic)
        await inst.send_heartbeat_all()
        inst.rebalance_immediately()

    async def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        inst = self._instance
        tasks = list(self._pull_tasks.values()) + list(self._orderly_tasks.values()) + list(self._bg_tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            # bounded: a task that ignores its cancel must not hang the caller's shutdown
            _, stuck = await asyncio.wait(tasks, timeout=10.0)
            if stuck:
                log.error("%s: %d task(s) did not stop on shutdown: %s", self.group, len(stuck), stuck)
        # let in-flight consumption finish briefly so its offsets get committed
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        for t in self._tasks:
            t.cancel()
        with contextlib.suppress(Exception):
            await self.persist_consumer_offset()
        if self._trace is not None:
            with contextlib.suppress(Exception):
                await self._trace.shutdown()
            self._trace = None
        if self._needs_locks and inst is not None:
            with contextlib.suppress(Exception):
                await self._unlock_all()
        await self._detach_instance(inst)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def suspend(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    @property
    def _needs_locks(self) -> bool:
        """Orderly clustering consumers lock their queues on the broker; broadcasting ones do not."""
        return self.orderly and self.message_model is MessageModel.CLUSTERING

    def _spawn(self, coro: Any, background: bool = False) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        tasks = self._bg_tasks if background else self._tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    @property
    def instance(self) -> MQClientInstance:
        if self._instance is None:
            raise MQClientError(-1, "consumer not started")
        return self._instance

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer currently pulls (after rebalance), sorted."""
        return sorted(mq for mq, pq in self._pqs.items() if not pq.dropped)

    # -- instance callbacks ----------------------------------------------------------------------
    def subscribed_topics(self) -> list[str]:
        return list(self._subs)

    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if topic in self._subs:
            self._sub_info[topic] = set(mqs)

    def consumer_data(self) -> dict[str, Any]:
        return {
            "groupName": self.group,
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": self.message_model.value,
            "consumeFromWhere": self.consume_from_where.value,
            "unitMode": False,
            "subscriptionDataSet": [s.to_json() for s in self._subs.values()],
        }

    async def persist_consumer_offset(self) -> None:
        if self.offset_store is None:
            return
        await self.offset_store.persist_all(list(self._pqs))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """The broker reset the group's offsets (mqadmin resetOffsetByTime): drop the affected queues,
        store the new offsets and rebalance so pulling restarts from them."""
        store = self.offset_store
        if store is None:
            return
        async with self._rebalance_lock:
            for mq, off in offsets.items():
                pq = self._pqs.pop(mq, None)
                if pq is not None:
                    pq.dropped = True
                    task = self._pull_tasks.pop(mq, None)
                    if task is not None:
                        task.cancel()
                store.update_offset(mq, off, False)
            with contextlib.suppress(Exception):
                await store.persist_all(list(offsets))
            for mq in offsets:
                store.remove_offset(mq)
        self.instance.rebalance_immediately()

    def _corrupt(self, mq: MessageQueue, queue_offset: int, commit_log_offset: int) -> None:
        """A pulled record failed its body CRC: it is not handed to the listener (as 5.x clients discard a
        corrupted message); counted, and logged at most once a second."""
        self.corrupt_messages += 1
        now = time.monotonic()
        if now - self._corrupt_logged_at >= 1.0:
            self._corrupt_logged_at = now
            log.error(
                "%s: message at queue offset %d (CommitLog offset %d) failed its body CRC and was discarded "
                "(%d so far)", mq, queue_offset, commit_log_offset, self.corrupt_messages,
            )  # fmt: skip

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO answer (ConsumerRunningInfo; mqTable keyed fastjson-style)."""
        from rocketq.protocol.lenient_json import FrozenKey

        now_ms = int(time.time() * 1000)
        store = self.offset_store
        mq_table = {}
        for mq, pq in list(self._pqs.items()):
            mq_table[FrozenKey.of(mq.to_json())] = {
                "commitOffset": store.table.get(mq, -1) if store else -1,
                "cachedMsgCount": pq.msg_count,
                "cachedMsgSizeInMiB": pq.msg_size // (1024 * 1024),
                "cachedMsgMaxOffset": pq.queue_offset_max,
                "locked": pq.locked,
                "droped": pq.dropped,
                "lastPullTimestamp": now_ms - int((time.monotonic() - pq.last_pull_ts) * 1000),
                "lastConsumeTimestamp": now_ms - int((time.monotonic() - pq.last_consume_ts) * 1000),
            }
        return {
            "properties": {
                "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
                "PROP_CLIENT_VERSION": "V4_9_8",
                "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
                "PROP_THREADPOOL_CORE_SIZE": str(self.consume_thread_max),
                "PROP_CONSUMER_START_TIMESTAMP": str(now_ms),
                "messageModel": self.message_model.value,
                "consumeFromWhere": self.consume_from_where.value,
                "consumerGroup": self.group,
            },
            "subscriptionSet": [s.to_json() for s in self._subs.values()],
            "mqTable": mq_table,
            "statusTable": {},
        }

    async def consume_directly(self, msg: MessageExt) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin consumeMessage): run the listener on one message."""
        self._reset_retry_topic([msg])
        t0 = time.monotonic()
        try:
            result = await self._call_listener([msg], ConsumeConcurrentlyContext(msg.queue))
            code = (
                "CR_SUCCESS" if is_success(result) else ("CR_RETURN_NULL" if result is None else "CR_LATER")
            )
            remark = None
        except Exception as exc:
            code, remark = "CR_THROW_EXCEPTION", repr(exc)
        return {
            "order": self.orderly,
            "autoCommit": True,
            "consumeResult": code,
            "remark": remark,
            "spentTimeMills": int((time.monotonic() - t0) * 1000),
        }

    # -- offsets on the broker -------------------------------------------------------------------
    # Offsets go to the master, or to a slave while the brokerName has none (RocketMQ's
    # findBrokerAddressInAdmin): the master overwrites them from its own table when it is back.
    async def _query_offset(self, mq: MessageQueue) -> int:
        addr = await self.instance.find_broker_addr_or_refresh(mq.broker_name, mq.topic, only_master=False)
        return await self.instance.api.query_consumer_offset(addr, self.group, mq)

    async def _update_offset(self, mq: MessageQueue, offset: int) -> None:
        addr = self.instance.find_broker_addr(mq.broker_name, only_master=False)
        if addr is None:
            await self.instance.update_topic_route(mq.topic)
            addr = self.instance.find_broker_addr(mq.broker_name, only_master=False)
        if addr is not None:
            await self.instance.api.update_consumer_offset(addr, self.group, mq, offset)

    async def _compute_pull_from_where(self, mq: MessageQueue) -> int:
        assert self.offset_store is not None
        try:
            last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        except Exception as exc:
            log.warning("read offset of %s failed: %s", mq, exc)
            return -1
        if last >= 0:
            return last
        inst = self.instance
        is_retry = mq.topic.startswith("%RETRY%")
        cfw = self.consume_from_where
        if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or (
            is_retry and cfw is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        ):
            return 0
        addr = await inst.find_broker_addr_or_refresh(mq.broker_name, mq.topic, only_master=False)
        try:
            if cfw is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET or is_retry:
                return await inst.api.get_max_offset(addr, mq)
            return await inst.api.search_offset(addr, mq, self.consume_timestamp)
        except Exception as exc:
            log.warning("compute pull offset of %s failed: %s", mq, exc)
            return -1

    # -- rebalance -------------------------------------------------------------------------------
    async def do_rebalance(self) -> None:
        if not self._running:
            return
        async with self._rebalance_lock:
            for topic in list(self._subs):
                await self._rebalance_topic(topic)
            for mq in [mq for mq in self._pqs if mq.topic not in self._subs]:
                pq = self._pqs.pop(mq)
                pq.dropped = True
                await self._remove_unnecessary(mq, pq)

    async def _rebalance_topic(self, topic: str) -> None:
        mqs = self._sub_info.get(topic)
        if not mqs:
            with contextlib.suppress(Exception):
                await self.instance.update_topic_route(topic)
            mqs = self._sub_info.get(topic)
            if not mqs:
                return
        if self.message_model is MessageModel.BROADCASTING:
            allocated = set(mqs)
        else:
            cids = await self.instance.find_consumer_id_list(topic, self.group)
            if not cids:
                return
            try:
                allocated = set(
                    self.allocate_strategy(self.group, self.client_id, sorted(mqs), sorted(set(cids)))
                )
            except Exception as exc:
                log.warning("allocate for %s failed: %s", topic, exc)
                return
        await self._update_process_queue_table(topic, allocated)

    async def _update_process_queue_table(self, topic: str, allocated: set[MessageQueue]) -> bool:
        changed = False
        for mq, pq in list(self._pqs.items()):
            if mq.topic != topic:
                continue
            if mq not in allocated:
                pq.dropped = True
                self._pqs.pop(mq, None)
                await self._remove_unnecessary(mq, pq)
                changed = True
        assert self.offset_store is not None
        new_mqs = sorted(mq for mq in allocated if mq not in self._pqs)
        if self._needs_locks and new_mqs:
            locked = await self._lock(new_mqs)
            new_mqs = [mq for mq in new_mqs if mq in locked]
        for mq in new_mqs:
            self.offset_store.remove_offset(mq)
        # every new queue's start offset at once (one broker round trip each), so that their pulls start
        # together rather than one round trip apart
        offsets = await asyncio.gather(*map(self._compute_pull_from_where, new_mqs), return_exceptions=True)
        retry = False
        for mq, offset in zip(new_mqs, offsets, strict=True):
            if not isinstance(offset, int) or offset < 0:
                if isinstance(offset, BaseException):
                    log.warning("compute pull offset of %s failed: %r", mq, offset)
                retry = True
                continue
            pq = ProcessQueue()
            if self.orderly:
                pq.locked = True
            self._pqs[mq] = pq
            self._pull_tasks[mq] = asyncio.get_running_loop().create_task(self._pull_loop(mq, pq, offset))
            changed = True
        if retry and self._running:
            # a broker did not answer (a master just lost: the route may not show it yet): try these queues
            # again in a second, with a fresh route, rather than at the next rebalance period
            inst = self.instance
            with contextlib.suppress(Exception):
                await inst.update_topic_route(topic)
            asyncio.get_running_loop().call_later(RETRY_REBALANCE_S, inst.rebalance_immediately)
        return changed

    async def _remove_unnecessary(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        otask = self._orderly_tasks.pop(mq, None)
        if otask is not None:
            otask.cancel()
        self._orderly_wakeups.pop(mq, None)
        assert self.offset_store is not None
        with contextlib.suppress(Exception):
            await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        if self._needs_locks:
            with contextlib.suppress(Exception):
                addr = self.instance.find_broker_addr(mq.broker_name)
                if addr:
                    await self.instance.api.unlock_batch_mq(addr, self.group, self.client_id, [mq])

    # -- pulling ---------------------------------------------------------------------------------
    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        inst = self.instance
        store = self.offset_store
        assert store is not None
        clustering = self.message_model is MessageModel.CLUSTERING
        size_limit = self.pull_threshold_size_for_queue * 1024 * 1024
        timeout_s = self.consumer_timeout_millis_when_suspend / 1000.0
        next_offset = offset
        suggested = 0

        def flow_controlled() -> bool:
            return (
                pq.msg_count > self.pull_threshold_for_queue
                or pq.msg_size > size_limit
                or (not self.orderly and pq.max_span() > self.consume_concurrently_max_span)
            )

        def room_for_another(body_len: int) -> bool:
            # the flow-control check made before a pull, with this answer's messages counted as cached
            # already (at most a batch): the cache stays within the thresholds plus one batch, as without
            # pulling ahead
            batch = self.pull_batch_size
            return (
                pq.msg_count + batch <= self.pull_threshold_for_queue
                and pq.msg_size + body_len <= size_limit
                and (self.orderly or pq.max_span() + batch <= self.consume_concurrently_max_span)
            )

        def request_for(offset: int, sub: SubscriptionData, addr: str) -> RemotingCommand:
            sys_flag = PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION
            commit_offset = 0
            if clustering:
                co = store.table.get(mq, -1)
                if co > 0:
                    commit_offset = co
                    sys_flag |= PULL_FLAG_COMMIT_OFFSET
            if addr != inst.find_broker_addr(mq.broker_name):
                sys_flag &= ~PULL_FLAG_COMMIT_OFFSET  # only a master stores commit offsets
            return build_pull_request(
                self.group, mq, offset, self.pull_batch_size, sys_flag, commit_offset,
                self.broker_suspend_max_time_millis, sub,
            )  # fmt: skip

        # A pull sent ahead: when a pull finds messages, the next one leaves before they are decoded and
        # handed to the listener (its offset is in the answer's header), so the broker reads the next
        # batch while this side works on the last one instead of the two taking turns.
        ahead: tuple[Awaitable[RemotingCommand], SubscriptionData, str] | None = None
        while self._running and not pq.dropped:
            if ahead is None:
                if self._paused:
                    await asyncio.sleep(1.0)
                    continue
                if flow_controlled():
                    await asyncio.sleep(PULL_DELAY_ON_FLOW_CONTROL_S)
                    continue
                sub = self._subs.get(mq.topic) or self._fallback_subscription(mq.topic)
                if sub is None:
                    await asyncio.sleep(PULL_DELAY_ON_EXCEPTION_S)
                    continue
            try:
                if ahead is None:
                    # the broker's suggestion (pullFromWhichNode), else the master, else any replica
                    addr = inst.find_broker_addr_by_id(mq.broker_name, suggested) or (
                        await inst.find_broker_addr_or_refresh(mq.broker_name, mq.topic, only_master=False)
                    )
                    pending = inst.remoting.start_invoke(addr, request_for(next_offset, sub, addr), timeout_s)
                else:
                    pending, sub, addr = ahead
                    ahead = None
                resp = await pending
                if (
                    resp.code == PullStatus.FOUND.value
                    and resp.body
                    and self._running
                    and not self._paused
                    and self.pull_interval <= 0
                    and room_for_another(len(resp.body))
                ):
                    ext = resp.ext_fields
                    nxt = int(ext.get("nextBeginOffset", -1))
                    to = inst.find_broker_addr_by_id(mq.broker_name, int(ext.get("suggestWhichBrokerId", 0)))
                    cur = self._subs.get(mq.topic) or sub
                    if nxt >= 0 and to:
                        early = inst.remoting.start_invoke(to, request_for(nxt, cur, to), timeout_s)
                        ahead = (early, cur, to)
                result = process_pull_response(
                    resp, mq, sub, addr, inst.config.check_crc, functools.partial(self._corrupt, mq)
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._running and not pq.dropped:
                    log.info("pull %s failed: %s", mq, exc)
                if ahead is not None:
                    _forget(ahead[0])
                    ahead = None
                # the broker may be gone (a master lost: its slave serves the queue): ask the NameServer
                with contextlib.suppress(Exception):
                    await inst.update_topic_route(mq.topic)
                await asyncio.sleep(PULL_DELAY_ON_EXCEPTION_S)
                continue
            if pq.dropped:
                if ahead is not None:
                    _forget(ahead[0])
                return
            pq.last_pull_ts = time.monotonic()
            suggested = result.suggest_which_broker_id
            status = result.status
            if status is PullStatus.FOUND:
                next_offset = result.next_begin_offset
                if result.messages:
                    pq.put_messages(result.messages)
                    self._dispatch(result.messages, pq, mq)
                elif pq.msg_count == 0:
                    store.update_offset(mq, next_offset, True)
            elif status is PullStatus.NO_NEW_MSG or status is PullStatus.NO_MATCHED_MSG:
                next_offset = result.next_begin_offset
                if pq.msg_count == 0:
                    store.update_offset(mq, next_offset, True)
            else:  # OFFSET_ILLEGAL: jump to where the broker says and persist it
                log.warning(
                    "pull offset %d of %s illegal, moving to %d", next_offset, mq, result.next_begin_offset
                )
                next_offset = result.next_begin_offset
                store.update_offset(mq, next_offset, False)
                with contextlib.suppress(Exception):
                    await store.persist(mq)
            if self.pull_interval > 0:
                await asyncio.sleep(self.pull_interval / 1000.0)
        if ahead is not None:
            _forget(ahead[0])

    def _fallback_subscription(self, topic: str) -> SubscriptionData | None:
        return None
