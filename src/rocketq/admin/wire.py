"""Reading admin answer bodies: fastjson-style JSON (object map keys), MessageQueue keys, per-queue stats.

Shared by :mod:`.client` and :mod:`.console_ops` (which AdminClient inherits), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from rocketq.protocol.lenient_json import loads as _lenient_loads

from .errors import AdminError


def loads(body: bytes) -> Any:
    """A broker/NameServer JSON body (lenient: fastjson writes objects as map keys); {} when empty."""
    if not body:
        return {}
    return _lenient_loads(body)


def mq_of(key: Any) -> tuple[str, str, int]:
    """(topic, brokerName, queueId) of a MessageQueue map key however the parser produced it."""
    if hasattr(key, "to_dict"):
        key = key.to_dict()
    if isinstance(key, str):
        key = orjson.loads(key)
    if isinstance(key, dict):
        return str(key.get("topic", "")), str(key.get("brokerName", "")), int(key.get("queueId", 0))
    if hasattr(key, "topic"):
        return key.topic, key.broker_name, key.queue_id
    raise AdminError(f"unrecognised message queue key {key!r}")


@dataclass(slots=True)
class QueueConsumeStats:
    """One row of RocketMQ's ConsumeStats offsetTable: a queue's max offset and the group's offset in it."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        """Messages stored but not yet consumed (RocketMQ: brokerOffset - consumerOffset, never below 0)."""
        return max(0, self.broker_offset - self.consumer_offset)
