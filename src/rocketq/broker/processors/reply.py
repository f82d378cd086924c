"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): a responder's reply is pushed to the requester
(found by REPLY_TO_CLIENT among producer channels) with PUSH_REPLY_MESSAGE_TO_CLIENT (326), and stored in
<cluster>_REPLY_TOPIC."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.headers import SendMessageRequestHeader
from rocketq.protocol.properties import (
    PROPERTY_CLUSTER,
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_PUSH_REPLY_TIME,
    properties_to_string,
    string_to_properties,
)
from rocketq.remoting import Channel

from .send import born_host_of

if TYPE_CHECKING:
    from ..context import BrokerContext

PUSH_TIMEOUT_S = 3.0


class ReplyProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        from rocketq.store import MessageToStore

        self.MessageToStore = MessageToStore

    def register(self, server) -> None:
        server.register_processor(RequestCode.SEND_REPLY_MESSAGE, self.process)
        server.register_processor(RequestCode.SEND_REPLY_MESSAGE_V2, self.process)

    async def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ctl = self.ctl
        h = SendMessageRequestHeader.from_request(request.code, request.ext_fields)
        tc = ctl.topics.get(h.topic)
        if tc is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if len(request.body) > ctl.cfg["maxMessageSize"]:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, "the message body size over max value")
        props = string_to_properties(h.properties or "")
        props[PROPERTY_CLUSTER] = ctl.cfg["brokerClusterName"]
        queue_id = h.queue_id if 0 <= h.queue_id < tc.write_queue_nums else 0
        born_host = born_host_of(channel)
        now_ms = int(time.time() * 1000)
        # store it (like storeReplyMessageEnable=true)
        result = ctl.store.put_message(
            self.MessageToStore(
                topic=h.topic,
                queue_id=queue_id,
                body=request.body,
                flag=h.flag,
                properties=dict(props),
                sys_flag=h.sys_flag,
                born_timestamp=h.born_timestamp,
                born_host=born_host,
                reconsume_times=h.reconsume_times or 0,
            )
        )
        store_ts = result.store_timestamp or now_ms
        target_id = props.get(PROPERTY_MESSAGE_REPLY_TO_CLIENT, "")
        # a client id is whatever a heartbeat claims: with ACL the reply (a read of the reply topic) goes
        # only to a requester whose account may read that topic
        accept = functools.partial(ctl.reads.may_read, topic=h.topic) if ctl.reads.enabled else None
        target = ctl.clients.producer_channel_by_client_id(target_id, accept)
        if target is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"push reply message fail, channel of <{target_id}> not found."
            )
        props[PROPERTY_PUSH_REPLY_TIME] = str(now_ms)
        ext = {
            "producerGroup": h.producer_group,
            "topic": h.topic,
            "defaultTopic": h.default_topic,
            "defaultTopicQueueNums": str(h.default_topic_queue_nums),
            "queueId": str(queue_id),
            "sysFlag": str(h.sys_flag),
            "bornTimestamp": str(h.born_timestamp),
            "flag": str(h.flag),
            "properties": properties_to_string(props),
            "reconsumeTimes": str(h.reconsume_times or 0),
            "unitMode": "false",
            "bornHost": f"{born_host[0]}:{born_host[1]}",
            "storeHost": ctl.broker_addr,
            "storeTimestamp": str(store_ts),
        }
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext, request.body)
        try:
            resp = await target.invoke(push, PUSH_TIMEOUT_S)
        except Exception as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"push reply message to {target_id} failed: {exc}"
            )
        if resp.code != ResponseCode.SUCCESS:
            return request.response(ResponseCode.SYSTEM_ERROR, f"push reply message fail: {resp.remark}")
        ids = result.msg_ids or [""]
        return request.response(
            ResponseCode.SUCCESS,
            None,
            {
                "msgId": ids[0],
                "queueId": str(queue_id),
                "queueOffset": str(result.queue_offset),
                "MSG_REGION": ctl.cfg["region"],
                "TRACE_ON": "true",
            },
        )
