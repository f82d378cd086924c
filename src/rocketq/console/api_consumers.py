"""Consumer and producer pages: groups with clients / TPS / lag, per-queue progress, connections, running
info, create / update / delete of subscription groups; a producer group's connections."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from rocketq.admin import AdminError, SubscriptionGroupConfig
from rocketq.admin.wire import mq_of
from rocketq.protocol.codes import ResponseCode
from rocketq.protocol.properties import RETRY_GROUP_TOPIC_PREFIX

from .api_topics import target_masters
from .context import ConsoleContext
from .routes import API, ApiError, Param
from .views import progress_json, summary_json

GROUP = Param("group", "name", where="path", description="consumer group")
# groups the brokers and tools use for themselves (the dashboard's "SYSTEM" groups)
SYSTEM_GROUPS = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_SYS_RMQ_TRANS",
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
    }
)
CONCURRENCY = 8


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(("CID_RMQ_SYS_", "rmq_sys_", "_INNER_TRACE_"))


@API.route("GET", "/api/consumers", "Every consumer group: state, clients, TPS, lag", "consumer")
async def consumers(ctx: ConsoleContext, request: web.Request) -> Any:
    admin = ctx.admin_for(request)
    configs, topics = await asyncio.gather(admin.consumer_groups(), admin.topic_list())
    names = set(configs) | {t[len(RETRY_GROUP_TOPIC_PREFIX) :] for t in topics if t.startswith("%RETRY%")}
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(group: str) -> dict[str, Any]:
        async with sem:
            s = await admin.group_summary(group)
        row = summary_json(s, configs.get(group))
        row["system"] = is_system_group(group)
        return row

    rows = await asyncio.gather(*(one(g) for g in sorted(names)))
    return {"groups": list(rows)}


async def _queue_clients(ctx: ConsoleContext, request: web.Request, group: str) -> dict[str, str]:
    """ "topic|broker|qid" -> client id holding the queue, from each online client's running info."""
    admin = ctx.admin_for(request)
    try:
        conn = await admin.consumer_connection(group)
    except AdminError:
        return {}
    owners: dict[str, str] = {}

    async def one(client_id: str) -> None:
        try:
            info = await admin.consumer_running_info(group, client_id)
        except AdminError:
            return
        for key in info.get("mqTable") or {}:
            t, b, q = mq_of(key)
            owners[f"{t}|{b}|{q}"] = client_id

    await asyncio.gather(*(one(str(c.get("clientId", ""))) for c in conn["connectionSet"][:64]))
    return owners


@API.route(
    "GET",
    "/api/consumers/{group}",
    "A group's summary and per-queue progress (consumerProgress)",
    "consumer",
    GROUP,
)
async def consumer_detail(ctx: ConsoleContext, request: web.Request, group: str) -> Any:
    admin = ctx.admin_for(request)
    summary, configs, owners = await asyncio.gather(
        admin.group_summary(group), admin.consumer_groups(), _queue_clients(ctx, request, group)
    )
    out = summary_json(summary, configs.get(group))
    prog = progress_json(summary.progress)
    for row in prog["queues"]:
        row["clientId"] = owners.get(f"{row['topic']}|{row['brokerName']}|{row['queueId']}", "")
    out["progress"] = prog
    return out


@API.route(
    "GET",
    "/api/consumers/{group}/connections",
    "Online clients of a group and its subscriptions",
    "consumer",
    GROUP,
)
async def consumer_connections(ctx: ConsoleContext, request: web.Request, group: str) -> Any:
    try:
        conn = await ctx.admin_for(request).consumer_connection(group)
    except AdminError as exc:
        if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return {"group": group, "online": False, "connections": [], "subscriptions": []}
        raise
    subs = [
        {
            "topic": str(s.get("topic", t)),
            "subString": str(s.get("subString", "")),
            "expressionType": str(s.get("expressionType", "TAG")),
        }
        for t, s in sorted(conn["subscriptionTable"].items())
        if isinstance(s, dict)
    ]
    return {
        "group": group,
        "online": True,
        "consumeType": conn.get("consumeType", ""),
        "messageModel": conn.get("messageModel", ""),
        "consumeFromWhere": conn.get("consumeFromWhere", ""),
        "connections": conn["connectionSet"],
        "subscriptions": subs,
    }


