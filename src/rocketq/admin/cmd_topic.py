"""Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus."""

from __future__ import annotations

import argparse
import re
from typing import TextIO

import orjson

from rocketq.protocol import headers as H
from rocketq.protocol.codes import RequestCode

from .client import AdminClient, TopicConfig, loads
from .errors import AdminError
from .fmt import fmt_ms, parse_bool, table
from .progress import Progress
from .registry import UsageError, command

TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LEN = 127
ORDER_TOPIC_NAMESPACE = "ORDER_TOPIC_CONFIG"
TOPIC_SYSFLAG_UNIT = 0x1
TOPIC_SYSFLAG_UNIT_SUB = 0x2


def validate_topic(topic: str) -> None:
    if not topic:
        raise UsageError("the topic name is blank")
    if len(topic) > TOPIC_MAX_LEN:
        raise UsageError(f"the topic name is longer than {TOPIC_MAX_LEN} characters")
    if not TOPIC_RE.match(topic):
        raise UsageError(
            f"the topic name {topic!r} contains illegal characters (allowed: ^[%|a-zA-Z0-9_-]+$)"
        )
    if topic == "TBW102":
        raise UsageError("the topic name conflicts with the auto-create default topic TBW102")


def perm_str(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def _broker_or_cluster(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help="create/update on this broker (ip:port)")
    g.add_argument(
        "-c", "--clusterName", dest="cluster", help="create/update on every master of this cluster"
    )


def _update_topic_args(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p)
    p.add_argument(
        "-t", "--topic", required=True, help="topic name: ^[%%|a-zA-Z0-9_-]+$, at most 127 characters"
    )
    p.add_argument("-r", "--readQueueNums", dest="read", type=int, default=8, help="read queue count (8)")
    p.add_argument("-w", "--writeQueueNums", dest="write", type=int, default=8, help="write queue count (8)")
    p.add_argument("-p", "--perm", type=int, default=6, help="permission W=2|R=4|WR=6 (6)")
    p.add_argument("-o", "--order", default="false", help="ordered topic: true|false (false)")
    p.add_argument("-u", "--unit", default="false", help="unit topic: true|false (false)")
    p.add_argument(
        "-s", "--hasUnitSub", dest="has_unit_sub", default="false", help="has unit sub: true|false"
    )


@command("updateTopic", "Update or create a topic", _update_topic_args)
async def update_topic(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    validate_topic(a.topic)
    if a.perm not in range(0, 8):
        raise UsageError("-p must be 2 (W), 4 (R) or 6 (RW)")
    if a.read < 0 or a.write < 0 or a.read > 1024 or a.write > 1024:
        raise UsageError("queue counts must be between 0 and 1024")
    order = parse_bool(a.order)
    sys_flag = (TOPIC_SYSFLAG_UNIT if parse_bool(a.unit) else 0) | (
        TOPIC_SYSFLAG_UNIT_SUB if parse_bool(a.has_unit_sub) else 0
    )
    cfg = TopicConfig(a.topic, a.read, a.write, a.perm, "SINGLE_TAG", sys_flag, order)
    if a.broker_addr:
        targets = {await admin.broker_name_of(a.broker_addr): a.broker_addr}
    else:
        targets = await admin.master_addrs(a.cluster)
        if not targets:
            raise AdminError(f"cluster {a.cluster!r} has no master broker")
    progress = Progress(f"creating topic {a.topic}", len(targets), "brokers")
    for addr in targets.values():
        await admin.create_topic(addr, cfg)
        out.write(f"create topic to {addr} success.\n")
        progress.step()
    if not await admin.wait_route(cfg, targets):
        out.write("warning: the NameServer does not show the new route yet (brokers register it shortly)\n")
    if order:
        conf = ";".join(f"{name}:{a.write}" for name in sorted(targets))
        resp = await admin.invoke_namesrv(
            RequestCode.PUT_KV_CONFIG,
            H.PutKVConfigRequestHeader(namespace=ORDER_TOPIC_NAMESPACE, key=a.topic, value=conf).to_ext(),
        )
        admin.check(resp, "set order conf")
        out.write(f"set cluster orderConf. isOrder={order}, orderConf=[{conf}]\n")
    out.write(
        f"TopicConfig [topicName={cfg.topic_name}, readQueueNums={cfg.read_queue_nums}, "
        f"writeQueueNums={cfg.write_queue_nums}, perm={perm_str(cfg.perm)}, "
        f"topicFilterType={cfg.topic_filter_type}, "
        f"topicSysFlag={cfg.topic_sys_flag}, order={str(cfg.order).lower()}]\n"
    )
    return 0


def _delete_topic_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-c", "--clusterName", dest="cluster", required=True, help="delete the topic from this cluster"
    )
    p.add_argument("-t", "--topic", required=True, help="topic name")


@command("deleteTopic", "Delete a topic from the brokers of a cluster and the NameServer", _delete_topic_args)
async def delete_topic(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    validate_topic(a.topic)
    await admin.topic_route(a.topic)  # a clear "topic does not exist" instead of a silent no-op
    await admin.delete_topic(a.topic, a.cluster)
    out.write(f"delete topic [{a.topic}] from cluster [{a.cluster}] success.\n")
    out.write(f"delete topic [{a.topic}] from NameServer success.\n")
    return 0


def _topic_list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-c",
        "--clusterModel",
        dest="cluster_model",
        action="store_true",
        help="also print each topic's cluster and consumer groups",
    )


async def _consumer_groups_of(admin: AdminClient, topic: str, masters: dict[str, str]) -> list[str]:
    groups: set[str] = set()
    for addr in masters.values():
        try:
            resp = await admin.invoke_broker(
                addr,
                RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                H.QueryTopicConsumeByWhoRequestHeader(topic=topic).to_ext(),
            )
        except AdminError:
            continue
        if resp.code == 0 and resp.body:
            groups.update(loads(resp.body_bytes).get("groupList") or [])
    return sorted(groups)


@command("topicList", "Fetch all topics from the NameServer", _topic_list_args)
async def topic_list(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    topics = await admin.topic_list()
    if not a.cluster_model:
        for t in topics:
            out.write(t + "\n")
        return 0
    info = await admin.cluster_info()
    cluster_of = {b: c for c, names in info["clusterAddrTable"].items() for b in names}
    rows: list[tuple[str, str, str]] = []
    wanted = [t for t in topics if not t.startswith(("%RETRY%", "%DLQ%"))]
    progress = Progress("reading topic routes and consumer groups", len(wanted), "topics")
    for t in wanted:
        progress.step()
        try:
            route = await admin.topic_route(t)
        except AdminError:
            continue
        masters = admin.route_masters(route)
        clusters = sorted({cluster_of.get(b, "") for b in masters}) or [""]
        groups = await _consumer_groups_of(admin, t, masters) or [""]
        for c in clusters:
            for g in groups:
                rows.append((c, t, g))
    table(out, ("Cluster Name", "Topic", "Consumer Group"), rows)
    return 0


def _topic_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


@command("topicRoute", "Examine a topic's route info", _topic_args)
async def topic_route(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    route = await admin.topic_route(a.topic)
    out.write(orjson.dumps(route, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n")
    return 0


@command("topicStatus", "Examine a topic's queue offsets", _topic_args)
async def topic_status(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    rows = await admin.topic_stats(a.topic)
    table(
        out,
        ("Topic", "Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"),
        (
            (r.topic, r.broker_name, r.queue_id, r.min_offset, r.max_offset, fmt_ms(r.last_update_timestamp))
            for r in rows
        ),
    )
    return 0


@command("topicClusterList", "List the clusters a topic lives in", _topic_args)
async def topic_cluster_list(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    route = await admin.topic_route(a.topic)
    info = await admin.cluster_info()
    names = {bd["brokerName"] for bd in route["brokerDatas"]}
    for cluster in sorted(c for c, brokers in info["clusterAddrTable"].items() if names & set(brokers)):
        out.write(cluster + "\n")
    return 0


def _update_perm_args(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p)
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-p", "--perm", type=int, required=True, help="new permission W=2|R=4|WR=6")


@command("updateTopicPerm", "Update a topic's read/write permission", _update_perm_args)
async def update_topic_perm(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    if a.perm not in (2, 4, 6):
        raise UsageError("-p must be 2 (W), 4 (R) or 6 (RW)")
    route = await admin.topic_route(a.topic)
    masters = admin.route_masters(route)
    if a.broker_addr:
        targets = {n: addr for n, addr in masters.items() if addr == a.broker_addr}
        if not targets:
            raise AdminError(f"broker {a.broker_addr} does not serve topic {a.topic!r}")
    else:
        in_cluster = await admin.master_addrs(a.cluster)
        targets = {n: addr for n, addr in masters.items() if n in in_cluster}
    queue_data = {qd["brokerName"]: qd for qd in route["queueDatas"]}
    for name, addr in sorted(targets.items()):
        qd = queue_data.get(name)
        if qd is None:
            continue
        old = int(qd.get("perm", 6))
        cfg = TopicConfig(
            a.topic,
            int(qd.get("readQueueNums", 8)),
            int(qd.get("writeQueueNums", 8)),
            a.perm,
            topic_sys_flag=int(qd.get("topicSysFlag", 0)),
        )
        await admin.create_topic(addr, cfg)
        out.write(f"update topic perm from {old} to {a.perm} in {addr} success.\n")
    return 0
