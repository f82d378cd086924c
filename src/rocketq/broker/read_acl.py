"""Authorization of reads by what is stored (aclEnable=true).

The RPC hook (acl.py) checks a request against the topic and group named in its header. That is not enough
for requests that find a message by its CommitLog offset or key, or that read a topic carrying other topics'
messages: VIEW_MESSAGE_BY_ID and CONSUME_MESSAGE_DIRECTLY name no topic, CONSUMER_SEND_MSG_BACK copies any
offset into the caller's own %RETRY% topic, and %RETRY% / %DLQ% / SCHEDULE_TOPIC_XXXX /
RMQ_SYS_TRANS_HALF_TOPIC hold messages of the topics they came from. So the processors ask this guard about
the message they touch, by the topics recorded in the stored record itself, never by a header the caller
chose:

- the stored topic, or for SCHEDULE_TOPIC_XXXX and RMQ_SYS_TRANS_HALF_TOPIC the REAL_TOPIC it will reach;
- for a %RETRY% / %DLQ% topic also the topic the message came from (RETRY_TOPIC, or 5.x's DLQ_ORIGIN_TOPIC).

Reading needs SUB on each (a %RETRY%<group> resource is the group's permission, as in the hook). A
white-listed address or an admin account is not limited. With aclEnable=false nothing is checked and nothing
is decoded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rocketq.protocol.codes import ResponseCode
from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.properties import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
)
from rocketq.protocol.record import decode_record

from .acl import PUB, SUB, Account, AclError, AclHook, permits, refusal

if TYPE_CHECKING:
    from rocketq.remoting import Channel

# topics whose messages belong to another topic, named in a property of each message
_CARRIERS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC})
SUBJECT_ATTR = "acl.subject"  # Channel.attrs: the account of the channel's last heartbeat (check-backs)


def carries_other_topics(topic: str) -> bool:
    """Does a pull of this topic need a per-message check (its messages came from other topics)?"""
    return topic in _CARRIERS or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


def message_resources(topic: str, props: dict[str, str]) -> list[str]:
    """The topics (and %RETRY% groups) a stored message belongs to, from its own record."""
    if topic in _CARRIERS:
        topic = props.get(PROPERTY_REAL_TOPIC) or topic
    out = [topic]
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        for key in (PROPERTY_RETRY_TOPIC, PROPERTY_DLQ_ORIGIN_TOPIC):
            origin = props.get(key)
            if origin and origin not in out:
                out.append(origin)
    return out


class ReadGuard:
    def __init__(self, hook: AclHook | None) -> None:
        self.hook = hook

    @property
    def enabled(self) -> bool:
        return self.hook is not None

    def subject(self, channel: Channel | None, request: RemotingCommand) -> Account | None:
        """The account limiting this request; None when nothing does (ACL off, white-listed, admin, or a
        request the broker made itself)."""
        if self.hook is None or channel is None:
            return None
        return self.hook.subject(channel.remote_addr, request)

    @staticmethod
    def refused(subject: Account | None, resources: Iterable[str], perm: int = SUB) -> str | None:
        """Why the subject may not have this message (None: it may)."""
        if subject is None:
            return None
        for resource in resources:
            if not permits(subject, resource, perm):
                return refusal(subject, resource, perm)
        return None

    def refused_message(self, subject: Account | None, msg: Any, perm: int = SUB) -> str | None:
        """msg: a decoded record (MessageExt)."""
        if subject is None:
            return None
        return self.refused(subject, message_resources(msg.topic, msg.properties), perm)

    def refused_record(self, subject: Account | None, view) -> str | None:
        """view: one stored record. An undecodable record is refused (nothing to authorize it by)."""
        if subject is None:
            return None
        try:
            msg = decode_record(view)
        except ProtocolError as exc:
            return f"[ACL] the stored record can not be authorized: {exc}"
        return self.refused_message(subject, msg)

    def readable_prefix(self, subject: Account | None, buffers: list) -> tuple[int, str | None]:
        """How many of these records (in order) the subject may read, and why the next one is refused.
        A pull stops before a refused record rather than skipping it: skipping would move the consumer's
        offset past a message its group may legitimately own under another account."""
        if subject is None:
            return len(buffers), None
        for i, view in enumerate(buffers):
            why = self.refused_record(subject, view)
            if why is not None:
                return i, why
        return len(buffers), None

    def check(self, channel: Channel | None, request: RemotingCommand, view) -> RemotingCommand | None:
        """NO_PERMISSION response when the request's account may not read this stored record, else None."""
        if self.hook is None:
            return None
        try:
            why = self.refused_record(self.subject(channel, request), view)
        except AclError as exc:
            why = str(exc)
        return None if why is None else request.response(ResponseCode.NO_PERMISSION, why)

    def may_publish(self, channel: Channel | None, topic: str) -> bool:
        """Check-backs carry the half message's body: only to a producer whose account may send to its topic.
        channel.attrs[SUBJECT_ATTR] is set by the heartbeat that registered the producer."""
        return self._channel_permits(channel, topic, PUB)

    def may_read(self, channel: Channel | None, topic: str) -> bool:
        """A message pushed to a client (a reply) is a read of its topic by the client's account."""
        return self._channel_permits(channel, topic, SUB)

    def _channel_permits(self, channel: Channel | None, topic: str, perm: int) -> bool:
        if self.hook is None:
            return True
        attrs = getattr(channel, "attrs", None) or {}
        if SUBJECT_ATTR not in attrs:
            return False
        subject = attrs[SUBJECT_ATTR]
        return subject is None or permits(subject, topic, perm)


__all__ = ["PUB", "SUB", "ReadGuard", "carries_other_topics", "message_resources"]
