"""CONSUMER_SEND_MSG_BACK (36): a failed message goes to %RETRY%<group> via the delay levels
(3 + reconsumeTimes, or the requested level), or to %DLQ%<group> once it has been retried
maxReconsumeTimes times (or delayLevel < 0)."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from rocketq.protocol.codes import PERM_WRITE, VERSION_V3_4_9, RequestCode, ResponseCode
from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.headers import ConsumerSendMsgBackRequestHeader
from rocketq.protocol.properties import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
)
from rocketq.protocol.record import decode_record
from rocketq.remoting import Channel

from ..restore import restored
from .send import put_status_response

if TYPE_CHECKING:
    from ..context import BrokerContext

PERM_RW = 6
DLQ_NUMS_PER_GROUP = 1


class SendBackProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl

    def register(self, server) -> None:
        server.register_processor(RequestCode.CONSUMER_SEND_MSG_BACK, self.process)

    def process(self, channel: Channel, request: RemotingCommand):
        ctl = self.ctl
        h = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        sgc = ctl.subscriptions.get(h.group)
        if sgc is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group}"
            )
        if not ctl.broker_perm & PERM_WRITE:
            return request.response(ResponseCode.NO_PERMISSION, "the broker sending message is forbidden")
        if sgc.retry_queue_nums <= 0:
            return request.response(ResponseCode.SUCCESS)
        new_topic = RETRY_GROUP_TOPIC_PREFIX + h.group
        queue_id = random.randrange(sgc.retry_queue_nums)
        tc = ctl.topics.create_in_send_back(new_topic, sgc.retry_queue_nums, PERM_RW, 0)
        if not tc.perm & PERM_WRITE:
            return request.response(
                ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
            )
        view = ctl.store.look_message_by_offset(h.offset) if h.offset >= 0 else None
        if view is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        try:
            msg = decode_record(view)
        except ProtocolError as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}: {exc}"
            )
        # the copy lands in the caller's own %RETRY% topic: it must be allowed to read the original
        why = ctl.reads.refused_message(ctl.reads.subject(channel, request), msg)
        if why is not None:
            return request.response(ResponseCode.NO_PERMISSION, why)
        props = dict(msg.properties)
        if not props.get(PROPERTY_RETRY_TOPIC):
            props[PROPERTY_RETRY_TOPIC] = msg.topic
        delay_level = h.delay_level
        max_times = sgc.retry_max_times
        if request.version >= VERSION_V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        tags_code = None
        now_ms = int(time.time() * 1000)
        if msg.reconsume_times >= max_times or delay_level < 0:
            new_topic = DLQ_GROUP_TOPIC_PREFIX + h.group
            queue_id = 0
            tc = ctl.topics.create_in_send_back(new_topic, DLQ_NUMS_PER_GROUP, PERM_RW, 0)
            if not tc.perm & PERM_WRITE:
                return request.response(
                    ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
                )
            props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        else:
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        if not props.get(PROPERTY_ORIGIN_MESSAGE_ID):
            props[PROPERTY_ORIGIN_MESSAGE_ID] = h.origin_msg_id or msg.offset_msg_id
        props.pop("WAIT", None)
        topic = new_topic
        if PROPERTY_DELAY_TIME_LEVEL in props:
            moved = ctl.delay_levels.redirect(props, topic, queue_id, now_ms)
            if moved is not None:
                topic, queue_id, _ = moved  # the store derives the delivery time (tags code)
        inner = restored(
            msg, topic, queue_id, props, reconsume_times=msg.reconsume_times + 1, tags_code=tags_code
        )
        result = ctl.store.put_message(inner)
        err = put_status_response(request, result)
        if err is not None:
            err.code = ResponseCode.SYSTEM_ERROR
            return err
        if new_topic.startswith(DLQ_GROUP_TOPIC_PREFIX):  # rocketmq_send_to_dlq_messages_total
            ctl.stats.sent_to_dlq(h.group, props.get(PROPERTY_RETRY_TOPIC) or msg.topic)
        return request.response(ResponseCode.SUCCESS)
