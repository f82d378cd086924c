"""Label values as RocketMQ 5.x's BrokerMetricsManager computes them (is_system, is_retry, message_type)."""

from __future__ import annotations

from rocketq.protocol.properties import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
)

# TopicValidator's system topics (plus every topic starting with rmq_sys_, and the cluster's and broker's
# own name topics, which the exporter adds)
SYSTEM_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "TBW102",
        "rmq_sys_REVIVE_LOG_",
        "rmq_sys_wheel_timer",
    }
)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"
# TopicMessageType.getMetricsValue(): the type's name in lower case
MESSAGE_TYPES = frozenset({"normal", "fifo", "delay", "transaction"})
TIMER_TOPIC = "rmq_sys_wheel_timer"  # 5.x timer messages wait here (store/timer.py)


def flag(value: bool) -> str:
    return "true" if value else "false"


def is_system_topic(topic: str, own_names: frozenset[str] = frozenset()) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX) or topic in own_names


def is_system_group(group: str) -> bool:
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def message_type_of(topic: str, attributes: dict[str, str] | None) -> str:
    """message_type of what a topic's queues hold: the schedule and timer topics hold delayed messages, the
    half topic transactional ones; any other topic is labelled with its 5.x ``message.type`` attribute, or
    normal without one (RocketMQ classifies each send by its properties; per stored topic this is what
    the store can tell without looking at each message)."""
    if topic in (SCHEDULE_TOPIC, TIMER_TOPIC):
        return "delay"
    if topic == TRANS_HALF_TOPIC:
        return "transaction"
    kind = (attributes or {}).get("message.type", "").lower()
    return kind if kind in MESSAGE_TYPES else "normal"
