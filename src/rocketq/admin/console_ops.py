"""AdminClient operations added for the web console (AdminClient inherits :class:`ConsoleOps`).

They sit beside the mqadmin ones and use only AdminClient's transport and lookups (``invoke_broker``,
``master_addrs``, ``topic_route``, ``pull``, ``send_message`` ...), so the console and the CLI share one
implementation: group progress and lag as RocketMQ's consumerProgress computes it, consumer running info,
consume-directly, typed topics, messages of a time range, message traces, resend to one group, skip backlog.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rocketq.protocol import headers as H
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.properties import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    TRACE_TOPIC,
)

from .errors import AdminError, TopicNotFoundError
from .records import StoredMessage
from .wire import QueueConsumeStats, loads, mq_of

MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
# properties a resent message must not carry over: they describe the old copy's delivery (delay, transaction
# state, queue positions, consume timing), and a new UNIQ_KEY is given to the new copy
_NOT_RESENT = frozenset(
    {
        "DELAY",
        "WAIT",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "UNIQ_KEY",
        "CONSUME_START_TIME",
        "MAX_RECONSUME_TIMES",
        "RECONSUME_TIME",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
        "__STARTDELIVERTIME",
    }
)
TRACE_CONTENT_SEP = "\x01"
TRACE_FIELD_SEP = "\x02"


@dataclass(slots=True)
class GroupProgress:
    """A group's ConsumeStats over every master: the rows of ``mqadmin consumerProgress -g GROUP``."""

    group: str
    rows: list[QueueConsumeStats]
    tps: float
    answered: int  # masters that answered
    errors: list[AdminError] = field(default_factory=list)

    @property
    def diff_total(self) -> int:
        """consumerProgress's "Diff Total": every queue of the group, its retry topic included."""
        return sum(r.diff for r in self.rows)

    @property
    def retry_diff(self) -> int:
        return sum(r.diff for r in self.rows if r.topic.startswith(RETRY_GROUP_TOPIC_PREFIX))

    @property
    def lag(self) -> int:
        """Backlog of the topics the group subscribes (its retry topic left out)."""
        return self.diff_total - self.retry_diff


@dataclass(slots=True)
class GroupSummary:
    """One line of the group list: who is online, how fast, how far behind."""

    group: str
    clients: int
    consume_type: str
    message_model: str
    version: int | None
    progress: GroupProgress
    subscriptions: dict[str, str]  # topic -> sub expression, from the online consumers


@dataclass(slots=True)
class TraceEvent:
    """One record of RMQ_SYS_TRACE_TOPIC (RocketMQ's TraceBean text format)."""

    kind: str  # Pub | SubBefore | SubAfter
    timestamp: int
    group: str
    msg_id: str
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_ms: int = 0
    msg_type: int = 0
    offset_msg_id: str = ""
    success: bool = True
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0


def decode_traces(body: bytes) -> list[TraceEvent]:
    """Every trace record in a RMQ_SYS_TRACE_TOPIC body; unreadable records are skipped."""
    out: list[TraceEvent] = []
    text = body.decode("utf-8", "replace")
    for rec in text.split(TRACE_FIELD_SEP):
        f = rec.split(TRACE_CONTENT_SEP)
        try:
            if f[0] == "Pub" and len(f) >= 14:
                out.append(
                    TraceEvent(
                        "Pub", int(f[1]), f[3], f[5], topic=f[4], tags=f[6], keys=f[7], store_host=f[8],
                        body_length=int(f[9] or 0), cost_ms=int(f[10] or 0), msg_type=int(f[11] or 0),
                        offset_msg_id=f[12], success=f[13] == "true",
                    )
                )  # fmt: skip
            elif f[0] == "SubBefore" and len(f) >= 8:
                out.append(
                    TraceEvent(
                        "SubBefore", int(f[1]), f[3], f[5], request_id=f[4], retry_times=int(f[6] or 0),
                        keys=f[7],
                    )
                )  # fmt: skip
            elif f[0] == "SubAfter" and len(f) >= 7:
                out.append(
                    TraceEvent(
                        "SubAfter", int(f[7]) if len(f) > 7 and f[7] else 0, f[8] if len(f) > 8 else "",
                        f[2], request_id=f[1], cost_ms=int(f[3] or 0), success=f[4] == "true", keys=f[5],
                        context_code=int(f[6] or 0),
                    )
                )  # fmt: skip
        except (ValueError, IndexError):
            continue
    return out


def _resend_properties(msg: StoredMessage, origin_topic: str) -> dict[str, str]:
    props = {k: v for k, v in msg.properties.items() if k not in _NOT_RESENT}
    props[PROPERTY_RETRY_TOPIC] = origin_topic
    props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
    return props


def origin_topic_of(msg: StoredMessage) -> str:
    """The topic a retried or dead-lettered message was first sent to."""
    if msg.topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        return msg.properties.get(PROPERTY_RETRY_TOPIC) or msg.properties.get("REAL_TOPIC") or msg.topic
    return msg.topic


