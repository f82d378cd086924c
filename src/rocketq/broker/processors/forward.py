"""Requests the broker relays to a consumer client: GET_CONSUMER_RUNNING_INFO (307) and
CONSUME_MESSAGE_DIRECTLY (309, the message looked up by its offsetMsgId)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import Channel

if TYPE_CHECKING:
    from ..context import BrokerContext

CALL_TIMEOUT_S = 5.0


class ForwardProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl

    def register(self, server) -> None:
        server.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self.running_info)
        server.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_directly)

    def _client_channel(self, group: str, client_id: str) -> Channel | None:
        cgi = self.ctl.clients.get_consumer_group(group)
        if cgi is None:
            return None
        for info in cgi.channels.values():
            if info.client_id == client_id and not info.channel.closed:
                return info.channel
        return None

    async def _relay(self, request: RemotingCommand, ch: Channel, body=b"") -> RemotingCommand:
        fwd = RemotingCommand.request(request.code, dict(request.ext_fields), body)
        try:
            resp = await ch.invoke(fwd, CALL_TIMEOUT_S)
        except Exception as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer {ch.remote_addr} failed: {exc}"
            )
        return request.response(resp.code, resp.remark, dict(resp.ext_fields), resp.body)

    async def running_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        client_id = request.ext_fields.get("clientId", "")
        ch = self._client_channel(group, client_id)
        if ch is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        return await self._relay(request, ch)

    async def consume_directly(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        client_id = request.ext_fields.get("clientId", "")
        msg_id = request.ext_fields.get("msgId", "")
        ch = self._client_channel(group, client_id)
        if ch is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        try:
            offset = int(msg_id[-16:], 16) if len(msg_id) in (32, 56) else -1
        except ValueError:
            offset = -1
        view = self.ctl.store.look_message_by_offset(offset) if offset >= 0 else None
        if view is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"can not find message by id {msg_id}")
        denied = self.ctl.reads.check(channel, request, view)
        if denied is not None:
            return denied
        return await self._relay(request, ch, bytes(view))


def _not_online(request: RemotingCommand, group: str, client_id: str) -> RemotingCommand:
    return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
