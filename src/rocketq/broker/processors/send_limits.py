"""Why the store refused a send as MESSAGE_ILLEGAL, in words that name the limit and its value.

Computed only on that error path (the hot path pays nothing): the store answers MESSAGE_ILLEGAL for a record
over ``maxMessageSize`` (the whole record: the 91-byte header, body, topic and properties, as RocketMQ
counts it, so a body of exactly maxMessageSize does not fit), for a batch that does not fit one CommitLog
segment, and for a topic name over 127 bytes.
"""

from __future__ import annotations

from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.headers import SendMessageRequestHeader
from rocketq.protocol.record import FIXED_SIZE

MAX_TOPIC_BYTES = 127


def illegal_message_reason(request: RemotingCommand, max_message_size: int, segment_size: int) -> str:
    try:
        h = SendMessageRequestHeader.of_request(request)
    except ProtocolError:
        return f"the message is illegal: over maxMessageSize={max_message_size} or a bad header"
    topic_len = len(h.topic.encode())
    if topic_len > MAX_TOPIC_BYTES:
        return f"the message is illegal: topic of {topic_len} bytes, over the {MAX_TOPIC_BYTES}-byte limit"
    body_len = request.body_length
    if h.batch or request.code == 320:
        return (
            f"the message is illegal: a message of the batch is over maxMessageSize={max_message_size} bytes "
            f"(each record counts its {FIXED_SIZE}-byte header, body, topic and properties), or the batch "
            f"({body_len} bytes) does not fit one CommitLog segment (mapedFileSizeCommitLog={segment_size})"
        )
    record = FIXED_SIZE + body_len + topic_len + len((h.properties or "").encode())
    if record > max_message_size:
        return (
            f"the message is illegal: its record of at least {record} bytes (body {body_len} + topic + "
            f"properties + {FIXED_SIZE}-byte header) is over maxMessageSize={max_message_size} bytes"
        )
    return (
        f"the message is illegal: its record of about {record} bytes does not fit one CommitLog segment "
        f"(mapedFileSizeCommitLog={segment_size}) or is over maxMessageSize={max_message_size} with the "
        "properties the broker adds"
    )
