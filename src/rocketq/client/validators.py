"""Client-side checks of group and topic names (RocketMQ's client Validators).

A producer or consumer with a bad group name, or a consumer subscribed to a bad topic name, fails at
start() with an MQClientError saying which name and why (the broker would refuse it later, and a push
consumer would otherwise run and silently receive nothing). A subscription to a topic that has no route
yet is logged once when the consumer starts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from .message import DEFAULT_TOPIC, RETRY_GROUP_TOPIC_PREFIX, MQClientError

log = logging.getLogger("rocketq.client")

NAME_PATTERN = r"^[%|a-zA-Z0-9_-]+$"
GROUP_MAX_LENGTH = 255
TOPIC_MAX_LENGTH = 127
_NAME_RE = re.compile(NAME_PATTERN)
_CHECKED_TOPICS: set[str] = set()  # topics check_topic passed (a producer sends to a few, over and over)


def check_group(group: str) -> None:
    if not isinstance(group, str) or not group.strip():
        raise MQClientError(-1, "The specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise MQClientError(-1, f"The specified group is longer than group max length {GROUP_MAX_LENGTH}.")
    if not _NAME_RE.match(group):
        raise MQClientError(
            -1, f"The specified group[{group}] contains illegal characters, allowing only {NAME_PATTERN}"
        )


def check_topic_name(topic: str) -> None:
    if topic is not None and not isinstance(topic, str):
        raise MQClientError(-1, f"The specified topic must be a string, not {type(topic).__name__}")
    if not topic or not topic.strip():
        raise MQClientError(-1, "The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MQClientError(-1, f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not _NAME_RE.match(topic):
        raise MQClientError(
            -1, f"The specified topic[{topic}] contains illegal characters, allowing only {NAME_PATTERN}"
        )


def check_topic(topic: str) -> None:
    """A topic a message is sent to: a valid name, and not TBW102 (the auto-create template)."""
    if type(topic) is str and topic in _CHECKED_TOPICS:
        return
    check_topic_name(topic)
    if topic == DEFAULT_TOPIC:
        raise MQClientError(-1, f"The topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.")
    if len(_CHECKED_TOPICS) >= 4096:
        _CHECKED_TOPICS.clear()
    _CHECKED_TOPICS.add(topic)


def check_consumer(group: str, topics: Iterable[str]) -> None:
    check_group(group)
    for topic in topics:
        check_topic_name(topic)


def log_missing_topic(group: str, topic: str, namesrv_addrs: Iterable[str]) -> None:
    """A subscription whose topic no NameServer knows: nothing arrives until the topic is created."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return  # the broker creates a group's retry topic itself, after the first heartbeat
    log.warning(
        "consumer group %s subscribes to topic %s, which does not exist on the NameServer %s: nothing is "
        "received until it is created (rocketq admin updateTopic -t %s ...)",
        group,
        topic,
        ";".join(namesrv_addrs),
        topic,
    )
