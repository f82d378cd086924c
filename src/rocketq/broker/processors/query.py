"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12, by key or UNIQ_KEY)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.headers import QueryMessageRequestHeader, ViewMessageRequestHeader
from rocketq.remoting import Channel

if TYPE_CHECKING:
    from ..context import BrokerContext

DEFAULT_QUERY_MAX_NUM = 32
MAX_QUERY_NUM = 64  # maxMsgsNumBatch


class QueryProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl

    def register(self, server) -> None:
        server.register_processor(RequestCode.VIEW_MESSAGE_BY_ID, self.view_by_id)
        server.register_processor(RequestCode.QUERY_MESSAGE, self.query_message)

    def view_by_id(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext(request.ext_fields)
        view = None
        if h.offset >= 0:
            try:
                view = self.ctl.store.look_message_by_offset(h.offset)
            except (ValueError, IndexError, OSError):
                view = None
        if view is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}"
            )
        denied = self.ctl.reads.check(channel, request, view)
        if denied is not None:
            view.release()
            return denied
        return request.response(ResponseCode.SUCCESS, None, None, [view])

    def query_message(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext(request.ext_fields)
        max_num = h.max_num
        if h.unique_key_query:
            max_num = DEFAULT_QUERY_MAX_NUM
        max_num = min(max(max_num, 1), MAX_QUERY_NUM)
        result = self.ctl.store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        ext = {
            "indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
            "indexLastUpdatePhyoffset": str(result.index_last_update_phyoffset),
        }
        buffers = list(result.buffers)
        why = None
        reads = self.ctl.reads
        if reads.enabled and buffers:  # the header topic passed the hook; each match is checked by itself
            subject = reads.subject(channel, request)
            allowed = []
            for view in buffers:
                refused = reads.refused_record(subject, view)
                if refused is None:
                    allowed.append(view)
                else:
                    why = refused
                    view.release()
            buffers = allowed
        if not buffers:
            if why is not None:
                return request.response(ResponseCode.NO_PERMISSION, why, ext)
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext
            )
        return request.response(ResponseCode.SUCCESS, None, ext, buffers)
