"""Consumer-group commands: consumerProgress, consumerConnection, updateSubGroup, resetOffsetByTime."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from rocketq.protocol import headers as H
from rocketq.protocol.codes import RequestCode, ResponseCode

from .client import AdminClient, SubscriptionGroupConfig, loads, mq_of
from .cmd_cluster import version_desc
from .errors import AdminError
from .fmt import fmt_ms, parse_bool, parse_timestamp, table
from .registry import UsageError, command

RETRY_PREFIX = "%RETRY%"


def _progress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", help="consumer group (all groups when omitted)")
    p.add_argument(
        "-s", "--showClientIP", dest="show_ip", default="false", help="show client IPs: true|false"
    )


async def _queue_owners(admin: AdminClient, group: str) -> dict[tuple[str, str, int], str]:
    """(topic, broker, qid) -> client IP, from each online consumer's running info (best effort)."""
    owners: dict[tuple[str, str, int], str] = {}
    try:
        conn = await admin.consumer_connection(group)
    except AdminError:
        return owners
    masters = await admin.master_addrs()
    addr = next(iter(masters.values()), None)
    if addr is None:
        return owners
    for c in conn["connectionSet"]:
        client_id = c.get("clientId", "")
        ext = H.GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id).to_ext()
        try:
            resp = await admin.invoke_broker(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        except AdminError:
            continue
        if resp.code != ResponseCode.SUCCESS:
            continue
        info = loads(resp.body_bytes)
        for key in info.get("mqTable") or {}:
            owners[mq_of(key)] = str(c.get("clientAddr", client_id)).split(":")[0]
    return owners


@command("consumerProgress", "Show a consumer group's progress (lag)", _progress_args)
async def consumer_progress(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    if not a.group:
        return await _all_groups(admin, out)
    rows, tps = await admin.consume_stats(a.group)
    show_ip = parse_bool(a.show_ip)
    owners = await _queue_owners(admin, a.group) if show_ip else {}
    diff_total = 0
    lines = []
    for r in rows:
        diff_total += r.diff
        ip = owners.get((r.topic, r.broker_name, r.queue_id), "N/A") if show_ip else None
        line = [r.topic, r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset]
        if show_ip:
            line.append(ip)
        line += [r.diff, fmt_ms(r.last_timestamp)]
        lines.append(line)
    headers = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset"]
    if show_ip:
        headers.append("Client IP")
    headers += ["Diff", "LastTime"]
    table(out, headers, lines)
    out.write(f"\nConsume TPS: {tps:.2f}\nDiff Total: {diff_total}\n")
    return 0


async def _all_groups(admin: AdminClient, out: TextIO) -> int:
    groups = sorted(t[len(RETRY_PREFIX) :] for t in await admin.topic_list() if t.startswith(RETRY_PREFIX))
    rows = []
    for g in groups:
        try:
            stats, tps = await admin.consume_stats(g)
        except AdminError:
            continue
        count, version, ctype, model = 0, "OFFLINE", "", ""
        try:
            conn = await admin.consumer_connection(g)
            count = len(conn["connectionSet"])
            if count:
                version = version_desc(max(int(c.get("version", 0)) for c in conn["connectionSet"]))
            ctype = str(conn.get("consumeType", ""))
            model = str(conn.get("messageModel", ""))
        except AdminError:
            pass
        rows.append((g, count, version, ctype, model, f"{tps:.2f}", sum(r.diff for r in stats)))
    table(out, ("Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total"), rows)
    return 0


def _group_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group")


def _connection_table(out: TextIO, conns: list[dict[str, Any]]) -> None:
    table(
        out,
        ("", "ClientId", "ClientAddr", "Language", "Version"),
        (
            (
                f"{i:03d}",
                c.get("clientId", ""),
                c.get("clientAddr", ""),
                c.get("language", ""),
                version_desc(c.get("version", "")),
            )
            for i, c in enumerate(conns, 1)
        ),
    )


@command("consumerConnection", "Show a consumer group's connections and subscriptions", _group_args)
async def consumer_connection(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    try:
        conn = await admin.consumer_connection(a.group)
    except AdminError as exc:
        if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
            raise AdminError(f"consumer group {a.group!r} has no consumer online", exc.code) from None
        raise
    _connection_table(out, conn["connectionSet"])
    out.write("\nBelow is subscription:\n")
    subs = conn["subscriptionTable"]
    table(
        out,
        ("", "Topic", "SubExpression"),
        (
            (f"{i:03d}", s.get("topic", t), s.get("subString", ""))
            for i, (t, s) in enumerate(sorted(subs.items()), 1)
        ),
    )
    out.write(
        f"\nConsumeType: {conn.get('consumeType', '')}\nMessageModel: {conn.get('messageModel', '')}\n"
        f"ConsumeFromWhere: {conn.get('consumeFromWhere', '')}\n"
    )
    return 0


def _sub_group_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address ip:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    p.add_argument(
        "-s", "--consumeEnable", dest="consume_enable", default="true", help="consume enabled (true)"
    )
    p.add_argument(
        "-m",
        "--consumeFromMinEnable",
        dest="from_min",
        default="false",
        help="consume from the min offset (false)",
    )
    p.add_argument(
        "-d", "--consumeBroadcastEnable", dest="broadcast", default="false", help="broadcast (false)"
    )
    p.add_argument(
        "-q", "--retryQueueNums", dest="retry_queues", type=int, default=1, help="retry queues (1)"
    )
    p.add_argument("-r", "--retryMaxTimes", dest="retry_max", type=int, default=16, help="max retries (16)")
    p.add_argument(
        "-i", "--brokerId", dest="broker_id", type=int, default=0, help="consume from this broker id (0)"
    )
    p.add_argument(
        "-w",
        "--whichBrokerWhenConsumeSlowly",
        dest="slow_broker",
        type=int,
        default=1,
        help="broker id when consuming slowly (1)",
    )
    p.add_argument(
        "-a",
        "--notifyConsumerIdsChanged",
        dest="notify",
        default="true",
        help="notify consumers on membership change (true)",
    )


@command("updateSubGroup", "Update or create a subscription group", _sub_group_args)
async def update_sub_group(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    try:
        cfg = SubscriptionGroupConfig(
            a.group,
            consume_enable=parse_bool(a.consume_enable),
            consume_from_min_enable=parse_bool(a.from_min),
            consume_broadcast_enable=parse_bool(a.broadcast),
            retry_queue_nums=a.retry_queues,
            retry_max_times=a.retry_max,
            broker_id=a.broker_id,
            which_broker_when_consume_slowly=a.slow_broker,
            notify_consumer_ids_changed_enable=parse_bool(a.notify),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    targets = [a.broker_addr] if a.broker_addr else list((await admin.master_addrs(a.cluster)).values())
    for addr in targets:
        await admin.create_subscription_group(addr, cfg)
        out.write(f"create subscription group to {addr} success.\n")
    fields = sorted(cfg.to_obj().items())
    out.write(
        "SubscriptionGroupConfig ["
        + ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in fields)
        + "]\n"
    )
    return 0


def _reset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="consumer group")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument(
        "-s",
        "--timestamp",
        required=True,
        help="reset to this time: now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS",
    )
    p.add_argument("-f", "--force", default="true", help="also move offsets forward: true|false (true)")
    p.add_argument("-c", "--cplus", action="store_true", help="accepted for compatibility (C++ clients)")


@command("resetOffsetByTime", "Reset a group's consume offsets to a point in time", _reset_args)
async def reset_offset_by_time(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    try:
        ts = parse_timestamp(a.timestamp)
        force = parse_bool(a.force, True)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out.write(
        f"rollback consumer offset by specified consumerGroup[{a.group}], "
        f"topic[{a.topic}], force[{str(force).lower()}], "
        f"timestamp(string)[{a.timestamp}], timestamp(long)[{ts}]\n"
    )
    try:
        table_ = await admin.reset_offset_by_time(a.group, a.topic, ts, force)
    except AdminError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        # Nobody online to tell: store the offsets in the broker directly (RocketMQ's "old" reset).
        rows = await admin.reset_offset_by_time_offline(a.group, a.topic, ts, force)
        if not rows:
            raise AdminError(f"consumer group {a.group!r} has no offsets for topic {a.topic!r}") from None
        table(
            out,
            ("Broker Name", "QID", "Broker Offset", "Consumer Offset", "Timestamp Offset", "Reset Offset"),
            (
                (r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset, ts_off, new)
                for r, ts_off, new in rows
            ),
        )
        return 0
    table(out, ("Broker Name", "QID", "Offset"), ((b, q, off) for (_, b, q), off in sorted(table_.items())))
    return 0


def _delete_sub_group_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address ip:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")


@command("deleteSubGroup", "Delete a subscription group from brokers", _delete_sub_group_args)
async def delete_sub_group(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    targets = [a.broker_addr] if a.broker_addr else list((await admin.master_addrs(a.cluster)).values())
    for addr in targets:
        await admin.delete_subscription_group(addr, a.group)
        out.write(f"delete subscription group [{a.group}] from broker [{addr}] success.\n")
    return 0


def _producer_conn_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True, help="producer group")
    p.add_argument("-t", "--topic", required=True, help="a topic the group sends to")


@command("producerConnection", "Show a producer group's connections", _producer_conn_args)
async def producer_connection(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    conns = await admin.producer_connection(a.group, a.topic)
    _connection_table(out, conns)
    return 0
