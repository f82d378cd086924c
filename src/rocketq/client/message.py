"""Client data model: Message, MessageQueue, SendResult and the public enums (names as in API.md)."""

from __future__ import annotations

import enum
import logging
import socket
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rocketq.protocol import properties as _props

# MessageConst property names and system topics, under the client's names (the values live in the protocol).
from rocketq.protocol.properties import (  # noqa: F401
    CLIENT_INNER_PRODUCER_GROUP,
    DLQ_GROUP_TOPIC_PREFIX,
    KEY_SEPARATOR,
    PROPERTY_CLUSTER,
    PROPERTY_CORRELATION_ID,
    PROPERTY_KEYS,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_MIN_OFFSET,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    REPLY_TOPIC_POSTFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    retry_topic,
)
from rocketq.protocol.record import HEADER as _RECORD_HEADER

DEFAULT_TOPIC = _props.AUTO_CREATE_TOPIC_KEY_TOPIC
PROPERTY_CONSUME_START_TIME = _props.PROPERTY_CONSUME_START_TIMESTAMP
PROPERTY_DELAY = _props.PROPERTY_DELAY_TIME_LEVEL
PROPERTY_REPLY_TO_CLIENT = _props.PROPERTY_MESSAGE_REPLY_TO_CLIENT
PROPERTY_TTL = _props.PROPERTY_MESSAGE_TTL
PROPERTY_MSG_TYPE = _props.PROPERTY_MESSAGE_TYPE
PROPERTY_REAL_QID = _props.PROPERTY_REAL_QUEUE_ID
PROPERTY_TRAN_MSG = _props.PROPERTY_TRANSACTION_PREPARED
PROPERTY_UNIQ_KEY = _props.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
PROPERTY_WAIT = _props.PROPERTY_WAIT_STORE_MSG_OK
REPLY_MESSAGE_FLAG = _props.REPLY_MESSAGE_TYPE


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class MessageModel(enum.Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeResult(enum.Enum):
    """ConsumeConcurrentlyStatus: CONSUME_SUCCESS / RECONSUME_LATER."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyResult(enum.Enum):
    """ConsumeOrderlyStatus."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """A queue of a topic on one broker; ordered by (topic, broker_name, queue_id) like Java's compareTo."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, object]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> MessageQueue:
        return cls(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))  # type: ignore[call-overload]

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


class Message:
    """A message to send. ``keys`` may be a string (space separated) or a list; ``properties`` are user
    properties (system properties such as TAGS/KEYS/DELAY live in their own attributes)."""

    __slots__ = ("body", "delay_level", "flag", "keys", "properties", "tags", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | str = b"",
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        flag: int = 0,
    ) -> None:
        self.topic = topic
        self.body = body.encode() if isinstance(body, str) else bytes(body)
        self.tags = tags
        if keys is None:
            self.keys: list[str] = []
        elif isinstance(keys, str):
            self.keys = [k for k in keys.split(KEY_SEPARATOR) if k]
        else:
            self.keys = [str(k) for k in keys]
        self.properties: dict[str, str] = dict(properties) if properties else {}
        self.delay_level = int(delay_level)
        self.flag = flag

    def put_user_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def wire_properties(self) -> dict[str, str]:
        """All properties as sent on the wire (user + TAGS/KEYS/DELAY)."""
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = KEY_SEPARATOR.join(self.keys)
        if self.delay_level > 0:
            props[PROPERTY_DELAY] = str(self.delay_level)
        return props

    def plain_wire_properties(self, uniq: str) -> str:
        """For a message without user properties: properties_to_string of wire_properties() plus UNIQ_KEY and
        WAIT=true (what the producer sends), in the same order, built without the dict."""
        out = f"{PROPERTY_UNIQ_KEY}\x01{uniq}\x02{PROPERTY_WAIT}\x01true"
        if self.delay_level > 0:
            out = f"{PROPERTY_DELAY}\x01{self.delay_level}\x02{out}"
        if self.keys:
            out = f"{PROPERTY_KEYS}\x01{KEY_SEPARATOR.join(self.keys)}\x02{out}"
        if self.tags:
            out = f"{PROPERTY_TAGS}\x01{self.tags}\x02{out}"
        return out

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, "
            f"body={len(self.body)}B, properties={self.properties!r})"
        )


