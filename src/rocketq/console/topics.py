"""Topic types as the dashboard filters them: NORMAL, FIFO, DELAY, TRANSACTION, MIXED (the 5.x topic attribute
``message.type``), RETRY (%RETRY%group), DLQ (%DLQ%group) and SYSTEM (the broker's own topics)."""

from __future__ import annotations

from typing import Any

from rocketq.protocol.properties import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    REPLY_TOPIC_POSTFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRACE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

# RocketMQ's TopicValidator system topics (plus the rmq_sys_ prefix of 5.x)
SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        SELF_TEST_TOPIC,
        TRACE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "TRANS_CHECK_MAX_TIME_TOPIC",
    }
)
SYSTEM_PREFIXES = ("rmq_sys_", "RMQ_SYS_")
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
KINDS = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED", "RETRY", "DLQ", "SYSTEM")


def _cluster_names(info: dict[str, Any] | None) -> set[str]:
    if not info:
        return set()
    return set(info.get("clusterAddrTable") or {}) | set(info.get("brokerAddrTable") or {})


def is_system_topic(topic: str, info: dict[str, Any] | None = None) -> bool:
    """A broker's own topic: RocketMQ's system topics, a cluster's or broker's topic, a reply topic."""
    return (
        topic in SYSTEM_TOPICS
        or topic.startswith(SYSTEM_PREFIXES)
        or topic.endswith("_" + REPLY_TOPIC_POSTFIX)
        or topic in _cluster_names(info)
    )


def is_internal_topic(topic: str, info: dict[str, Any] | None = None) -> bool:
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)) or is_system_topic(
        topic, info
    )


def message_type(cfg: dict[str, Any] | None) -> str:
    """NORMAL / FIFO / DELAY / TRANSACTION / MIXED from a TopicConfig: its message.type attribute, else FIFO
    for a 4.x ordered topic, else NORMAL."""
    if not cfg:
        return "NORMAL"
    attrs = cfg.get("attributes")
    if isinstance(attrs, dict):
        t = attrs.get("message.type") or attrs.get("+message.type")
        if isinstance(t, str) and t.upper() in MESSAGE_TYPES:
            return t.upper()
    if cfg.get("order") is True or str(cfg.get("order", "")).lower() == "true":
        return "FIFO"
    return "NORMAL"


def topic_kind(topic: str, cfg: dict[str, Any] | None, info: dict[str, Any] | None) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "RETRY"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "DLQ"
    if is_system_topic(topic, info):
        return "SYSTEM"
    return message_type(cfg)


def perm_text(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-")
