"""Message pages: query by topic + time range, by key, by msgId; detail with the consume status per group;
resend to a group; message trace; the DLQ of a group (list, resend one or many, export)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import orjson
from aiohttp import web

from rocketq.admin import AdminError, TopicNotFoundError
from rocketq.admin.console_ops import origin_topic_of
from rocketq.admin.records import decode_offset_msg_id
from rocketq.protocol.properties import DLQ_GROUP_TOPIC_PREFIX

from .context import ConsoleContext
from .jobs import Job
from .routes import API, ApiError, Param
from .views import message_detail, message_summary, trace_json

MSG_ID_RE = re.compile(r"^[0-9A-Fa-f]{32,64}$")
MAX_RESULTS = 2000
BEGIN = Param("begin", "integer", description="ms since the epoch (default: an hour ago)")
END = Param("end", "integer", description="ms since the epoch (default: now)")


def _range(begin: int | None, end: int | None, default_span_ms: int = 3_600_000) -> tuple[int, int]:
    now = int(time.time() * 1000)
    end = now if end is None else end
    begin = end - default_span_ms if begin is None else begin
    if begin < 0 or end < begin:
        raise ApiError(400, "begin must be before end (ms since the epoch)")
    return begin, end


def _msg_id(value: str, name: str = "msgId") -> str:
    value = value.strip()
    if not MSG_ID_RE.match(value):
        raise ApiError(400, f"{name}: a message id is 32 hex characters")
    return value.upper()


def _offset_id(addrs: list[str], value: str, name: str = "offsetMsgId") -> str:
    """An offsetMsgId whose broker address is one of the cluster's: the console never connects to an
    address a request made up (an offsetMsgId carries the address of the broker that stored it)."""
    msg_id = _msg_id(value, name)
    try:
        addr, _ = decode_offset_msg_id(msg_id)
    except ValueError:
        raise ApiError(400, f"{name}: not an offsetMsgId") from None
    if addr not in addrs:
        raise ApiError(404, f"{name}: no broker of this cluster stored {msg_id} (its address is {addr})")
    return msg_id


@API.route(
    "GET",
    "/api/messages",
    "Messages of a topic stored in a time range (newest first, at most 2000)",
    "message",
    Param("topic", "name", required=True),
    BEGIN,
    END,
)
async def by_time(
    ctx: ConsoleContext, request: web.Request, topic: str, begin: int | None = None, end: int | None = None
) -> Any:
    b, e = _range(begin, end)
    msgs, truncated = await ctx.admin_for(request).messages_by_time(topic, b, e, max_total=MAX_RESULTS)
    return {"messages": [message_summary(m) for m in msgs], "truncated": truncated, "begin": b, "end": e}


@API.route(
    "GET",
    "/api/messages/by-key",
    "Messages of a topic by key (the broker's index)",
    "message",
    Param("topic", "name", required=True),
    Param("key", required=True, max_len=512),
    BEGIN,
    END,
)
async def by_key(
    ctx: ConsoleContext,
    request: web.Request,
    topic: str,
    key: str,
    begin: int | None = None,
    end: int | None = None,
) -> Any:
    b = 0 if begin is None else begin
    msgs = await ctx.admin_for(request).query_message(topic, key, max_num=64, begin=b, end=end)
    return {"messages": [message_summary(m) for m in msgs]}


@API.route(
    "GET",
    "/api/messages/by-id",
    "A message by its msgId (with the topic) or its offsetMsgId",
    "message",
    Param("msgId", required=True, max_len=64),
    Param("topic", "name"),
)
async def by_id(ctx: ConsoleContext, request: web.Request, msgId: str, topic: str | None = None) -> Any:
    msg_id = _msg_id(msgId)
    admin = ctx.admin_for(request)
    found = []
    if topic:
        found = await admin.query_message(topic, msg_id, max_num=32, unique_key=True)
    if not found:
        try:
            found = [await admin.view_message(_offset_id(await admin.broker_addrs(), msg_id, "msgId"))]
        except (AdminError, ApiError) as exc:
            raise ApiError(404, f"no message {msg_id}" + (f" in topic {topic}" if topic else "")) from exc
    return {"messages": [message_summary(m) for m in found]}


async def _consume_status(ctx: ConsoleContext, request: web.Request, m: Any) -> list[dict[str, Any]]:
    """Per group consuming the message's topic: CONSUMED when its offset in the message's queue is past the
    message, NOT_CONSUMED_YET when not, UNKNOWN when the group has no offset there."""
    admin = ctx.admin_for(request)
    topic = m.topic
    try:
        groups = await admin.topic_consumer_groups(topic)
    except AdminError:
        return []

    async def one(group: str) -> dict[str, Any]:
        p = await admin.group_progress(group, topic)
        row = next(
            (
                r
                for r in p.rows
                if r.topic == topic and r.queue_id == m.queue_id and r.broker_name == m.broker_name
            ),
            None,
        )
        if row is None:
            status = "UNKNOWN"
        else:
            status = "CONSUMED" if row.consumer_offset > m.queue_offset else "NOT_CONSUMED_YET"
        return {"group": group, "status": status}

    return list(await asyncio.gather(*(one(g) for g in groups[:64])))


@API.route(
    "GET",
    "/api/messages/detail",
    "One message: properties, body, consume status per group",
    "message",
    Param("offsetMsgId", required=True, max_len=64),
)
async def detail(ctx: ConsoleContext, request: web.Request, offsetMsgId: str) -> Any:
    admin = ctx.admin_for(request)
    m = await admin.view_message(_offset_id(await admin.broker_addrs(), offsetMsgId))
    out = message_detail(m)
    out["originTopic"] = origin_topic_of(m)
    out["consumeStatus"] = await _consume_status(ctx, request, m)
    return out


@API.route(
    "POST",
    "/api/messages/resend",
    "Deliver a message again to one group (through its retry topic), "
    "or have one online client consume it directly",
    "message",
    Param("offsetMsgId", required=True, where="body", max_len=64),
    Param("group", "name", required=True, where="body"),
    Param("clientId", where="body", max_len=256, description="consume directly by this client"),
)
async def resend(
    ctx: ConsoleContext,
    request: web.Request,
    offsetMsgId: str,
    group: str,
    clientId: str | None = None,
) -> Any:
    admin = ctx.admin_for(request)
    msg_id = _offset_id(await admin.broker_addrs(), offsetMsgId)
    if clientId:
        m = await admin.view_message(msg_id)
        result = await admin.consume_message_directly(group, clientId, msg_id, m.broker_name)
        return {"mode": "consumeDirectly", "result": result}
    r = await admin.resend_to_group(msg_id, group)
    return {"mode": "retryTopic", "status": r.status, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id}


@API.route(
    "GET",
    "/api/trace",
    "A message's trace: send, store and consume events",
    "trace",
    Param("msgId", required=True, max_len=64),
    Param("topic", "name"),
    Param("traceTopic", "name", description="default RMQ_SYS_TRACE_TOPIC"),
)
async def trace(
    ctx: ConsoleContext,
    request: web.Request,
    msgId: str,
    topic: str | None = None,
    traceTopic: str | None = None,
) -> Any:
    msg_id = _msg_id(msgId)
    admin = ctx.admin_for(request)
    events = await admin.message_traces(msg_id, traceTopic or ctx.config.trace_topic)
    stored = None
    topic = topic or next((e.topic for e in events if e.kind == "Pub" and e.topic), None)
    if topic:
        try:
            found = await admin.query_message(topic, msg_id, max_num=4, unique_key=True)
        except AdminError:
            found = []
        if found:
            m = found[0]
            stored = {
                "topic": m.topic,
                "brokerName": m.broker_name,
                "storeHost": m.store_host,
                "storeTimestamp": m.store_timestamp,
                "bornTimestamp": m.born_timestamp,
                "queueId": m.queue_id,
                "queueOffset": m.queue_offset,
                "offsetMsgId": m.offset_msg_id,
            }
    return {"msgId": msg_id, "events": [trace_json(e) for e in events], "stored": stored}


async def _dlq(
    ctx: ConsoleContext,
    request: web.Request,
    group: str,
    begin: int | None,
    end: int | None,
    limit: int = MAX_RESULTS,
) -> tuple[list[Any], bool, int, int]:
    b, e = _range(begin, end, 3 * 86_400_000)
    try:
        msgs, truncated = await ctx.admin_for(request).messages_by_time(
            DLQ_GROUP_TOPIC_PREFIX + group, b, e, max_total=limit
        )
    except TopicNotFoundError:
        return [], False, b, e
    return msgs, truncated, b, e


@API.route(
    "GET",
    "/api/dlq",
    "A group's dead-letter messages (%DLQ%group) in a time range",
    "dlq",
    Param("group", "name", required=True),
    Param("begin", "integer", description="ms since the epoch (default: 3 days ago)"),
    END,
)
async def dlq(
    ctx: ConsoleContext, request: web.Request, group: str, begin: int | None = None, end: int | None = None
) -> Any:
    msgs, truncated, b, e = await _dlq(ctx, request, group, begin, end)
    rows = []
    for m in msgs:
        row = message_summary(m)
        row["originTopic"] = origin_topic_of(m)
        rows.append(row)
    return {"group": group, "messages": rows, "truncated": truncated, "begin": b, "end": e}


@API.route(
    "POST",
    "/api/dlq/resend",
    "Deliver dead-letter messages again to their group (a job)",
    "dlq",
    Param("group", "name", required=True, where="body"),
    Param("offsetMsgIds", "array", required=True, where="body", max_len=64),
)
async def dlq_resend(
    ctx: ConsoleContext,
    request: web.Request,
    group: str,
    offsetMsgIds: list[str],
) -> Any:
    admin = ctx.admin_for(request)
    addrs = await admin.broker_addrs()
    ids = [_offset_id(addrs, i, "offsetMsgIds") for i in offsetMsgIds]
    if not ids:
        raise ApiError(400, "offsetMsgIds: at least one id")

    async def work(job: Job) -> Any:
        sent = []
        for msg_id in ids:
            try:
                r = await admin.resend_to_group(msg_id, group)
            except AdminError as exc:
                job.step(f"{msg_id}: {exc}", ok=False)
                continue
            sent.append({"offsetMsgId": msg_id, "newMsgId": r.msg_id})
            job.step(f"{msg_id}: resent to {group} as {r.msg_id}")
        return {"resent": sent}

    job = ctx.jobs.start(f"resend {len(ids)} DLQ message(s) of {group}", len(ids), work, ctx.user_of(request))
    return {"job": job.id}


@API.route(
    "GET",
    "/api/dlq/export",
    "A group's dead-letter messages with bodies, as a JSON download",
    "dlq",
    Param("group", "name", required=True),
    Param("begin", "integer", description="ms since the epoch (default: 3 days ago)"),
    END,
    download="application/json",
)
async def dlq_export(
    ctx: ConsoleContext, request: web.Request, group: str, begin: int | None = None, end: int | None = None
) -> web.StreamResponse:
    msgs, truncated, b, e = await _dlq(ctx, request, group, begin, end)
    doc = {
        "group": group,
        "begin": b,
        "end": e,
        "truncated": truncated,
        "messages": [{**message_detail(m, limit=None), "originTopic": origin_topic_of(m)} for m in msgs],
    }
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", group)
    return web.Response(
        body=orjson.dumps(doc, option=orjson.OPT_INDENT_2),
        content_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="dlq-{safe}.json"'},
    )