class ConsoleOps:
    """Mixed into AdminClient; every method relies on AdminClient's own transport and lookup methods."""

    # AdminClient's methods used here (declared for readers and type checkers; client.py defines them)
    invoke_broker: Callable[..., Awaitable[Any]]
    check: Callable[..., Any]
    master_addrs: Callable[..., Awaitable[dict[str, str]]]
    consumer_connection: Callable[[str], Awaitable[dict[str, Any]]]
    subscription_groups: Callable[[str], Awaitable[dict[str, dict[str, Any]]]]
    delete_subscription_group: Callable[[str, str], Awaitable[None]]
    reset_offset_by_time: Callable[..., Awaitable[dict[tuple[str, str, int], int]]]
    topic_queues: Callable[..., Awaitable[list[tuple[str, str, int]]]]
    topic_configs: Callable[[str], Awaitable[dict[str, dict[str, Any]]]]
    min_offset: Callable[[str, str, int], Awaitable[int]]
    max_offset: Callable[[str, str, int], Awaitable[int]]
    search_offset: Callable[[str, str, int, int], Awaitable[int]]
    pull: Callable[..., Awaitable[Any]]
    query_message: Callable[..., Awaitable[list[StoredMessage]]]
    view_message: Callable[[str], Awaitable[StoredMessage]]
    send_message: Callable[..., Awaitable[Any]]

    # -- consumer groups -----------------------------------------------------------------------------------
    async def group_progress(self, group: str, topic: str | None = None) -> GroupProgress:
        """GET_CONSUME_STATS on every master, as ``mqadmin consumerProgress`` does: per queue the broker's
        max offset and the group's committed offset (0 when it never committed), diff = the difference.
        A group that committed nothing yet has no rows (not a -1)."""
        masters = await self.master_addrs()
        ext = H.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext()

        async def one(name: str, addr: str) -> Any:
            try:
                resp = await self.invoke_broker(addr, RequestCode.GET_CONSUME_STATS, ext)
                return name, self.check(resp, f"consumerProgress {group} on {name}")
            except AdminError as exc:
                return name, exc

        progress = GroupProgress(group, [], 0.0, 0)
        for name, got in await asyncio.gather(*(one(n, a) for n, a in masters.items())):
            if isinstance(got, AdminError):
                progress.errors.append(got)
                continue
            progress.answered += 1
            stats = loads(got.body_bytes)
            progress.tps += float(stats.get("consumeTps", 0) or 0)
            for key, w in (stats.get("offsetTable") or {}).items():
                t, b, q = mq_of(key)
                progress.rows.append(
                    QueueConsumeStats(
                        t,
                        b or name,
                        q,
                        int(w.get("brokerOffset", 0)),
                        int(w.get("consumerOffset", 0)),
                        int(w.get("lastTimestamp", 0)),
                    )
                )
        progress.rows.sort(key=lambda r: (r.topic, r.broker_name, r.queue_id))
        return progress

    async def consumer_groups(self) -> dict[str, dict[str, Any]]:
        """groupName -> SubscriptionGroupConfig (as JSON, plus ``brokers``), merged over every master."""
        masters = await self.master_addrs()
        tables = await asyncio.gather(
            *(self.subscription_groups(addr) for addr in masters.values()),
            return_exceptions=True,
        )
        out: dict[str, dict[str, Any]] = {}
        for name, table in zip(masters, tables, strict=True):
            if isinstance(table, BaseException):
                if not isinstance(table, AdminError):
                    raise table
                continue
            for group, cfg in table.items():
                entry = out.setdefault(group, {**cfg, "brokers": []})
                entry["brokers"].append(name)
        return out

    async def group_summary(self, group: str) -> GroupSummary:
        """Connections and progress of one group, fetched together."""

        refused: list[AdminError] = []

        async def conn() -> dict[str, Any] | None:
            try:
                return await self.consumer_connection(group)
            except AdminError as exc:  # offline (CONSUMER_NOT_ONLINE), or refused: no connection to show
                if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    refused.append(exc)
                return None

        c, progress = await asyncio.gather(conn(), self.group_progress(group))
        progress.errors.extend(refused)
        conns = (c or {}).get("connectionSet") or []
        versions = [int(x.get("version", 0)) for x in conns if str(x.get("version", "")).isdigit()]
        subs = {
            str(s.get("topic", t)): str(s.get("subString", "*"))
            for t, s in ((c or {}).get("subscriptionTable") or {}).items()
            if isinstance(s, dict)
        }
        return GroupSummary(
            group,
            len(conns),
            str((c or {}).get("consumeType", "")),
            str((c or {}).get("messageModel", "")),
            max(versions) if versions else None,
            progress,
            subs,
        )

    async def consumer_running_info(self, group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO relayed by a master to the client (ConsumerRunningInfo as JSON)."""
        ext = H.GetConsumerRunningInfoRequestHeader(
            consumer_group=group, client_id=client_id, jstack_enable=jstack
        ).to_ext()
        last: AdminError | None = None
        masters = await self.master_addrs()
        for name, addr in masters.items():
            resp = await self.invoke_broker(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext, timeout_s=10.0)
            try:
                self.check(resp, f"consumerRunningInfo {group} {client_id} on {name}")
            except AdminError as exc:
                last = exc
                continue
            return loads(resp.body_bytes)
        raise last or AdminError("no broker in the cluster")

    async def consume_message_directly(
        self, group: str, client_id: str, offset_msg_id: str, broker_name: str = ""
    ) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: one online client of the group runs its listener on the message.
        Returns ConsumeMessageDirectlyResult (consumeResult, remark, spentTimeMills ...)."""
        masters = await self.master_addrs()
        addr = masters.get(broker_name) or next(iter(masters.values()), None)
        if addr is None:
            raise AdminError("no broker to forward the message to the consumer")
        ext = H.ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=client_id, msg_id=offset_msg_id, broker_name=broker_name
        ).to_ext()
        resp = await self.invoke_broker(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, timeout_s=10.0)
        self.check(resp, f"consume message directly by {client_id}")
        body = loads(resp.body_bytes)
        return body if isinstance(body, dict) else {"result": body}

    async def skip_backlog(self, group: str, topic: str) -> dict[tuple[str, str, int], int]:
        """Move the group's offsets on the topic to the end of every queue (RocketMQ's reset to -1)."""
        return await self.reset_offset_by_time(group, topic, -1, True)

    async def delete_group(self, group: str, cluster: str | None = None) -> list[str]:
        """Delete the subscription group from every master (of one cluster). Returns the brokers touched."""
        masters = await self.master_addrs(cluster)
        for addr in masters.values():
            await self.delete_subscription_group(addr, group)
        return list(masters)

    # -- messages ------------------------------------------------------------------------------------------
    async def messages_by_time(
        self, topic: str, begin: int, end: int, *, max_total: int = 2000, deadline_s: float = 20.0
    ) -> tuple[list[StoredMessage], bool]:
        """Messages of every readable queue stored in [begin, end] ms, newest first, at most ``max_total``
        (like the dashboard's query by topic). Returns (messages, truncated)."""
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + deadline_s
        found: list[StoredMessage] = []
        truncated = False
        for name, addr, qid in await self.topic_queues(topic):
            lo_q, hi_q = await asyncio.gather(
                self.min_offset(addr, topic, qid),
                self.max_offset(addr, topic, qid),
            )
            if hi_q <= lo_q:
                continue
            lo = max(lo_q, await self.search_offset(addr, topic, qid, begin))
            hi = min(hi_q, await self.search_offset(addr, topic, qid, end) + 1)
            offset = lo
            while offset < hi:
                if len(found) >= max_total or loop.time() > stop_at:
                    truncated = True
                    break
                r = await self.pull(addr, topic, qid, offset, max_nums=32, broker_name=name)
                for m in r.messages:
                    if m.queue_offset < hi and begin <= m.store_timestamp <= end:
                        found.append(m)
                if r.code != ResponseCode.SUCCESS or r.next_begin_offset <= offset:
                    break
                offset = r.next_begin_offset
        found.sort(key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
        return found[:max_total], truncated or len(found) > max_total

    async def message_traces(self, msg_id: str, trace_topic: str = TRACE_TOPIC) -> list[TraceEvent]:
        """The trace records of one message (by its msgId) from the trace topic, oldest first."""
        try:
            records = await self.query_message(trace_topic, msg_id, max_num=64)
        except TopicNotFoundError:
            return []
        events = [e for m in records for e in decode_traces(m.body) if e.msg_id == msg_id]
        events.sort(key=lambda e: (e.timestamp, ("Pub", "SubBefore", "SubAfter").index(e.kind)))
        return events

    async def resend_to_group(self, offset_msg_id: str, group: str) -> Any:
        """Deliver a stored message (e.g. from %DLQ%group) again to one consumer group only: a new copy goes
        to %RETRY%group with RETRY_TOPIC set to its first topic, so the group's consumers see that topic and
        the copy has the whole retry budget again. Returns the SendResult."""
        msg = await self.view_message(offset_msg_id)
        origin = origin_topic_of(msg)
        retry = RETRY_GROUP_TOPIC_PREFIX + group
        try:
            return await self.send_message(
                retry,
                msg.body,
                tags=msg.tags,
                keys=msg.keys,
                properties=_resend_properties(msg, origin),
                flag=msg.flag,
            )
        except TopicNotFoundError:
            raise AdminError(
                f"group {group!r} has no retry topic {retry} yet: it is created when a consumer of the group "
                "starts (or use consume-directly with an online client)"
            ) from None

    # -- topics --------------------------------------------------------------------------------------------
    async def topic_config_tables(self) -> dict[str, dict[str, dict[str, Any]]]:
        """brokerName -> topicName -> TopicConfig (as JSON), from every master."""
        masters = await self.master_addrs()
        tables = await asyncio.gather(
            *(self.topic_configs(a) for a in masters.values()),
            return_exceptions=True,
        )
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for name, t in zip(masters, tables, strict=True):
            if isinstance(t, AdminError):
                continue
            if isinstance(t, BaseException):
                raise t
            out[name] = t
        return out
