"""LitePullConsumer (DefaultLitePullConsumer) — asyncio core: subscribe (rebalanced) or assign, then
poll / commit / seek. Reuses the push consumer's rebalance and long-polling pull loop; pulled messages
go to a local buffer instead of a listener."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from .allocate import Strategy
from .consumer import PushConsumer
from .instance import DEFAULT_INSTANCE_NAME, ClientConfig
from .message import ConsumeFromWhere, MessageExt, MessageModel, MessageQueue, MQClientError
from .offset_store import ReadOffsetType
from .process_queue import ProcessQueue
from .subscription import SubscriptionData
from .validators import check_consumer, log_missing_topic


class LitePullConsumer(PushConsumer):
    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | int | float | datetime | None = None,
        allocate_strategy: str | Strategy | None = None,
        pull_batch_size: int = 10,
        auto_commit: bool = True,
        auto_commit_interval_millis: int = 5000,
        pull_threshold_for_queue: int = 1000,
        poll_timeout_millis: int = 5000,
        broker_suspend_max_time_millis: int = 20000,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        offset_store_dir: str | None = None,
        client_config: ClientConfig | None = None,
    ) -> None:
        super().__init__(
            group,
            namesrv,
            message_model=message_model,
            consume_from_where=consume_from_where,
            consume_timestamp=consume_timestamp,
            allocate_strategy=allocate_strategy,
            pull_batch_size=pull_batch_size,
            pull_threshold_for_queue=pull_threshold_for_queue,
            broker_suspend_max_time_millis=broker_suspend_max_time_millis,
            consumer_timeout_millis_when_suspend=broker_suspend_max_time_millis + 10000,
            instance_name=instance_name,
            offset_store_dir=offset_store_dir,
            client_config=client_config,
        )
        self.auto_commit = auto_commit
        self.auto_commit_interval_millis = auto_commit_interval_millis
        self.poll_timeout_millis = poll_timeout_millis
        self._assigned: list[MessageQueue] | None = None
        self._buffer: asyncio.Queue[tuple[MessageQueue, ProcessQueue, list[MessageExt]]] | None = None
        self._consumed: dict[MessageQueue, int] = {}
        self._paused_mqs: set[MessageQueue] = set()
        self._next_auto_commit = 0.0
        self._assign_subs: dict[str, SubscriptionData] = {}

    # -- configuration ---------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        if self._assigned is not None:
            raise MQClientError(-1, "Subscribe and assign are mutually exclusive.")
        super().subscribe(topic, expression)

    async def assign(self, mqs: Iterable[MessageQueue]) -> None:
        if self._subs and self._assigned is None:
            raise MQClientError(-1, "Subscribe and assign are mutually exclusive.")
        self._assigned = sorted(set(mqs))
        if self._running:
            await self._apply_assignment()

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        check_consumer(self.group, self._subs)
        inst = await self._attach_instance()
        self._buffer = asyncio.Queue()
        self._running = True
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_millis / 1000.0
        inst.register_consumer(self.group, self)
        await inst.start()
        topics = set(self._subs) | {mq.topic for mq in self._assigned or ()}
        for topic in topics:
            with contextlib.suppress(Exception):
                if not await inst.update_topic_route(topic):
                    log_missing_topic(self.group, topic, inst.namesrv_addrs)
        await self._check_filters()
        await inst.send_heartbeat_all()
        if self._assigned is not None:
            await self._apply_assignment()
        else:
            inst.rebalance_immediately()

    async def shutdown(self) -> None:
        if not self._running:
            return
        if self.auto_commit:
            with contextlib.suppress(Exception):
                await self.commit()
        self._running = False
        inst = self._instance
        tasks = list(self._pull_tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.persist_consumer_offset()
        await self._detach_instance(inst)

    async def _apply_assignment(self) -> None:
        wanted = set(self._assigned or ())
        for mq, pq in list(self._pqs.items()):
            if mq not in wanted:
                pq.dropped = True
                self._pqs.pop(mq, None)
                self._consumed.pop(mq, None)
                await self._remove_unnecessary(mq, pq)
        for mq in sorted(wanted - set(self._pqs)):
            await self._start_queue(mq, None)

    async def _start_queue(self, mq: MessageQueue, offset: int | None) -> None:
        if offset is None:
            assert self.offset_store is not None
            self.offset_store.remove_offset(mq)
            offset = await self._compute_pull_from_where(mq)
            if offset < 0:
                return
        pq = ProcessQueue()
        self._pqs[mq] = pq
        self._consumed[mq] = offset
        self._pull_tasks[mq] = asyncio.get_running_loop().create_task(self._pull_loop(mq, pq, offset))

    # -- instance callbacks ----------------------------------------------------------------------
    def subscribed_topics(self) -> list[str]:
        return list(self._subs) + sorted({mq.topic for mq in self._assigned or ()} - set(self._subs))

    def consumer_data(self) -> dict[str, Any]:
        data = super().consumer_data()
        data["consumeType"] = "CONSUME_ACTIVELY"
        return data

    async def do_rebalance(self) -> None:
        if self._assigned is not None:
            return
        await super().do_rebalance()

    async def _update_process_queue_table(self, topic: str, allocated: set[MessageQueue]) -> bool:
        before = set(self._pqs)
        changed = await super()._update_process_queue_table(topic, allocated)
        for mq in set(self._pqs) - before:
            self._consumed.setdefault(mq, -1)
        for mq in before - set(self._pqs):
            self._consumed.pop(mq, None)
        return changed

    def _fallback_subscription(self, topic: str) -> SubscriptionData | None:
        # assigned queues are pulled with "*" (like Java's assign mode)
        if self._assigned is not None and any(mq.topic == topic for mq in self._assigned):
            sub = self._assign_subs.get(topic)
            if sub is None:
                sub = self._assign_subs[topic] = SubscriptionData.build(topic, "*")
            return sub
        return None

    def _dispatch(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        assert self._buffer is not None
        self._buffer.put_nowait((mq, pq, msgs))

    # -- polling ---------------------------------------------------------------------------------
    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """Messages of one pull (≤ pull_batch_size) or [] after ``timeout_ms``."""
        if not self._running or self._buffer is None:
            raise MQClientError(-1, "The consumer not running, please start it first.")
        if self.auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval_millis / 1000.0
            await self.commit()
        deadline = (
            time.monotonic() + (self.poll_timeout_millis if timeout_ms is None else timeout_ms) / 1000.0
        )
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    mq, pq, msgs = self._buffer.get_nowait()
                else:
                    async with asyncio.timeout(remaining):  # not wait_for: it can swallow a cancel on 3.11
                        mq, pq, msgs = await self._buffer.get()
            except (TimeoutError, asyncio.QueueEmpty):
                return []
            if pq.dropped or self._pqs.get(mq) is not pq or mq in self._paused_mqs:
                if mq in self._paused_mqs and not pq.dropped:
                    self._buffer.put_nowait((mq, pq, msgs))
                    await asyncio.sleep(min(0.05, max(remaining, 0)))
                    if time.monotonic() >= deadline:
                        return []
                continue
            offset = pq.remove_messages(msgs)
            if offset >= 0:
                self._consumed[mq] = offset
            self._reset_retry_topic(msgs)
            return msgs

    async def commit(self, offsets: dict[MessageQueue, int] | None = None, persist: bool = True) -> None:
        """Commit the offsets of everything polled so far (or the given ``{mq: offset}``)."""
        store = self.offset_store
        if store is None:
            return
        items = offsets.items() if offsets is not None else list(self._consumed.items())
        for mq, off in items:
            if off >= 0:
                store.update_offset(mq, off, False)
        if persist:
            await store.persist_all(list(self._pqs) if offsets is None else list(offsets))

    commit_sync = commit

    async def committed(self, mq: MessageQueue) -> int:
        assert self.offset_store is not None
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset``; messages of ``mq`` buffered but not polled are discarded."""
        if mq not in self._pqs:
            raise MQClientError(-1, f"The message queue is not in assigned list, may be rebalancing, {mq}")
        inst = self.instance
        addr = await inst.find_broker_addr_or_refresh(mq.broker_name, mq.topic)
        lo = await inst.api.get_min_offset(addr, mq)
        hi = await inst.api.get_max_offset(addr, mq)
        if offset < lo or offset > hi:
            raise MQClientError(
                -1, f"Seek offset illegal, seek offset = {offset}, min offset = {lo}, max offset = {hi}"
            )
        old = self._pqs.pop(mq)
        old.dropped = True
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await self._start_queue(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        addr = await self.instance.find_broker_addr_or_refresh(mq.broker_name, mq.topic)
        await self.seek(mq, await self.instance.api.get_min_offset(addr, mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        addr = await self.instance.find_broker_addr_or_refresh(mq.broker_name, mq.topic)
        await self.seek(mq, await self.instance.api.get_max_offset(addr, mq))

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        inst = self.instance
        await inst.update_topic_route(topic)
        from .route import topic_route_to_subscribe_info

        route = inst.routes.get(topic)
        if route is None:
            raise MQClientError(17, f"No route info of this topic: {topic}")
        return sorted(topic_route_to_subscribe_info(topic, route))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        self._paused_mqs.update(mqs)

    def resume(self, mqs: Iterable[MessageQueue] | None = None) -> None:  # type: ignore[override]
        if mqs is None:
            self._paused_mqs.clear()
        else:
            self._paused_mqs.difference_update(mqs)

    def assignment(self) -> list[MessageQueue]:
        return sorted(self._pqs)
