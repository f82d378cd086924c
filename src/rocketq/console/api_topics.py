"""Topic pages: list by type, detail (config per broker, queue status, route, consumer groups), create /
update with a message type, send a test message, reset offset, skip backlog, delete."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from rocketq.admin import AdminClient, AdminError, TopicConfig
from rocketq.admin.cmd_topic import validate_topic
from rocketq.admin.registry import UsageError

from .context import ConsoleContext
from .jobs import Job
from .routes import API, ApiError, Param
from .topics import KINDS, MESSAGE_TYPES, message_type, perm_text, topic_kind

MAX_TEST_BODY = 64 * 1024
TOPIC = Param("topic", "name", where="path", description="topic name")


def _check_topic(topic: str) -> None:
    try:
        validate_topic(topic)
    except UsageError as exc:
        raise ApiError(400, str(exc)) from None


@API.route(
    "GET",
    "/api/topics",
    "Every topic with its type, queues and permission",
    "topic",
    Param("type", description="only this type: " + " | ".join(KINDS), max_len=16),
)
async def topics(ctx: ConsoleContext, request: web.Request, type: str | None = None) -> Any:
    admin = ctx.admin_for(request)
    names, tables, info = await asyncio.gather(
        admin.topic_list(), admin.topic_config_tables(), admin.cluster_info()
    )
    cluster_of = {b: c for c, bs in info["clusterAddrTable"].items() for b in bs}
    rows = []
    counts: dict[str, int] = {}
    for t in names:
        cfgs = {b: tab[t] for b, tab in tables.items() if t in tab}
        first = next(iter(cfgs.values()), None)
        kind = topic_kind(t, first, info)
        counts[kind] = counts.get(kind, 0) + 1
        if type and kind != type.upper():
            continue
        rows.append(
            {
                "topic": t,
                "type": kind,
                "brokers": sorted(cfgs),
                "clusters": sorted({cluster_of.get(b, "") for b in cfgs} - {""}),
                "readQueueNums": sum(int(c.get("readQueueNums", 0)) for c in cfgs.values()),
                "writeQueueNums": sum(int(c.get("writeQueueNums", 0)) for c in cfgs.values()),
                "perm": perm_text(int(first.get("perm", 6))) if first else "",
            }
        )
    return {"topics": rows, "counts": counts, "clusters": sorted(info["clusterAddrTable"])}


@API.route("GET", "/api/topics/{topic}", "A topic's config on each broker and its type", "topic", TOPIC)
async def topic_detail(ctx: ConsoleContext, request: web.Request, topic: str) -> Any:
    admin = ctx.admin_for(request)
    tables, info = await asyncio.gather(admin.topic_config_tables(), admin.cluster_info())
    cfgs = {b: tab[topic] for b, tab in tables.items() if topic in tab}
    if not cfgs:
        await admin.topic_route(topic)  # a 404 when the NameServer does not know it either
    first = next(iter(cfgs.values()), None)
    return {
        "topic": topic,
        "type": topic_kind(topic, first, info),
        "messageType": message_type(first),
        "configs": cfgs,
    }


@API.route("GET", "/api/topics/{topic}/status", "Per-queue min / max offset and last update", "topic", TOPIC)
async def topic_status(ctx: ConsoleContext, request: web.Request, topic: str) -> Any:
    rows = await ctx.admin_for(request).topic_stats(topic)
    return {
        "topic": topic,
        "queues": [
            {
                "brokerName": r.broker_name,
                "queueId": r.queue_id,
                "minOffset": r.min_offset,
                "maxOffset": r.max_offset,
                "messages": max(0, r.max_offset - r.min_offset),
                "lastUpdateTimestamp": r.last_update_timestamp,
            }
            for r in rows
        ],
    }


@API.route("GET", "/api/topics/{topic}/route", "The topic's route (brokers and queue data)", "topic", TOPIC)
async def topic_route(ctx: ConsoleContext, request: web.Request, topic: str) -> Any:
    return await ctx.admin_for(request).topic_route(topic)


@API.route(
    "GET", "/api/topics/{topic}/consumers", "Groups consuming the topic, with their lag on it", "topic", TOPIC
)
async def topic_consumers(ctx: ConsoleContext, request: web.Request, topic: str) -> Any:
    admin = ctx.admin_for(request)
    groups = await admin.topic_consumer_groups(topic)

    async def one(group: str) -> dict[str, Any]:
        progress = await admin.group_progress(group, topic)
        try:
            clients = len((await admin.consumer_connection(group))["connectionSet"])
        except AdminError:
            clients = 0
        rows = [r for r in progress.rows if r.topic == topic]
        return {
            "group": group,
            "clients": clients,
            "tps": round(progress.tps, 2),
            "lag": sum(r.diff for r in rows) if rows else None,
            "queues": len(rows),
        }

    return {"topic": topic, "groups": list(await asyncio.gather(*(one(g) for g in groups)))}


async def target_masters(
    admin: AdminClient, cluster: str | None, brokers: list[str] | None
) -> dict[str, str]:
    masters = await admin.master_addrs(cluster)
    if brokers:
        unknown = sorted(set(brokers) - set(masters))
        if unknown:
            raise ApiError(400, f"unknown broker(s): {', '.join(unknown)}")
        masters = {b: a for b, a in masters.items() if b in brokers}
    if not masters:
        raise ApiError(400, "no master broker to act on")
    return masters


@API.route(
    "POST",
    "/api/topics",
    "Create or update a topic on every master of a cluster (a job)",
    "topic",
    Param("topic", "name", required=True, where="body"),
    Param("clusterName", "name", where="body", description="default: every cluster"),
    Param("brokerNames", "array", where="body", description="only these brokers"),
    Param("readQueueNums", "integer", where="body", description="default 8"),
    Param("writeQueueNums", "integer", where="body", description="default 8"),
    Param("perm", "integer", where="body", description="2 (W), 4 (R) or 6 (RW), default 6"),
    Param("messageType", where="body", description=" | ".join(MESSAGE_TYPES), max_len=16),
)
async def create_topic(
    ctx: ConsoleContext,
    request: web.Request,
    topic: str,
    clusterName: str | None = None,
    brokerNames: list[str] | None = None,
    readQueueNums: int = 8,
    writeQueueNums: int = 8,
    perm: int = 6,
    messageType: str = "NORMAL",
) -> Any:
    _check_topic(topic)
    if topic.startswith(("%RETRY%", "%DLQ%")):
        raise ApiError(400, "retry and DLQ topics are created by the brokers")
    if not (1 <= readQueueNums <= 1024 and 1 <= writeQueueNums <= 1024):
        raise ApiError(400, "queue counts are between 1 and 1024")
    if perm not in (2, 4, 6):
        raise ApiError(400, "perm is 2 (W), 4 (R) or 6 (RW)")
    mtype = messageType.upper()
    if mtype not in MESSAGE_TYPES:
        raise ApiError(400, f"messageType is one of {', '.join(MESSAGE_TYPES)}")
    admin = ctx.admin_for(request)
    masters = await target_masters(admin, clusterName, brokerNames)
    cfg = TopicConfig(topic, readQueueNums, writeQueueNums, perm, order=mtype == "FIFO")

    async def route(job: Job) -> dict[str, Any]:
        routed = await admin.wait_route(cfg, masters)
        job.step("the NameServer shows the route" if routed else "the route is not on the NameServer yet")
        return {"topic": topic, "routed": routed}

    return ctx.broker_job(
        request,
        f"create / update topic {topic}",
        masters,
        lambda addr: admin.create_topic(addr, cfg, f"+message.type={mtype}"),
        f"topic {topic} written",
        route,
    )


@API.route(
    "DELETE",
    "/api/topics/{topic}",
    "Delete a topic from its brokers and the NameServer (a job)",
    "topic",
    TOPIC,
    Param("clusterName", "name", description="default: every cluster it is in"),
)
async def delete_topic(
    ctx: ConsoleContext,
    request: web.Request,
    topic: str,
    clusterName: str | None = None,
) -> Any:
    _check_topic(topic)
    admin = ctx.admin_for(request)
    route = await admin.topic_route(topic)
    masters = admin.route_masters(route)
    if clusterName:
        in_cluster = await admin.master_addrs(clusterName)
        masters = {b: a for b, a in masters.items() if b in in_cluster}

    async def namesrv(job: Job) -> dict[str, Any]:
        await admin.delete_topic_in_namesrv(topic, clusterName)
        job.step("deleted on the NameServer")
        return {"topic": topic}

    return ctx.broker_job(
        request,
        f"delete topic {topic}",
        masters,
        lambda addr: admin.delete_topic_in_broker(addr, topic),
        f"topic {topic} deleted",
        namesrv,
    )


@API.route(
    "POST",
    "/api/topics/{topic}/send",
    "Send a test message",
    "topic",
    TOPIC,
    Param("body", required=True, where="body", max_len=MAX_TEST_BODY),
    Param("tags", where="body", max_len=256),
    Param("keys", where="body", max_len=1024),
)
async def send_test(
    ctx: ConsoleContext,
    request: web.Request,
    topic: str,
    body: str,
    tags: str | None = None,
    keys: str | None = None,
) -> Any:
    r = await ctx.admin_for(request).send_message(topic, body.encode(), tags=tags or None, keys=keys or None)
    return {
        "status": r.status,
        "msgId": r.msg_id,
        "offsetMsgId": r.offset_msg_id,
        "brokerName": r.broker_name,
        "queueId": r.queue_id,
        "queueOffset": r.queue_offset,
    }


def _offset_job(
    ctx: ConsoleContext, request: web.Request, title: str, admin: AdminClient, go: Any
) -> dict[str, str]:
    async def work(job: Job) -> Any:
        table = await go()
        for (t, b, q), off in sorted(table.items()):
            job.step(f"{t} {b} queue {q}: offset {off}")
        job.total = max(job.total, job.done)
        return {"queues": len(table)}

    job = ctx.jobs.start(title, 0, work, ctx.user_of(request))
    return {"job": job.id}


@API.route(
    "POST",
    "/api/topics/{topic}/reset-offset",
    "Reset a group's offsets on the topic to a time (a job)",
    "topic",
    TOPIC,
    Param("group", "name", required=True, where="body"),
    Param("timestamp", "integer", required=True, where="body", description="ms since the epoch"),
    Param("force", "boolean", where="body", description="also move offsets backwards (true)"),
)
async def reset_offset(
    ctx: ConsoleContext,
    request: web.Request,
    topic: str,
    group: str,
    timestamp: int,
    force: bool = True,
) -> Any:
    if timestamp < 0 or timestamp > int(time.time() * 1000) + 366 * 86_400_000:
        raise ApiError(400, "timestamp: milliseconds since the epoch")
    admin = ctx.admin_for(request)
    return _offset_job(
        ctx,
        request,
        f"reset offset of {group} on {topic}",
        admin,
        lambda: admin.reset_offset_by_time(group, topic, timestamp, force),
    )


@API.route(
    "POST",
    "/api/topics/{topic}/skip-backlog",
    "Move a group's offsets to the end (a job)",
    "topic",
    TOPIC,
    Param("group", "name", required=True, where="body"),
)
async def skip_backlog(ctx: ConsoleContext, request: web.Request, topic: str, group: str) -> Any:
    admin = ctx.admin_for(request)
    return _offset_job(
        ctx, request, f"skip backlog of {group} on {topic}", admin, lambda: admin.skip_backlog(group, topic)
    )
