"""TransactionProducer (TransactionMQProducer) — asyncio core.

send_message_in_transaction: the half message (TRAN_MSG=true, PGROUP) is stored but not delivered; the
local transaction runs; END_TRANSACTION commits or rolls it back. When the outcome stays unknown the broker
asks again with CHECK_TRANSACTION_STATE and the listener's check decides.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import Channel

from .codec import decode_offset_msg_id, decode_records
from .instance import ClientConfig
from .message import (
    PROPERTY_TRAN_MSG,
    PROPERTY_UNIQ_KEY,
    Message,
    MessageExt,
    MQClientError,
    SendResult,
    SendStatus,
)
from .producer import Producer

log = logging.getLogger(__name__)

PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_ID = "__transactionId__"
_COMMIT = 8
_ROLLBACK = 12
_UNKNOWN = 0


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # RocketMQ's spelling


_WIRE = {
    LocalTransactionState.COMMIT_MESSAGE: _COMMIT,
    LocalTransactionState.ROLLBACK_MESSAGE: _ROLLBACK,
    LocalTransactionState.UNKNOW: _UNKNOWN,
}


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...
    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


@dataclass(slots=True)
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _call(fn: Any, *args: Any) -> Any:
    """Coroutine functions run on the loop; plain ones in the default thread pool."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.get_running_loop().run_in_executor(None, fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _state(value: Any) -> LocalTransactionState:
    if isinstance(value, LocalTransactionState):
        return value
    if isinstance(value, str) and value in LocalTransactionState.__members__:
        return LocalTransactionState[value]
    return LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    """``TransactionProducer("PG", namesrv=..., listener=obj)`` where ``obj`` has
    ``execute_local_transaction(msg, arg)`` and ``check_local_transaction(msg)`` (plain or async)."""

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        listener: TransactionListener | None = None,
        client_config: ClientConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(group, namesrv, client_config=client_config, **kwargs)
        self.listener = listener

    async def start(self) -> None:
        await super().start()
        inst = self.instance
        inst.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, inst.on_check_transaction_state)

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        listener = self.listener
        if listener is None:
            raise MQClientError(-1, "TransactionListener is null")
        if msg.delay_level > 0:
            msg.delay_level = 0  # delay is ignored for transactional messages, like RocketMQ
        self._check_message(msg)
        msg.properties[PROPERTY_TRAN_MSG] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = self.group
        result = await self.send(msg)
        state = LocalTransactionState.UNKNOW
        exc: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            if result.transaction_id:
                msg.properties[PROPERTY_TRANSACTION_ID] = result.transaction_id
            try:
                state = _state(await _call(listener.execute_local_transaction, msg, arg))
            except Exception as e:
                log.warning("executeLocalTransaction threw: %r", e)
                exc = e
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end_transaction(result, state, exc)
        except Exception as e:
            log.warning("END_TRANSACTION for %s failed (the broker will check back): %s", result.msg_id, e)
        return TransactionSendResult(
            result.status,
            result.msg_id,
            result.offset_msg_id,
            result.queue,
            result.queue_offset,
            result.transaction_id,
            result.region_id,
            result.trace_on,
            state,
        )

    async def _end_transaction(
        self, result: SendResult, state: LocalTransactionState, exc: BaseException | None
    ) -> None:
        inst = self.instance
        addr = await inst.find_broker_addr_or_refresh(result.queue.broker_name, result.queue.topic)
        _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        ext = {
            "producerGroup": self.group,
            "tranStateTableOffset": str(result.queue_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(_WIRE[state]),
            "fromTransactionCheck": "false",
            "msgId": result.msg_id,
            "transactionId": result.transaction_id or result.msg_id,
        }
        remark = f"executeLocalTransactionBranch exception: {exc!r}" if exc is not None else None
        req = RemotingCommand.request(RequestCode.END_TRANSACTION, ext)
        req.remark = remark
        await inst.remoting.invoke_oneway(addr, req)

    async def check_transaction_state(self, channel: Channel, request: RemotingCommand) -> None:
        """Answer a broker's CHECK_TRANSACTION_STATE with END_TRANSACTION on the same connection."""
        listener = self.listener
        msgs = decode_records(request.body_bytes)
        if listener is None or not msgs:
            return
        msg = msgs[0]
        uniq = msg.properties.get(PROPERTY_UNIQ_KEY)
        transaction_id = request.ext_fields.get("transactionId") or uniq or msg.msg_id
        try:
            state = _state(await _call(listener.check_local_transaction, msg))
            exc = None
        except Exception as e:
            log.warning("checkLocalTransaction threw: %r", e)
            state, exc = LocalTransactionState.UNKNOW, e
        ext = {
            "producerGroup": self.group,
            "tranStateTableOffset": str(msg.queue_offset),
            "commitLogOffset": str(msg.commit_log_offset),
            "commitOrRollback": str(_WIRE[state]),
            "fromTransactionCheck": "true",
            "msgId": uniq or msg.msg_id,
            "transactionId": transaction_id,
        }
        req = RemotingCommand.request(RequestCode.END_TRANSACTION, ext)
        if exc is not None:
            req.remark = f"checkLocalTransactionState Exception: {exc!r}"
        try:
            channel.invoke_oneway(req)
        except Exception as e:
            log.info("END_TRANSACTION after check failed: %s", e)
