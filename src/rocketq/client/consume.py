"""Concurrent consumption (ConsumeMessageConcurrentlyService): listener calls in a worker pool, the
result → commit the offset or send the messages back for retry, and the listener contexts."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any

from .message import (
    PROPERTY_CONSUME_START_TIME,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    ConsumeOrderlyResult,
    ConsumeResult,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    put_properties_lazily,
    retry_topic,
)
from .process_queue import ProcessQueue

log = logging.getLogger(__name__)

RECONSUME_LOCAL_DELAY_S = 5.0


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Optional second listener argument: ``ack_index`` (on SUCCESS, messages after it are retried) and
    ``delay_level_when_next_consume`` (0 = the broker's 3 + reconsumeTimes, -1 = straight to the DLQ)."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


def wants_context(listener: Any) -> bool:
    """fn(msgs) or fn(msgs, context) like Java's consumeMessage(msgs, context)."""
    try:
        params = list(inspect.signature(listener).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


_SUCCESSES = (ConsumeResult.SUCCESS, ConsumeOrderlyResult.SUCCESS, "CONSUME_SUCCESS", "SUCCESS")


def is_success(result: Any) -> bool:
    return result is ConsumeResult.SUCCESS or result in _SUCCESSES


class ConcurrentConsumeMixin:
    """Part of PushConsumer: dispatch of pulled messages and concurrent consumption."""

    _meter: Any = None  # rocketq.client.metrics.ClientMeter (PushConsumer sets it at start when enabled)

    def _dispatch(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        meter = self._meter
        if meter is not None:  # rocketmq_delivery_latency, and the arrival time for rocketmq_await_time
            meter.received(msgs, self.group, self.client_id)
        if self.orderly:
            ev = self._orderly_wakeups.get(mq)
            if ev is None:
                ev = self._orderly_wakeups[mq] = asyncio.Event()
                self._orderly_tasks[mq] = asyncio.get_running_loop().create_task(
                    self._orderly_loop(mq, pq, ev)
                )
            ev.set()
            return
        bs = self.consume_message_batch_max_size
        reqs = self._consume_requests
        if bs == 1:
            reqs.extend(([m], pq, mq) for m in msgs)
        else:
            reqs.extend((msgs[i : i + bs], pq, mq) for i in range(0, len(msgs), bs))
        self._add_consume_worker()

    # ConsumeRequests go to a deque served by at most consume_thread_max worker tasks (RocketMQ's consume
    # thread pool) instead of one Task + semaphore wait per request: a listener that returns without
    # suspending lets one worker serve a whole pull, while a worker that suspends first starts a helper,
    # so slow listeners still run up to consume_thread_max at a time.
    def _add_consume_worker(self) -> None:
        if self._consume_requests and not self._helper_pending and self._n_workers < self.consume_thread_max:
            self._helper_pending = True
            self._n_workers += 1
            self._spawn(self._consume_worker())

    async def _consume_worker(self) -> None:
        self._helper_pending = False
        reqs = self._consume_requests
        served = 0
        try:
            while reqs and self._running:
                msgs, pq, mq = reqs.popleft()
                if reqs:
                    self._add_consume_worker()
                served += 1
                if served % 256 == 0:  # a listener that never suspends must not starve the pull loops
                    await asyncio.sleep(0)
                try:
                    await self._consume_concurrently(msgs, pq, mq)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("consume request of %s failed", mq)
        finally:
            self._n_workers -= 1

    def _reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        rt_name = retry_topic(self.group)
        now = str(int(time.time() * 1000))
        for m in msgs:
            if m.topic == rt_name:  # topic first: reading properties would parse them
                origin = m.properties.get(PROPERTY_RETRY_TOPIC)
                if origin:
                    m.topic = origin
        put_properties_lazily(msgs, {PROPERTY_CONSUME_START_TIME: now})

    async def _call_listener(self, msgs: list[MessageExt], context: Any = None) -> Any:
        meter = self._meter
        if meter is None:
            return await self._call_traced(msgs, context)
        started = time.time()
        ok = False
        try:
            result = await self._call_traced(msgs, context)
            ok = is_success(result)
            return result
        finally:  # rocketmq_await_time, rocketmq_process_time
            meter.consumed(msgs, self.group, self.client_id, started, ok)

    async def _call_traced(self, msgs: list[MessageExt], context: Any = None) -> Any:
        trace = self._trace
        if trace is None:
            return await self._invoke_listener(msgs, context)
        request_id = trace.before_consume(msgs)
        t0 = time.monotonic()
        try:
            result = await self._invoke_listener(msgs, context)
        except Exception:
            trace.after_consume(request_id, msgs, int((time.monotonic() - t0) * 1000), None, True)
            raise
        trace.after_consume(request_id, msgs, int((time.monotonic() - t0) * 1000), result, False)
        return result

    async def _invoke_listener(self, msgs: list[MessageExt], context: Any = None) -> Any:
        listener = self._listener
        assert listener is not None
        args = (msgs, context) if self._listener_wants_context else (msgs,)
        if self._listener_is_async:
            return await listener(*args)
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, listener, *args)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _consume_concurrently(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped or not self._running:  # shutting down: leave it unconsumed (not committed)
            return
        self._reset_retry_topic(msgs)  # also stamps CONSUME_START_TIME (consume timeout)
        ctx = ConsumeConcurrentlyContext(mq)
        try:
            result = await self._call_listener(msgs, ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("consume of %d message(s) from %s threw: %r", len(msgs), mq, exc)
            result = ConsumeResult.RECONSUME_LATER
        if pq.dropped:
            return
        ack_index = min(ctx.ack_index, len(msgs) - 1) if is_success(result) else -1
        failed = msgs[ack_index + 1 :]
        if failed and self.message_model is MessageModel.CLUSTERING:
            retry_local = []
            for m in failed:
                if not await self.send_message_back(m, ctx.delay_level_when_next_consume):
                    m.reconsume_times += 1
                    retry_local.append(m)
            if retry_local:
                done = [m for m in msgs if m not in retry_local]
                self._spawn(self._consume_later(retry_local, pq, mq), background=True)
                msgs = done
        elif failed:
            log.warning("broadcasting consume failed, dropping %d message(s) of %s", len(failed), mq)
        offset = pq.remove_messages(msgs)
        if offset >= 0 and not pq.dropped and self.offset_store is not None:
            self.offset_store.update_offset(mq, offset, True)

    async def _consume_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        await asyncio.sleep(RECONSUME_LOCAL_DELAY_S)
        self._consume_requests.extend(([m], pq, mq) for m in msgs)
        self._add_consume_worker()

    async def _clean_expired_loop(self) -> None:
        """cleanExpiredMsg: a message stuck in the listener longer than consume_timeout minutes is sent
        back for retry and dropped from the process queue, so the queue's offset can move on."""
        period = self.consume_timeout * 60.0
        while self._running:
            await asyncio.sleep(period)
            if self.orderly or self.message_model is not MessageModel.CLUSTERING:
                continue
            now_ms = int(time.time() * 1000)
            for mq, pq in list(self._pqs.items()):
                for _ in range(16):
                    m = pq.first_message()
                    if m is None or pq.dropped:
                        break
                    started = m.properties.get(PROPERTY_CONSUME_START_TIME)
                    if not started or now_ms - int(started) <= period * 1000:
                        break
                    log.warning("consume of %s on %s timed out, sending it back", m.msg_id, mq)
                    if not await self.send_message_back(m, 3):
                        break
                    offset = pq.remove_messages([m])
                    if offset >= 0 and self.offset_store is not None:
                        self.offset_store.update_offset(mq, offset, True)

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK; if the broker refuses, re-send to %RETRY%<group> as
        CLIENT_INNER_PRODUCER. False only if both failed."""
        inst = self.instance
        try:
            addr = inst.find_broker_addr(msg.broker_name) if msg.broker_name else None
            await inst.api.consumer_send_msg_back(
                addr or msg.store_host,
                commit_log_offset=msg.commit_log_offset,
                group=self.group,
                delay_level=delay_level,
                origin_msg_id=msg.msg_id,
                origin_topic=msg.topic,
                max_reconsume_times=self.max_reconsume_times,
            )
            return True
        except Exception as exc:  # remoting failure, broker refusal, no route ...
            log.info("send back of %s failed (%s), re-sending to the retry topic", msg.msg_id, exc)
        try:
            props = dict(msg.properties)
            props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
            props[PROPERTY_RETRY_TOPIC] = msg.topic
            props[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1)
            props[PROPERTY_MAX_RECONSUME_TIMES] = str(self.max_reconsume_times)
            props.pop("DELAY", None)
            new = Message(retry_topic(self.group), msg.body, properties=props, flag=msg.flag)
            new.delay_level = 3 + msg.reconsume_times
            producer = await inst.inner_producer()
            await producer.send(new)
            return True
        except Exception as exc:
            log.warning("re-send of %s to the retry topic failed: %s", msg.msg_id, exc)
            return False