# Fields of a received MessageExt that derive from its property string. codec.decode_records leaves them
# unset and MessageExt.__getattr__ fills them on first access: parsing every message's properties and
# formatting its offsetMsgId was ~half of a draining consumer's CPU; most listeners read only the body.
_PROPS_DERIVED = frozenset(("properties", "tags", "keys", "delay_level", "msg_id"))

# Fields of a received MessageExt that codec.decode_records keeps in the record header's bytes (``_h``, the
# 88 bytes protocol.record.HEADER unpacks) until one of them is read: a draining consumer sets topic, body
# and queue_offset per message and nothing else. Name -> index into the unpacked tuple; the hosts are built
# from two.
_HEADER_FIELDS = {
    "store_size": 0,
    "body_crc": 2,
    "queue_id": 3,
    "flag": 4,
    "commit_log_offset": 6,
    "sys_flag": 7,
    "born_timestamp": 8,
    "born_host": 9,
    "store_timestamp": 11,
    "store_host": 12,
    "reconsume_times": 14,
    "prepared_transaction_offset": 15,
}


class MessageExt(Message):
    """A stored message as received from the broker (pull, view, query)."""

    __slots__ = (
        "_h",
        "_pextra",
        "_praw",
        "body_crc",
        "born_host",
        "born_timestamp",
        "broker_name",
        "commit_log_offset",
        "msg_id",
        "offset_msg_id",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
    )

    def __init__(self, topic: str, body: bytes = b"", properties: Mapping[str, str] | None = None) -> None:
        props = dict(properties) if properties else {}
        super().__init__(topic, body, properties=props)
        self.properties = props  # received messages expose every property, system ones included
        self.tags = props.get(PROPERTY_TAGS)
        keys = props.get(PROPERTY_KEYS)
        self.keys = [k for k in keys.split(KEY_SEPARATOR) if k] if keys else []
        delay = props.get(PROPERTY_DELAY)
        self.delay_level = int(delay) if delay and delay.isdigit() else 0
        self._praw: bytes | None = None  # unparsed property string (lazy messages only)
        self._pextra: dict[str, str] | None = None  # properties to add when _praw is parsed
        self.msg_id = ""
        self.offset_msg_id = ""
        self.queue_id = 0
        self.queue_offset = 0
        self.commit_log_offset = 0
        self.born_timestamp = 0
        self.store_timestamp = 0
        self.born_host = ""
        self.store_host = ""
        self.reconsume_times = 0
        self.broker_name = ""
        self.sys_flag = 0
        self.store_size = 0
        self.body_crc = 0
        self.prepared_transaction_offset = 0

    def __getattr__(self, name: str) -> Any:
        # Only reached for a slot that is unset: the lazy fields of a decoded message. Once computed they
        # are stored in their slots, so later reads (and writes) are plain slot accesses.
        if name in _PROPS_DERIVED:
            self._parse_properties()
            return object.__getattribute__(self, name)
        if name in _HEADER_FIELDS:
            self._unpack_header()
            return object.__getattribute__(self, name)
        if name == "offset_msg_id":
            value = _offset_msg_id(self.store_host, self.commit_log_offset)
            self.offset_msg_id = value
            return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _unpack_header(self) -> None:
        h = _RECORD_HEADER.unpack_from(self._h)  # AttributeError: not decoded lazily (no such field)
        for name, i in _HEADER_FIELDS.items():
            slot = _SLOTS[name]
            try:
                slot.__get__(self)  # assigned before the first read: keep it
                continue
            except AttributeError:
                pass
            slot.__set__(self, f"{socket.inet_ntoa(h[i])}:{h[i + 1]}" if i in (9, 12) else h[i])

    def _parse_properties(self) -> None:
        raw = self._praw
        props = _props.string_to_properties(str(raw, "utf-8", "replace")) if raw else {}
        if self._pextra:
            props.update(self._pextra)
        self._praw = self._pextra = None
        delay = props.get(PROPERTY_DELAY)
        keys = props.get(PROPERTY_KEYS)
        derived = (
            ("properties", props),
            ("tags", props.get(PROPERTY_TAGS)),
            ("keys", [k for k in keys.split(KEY_SEPARATOR) if k] if keys else []),
            ("delay_level", int(delay) if delay and delay.isdigit() else 0),
            ("msg_id", None),
        )
        for name, value in derived:
            slot = _SLOTS[name]
            try:
                slot.__get__(self)  # assigned by the user before the first read: keep theirs
            except AttributeError:
                if name == "msg_id":
                    value = props.get(PROPERTY_UNIQ_KEY) or self.offset_msg_id
                slot.__set__(self, value)

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, msg_id={self.msg_id}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, tags={self.tags!r}, reconsume_times={self.reconsume_times}, "
            f"body={len(self.body)}B)"
        )