@API.route(
    "GET",
    "/api/consumers/{group}/running-info",
    "A client's running info (queues, threads, stats)",
    "consumer",
    GROUP,
    Param("clientId", required=True, max_len=256),
)
async def running_info(ctx: ConsoleContext, request: web.Request, group: str, clientId: str) -> Any:
    info = await ctx.admin_for(request).consumer_running_info(group, clientId)
    mq_table = []
    for key, pq in (info.get("mqTable") or {}).items():
        t, b, q = mq_of(key)
        mq_table.append({"topic": t, "brokerName": b, "queueId": q, **(pq if isinstance(pq, dict) else {})})
    info["mqTable"] = sorted(mq_table, key=lambda r: (r["topic"], r["brokerName"], r["queueId"]))
    return info


@API.route(
    "POST",
    "/api/consumers",
    "Create or update a subscription group on masters (a job)",
    "consumer",
    Param("group", "name", required=True, where="body"),
    Param("clusterName", "name", where="body"),
    Param("brokerNames", "array", where="body"),
    Param("consumeEnable", "boolean", where="body"),
    Param("consumeBroadcastEnable", "boolean", where="body"),
    Param("consumeFromMinEnable", "boolean", where="body"),
    Param("consumeMessageOrderly", "boolean", where="body"),
    Param("retryQueueNums", "integer", where="body"),
    Param("retryMaxTimes", "integer", where="body"),
    Param("brokerId", "integer", where="body"),
    Param("whichBrokerWhenConsumeSlowly", "integer", where="body"),
)
async def update_group(
    ctx: ConsoleContext,
    request: web.Request,
    group: str,
    clusterName: str | None = None,
    brokerNames: list[str] | None = None,
    consumeEnable: bool = True,
    consumeBroadcastEnable: bool = False,
    consumeFromMinEnable: bool = False,
    consumeMessageOrderly: bool = False,
    retryQueueNums: int = 1,
    retryMaxTimes: int = 16,
    brokerId: int = 0,
    whichBrokerWhenConsumeSlowly: int = 1,
) -> Any:
    if not 0 <= retryMaxTimes <= 64 or not 1 <= retryQueueNums <= 64:
        raise ApiError(400, "retryMaxTimes is 0..64 and retryQueueNums 1..64")
    admin = ctx.admin_for(request)
    masters = await target_masters(admin, clusterName, brokerNames)
    cfg = SubscriptionGroupConfig(
        group,
        consume_enable=consumeEnable,
        consume_from_min_enable=consumeFromMinEnable,
        consume_broadcast_enable=consumeBroadcastEnable,
        retry_queue_nums=retryQueueNums,
        retry_max_times=retryMaxTimes,
        broker_id=brokerId,
        which_broker_when_consume_slowly=whichBrokerWhenConsumeSlowly,
    )
    extra = {"consumeMessageOrderly": consumeMessageOrderly}

    return ctx.broker_job(
        request,
        f"create / update group {group}",
        masters,
        lambda addr: admin.create_subscription_group(addr, cfg, extra),
        f"group {group} written",
    )


@API.route(
    "DELETE",
    "/api/consumers/{group}",
    "Delete a subscription group from the masters (a job)",
    "consumer",
    GROUP,
    Param("clusterName", "name"),
)
async def delete_group(
    ctx: ConsoleContext,
    request: web.Request,
    group: str,
    clusterName: str | None = None,
) -> Any:
    admin = ctx.admin_for(request)
    masters = await admin.master_addrs(clusterName)

    return ctx.broker_job(
        request,
        f"delete group {group}",
        masters,
        lambda addr: admin.delete_subscription_group(addr, group),
        f"group {group} deleted",
    )


@API.route(
    "GET",
    "/api/producers",
    "Connections of a producer group on a topic",
    "producer",
    Param("group", "name", required=True),
    Param("topic", "name", required=True),
)
async def producers(ctx: ConsoleContext, request: web.Request, group: str, topic: str) -> Any:
    try:
        conns = await ctx.admin_for(request).producer_connection(group, topic)
    except AdminError as exc:
        if "not exist" in str(exc):
            return {"group": group, "topic": topic, "connections": []}
        raise
    return {"group": group, "topic": topic, "connections": conns}
