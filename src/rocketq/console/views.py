"""Admin results shaped as the JSON the pages read. Message bodies and properties go out as JSON strings
(the pages only ever put them into text nodes); a body that is not UTF-8 goes out as base64."""

from __future__ import annotations

import base64
from typing import Any

from rocketq.admin.console_ops import GroupProgress, GroupSummary, TraceEvent
from rocketq.admin.records import StoredMessage
from rocketq.admin.wire import QueueConsumeStats

BODY_LIMIT = 256 * 1024  # a detail view shows this much of a body (the export has it whole)
PREVIEW = 120


def body_fields(body: bytes, limit: int | None = BODY_LIMIT) -> dict[str, Any]:
    """The body as text when it is UTF-8 (cut at ``limit`` bytes, never inside a character), else base64."""
    shown = body if limit is None else body[:limit]
    text: str | None = None
    # a cut may split the last character: then up to 3 of its bytes are left out
    for drop in range(4) if len(shown) < len(body) else (0,):
        part = shown[: len(shown) - drop]
        try:
            text = part.decode("utf-8")
        except UnicodeDecodeError:
            continue
        shown = part
        break
    out: dict[str, Any] = {"bodyLength": len(body), "bodyTruncated": len(shown) < len(body)}
    if text is not None:
        out["body"] = text
    else:
        out["bodyBase64"] = base64.b64encode(shown).decode()
    return out


def message_summary(m: StoredMessage) -> dict[str, Any]:
    preview = m.body[: PREVIEW * 4].decode("utf-8", "replace")[:PREVIEW]
    return {
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags or "",
        "keys": m.keys or "",
        "brokerName": m.broker_name,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "storeTimestamp": m.store_timestamp,
        "reconsumeTimes": m.reconsume_times,
        "bodyLength": len(m.body),
        "bodyPreview": preview,
    }


def message_detail(m: StoredMessage, *, limit: int | None = BODY_LIMIT) -> dict[str, Any]:
    return {
        **message_summary(m),
        "commitLogOffset": m.commit_log_offset,
        "bornTimestamp": m.born_timestamp,
        "bornHost": m.born_host,
        "storeHost": m.store_host,
        "sysFlag": m.sys_flag,
        "flag": m.flag,
        "bodyCRC": m.body_crc,
        "storeSize": m.store_size,
        "properties": dict(sorted(m.properties.items())),
        **body_fields(m.body, limit),
    }


def queue_row(r: QueueConsumeStats) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "brokerName": r.broker_name,
        "queueId": r.queue_id,
        "brokerOffset": r.broker_offset,
        "consumerOffset": r.consumer_offset,
        "diff": r.diff,
        "lastTimestamp": r.last_timestamp,
    }


def progress_json(p: GroupProgress) -> dict[str, Any]:
    return {
        "group": p.group,
        "tps": round(p.tps, 2),
        "diffTotal": p.diff_total,
        "lag": p.lag,
        "retryLag": p.retry_diff,
        "queues": [queue_row(r) for r in p.rows],
        "brokersAnswered": p.answered,
        "errors": [str(e) for e in p.errors],
    }


def group_state(s: GroupSummary) -> str:
    if s.clients:
        return "ONLINE"
    if s.progress.rows:
        return "OFFLINE"
    return "NO_OFFSETS" if s.progress.answered else "UNKNOWN"


def summary_json(s: GroupSummary, config: dict[str, Any] | None) -> dict[str, Any]:
    p = s.progress
    topics = sorted({r.topic for r in p.rows} | set(s.subscriptions))
    return {
        "group": s.group,
        "state": group_state(s),
        "clients": s.clients,
        "consumeType": s.consume_type,
        "messageModel": s.message_model,
        "version": s.version,
        "tps": round(p.tps, 2),
        # None (shown as "-") when the group has no offsets at all: nothing consumed, so no lag to report
        "lag": p.lag if p.rows else None,
        "retryLag": p.retry_diff if p.rows else None,
        "diffTotal": p.diff_total if p.rows else None,
        "topics": topics,
        "subscriptions": s.subscriptions,
        "config": config,
        "errors": [str(e) for e in p.errors],
    }


def trace_json(e: TraceEvent) -> dict[str, Any]:
    return {
        "kind": e.kind,
        "timestamp": e.timestamp,
        "group": e.group,
        "msgId": e.msg_id,
        "topic": e.topic,
        "tags": e.tags,
        "keys": e.keys,
        "storeHost": e.store_host,
        "bodyLength": e.body_length,
        "costMs": e.cost_ms,
        "msgType": e.msg_type,
        "offsetMsgId": e.offset_msg_id,
        "success": e.success,
        "requestId": e.request_id,
        "retryTimes": e.retry_times,
        "contextCode": e.context_code,
    }