_SLOTS: dict[str, Any] = {
    name: (MessageExt.__dict__.get(name) or Message.__dict__[name])
    for name in (*_PROPS_DERIVED, *_HEADER_FIELDS)
}


def _offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """offsetMsgId from a received message's "ip:port" / "[ipv6]:port" store host."""
    host, _, port = store_host.rpartition(":")
    ip = socket.inet_pton(socket.AF_INET6, host[1:-1]) if host.startswith("[") else socket.inet_aton(host)
    return (ip + struct.pack(">iq", int(port), commit_log_offset)).hex().upper()


def put_properties_lazily(msgs: Iterable[MessageExt], extra: Mapping[str, str]) -> None:
    """Add ``extra`` to the properties of received messages without parsing those not yet parsed (the
    pending dicts are shared: messages of one pull share one, so the merged dict is made once per run)."""
    last: object = put_properties_lazily
    merged: dict[str, str] | None = None
    for m in msgs:
        if m._praw is None:
            m.properties.update(extra)
            continue
        pending = m._pextra
        if pending is not last:
            last = pending
            merged = {**pending, **extra} if pending else dict(extra)
        m._pextra = merged


@dataclass(slots=True)
class SendResult:
    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def send_status(self) -> SendStatus:  # Java spelling
        return self.status

    @property
    def message_queue(self) -> MessageQueue:
        return self.queue


def create_reply_message(request: Message, body: bytes | str) -> Message:
    """MessageUtil.createReplyMessage: the reply to a request message, addressed to
    <cluster>_REPLY_TOPIC and routed back to the requesting client by the broker."""
    props = request.properties
    cluster = props.get(PROPERTY_CLUSTER)
    if not cluster:
        raise MQClientError(
            10007, "create reply message fail, requestMessage error, property[CLUSTER] is null."
        )
    reply = Message(f"{cluster}_{REPLY_TOPIC_POSTFIX}", body)
    reply.properties[PROPERTY_MSG_TYPE] = REPLY_MESSAGE_FLAG
    for key in (PROPERTY_CORRELATION_ID, PROPERTY_REPLY_TO_CLIENT, PROPERTY_TTL):
        if key in props:
            reply.properties[key] = props[key]
    return reply


class MQClientError(Exception):
    """A client-side failure (no route, bad argument, all retries failed); like MQClientException."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"CODE: {code} DESC: {message}")
        self.code = code
        self.remark = message


class MQBrokerError(Exception):
    """The broker answered with an error code; ``code`` and ``remark`` are the broker's."""

    def __init__(self, code: int, remark: str | None, broker_addr: str = "") -> None:
        where = f" BROKER: {broker_addr}" if broker_addr else ""
        super().__init__(f"CODE: {code} DESC: {remark}{where}")
        self.code = code
        self.remark = remark or ""
        self.broker_addr = broker_addr


def invoke_send_callback(callback: Any, result: SendResult | None, exc: BaseException | None) -> None:
    """``callback(result, exc)`` or a SendCallback-like object with on_success(result) / on_exception(exc).
    A callback that raises must not break the client: its error is logged."""
    try:
        if hasattr(callback, "on_success") or hasattr(callback, "on_exception"):
            if exc is None:
                callback.on_success(result)
            else:
                callback.on_exception(exc)
        else:
            callback(result, exc)
    except Exception:
        logging.getLogger(__name__).exception("send callback raised")
