"""Consumer offsets and queue offsets: QUERY/UPDATE_CONSUMER_OFFSET (14/15), GET_MAX/MIN_OFFSET (30/31),
SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketq.remoting import Channel

from ..validation import check_name, check_topic

if TYPE_CHECKING:
    from ..context import BrokerContext


class OffsetProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl

    def register(self, server) -> None:
        r = server.register_processor
        r(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        r(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)
        r(RequestCode.GET_MAX_OFFSET, self.get_max_offset)
        r(RequestCode.GET_MIN_OFFSET, self.get_min_offset)
        r(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset)
        r(RequestCode.GET_EARLIEST_MSG_STORETIME, self.earliest_time)

    def query_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self.ctl.offsets.query(h.consumer_group, h.topic, h.queue_id)
        if offset >= 0:
            return request.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})
        # No committed offset: like RocketMQ, a queue whose first message is still present starts at 0
        # (so a brand-new group sees a young queue's history); otherwise the client decides.
        if self.ctl.store.get_min_offset_in_queue(h.topic, h.queue_id) <= 0:
            return request.response(ResponseCode.SUCCESS, None, {"offset": "0"})
        return request.response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )

    def update_consumer_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        reason = check_name("consumer group", h.consumer_group) or check_topic(h.topic)
        if reason is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, reason)
        # offsets only for queues that exist (as RocketMQ 5 checks): a commit must not create state the
        # broker would keep and persist forever for a topic, queue or group nobody created
        ctl = self.ctl
        tc = ctl.topics.get(h.topic)
        if tc is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        if not 0 <= h.queue_id < max(tc.read_queue_nums, tc.write_queue_nums):
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] readQueueNums:[{tc.read_queue_nums}]",
            )
        if ctl.subscriptions.find_or_create(h.consumer_group) is None:
            reason = f"subscription group [{h.consumer_group}] does not exist"
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, reason)
        # ali-ons sends -1 for "no offset" (and for 0): a negative offset never overwrites
        if h.commit_offset >= 0:
            self.ctl.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return request.response(ResponseCode.SUCCESS)

    def get_max_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext(request.ext_fields)
        off = self.ctl.store.get_max_offset_in_queue(h.topic, h.queue_id)
        return request.response(ResponseCode.SUCCESS, None, {"offset": str(off)})

    def get_min_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext(request.ext_fields)
        off = self.ctl.store.get_min_offset_in_queue(h.topic, h.queue_id)
        return request.response(ResponseCode.SUCCESS, None, {"offset": str(off)})

    def search_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        off = self.ctl.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return request.response(ResponseCode.SUCCESS, None, {"offset": str(off)})

    def earliest_time(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.from_ext(request.ext_fields)
        ts = self.ctl.store.get_earliest_message_time(h.topic, h.queue_id)
        return request.response(ResponseCode.SUCCESS, None, {"timestamp": str(ts)})
