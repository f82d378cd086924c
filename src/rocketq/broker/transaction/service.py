"""Batch transactions on RocketMQ's half-message mechanism (used by the Spark exactly-once sink).

The mechanism itself is RocketMQ's and lives in rocketq.broker.transactions (TransactionService): a prepared
message waits in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC / REAL_QID; END_TRANSACTION (37) commits it
(re-stored in the real topic/queue with sysFlag COMMIT) or rolls it back, and either way appends an op record
(body = the half's queue offset, tag "d") to RMQ_SYS_TRANS_OP_HALF_TOPIC; unresolved halves are checked back
with CHECK_TRANSACTION_STATE (39). This module resolves each half through that same END_TRANSACTION path.

What it adds is a batch transaction id (property RQ_BATCH_TXN on every half of one Spark (query, batch)) and
a durable marker per id: END_TRANSACTION_BATCH persists {txn -> decision, listed half offsets} BEFORE
resolving anything, then resolves the listed halves. A repeated commit finds the marker and resolves nothing
that was
listed the first time (idempotent even after the broker forgot which halves it resolved); halves it names
that the marker does not list are orphans of a failed or re-run task attempt and are rolled back.
A periodic scan (every few seconds) finishes work a crash interrupted: an unresolved batch half whose marker
exists is resolved from it; one without a marker is rolled back once older than its CHECK_IMMUNITY_TIME
(the sink sets it), which is also how halves of an aborted query or a dead executor disappear.
The op queue is the source of truth for "resolved": it is re-read incrementally, so resolutions made by
either path are seen by both.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from rocketq.broker.persist import ConfigFile
from rocketq.protocol import record as rec
from rocketq.protocol import sysflag as sf
from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.properties import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

if TYPE_CHECKING:
    from rocketq.broker.context import BrokerContext

log = logging.getLogger(__name__)

PROPERTY_BATCH_TXN = "RQ_BATCH_TXN"
OP_TAG_REMOVE = "d"
COMMIT = sf.TRANSACTION_COMMIT_TYPE
ROLLBACK = sf.TRANSACTION_ROLLBACK_TYPE
MARKER_RETENTION_MS = 7 * 24 * 3600 * 1000
SCAN_INTERVAL_S = 5.0


class EndResult:
    OK = 0
    ALREADY = 1  # resolved before: a no-op
    NOT_FOUND = 2
    MISMATCH = 3
    STORE_FAILED = 4


class TransactionalMessageService:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        cfg = ctl.cfg
        self.timeout_ms = cfg["transactionTimeOut"]
        self.check_max = cfg["transactionCheckMax"]
        self.check_interval_ms = cfg["transactionCheckInterval"]
        self.done: set[int] = set()  # resolved half queue offsets
        self.check_from = 0  # every half below this offset is resolved or re-appended
        self.markers: dict[str, dict[str, Any]] = {}
        self._markers_file = ConfigFile(os.path.join(cfg.config_dir, "batchTransactions.json"))
        self.orphan_ms = self.timeout_ms + self.check_max * self.check_interval_ms
        self._op_offset = 0
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    # -- lifecycle -------------------------------------------------------------------------------
    def load(self) -> None:
        data = self._markers_file.load() or {}
        self.markers = dict(data.get("markers") or {})
        self.check_from = max(
            int(data.get("checkFrom") or 0), self.ctl.store.get_min_offset_in_queue(TRANS_HALF_TOPIC, 0)
        )
        self._read_ops()
        self.done = {o for o in self.done if o >= self.check_from}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._check_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def snapshot(self) -> dict[str, Any]:
        return {"checkFrom": self.check_from, "markers": self.markers}

    def persist_sync(self) -> None:
        self._markers_file.persist_sync(self.snapshot())

    # -- resolving one half ----------------------------------------------------------------------
    def _half(self, phys: int):
        buf = self.ctl.store.look_message_by_offset(phys)
        if buf is None:
            return None
        try:
            m = rec.decode_record(buf)
        except Exception:
            return None
        if m.topic != TRANS_HALF_TOPIC:
            return None
        m.body = bytes(m.body)
        m._props_raw = bytes(m._props_raw)
        buf.release()
        return m

    def end_one(self, half_qoff: int, phys: int, decision: int, pgroup: str | None) -> int:
        """Commit or roll back one half through the broker's END_TRANSACTION processing."""
        if half_qoff in self.done or half_qoff < self.check_from:  # below check_from: all resolved
            return EndResult.ALREADY
        tx = getattr(self.ctl, "transactions", None)
        if tx is not None and hasattr(tx, "end_transaction"):
            m = self._half(phys)
            if m is None:
                return EndResult.NOT_FOUND
            ext = {
                "producerGroup": pgroup
                if pgroup is not None
                else m.properties.get(PROPERTY_PRODUCER_GROUP, ""),
                "tranStateTableOffset": str(half_qoff),
                "commitLogOffset": str(phys),
                "commitOrRollback": str(decision),
                "fromTransactionCheck": "false",
                "msgId": m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
            }
            resp = tx.end_transaction(None, RemotingCommand.request(RequestCode.END_TRANSACTION, ext))
            if resp is None or resp.code != 0:
                log.warning("END_TRANSACTION of half %d: %s", half_qoff, resp and resp.remark)
                return EndResult.MISMATCH
            self.done.add(half_qoff)
            return EndResult.OK
        return self._end_locally(half_qoff, phys, decision, pgroup)

    def _end_locally(self, half_qoff: int, phys: int, decision: int, pgroup: str | None) -> int:
        """The same semantics without the broker's TransactionService (standalone use of this module)."""
        m = self._half(phys)
        if m is None:
            return EndResult.NOT_FOUND
        props = m.properties
        if m.queue_offset != half_qoff or (
            pgroup is not None and props.get(PROPERTY_PRODUCER_GROUP) != pgroup
        ):
            return EndResult.MISMATCH
        if decision == COMMIT:
            real = dict(props)
            topic = real.pop(PROPERTY_REAL_TOPIC, None)
            qid = int(real.pop(PROPERTY_REAL_QUEUE_ID, "0") or 0)
            real.pop(PROPERTY_TRANSACTION_PREPARED, None)
            real.pop(PROPERTY_BATCH_TXN, None)
            real.pop(PROPERTY_TRANSACTION_CHECK_TIMES, None)
            if not topic:
                return EndResult.MISMATCH
            from rocketq.store import MessageToStore

            res = self.ctl.store.put_message(
                MessageToStore(
                    topic=topic,
                    queue_id=qid,
                    body=m.body,
                    flag=m.flag,
                    properties=real,
                    sys_flag=sf.reset_transaction_value(m.sys_flag, COMMIT),
                    born_timestamp=m.born_timestamp,
                    born_host=m.born_host,
                    reconsume_times=m.reconsume_times,
                    prepared_transaction_offset=m.commit_log_offset,
                )
            )
            if not res.ok:
                log.error("commit of half %d to %s/%d failed: %s", half_qoff, topic, qid, res.status.name)
                return EndResult.STORE_FAILED
        if not self._op(half_qoff):
            return EndResult.STORE_FAILED
        return EndResult.OK

    def _op(self, half_qoff: int) -> bool:
        from rocketq.store import MessageToStore

        res = self.ctl.store.put_message(
            MessageToStore(
                topic=TRANS_OP_HALF_TOPIC,
                queue_id=0,
                body=str(half_qoff).encode(),
                properties={PROPERTY_TAGS: OP_TAG_REMOVE},
                born_timestamp=int(time.time() * 1000),
            )
        )
        if not res.ok:
            log.error("op record for half %d failed: %s", half_qoff, res.status.name)
            return False
        self.done.add(half_qoff)
        return True

    # -- batch transactions ----------------------------------------------------------------------
    async def end_batch(self, txn: str, decision: int, halves: list[tuple[int, int]], pgroup: str) -> dict:
        """Resolve a batch transaction; idempotent per txn. Returns counts for the response.

        COMMIT persists the marker first. ROLLBACK (a failed task or an aborted batch) only rolls the named
        halves back and leaves no marker: a later re-run of the same (query, batch) must still be able to
        commit. Halves listed by an existing COMMIT marker are never rolled back."""
        async with self._lock:
            self._read_ops()
            marker = self.markers.get(txn)
            repeated = marker is not None
            if marker is None and decision == COMMIT:
                gone = [q for q, _ in halves if q in self.done or q < self.check_from]
                if gone:
                    # resolved before any commit: rolled back as orphans (older than their immunity time).
                    # No marker, so a re-run of the batch can still commit its new halves.
                    raise RuntimeError(
                        f"{len(gone)} prepared messages of {txn} were already rolled back "
                        f"(first: {gone[0]}); "
                        "the batch took longer than transactionTimeoutSeconds and must be re-run"
                    )
                marker = {
                    "decision": decision,
                    "halves": sorted(q for q, _ in halves),
                    "group": pgroup,
                    "ts": int(time.time() * 1000),
                }
                self.markers[txn] = marker
                self._expire_markers()
                await self._markers_file.persist(self.snapshot())  # durable before anything is visible
            listed = set(marker["halves"]) if marker is not None else set()
            counts = {"resolved": 0, "already": 0, "rolledBack": 0, "repeated": repeated}
            for qoff, phys in halves:
                if qoff in listed:
                    if repeated:
                        counts["already"] += 1  # the first commit (or the scan) owns it
                        continue
                    d = COMMIT
                else:
                    d = ROLLBACK
                r = self.end_one(qoff, phys, d, pgroup)
                if r == EndResult.OK:
                    counts["resolved" if d == COMMIT else "rolledBack"] += 1
                elif r == EndResult.ALREADY:
                    counts["already"] += 1
                else:
                    raise RuntimeError(f"half {qoff}@{phys} of {txn}: result {r}")
            return counts

    def _expire_markers(self) -> None:
        cutoff = int(time.time() * 1000) - MARKER_RETENTION_MS
        for k in [k for k, v in self.markers.items() if v.get("ts", 0) < cutoff]:
            del self.markers[k]

    # -- recovery scan -------------------------------------------------------------------------
    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(SCAN_INTERVAL_S)
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("batch transaction scan failed")

    async def check_once(self, now_ms: int | None = None) -> int:
        """One scan of unresolved batch halves; returns how many were resolved."""
        async with self._lock:
            self._read_ops()
            return self._check(now_ms or int(time.time() * 1000))

    def _read_ops(self) -> None:
        store = self.ctl.store
        off = max(self._op_offset, store.get_min_offset_in_queue(TRANS_OP_HALF_TOPIC, 0))
        while True:
            r = store.get_message("CID_RMQ_SYS_TRANS", TRANS_OP_HALF_TOPIC, 0, off, 1024, None)
            try:
                for buf in r.buffers:
                    try:
                        self.done.add(int(bytes(rec.decode_record(buf).body)))
                    except ValueError:
                        pass
            finally:
                r.release()
            if r.next_begin_offset <= off:
                break
            off = r.next_begin_offset
        self._op_offset = off

    def _check(self, now_ms: int) -> int:
        store = self.ctl.store
        off = max(self.check_from, store.get_min_offset_in_queue(TRANS_HALF_TOPIC, 0))
        max_off = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        acted = 0
        advance = True
        while off < max_off:
            r = store.get_message("CID_RMQ_SYS_TRANS", TRANS_HALF_TOPIC, 0, off, 256, None)
            try:
                for buf, qoff in zip(r.buffers, r.queue_offsets, strict=True):
                    if qoff not in self.done:
                        m = rec.decode_record(buf)
                        props = m.properties
                        txn = props.get(PROPERTY_BATCH_TXN)
                        if txn is not None:
                            acted += self._resolve(txn, m, qoff, props, now_ms)
                        if qoff not in self.done:
                            advance = False  # plain transactional halves: TransactionService's job
                    if advance:
                        self.check_from = qoff + 1
            finally:
                r.release()
            if r.next_begin_offset <= off:
                break
            off = r.next_begin_offset
        self.done = {o for o in self.done if o >= self.check_from}
        return acted

    def _resolve(self, txn: str, m, qoff: int, props: dict[str, str], now_ms: int) -> int:
        marker = self.markers.get(txn)
        if marker is not None:
            d = marker["decision"] if qoff in set(marker["halves"]) else ROLLBACK
            return int(self.end_one(qoff, m.commit_log_offset, d, None) == EndResult.OK)
        immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        limit = int(immunity) * 1000 if immunity and immunity.isdigit() else self.orphan_ms
        if now_ms - m.store_timestamp >= limit:  # never committed: an orphan of a dead task or query
            return int(self.end_one(qoff, m.commit_log_offset, ROLLBACK, None) == EndResult.OK)
        return 0
