"""HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38), CHECK_CLIENT_CONFIG (46)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.filter.sql92 import SqlError
from rocketq.protocol import lenient_json
from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.properties import RETRY_GROUP_TOPIC_PREFIX
from rocketq.remoting import Channel

from ..client_manager import ClientChannelInfo
from ..read_acl import SUBJECT_ATTR
from ..subscription import SubscriptionData, sql_filter
from ..validation import check_name

if TYPE_CHECKING:
    from ..context import BrokerContext

PERM_RW = 6


def parse_body(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return lenient_json.loads(body)


class ClientProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl

    def register(self, server) -> None:
        r = server.register_processor
        r(RequestCode.HEART_BEAT, self.heartbeat)
        r(RequestCode.UNREGISTER_CLIENT, self.unregister)
        r(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list)
        r(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config)

    def heartbeat(self, channel: Channel, request: RemotingCommand):
        try:
            data = parse_body(request.body_bytes)
        except (ProtocolError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}")
        if not isinstance(data, dict):
            return request.response(ResponseCode.SYSTEM_ERROR, "bad heartbeat body: not an object")
        ctl = self.ctl
        client_id = str(data.get("clientID") or data.get("clientId") or channel.remote_addr)
        now = time.monotonic()
        created = False
        for cd in data.get("consumerDataSet") or ():
            if not isinstance(cd, dict):
                continue
            group = str(cd.get("groupName") or "")
            if check_name("consumer group", group) is not None:
                continue
            sgc = ctl.subscriptions.find_or_create(group)
            notify = True
            if sgc is not None:
                notify = sgc.notify_consumer_ids_changed_enable
                if sgc.retry_queue_nums > 0:
                    retry = RETRY_GROUP_TOPIC_PREFIX + group
                    if retry not in ctl.topics.table:
                        ctl.topics.create_in_send_back(retry, sgc.retry_queue_nums, PERM_RW, 0, notify=False)
                        created = True
            subs = []
            for sd in cd.get("subscriptionDataSet") or ():
                if isinstance(sd, dict) and sd.get("topic"):
                    subs.append(SubscriptionData.from_obj(sd))
            info = ClientChannelInfo(channel, client_id, request.language, request.version, now)
            ctl.clients.register_consumer(
                group,
                info,
                str(cd.get("consumeType") or "CONSUME_PASSIVELY"),
                str(cd.get("messageModel") or "CLUSTERING"),
                str(cd.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"),
                subs,
                notify,
            )
        producers = data.get("producerDataSet") or ()
        if producers and ctl.reads.enabled:  # who may receive this group's transaction check-backs
            channel.attrs[SUBJECT_ATTR] = ctl.reads.subject(channel, request)
        for pd in producers:
            if isinstance(pd, dict) and pd.get("groupName"):
                info = ClientChannelInfo(channel, client_id, request.language, request.version, now)
                ctl.clients.register_producer(str(pd["groupName"]), info)
        if created:  # the retry topic's route must exist when the client asks for it
            return self._registered(request)
        return request.response(ResponseCode.SUCCESS)

    async def _registered(self, request: RemotingCommand) -> RemotingCommand:
        await self.ctl.register_now()
        return request.response(ResponseCode.SUCCESS)

    def unregister(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        producer_group = ext.get("producerGroup")
        consumer_group = ext.get("consumerGroup")
        if producer_group:
            self.ctl.clients.unregister_producer(producer_group, channel)
        if consumer_group:
            sgc = self.ctl.subscriptions.get(consumer_group)
            notify = sgc is None or sgc.notify_consumer_ids_changed_enable
            self.ctl.clients.unregister_consumer(consumer_group, channel, notify)
        return request.response(ResponseCode.SUCCESS)

    def consumer_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup") or ""
        cgi = self.ctl.clients.get_consumer_group(group)
        if cgi is None or not cgi.channels:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        body = orjson.dumps({"consumerIdList": cgi.client_ids()})
        return request.response(ResponseCode.SUCCESS, None, None, body)

    def check_client_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            data = parse_body(request.body_bytes) or {}
        except (ProtocolError, ValueError):
            data = {}
        sub = data.get("subscriptionData") if isinstance(data, dict) else None
        expr = sub.get("expressionType") if isinstance(sub, dict) else None
        if expr and expr != "TAG":
            if not self.ctl.cfg["enablePropertyFilter"]:
                return request.response(
                    ResponseCode.SYSTEM_ERROR,
                    f"The broker does not support consumer to filter message by {expr}",
                )
            try:
                sql_filter(str(sub.get("subString") or ""))
            except SqlError as exc:
                return request.response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"bad SQL92 expression: {exc}"
                )
        return request.response(ResponseCode.SUCCESS)
