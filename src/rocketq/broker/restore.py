"""Putting a stored message back into the store under another topic / queue.

Delayed delivery (schedule.py), consumer send-back (processors/sendback.py) and transaction commit /
check-back (transactions.py) all re-store a message they read from the CommitLog: the body, flag, born
time and host carry over, the caller picks the destination, properties and what else changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketq.protocol.properties import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC

if TYPE_CHECKING:
    from rocketq.store import MessageToStore

# Put statuses after which the message is in the CommitLog (the flush / slave ones only report lateness).
STORED = frozenset(("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"))


def real_destination(
    props: dict[str, str], default_topic: str | None = None, pop: bool = False
) -> tuple[str | None, int]:
    """(REAL_TOPIC, REAL_QID) saved when the message was parked in a system topic; a bad queue id reads as 0.
    ``pop`` removes both properties from ``props``."""
    get = props.pop if pop else props.get
    topic = get(PROPERTY_REAL_TOPIC, default_topic)
    try:
        qid = int(get(PROPERTY_REAL_QUEUE_ID, "0"))
    except ValueError:
        qid = 0
    return topic, qid


def restored(msg: Any, topic: str, queue_id: int, props: dict[str, str], **changes: Any) -> MessageToStore:
    """A MessageToStore copying ``msg`` (a decoded record) to topic/queue_id with ``props``;
    ``changes`` overrides other fields (sys_flag, reconsume_times, tags_code, ...)."""
    from rocketq.store import MessageToStore  # the broker loads the store lazily

    fields: dict[str, Any] = {
        "sys_flag": msg.sys_flag,
        "born_timestamp": msg.born_timestamp,
        "born_host": msg.born_host,
        "reconsume_times": msg.reconsume_times,
    }
    fields.update(changes)
    return MessageToStore(topic, queue_id, bytes(msg.body), msg.flag, props, **fields)
