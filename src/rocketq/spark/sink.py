"""Writers of the "rocketmq" data source (batch and streaming), at-least-once or exactly-once.

write() sends every row, then waits for every acknowledgement before it returns (an unacknowledged message
fails the task, so Spark retries it: at-least-once). exactly_once sends each row as a prepared (half) message
of one batch transaction "<query id>:<batch id>" (or a per-job id for batch writes); the driver's commit()
sends one END_TRANSACTION_BATCH per broker listing the halves of the successful task attempts, which the
broker applies once (see rocketq.broker.transaction.service and docs/spark.md).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from rocketq.client.codec import UNIQ_IDS
from rocketq.protocol.codes import RequestCode
from rocketq.protocol.frame import RemotingCommand

from .brokerio import RocketMQSourceError, get_io

log = logging.getLogger(__name__)

END_TRANSACTION_BATCH = 10037
COMMIT, ROLLBACK = 8, 12
SYSFLAG_PREPARED = 0x4
SYSFLAG_COMPRESSED_ZLIB = 0x1 | 0x300
COMPRESS_OVER = 4096
_BATCH_HEAD = struct.Struct(">iiiii")
_I16 = struct.Struct(">h")
# prepared halves stay invisible to the broker's check-back for this long; an uncommitted batch half older
# than this is an orphan and is rolled back by the broker
DEFAULT_HALF_TIMEOUT_S = 300

_STR = (StringType,)
_COLUMNS: dict[str, tuple[type, ...]] = {
    "body": (BinaryType, StringType),
    "topic": _STR,
    "tags": _STR,
    "keys": (StringType, ArrayType),
    "properties": (MapType,),
    "shardingKey": _STR,
    "brokerName": _STR,
    "queueId": (IntegerType, LongType, ShortType),
    "delayLevel": (IntegerType, LongType, ShortType),
}


class SinkError(ValueError):
    pass


@dataclass
class SinkOptions:
    namesrv: str
    topic: str | None
    guarantee: str
    group: str
    batch_size: int
    max_in_flight: int
    timeout_s: float
    half_timeout_s: int
    columns: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, opts: dict[str, str], schema: StructType) -> SinkOptions:
        o = {k.lower(): v for k, v in opts.items()}
        ns = o.get("nameserver") or o.get("namesrv")
        if not ns:
            raise SinkError("option 'nameserver' is required")
        guarantee = (o.get("deliveryguarantee") or "at_least_once").lower()
        if guarantee not in ("at_least_once", "exactly_once"):
            raise SinkError("deliveryGuarantee must be at_least_once or exactly_once")
        names = {f.name: f for f in schema.fields}
        unknown = sorted(set(names) - set(_COLUMNS))
        if unknown:
            raise SinkError(f"unsupported sink columns {unknown}; supported: {sorted(_COLUMNS)}")
        if "body" not in names:
            raise SinkError("the sink needs a 'body' column (binary or string)")
        for n, f in names.items():
            if not isinstance(f.dataType, _COLUMNS[n]):
                raise SinkError(f"column {n} has type {f.dataType.simpleString()}; expected one of "
                                f"{[t.__name__ for t in _COLUMNS[n]]}")  # fmt: skip
            if (
                n == "keys"
                and isinstance(f.dataType, ArrayType)
                and not isinstance(f.dataType.elementType, StringType)
            ):
                raise SinkError("column keys must be string or array<string>")
            if n == "properties" and not (
                isinstance(f.dataType.keyType, StringType) and isinstance(f.dataType.valueType, StringType)
            ):
                raise SinkError("column properties must be map<string,string>")
        if ("brokerName" in names) != ("queueId" in names):
            raise SinkError("brokerName and queueId columns go together")
        if "shardingKey" in names and "queueId" in names:
            raise SinkError("use either shardingKey or brokerName+queueId, not both")
        topic = o.get("topic")
        if "topic" not in names and not topic:
            raise SinkError("give the target topic: a 'topic' column or the topic option")
        if guarantee == "exactly_once" and "delayLevel" in names:
            raise SinkError("delayLevel is not supported with deliveryGuarantee=exactly_once")
        return cls(
            namesrv=ns,
            topic=topic,
            guarantee=guarantee,
            group=o.get("producergroup") or "SPARK_ROCKETMQ_SINK",
            batch_size=int(o.get("sendbatchsize") or 256),
            max_in_flight=int(o.get("maxinflight") or 32),
            timeout_s=int(o.get("sendtimeoutms") or 10_000) / 1000.0,
            half_timeout_s=int(o.get("transactiontimeoutseconds") or DEFAULT_HALF_TIMEOUT_S),
            columns=list(names),
        )


@dataclass
class RocketMQCommitMessage(WriterCommitMessage):
    txn: str | None
    rows: int
    halves: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # broker -> [(qoff, phys)]
    addrs: dict[str, str] = field(default_factory=dict)  # broker -> master address


# ------------------------------------------------------------------------------------------------
# rows -> messages
def _props_string(tags: Any, keys: Any, props: Any, sharding: Any, delay: Any, extra: str) -> str:
    parts = []
    if tags:
        parts.append("TAGS\x01" + tags)
    if keys:
        parts.append("KEYS\x01" + (keys if isinstance(keys, str) else " ".join(k for k in keys if k)))
    if props:
        parts.extend(k + "\x01" + v for k, v in props if k and v is not None)
    if sharding:
        parts.append("__SHARDINGKEY\x01" + sharding)
    if delay:
        parts.append("DELAY\x01" + str(int(delay)))
    parts.append(extra + UNIQ_IDS.next_id())
    return "\x02".join(parts)


def _col(rb: pa.RecordBatch, name: str) -> list[Any] | None:
    i = rb.schema.get_field_index(name)
    return rb.column(i).to_pylist() if i >= 0 else None


class _Sender:
    """Per task: turns Arrow batches into send requests and keeps up to max_in_flight outstanding."""

    def __init__(self, o: SinkOptions, txn: str | None) -> None:
        self.o = o
        self.txn = txn
        self.io = get_io(o.namesrv)
        self.rows = 0
        self.halves: dict[str, list[tuple[int, int]]] = {}
        self.addrs: dict[str, str] = {}
        self._queues: dict[str, list[tuple[str, str, int]]] = {}
        self._rr = 0

    def queues(self, topic: str) -> list[tuple[str, str, int]]:
        qs = self._queues.get(topic)
        if qs is None:
            qs = self._queues[topic] = self.io.write_queues(topic)
            if not qs:
                raise RocketMQSourceError(f"topic {topic!r} has no writable queue")
        return qs

    def send_batch(self, rb: pa.RecordBatch) -> None:
        n = rb.num_rows
        if not n:
            return
        o = self.o
        bodies = _col(rb, "body")
        topics = _col(rb, "topic")
        tags, keys, props = _col(rb, "tags"), _col(rb, "keys"), _col(rb, "properties")
        sharding, brokers, qids, delays = (
            _col(rb, "shardingKey"),
            _col(rb, "brokerName"),
            _col(rb, "queueId"),
            _col(rb, "delayLevel"),
        )
        none = [None] * n
        tags, keys, props = tags or none, keys or none, props or none
        sharding, delays = sharding or none, delays or none
        exactly = o.guarantee == "exactly_once"
        extra = "WAIT\x01true\x02"
        if exactly:
            extra += (
                f"TRAN_MSG\x01true\x02PGROUP\x01{o.group}\x02RQ_BATCH_TXN\x01{self.txn}\x02"
                f"CHECK_IMMUNITY_TIME_IN_SECONDS\x01{o.half_timeout_s}\x02"
            )
        extra += "UNIQ_KEY\x01"
        # group rows by target queue (keeps per-queue order = input order)
        groups: dict[tuple[str, str, int], list[tuple[bytes, str]]] = {}
        single: list[tuple[tuple[str, str, int], bytes, str]] = []
        for i in range(n):
            body = bodies[i]
            if body is None:
                raise SinkError("body must not be null")
            if isinstance(body, str):
                body = body.encode()
            topic = topics[i] if topics is not None and topics[i] else o.topic
            if not topic:
                raise SinkError("row without topic (null topic column and no topic option)")
            qs = self.queues(topic)
            if brokers is not None and brokers[i] is not None and qids[i] is not None:
                q = (topic, brokers[i], int(qids[i]))
            elif sharding[i]:
                q = qs[(zlib.crc32(sharding[i].encode()) & 0x7FFFFFFF) % len(qs)]
            else:
                q = qs[self._rr % len(qs)]
                self._rr += 1
            ps = _props_string(tags[i], keys[i], props[i], sharding[i], delays[i], extra)
            if exactly or delays[i]:
                single.append((q, body, ps))
            else:
                groups.setdefault(q, []).append((body, ps))
        self.io.call(self._send_all(groups, single))
        self.rows += n

    # -- async part (on the client loop) ---------------------------------------------------------
    def _header(self, q: tuple[str, str, int], sys_flag: int, props: str, batch: bool) -> dict[str, str]:
        return {
            "a": self.o.group,
            "b": q[0],
            "c": "TBW102",
            "d": "4",
            "e": str(q[2]),
            "f": str(sys_flag),
            "g": str(int(time.time() * 1000)),
            "h": "0",
            "i": props,
            "j": "0",
            "k": "false",
            "m": "true" if batch else "false",
        }

    async def _send_all(self, groups: dict, single: list) -> None:
        sem = asyncio.Semaphore(self.o.max_in_flight)
        tasks = []
        bs = self.o.batch_size
        for q, msgs in groups.items():
            for j in range(0, len(msgs), bs):
                chunk = msgs[j : j + bs]
                body = _encode_batch(chunk)
                req = lambda q=q, body=body: RemotingCommand.request(  # noqa: E731
                    RequestCode.SEND_BATCH_MESSAGE, self._header(q, 0, "WAIT\x01true", True), body
                )
                tasks.append(asyncio.ensure_future(self._send(sem, q, req, False)))
        for q, body, ps in single:
            sysf = SYSFLAG_PREPARED if self.o.guarantee == "exactly_once" else 0
            if len(body) >= COMPRESS_OVER:
                body = zlib.compress(body, 5)
                sysf |= SYSFLAG_COMPRESSED_ZLIB
            req = lambda q=q, body=body, ps=ps, sysf=sysf: RemotingCommand.request(  # noqa: E731
                RequestCode.SEND_MESSAGE_V2, self._header(q, sysf, ps, False), body
            )
            tasks.append(asyncio.ensure_future(self._send(sem, q, req, sysf & SYSFLAG_PREPARED)))
        if tasks:
            results = await asyncio.gather(*tasks, return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if errors:
                raise errors[0]

    async def _send(self, sem: asyncio.Semaphore, q, make_request, prepared: int) -> None:
        async with sem:
            last: Exception | None = None
            for attempt in range(3):
                try:
                    resp = await self.io.invoke_broker(q[0], q[1], make_request(), self.o.timeout_s)
                except Exception as exc:  # connection/timeout: retry (at-least-once may duplicate)
                    last = exc
                    await asyncio.sleep(0.2 * (attempt + 1))
                    continue
                if resp.code in (0, 10, 11, 12):  # SEND_OK, FLUSH_DISK/SLAVE timeouts: stored
                    if prepared:
                        h = resp.ext_fields
                        phys = int(h["msgId"][-16:], 16)
                        self.halves.setdefault(q[1], []).append((int(h["queueOffset"]), phys))
                        if q[1] not in self.addrs:
                            self.addrs[q[1]] = await self.io.broker_addr(q[0], q[1])
                    return
                last = RocketMQSourceError(f"send to {q}: {resp.code} {resp.remark}")
                if resp.code not in (1, 2, 14, 17, 215):
                    break
                await asyncio.sleep(0.2 * (attempt + 1))
            raise last or RocketMQSourceError(f"send to {q} failed")


def _encode_batch(msgs: list[tuple[bytes, str]]) -> bytes:
    parts: list[bytes] = []
    pack = _BATCH_HEAD.pack
    i16 = _I16.pack
    for body, ps in msgs:
        pb = ps.encode()
        parts += (pack(22 + len(body) + len(pb), 0, 0, 0, len(body)), body, i16(len(pb)), pb)
    return b"".join(parts)


# ------------------------------------------------------------------------------------------------
def end_batch(namesrv: str, topic_hint: str | None, txn: str, decision: int, group: str, messages) -> dict:
    """Driver side: one END_TRANSACTION_BATCH per broker holding halves of this transaction."""
    per_broker: dict[str, list[tuple[int, int]]] = {}
    addrs: dict[str, str] = {}
    for m in messages:
        if isinstance(m, RocketMQCommitMessage):
            addrs.update(m.addrs)
            for b, hs in m.halves.items():
                per_broker.setdefault(b, []).extend(hs)
    if not per_broker:
        return {}
    io = get_io(namesrv)

    async def one(broker: str, halves: list[tuple[int, int]]) -> dict:
        addr = addrs.get(broker) or await _broker_addr(io, broker)
        req = RemotingCommand.request(
            END_TRANSACTION_BATCH,
            {"producerGroup": group, "transactionId": txn, "commitOrRollback": str(decision)},
            orjson.dumps({"halves": halves}),
        )
        resp = await io.invoke_addr(addr, req, 30.0)
        if resp.code != 0:
            raise RocketMQSourceError(f"END_TRANSACTION_BATCH {txn} on {broker}: {resp.code} {resp.remark}")
        return dict(resp.ext_fields)

    async def go() -> dict:
        items = sorted(per_broker.items())
        res = await asyncio.gather(*(one(b, h) for b, h in items))
        return dict(zip([b for b, _ in items], res, strict=True))

    return io.call(go())


async def _broker_addr(io, broker: str) -> str:
    for r in io.routes.values():
        for bd in r.broker_datas:
            if bd.broker_name == broker and "0" in bd.broker_addrs:
                return bd.broker_addrs["0"]
    raise RocketMQSourceError(f"no address known for broker {broker!r}")


def _rollback_quietly(o: SinkOptions, s: _Sender) -> None:
    if s.halves and s.txn:
        try:
            msg = RocketMQCommitMessage(s.txn, 0, s.halves, s.addrs)
            end_batch(o.namesrv, o.topic, s.txn, ROLLBACK, o.group, [msg])
        except Exception as exc:
            log.warning("rolling back the halves of a failed task failed (the broker will): %s", exc)


def _write(o: SinkOptions, txn: str | None, iterator: Iterator[pa.RecordBatch]) -> RocketMQCommitMessage:
    s = _Sender(o, txn)
    try:
        for rb in iterator:
            s.send_batch(rb)
    except BaseException:
        _rollback_quietly(o, s)
        raise
    return RocketMQCommitMessage(txn, s.rows, s.halves, s.addrs)


class RocketMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, o: SinkOptions) -> None:
        self.o = o
        self.txn = f"job:{uuid.uuid4().hex}" if o.guarantee == "exactly_once" else None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RocketMQCommitMessage:
        return _write(self.o, self.txn, iterator)

    def commit(self, messages: list[Any]) -> None:
        if self.txn:
            end_batch(self.o.namesrv, self.o.topic, self.txn, COMMIT, self.o.group, messages)

    def abort(self, messages: list[Any]) -> None:
        if self.txn:
            end_batch(self.o.namesrv, self.o.topic, self.txn, ROLLBACK, self.o.group, messages)


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, o: SinkOptions) -> None:
        self.o = o

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RocketMQCommitMessage:
        txn = None
        if self.o.guarantee == "exactly_once":
            from pyspark import TaskContext

            ctx = TaskContext.get()
            qid = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
            bid = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
            if not qid or bid is None:
                raise SinkError("exactly_once needs the streaming query id and batch id of the task")
            txn = f"{qid}:{bid}"
        return _write(self.o, txn, iterator)

    def _txn(self, messages: list[Any]) -> str | None:
        for m in messages:
            if isinstance(m, RocketMQCommitMessage) and m.txn:
                return m.txn
        return None

    def commit(self, messages: list[Any], batchId: int) -> None:
        txn = self._txn(messages)
        if txn:
            end_batch(self.o.namesrv, self.o.topic, txn, COMMIT, self.o.group, messages)

    def abort(self, messages: list[Any], batchId: int) -> None:
        txn = self._txn(messages)
        if txn:
            end_batch(self.o.namesrv, self.o.topic, txn, ROLLBACK, self.o.group, messages)
