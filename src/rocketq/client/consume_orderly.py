"""Orderly consumption (ConsumeMessageOrderlyService): one consumer task per queue, broker-side queue
locks (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ) for clustering, in-place retry with a suspend pause."""

from __future__ import annotations

import asyncio
import logging
import time

from .consume import ConsumeOrderlyContext, is_success
from .message import ConsumeOrderlyResult, MessageQueue
from .process_queue import ProcessQueue

log = logging.getLogger(__name__)

LOCK_INTERVAL_S = 20.0


class OrderlyConsumeMixin:
    """Part of PushConsumer: MessageListenerOrderly support."""

    async def _lock(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        locked: set[MessageQueue] = set()
        for broker, group_mqs in by_broker.items():
            addr = self.instance.find_broker_addr(broker)
            if addr is None:
                continue
            try:
                locked |= await self.instance.api.lock_batch_mq(addr, self.group, self.client_id, group_mqs)
            except Exception as exc:
                log.info("lock %s failed: %s", broker, exc)
        now = time.monotonic()
        for mq in mqs:
            pq = self._pqs.get(mq)
            if pq is not None:
                pq.locked = mq in locked
                if pq.locked:
                    pq.last_lock_ts = now
        return locked

    async def _lock_loop(self) -> None:
        while self._running:
            await asyncio.sleep(LOCK_INTERVAL_S)
            if self._pqs:
                await self._lock(list(self._pqs))

    async def _unlock_all(self) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self._pqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, mqs in by_broker.items():
            addr = self.instance.find_broker_addr(broker)
            if addr:
                await self.instance.api.unlock_batch_mq(addr, self.group, self.client_id, mqs)

    async def _orderly_loop(self, mq: MessageQueue, pq: ProcessQueue, wakeup: asyncio.Event) -> None:
        bs = self.consume_message_batch_max_size
        suspend_s = self.suspend_current_queue_time_millis / 1000.0
        while self._running and not pq.dropped:
            await wakeup.wait()
            wakeup.clear()
            while self._running and not pq.dropped:
                if self._needs_locks and (not pq.locked or pq.is_lock_expired()):
                    await asyncio.sleep(0.1)
                    if pq.is_lock_expired():
                        await self._lock([mq])
                    continue
                msgs = pq.take_messages(bs)
                if not msgs:
                    break
                self._reset_retry_topic(msgs)
                octx = ConsumeOrderlyContext(mq)
                try:
                    result = await self._call_listener(msgs, octx)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("orderly consume from %s threw: %r", mq, exc)
                    result = ConsumeOrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
                if pq.dropped:
                    return
                if is_success(result):
                    offset = pq.commit()
                else:
                    over = [m for m in msgs if m.reconsume_times >= self.max_reconsume_times]
                    if over and all([await self.send_message_back(m, -1) for m in over]):
                        # exhausted: parked in the DLQ, move on
                        offset = pq.commit()
                    else:
                        for m in msgs:
                            m.reconsume_times += 1
                        pq.make_messages_to_consume_again(msgs)
                        wait_ms = octx.suspend_current_queue_time_millis
                        await asyncio.sleep(wait_ms / 1000.0 if wait_ms >= 0 else suspend_s)
                        continue
                if offset >= 0 and self.offset_store is not None:
                    self.offset_store.update_offset(mq, offset, False)
