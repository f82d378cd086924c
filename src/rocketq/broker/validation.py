"""Topic / group name rules (RocketMQ's TopicValidator): ``^[%|a-zA-Z0-9_-]+$``, at most 127 chars."""

from __future__ import annotations

import re

from rocketq.protocol.properties import AUTO_CREATE_TOPIC_KEY_TOPIC

_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
MAX_NAME_LENGTH = 127


def check_name(kind: str, name: str | None) -> str | None:
    """None when valid, else the reason (used as the response remark)."""
    if not name:
        return f"The specified {kind} is blank."
    if len(name) > MAX_NAME_LENGTH:
        return f"The specified {kind} is longer than {MAX_NAME_LENGTH} characters."
    if not _NAME.fullmatch(name):
        return f"The specified {kind}[{name}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


def check_topic(topic: str | None) -> str | None:
    return check_name("topic", topic)


def check_send_topic(topic: str | None) -> str | None:
    reason = check_name("topic", topic)
    if reason is None and topic == AUTO_CREATE_TOPIC_KEY_TOPIC:
        return f"The specified topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC."
    return reason
