"""Transactional messages: half messages wait in RMQ_SYS_TRANS_HALF_TOPIC (queue 0) until END_TRANSACTION
commits (re-stored to the real topic/queue) or rolls back; resolutions are recorded as op messages in
RMQ_SYS_TRANS_OP_HALF_TOPIC (body = the half's queue offset, tags "d") so a restart knows them. Unresolved
half messages older than transactionTimeOut (or CHECK_IMMUNITY_TIME_IN_SECONDS) are checked back with
CHECK_TRANSACTION_STATE (oneway, to a channel of the producer group) every transactionCheckInterval, at
most transactionCheckMax times; each check re-appends the half with TRANSACTION_CHECK_TIMES + 1."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.protocol.properties import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    properties_to_string,
)
from rocketq.protocol.record import decode_record, encode_record
from rocketq.protocol.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rocketq.remoting import Channel

from .restore import STORED, real_destination, restored

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger(__name__)

HALF_GROUP = "CID_RMQ_SYS_TRANS"
PROPERTY_BATCH_TXN = "RQ_BATCH_TXN"  # batch transactions (Spark sink): resolved by transaction/service.py
OP_TAG = "d"
BATCH = 32


def _read_all(store, topic: str, start: int, stop: int):
    """Decoded records of topic queue 0 in [start, stop)."""
    offset = start
    while offset < stop:
        result = store.get_message(HALF_GROUP, topic, 0, offset, BATCH, None)
        if result.status.name != "FOUND" or not result.buffers:
            if result.next_begin_offset > offset:
                offset = result.next_begin_offset
                continue
            return
        for buf in result.buffers:
            try:
                msg = decode_record(buf)
            except ProtocolError:
                continue
            offset = msg.queue_offset + 1
            yield msg


class TransactionService:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        cfg = ctl.cfg
        self.timeout_ms = cfg["transactionTimeOut"]
        self.check_max = cfg["transactionCheckMax"]
        self.interval_s = max(cfg["transactionCheckInterval"] / 1000.0, 0.1)
        self.resolved: set[int] = set()
        # UNIQ_KEYs resolved while this process runs: a half re-appended by a check is not checked or
        # committed twice (bounded; insertion ordered)
        self.resolved_ids: dict[str, None] = {}
        self._op_offset = 0
        self._finished: set[int] = set()  # half offsets >= the committed check offset that need no check
        self._task: asyncio.Task[None] | None = None
        from rocketq.store import MessageToStore

        self.MessageToStore = MessageToStore

    def register(self, server) -> None:
        server.register_processor(RequestCode.END_TRANSACTION, self.end_transaction)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._check_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    # -- END_TRANSACTION ---------------------------------------------------------------------
    def end_transaction(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.from_ext(request.ext_fields)
        kind = h.commit_or_rollback
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return None  # unknown: wait for the check-back (Java answers nothing either)
        store = self.ctl.store
        view = store.look_message_by_offset(h.commit_log_offset) if h.commit_log_offset >= 0 else None
        if view is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        msg = decode_record(view)
        props = dict(msg.properties)
        if msg.topic != TRANS_HALF_TOPIC:
            return request.response(
                ResponseCode.SYSTEM_ERROR, "the message is not a prepared transaction message"
            )
        if props.get(PROPERTY_PRODUCER_GROUP) != h.producer_group:
            return request.response(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if msg.queue_offset != h.tran_state_table_offset:
            return request.response(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if msg.queue_offset in self.resolved or (uniq is not None and uniq in self.resolved_ids):
            self._mark_resolved(msg.queue_offset, None)
            return request.response(ResponseCode.SUCCESS)
        topic_of_half = props.get(PROPERTY_REAL_TOPIC) or msg.topic
        if kind == TRANSACTION_COMMIT_TYPE:
            real_topic, real_qid = real_destination(props, pop=True)
            if not real_topic:
                return request.response(ResponseCode.SYSTEM_ERROR, "prepared message without REAL_TOPIC")
            props.pop(PROPERTY_TRANSACTION_PREPARED, None)
            props.pop(PROPERTY_TRANSACTION_CHECK_TIMES, None)
            inner = restored(
                msg,
                real_topic,
                real_qid,
                props,
                sys_flag=(msg.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE,
                prepared_transaction_offset=msg.commit_log_offset,
            )
            result = store.put_message(inner)
            if result.status.name not in STORED:
                return request.response(ResponseCode.SYSTEM_ERROR, f"commit failed: {result.status.name}")
        # rocketmq_commit_messages_total / rocketmq_rollback_messages_total, by the message's real topic
        committed = kind == TRANSACTION_COMMIT_TYPE
        self.ctl.stats.transaction_ended(topic_of_half, committed)
        self._mark_resolved(msg.queue_offset, uniq)
        return request.response(ResponseCode.SUCCESS)

    def _mark_resolved(self, half_offset: int, uniq: str | None) -> None:
        if uniq is not None:
            self.resolved_ids[uniq] = None
            if len(self.resolved_ids) > 100_000:
                del self.resolved_ids[next(iter(self.resolved_ids))]
        if half_offset in self.resolved:
            return
        self.resolved.add(half_offset)
        op = self.MessageToStore(
            topic=TRANS_OP_HALF_TOPIC,
            queue_id=0,
            body=str(half_offset).encode(),
            properties={"TAGS": OP_TAG},
            born_timestamp=int(time.time() * 1000),
        )
        self.ctl.store.put_message(op)

    # -- check-back --------------------------------------------------------------------------
    def _load_ops(self) -> None:
        store = self.ctl.store
        stop = store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0)
        half_done = self.ctl.offsets.query(HALF_GROUP, TRANS_HALF_TOPIC, 0)
        for msg in _read_all(store, TRANS_OP_HALF_TOPIC, max(self._op_offset, 0), stop):
            try:
                off = int(bytes(msg.body))
            except ValueError:
                continue
            if off >= half_done:
                self.resolved.add(off)
        self._op_offset = stop

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction check failed")

    def check_once(self) -> None:
        ctl = self.ctl
        store = ctl.store
        self._load_ops()
        start = max(ctl.offsets.query(HALF_GROUP, TRANS_HALF_TOPIC, 0), 0)
        stop = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        now = int(time.time() * 1000)
        finished = self._finished
        for msg in _read_all(store, TRANS_HALF_TOPIC, start, stop):
            off = msg.queue_offset
            if off in finished:
                continue
            if off in self.resolved:
                self.resolved.discard(off)
                finished.add(off)
                continue
            props = msg.properties
            if PROPERTY_BATCH_TXN in props:
                finished.add(off)  # batch halves are resolved by the batch transaction service
                continue
            try:
                checks = int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0"))
                immunity_ms = int(props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, "0")) * 1000
            except ValueError:
                checks, immunity_ms = 0, 0
            if now - msg.store_timestamp < max(self.timeout_ms, immunity_ms):
                continue  # too young for a check-back
            if props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) in self.resolved_ids:
                finished.add(off)  # resolved through an older copy of this half message
                continue
            if checks >= self.check_max:
                log.warning("half message %s dropped after %d checks", msg.offset_msg_id, checks)
                finished.add(off)
                continue
            # the check-back carries the body: only to a producer whose account may send to the topic
            real_topic = props.get(PROPERTY_REAL_TOPIC) or ""
            channel = ctl.clients.producer_channel(
                props.get(PROPERTY_PRODUCER_GROUP, ""),
                functools.partial(ctl.reads.may_publish, topic=real_topic) if ctl.reads.enabled else None,
            )
            if channel is None:
                continue  # producer offline: keep it and try again later
            self._check_back(channel, msg, checks + 1)
            finished.add(off)  # the re-appended copy carries on
        done = start
        while done in finished:
            finished.discard(done)
            done += 1
        if done > start:
            ctl.offsets.commit(HALF_GROUP, TRANS_HALF_TOPIC, 0, done)

    def pending_halves(self, limit: int = 500) -> dict[str, int]:
        """Half messages still waiting for a commit or rollback, per real topic (rocketmq_half_messages):
        the half queue from the committed check offset on, less those resolved; at most ``limit`` read."""
        store = self.ctl.store
        start = max(self.ctl.offsets.query(HALF_GROUP, TRANS_HALF_TOPIC, 0), 0)
        stop = min(store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0), start + limit)
        pending: dict[str, int] = {}
        for msg in _read_all(store, TRANS_HALF_TOPIC, start, stop):
            off = msg.queue_offset
            if off in self._finished or off in self.resolved:
                continue
            props = msg.properties
            if props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) in self.resolved_ids:
                continue
            topic = props.get(PROPERTY_REAL_TOPIC) or ""
            pending[topic] = pending.get(topic, 0) + 1
        return pending

    def _check_back(self, channel: Channel, msg, checks: int) -> None:
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(checks)
        result = self.ctl.store.put_message(restored(msg, TRANS_HALF_TOPIC, 0, props))
        if result.status.name not in STORED:
            return
        real_props = dict(props)
        topic, qid = real_destination(real_props, msg.topic, pop=True)
        body = encode_record(
            msg.body,
            topic,
            properties_to_string(real_props),
            queue_id=qid,
            flag=msg.flag,
            queue_offset=result.queue_offset,
            phys_offset=result.wrote_offset,
            sys_flag=(msg.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_NOT_TYPE,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_timestamp=result.store_timestamp,
            store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
        )
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        ext = CheckTransactionStateRequestHeader(
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=result.wrote_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=result.msg_ids[0] if result.msg_ids else None,
        ).to_ext()
        try:
            channel.invoke_oneway(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, ext, body))
        except Exception as exc:
            log.info("check transaction state on %s failed: %s", channel.remote_addr, exc)
