"""Message commands: sendMessage, queryMsgById, queryMsgByKey, queryMsgByOffset, printMsg."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

import orjson

from rocketq.protocol.codes import ResponseCode

from .client import AdminClient
from .errors import AdminError
from .fmt import body_text, fmt_ms, parse_bool, parse_timestamp, table
from .records import StoredMessage
from .registry import UsageError, command

SYSTEM_PROPERTIES = frozenset(
    {
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "ORIGIN_MESSAGE_ID",
        "RECONSUME_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "CLUSTER",
        "TRAN_PREPARED_QUEUE_OFFSET",
    }
)


def print_message(out: TextIO, m: StoredMessage, *, charset: str = "UTF-8", print_body: bool = True) -> None:
    user = {k: v for k, v in m.properties.items() if k not in SYSTEM_PROPERTIES}
    lines = [
        ("OffsetID", m.offset_msg_id),
        ("Topic", m.topic),
        ("Tags", f"[{m.tags or ''}]"),
        ("Keys", f"[{m.keys or ''}]"),
        ("Broker Name", m.broker_name),
        ("Queue ID", m.queue_id),
        ("Queue Offset", m.queue_offset),
        ("CommitLog Offset", m.commit_log_offset),
        ("Reconsume Times", m.reconsume_times),
        ("Born Timestamp", fmt_ms(m.born_timestamp)),
        ("Store Timestamp", fmt_ms(m.store_timestamp)),
        ("Born Host", m.born_host),
        ("Store Host", m.store_host),
        ("System Flag", m.sys_flag),
        ("Properties", m.properties),
        ("User Properties", user),
        ("Body Length", len(m.body)),
    ]
    if "UNIQ_KEY" in m.properties:
        lines.insert(0, ("MsgId", m.properties["UNIQ_KEY"]))
    for label, value in lines:
        out.write(f"{label + ':':<21}{value}\n")
    if print_body:
        out.write(f"{'Message Body:':<21}{body_text(m.body, charset)}\n")


def _send_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-p", "--body", required=True, help="message body (UTF-8)")
    p.add_argument("-k", "--key", dest="keys", help="message keys (space separated)")
    p.add_argument("-c", "--tags", help="message tag")
    p.add_argument("-b", "--broker", dest="broker_name", help="send to this broker name")
    p.add_argument("-i", "--qid", dest="queue_id", type=int, help="send to this queue id (with -b)")


@command("sendMessage", "Send a message", _send_args)
async def send_message(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    if a.queue_id is not None and a.broker_name is None:
        raise UsageError("-i (queue id) needs -b (broker name)")
    r = await admin.send_message(
        a.topic, a.body.encode(), tags=a.tags, keys=a.keys, broker_name=a.broker_name, queue_id=a.queue_id
    )
    table(
        out,
        ("Broker Name", "QID", "Send Result", "MsgId", "OffsetMsgId", "Queue Offset"),
        [(r.broker_name, r.queue_id, r.status, r.msg_id, r.offset_msg_id, r.queue_offset)],
    )
    return 0


def _by_id_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_ids", required=True, help="offsetMsgId(s), comma separated")
    p.add_argument("-t", "--topic", help="topic, to look up a client msgId (UNIQ_KEY) instead")
    p.add_argument(
        "-g", "--consumerGroup", dest="group", help="with -d: let this consumer consume it directly"
    )
    p.add_argument("-d", "--clientId", dest="client_id", help="with -g: the consumer's client id")


@command("queryMsgById", "Query a message by its offsetMsgId", _by_id_args)
async def query_msg_by_id(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    for msg_id in [x.strip() for x in a.msg_ids.split(",") if x.strip()]:
        if a.topic:
            found = await admin.query_message(a.topic, msg_id, max_num=1, unique_key=True)
            if not found:
                try:
                    found = [await admin.view_message(msg_id)]
                except AdminError:
                    raise AdminError(f"message {msg_id} not found in topic {a.topic}") from None
            msg = found[0]
        else:
            msg = await admin.view_message(msg_id)
        print_message(out, msg)
        if a.group and a.client_id:
            await _consume_directly(admin, out, msg, a.group, a.client_id)
        elif a.group or a.client_id:
            raise UsageError("-g and -d go together")
        out.write("\n")
    return 0


async def _consume_directly(
    admin: AdminClient, out: TextIO, msg: StoredMessage, group: str, client_id: str
) -> None:
    result = await admin.consume_message_directly(group, client_id, msg.offset_msg_id, msg.broker_name)
    out.write(f"ConsumeMessageDirectlyResult: {orjson.dumps(result).decode()}\n")


def _by_key_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-k", "--msgKey", dest="key", required=True, help="message key")
    p.add_argument(
        "-b", "--beginTimestamp", dest="begin", default="0", help="begin time (ms or yyyy-MM-dd#HH:mm:ss:SSS)"
    )
    p.add_argument("-e", "--endTimestamp", dest="end", default=None, help="end time (default: now)")
    p.add_argument(
        "-m", "--maxNum", dest="max_num", type=int, default=64, help="max messages per broker (64)"
    )


@command("queryMsgByKey", "Query messages by key", _by_key_args)
async def query_msg_by_key(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    try:
        begin = parse_timestamp(a.begin)
        end = parse_timestamp(a.end) if a.end else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    msgs = await admin.query_message(a.topic, a.key, max_num=a.max_num, begin=begin, end=end)
    if not msgs:
        raise AdminError(f"no message with key {a.key!r} in topic {a.topic!r}", ResponseCode.QUERY_NOT_FOUND)
    table(
        out,
        ("Message ID", "Offset Msg ID", "Broker Name", "QID", "Offset", "Store Time"),
        (
            (m.msg_id, m.offset_msg_id, m.broker_name, m.queue_id, m.queue_offset, fmt_ms(m.store_timestamp))
            for m in msgs
        ),
    )
    return 0


def _by_offset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument(
        "-b", "--brokerName", dest="broker_name", required=True, help="broker name (see clusterList)"
    )
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True, help="queue id")
    p.add_argument("-o", "--offset", type=int, required=True, help="queue offset")


@command("queryMsgByOffset", "Query a message by queue offset", _by_offset_args)
async def query_msg_by_offset(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    route = await admin.topic_route(a.topic)
    masters = admin.route_masters(route)
    addr = masters.get(a.broker_name)
    if addr is None:
        raise AdminError(f"broker {a.broker_name!r} does not serve topic {a.topic!r}")
    r = await admin.pull(addr, a.topic, a.queue_id, a.offset, max_nums=1, broker_name=a.broker_name)
    if not r.messages:
        raise AdminError(
            f"no message at {a.topic}:{a.broker_name}:{a.queue_id} offset {a.offset} "
            f"(queue holds offsets {r.min_offset}..{r.max_offset - 1})",
            r.code,
        )
    print_message(out, r.messages[0])
    return 0


def _print_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--charsetName", dest="charset", default="UTF-8", help="body charset (UTF-8)")
    p.add_argument("-s", "--subExpression", dest="sub", default="*", help="tag expression (*)")
    p.add_argument("-b", "--beginTimestamp", dest="begin", help="begin time (ms or yyyy-MM-dd#HH:mm:ss:SSS)")
    p.add_argument("-e", "--endTimestamp", dest="end", help="end time (ms or yyyy-MM-dd#HH:mm:ss:SSS)")
    p.add_argument(
        "-d", "--printBody", dest="print_body", default="true", help="print bodies: true|false (true)"
    )


@command("printMsg", "Print the messages of a topic", _print_args)
async def print_msg(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    try:
        begin = parse_timestamp(a.begin) if a.begin else None
        end = parse_timestamp(a.end) if a.end else None
        print_body = parse_bool(a.print_body, True)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for name, addr, qid in await admin.topic_queues(a.topic):
        lo = await admin.min_offset(addr, a.topic, qid)
        hi = await admin.max_offset(addr, a.topic, qid)
        if begin is not None:
            lo = max(lo, await admin.search_offset(addr, a.topic, qid, begin))
        if end is not None:
            hi = min(hi, await admin.search_offset(addr, a.topic, qid, end))
        out.write(
            f"minOffset={lo}, maxOffset={hi}, "
            f"MessageQueue [topic={a.topic}, brokerName={name}, queueId={qid}]\n"
        )
        offset = lo
        deadline = time.monotonic() + 60
        while offset < hi and time.monotonic() < deadline:
            r = await admin.pull(
                addr, a.topic, qid, offset, max_nums=32, sub_expression=a.sub, broker_name=name
            )
            for m in r.messages:
                if m.queue_offset >= hi or (end is not None and m.store_timestamp > end):
                    continue
                out.write(
                    f"MSGID: {m.msg_id} QID: {m.queue_id} OFFSET: {m.queue_offset} TAGS: {m.tags or ''} "
                    f"KEYS: {m.keys or ''} STORE: {fmt_ms(m.store_timestamp)}"
                )
                out.write(f" BODY: {body_text(m.body, a.charset)}\n" if print_body else "\n")
            if (
                r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED)
                or r.next_begin_offset <= offset
            ):
                break
            offset = r.next_begin_offset
    return 0


def _by_unique_key_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="client msgId (UNIQ_KEY)")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument(
        "-g", "--consumerGroup", dest="group", help="with -d: let this consumer consume it directly"
    )
    p.add_argument("-d", "--clientId", dest="client_id", help="with -g: the consumer's client id")


@command("queryMsgByUniqueKey", "Query a message by its client msgId (UNIQ_KEY)", _by_unique_key_args)
async def query_msg_by_unique_key(admin: AdminClient, a: argparse.Namespace, out: TextIO) -> int:
    if bool(a.group) != bool(a.client_id):
        raise UsageError("-g and -d go together")
    found = await admin.query_message(a.topic, a.msg_id, max_num=32, unique_key=True)
    if not found:
        raise AdminError(
            f"no message with msgId {a.msg_id} in topic {a.topic!r}", ResponseCode.QUERY_NOT_FOUND
        )
    print_message(out, found[0])
    if a.group:
        await _consume_directly(admin, out, found[0], a.group, a.client_id)
    return 0
