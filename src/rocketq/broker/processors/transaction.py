"""END_TRANSACTION (37) and END_TRANSACTION_BATCH (rocketq extension) on top of the half-message service.

END_TRANSACTION_BATCH: header {producerGroup, transactionId, commitOrRollback (8 | 12)}, body JSON
{"halves": [[tranStateTableOffset, commitLogOffset], ...]}: every half of one batch transaction on this
broker. COMMIT persists a marker, then resolves the halves; a repeat with the same transactionId is a no-op
for the listed halves and rolls back any half it names that the first did not (orphans of retried tasks).
Response extFields: resolved, already, rolledBackOrphans, repeated.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.headers import EndTransactionRequestHeader
from rocketq.remoting import Channel

from ..read_acl import PUB, message_resources
from ..transaction.service import COMMIT, ROLLBACK, EndResult, TransactionalMessageService

if TYPE_CHECKING:
    from ..context import BrokerContext

log = logging.getLogger(__name__)

END_TRANSACTION_BATCH = 10037  # rocketq extension code (outside RocketMQ's range)


class TransactionProcessor:
    def __init__(self, ctl: BrokerContext, service: TransactionalMessageService) -> None:
        self.ctl = ctl
        self.service = service

    def register(self, server) -> None:
        server.register_processor(RequestCode.END_TRANSACTION, self.end_transaction)
        server.register_processor(END_TRANSACTION_BATCH, self.end_transaction_batch)

    def _refused(self, channel: Channel, request: RemotingCommand, offsets: list[int]):
        """aclEnable: ending a half needs PUB on the topic it was sent to (its stored REAL_TOPIC; RocketMQ 5
        asks the same of a header field the caller fills in)."""
        reads = self.ctl.reads
        subject = reads.subject(channel, request)
        if subject is None:
            return None
        for phys in offsets:
            m = self.service._half(phys) if phys >= 0 else None
            if m is None:
                continue  # not a half: answered as before (not found / mismatch)
            why = reads.refused(subject, message_resources(m.topic, m.properties)[:1], PUB)
            if why is not None:
                return request.response(ResponseCode.NO_PERMISSION, why)
        return None

    def end_transaction(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.from_ext(request.ext_fields)
        if h.commit_or_rollback not in (COMMIT, ROLLBACK):
            return request.response(ResponseCode.SUCCESS)  # unknown: keep the half for the check-back
        denied = self._refused(channel, request, [h.commit_log_offset])
        if denied is not None:
            return denied
        r = self.service.end_one(
            h.tran_state_table_offset, h.commit_log_offset, h.commit_or_rollback, h.producer_group
        )
        if r in (EndResult.OK, EndResult.ALREADY):
            return request.response(ResponseCode.SUCCESS)
        reason = {
            EndResult.NOT_FOUND: "find prepared transaction message failed",
            EndResult.MISMATCH: "the prepared message does not match the request (producer group or offsets)",
        }.get(r, "storing the transaction result failed")
        return request.response(ResponseCode.SYSTEM_ERROR, reason)

    async def end_transaction_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        txn = ext.get("transactionId") or ""
        group = ext.get("producerGroup") or ""
        try:
            decision = int(ext.get("commitOrRollback", "0"))
            halves = [
                (int(q), int(p)) for q, p in orjson.loads(request.body_bytes or b"{}").get("halves", [])
            ]
        except (ValueError, TypeError, AttributeError, orjson.JSONDecodeError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad END_TRANSACTION_BATCH: {exc}")
        if not txn or decision not in (COMMIT, ROLLBACK) or len(txn) > 512:
            return request.response(
                ResponseCode.SYSTEM_ERROR, "transactionId and commitOrRollback 8|12 required"
            )
        denied = self._refused(channel, request, [phys for _, phys in halves])
        if denied is not None:
            return denied
        try:
            counts = await self.service.end_batch(txn, decision, halves, group)
        except Exception as exc:
            log.warning("batch transaction %s failed: %s", txn, exc)
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return request.response(ResponseCode.SUCCESS, None, {k: str(v).lower() for k, v in counts.items()})


def register(ctl: BrokerContext) -> TransactionalMessageService:
    """Create the service, load its state, start the check-back loop and register the processor."""
    service = TransactionalMessageService(ctl)
    service.load()
    TransactionProcessor(ctl, service).register(ctl.server)
    service.start()
    if service._task is not None:
        ctl._tasks.append(service._task)  # cancelled with the broker's other periodic tasks
    return service
