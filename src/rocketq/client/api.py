"""MQClientAPI: the client's requests to NameServers and Brokers, one coroutine per RocketMQ call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import RemotingClient

from .message import MessageQueue, MQBrokerError, MQClientError
from .route import TopicRouteData, loads_lenient

NO_ROUTE = 17  # TOPIC_NOT_EXIST


class MQClientAPI:
    def __init__(
        self, remoting: RemotingClient, namesrv_addrs: Sequence[str], timeout_s: float = 3.0
    ) -> None:
        self.remoting = remoting
        self.namesrv_addrs = list(namesrv_addrs)
        self._ns_index = 0
        self.timeout_s = timeout_s

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        return await self.remoting.invoke(addr, request, self.timeout_s if timeout_s is None else timeout_s)

    async def invoke_namesrv(self, request_factory: Any, timeout_s: float | None = None) -> RemotingCommand:
        """Try each NameServer in turn, starting with the last one that worked."""
        last: Exception | None = None
        n = len(self.namesrv_addrs)
        for i in range(n):
            idx = (self._ns_index + i) % n
            try:
                resp = await self.invoke(self.namesrv_addrs[idx], request_factory(), timeout_s)
            except Exception as exc:
                last = exc
                continue
            self._ns_index = idx
            return resp
        raise MQClientError(-1, f"no NameServer reachable ({self.namesrv_addrs}): {last}")

    async def get_topic_route(self, topic: str) -> TopicRouteData | None:
        """None when the NameServer has no route for the topic."""
        resp = await self.invoke_namesrv(
            lambda: RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        )
        if resp.code == NO_ROUTE:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise MQClientError(resp.code, resp.remark or "get route failed")
        if not resp.body:
            return None
        return TopicRouteData.from_json(loads_lenient(resp.body_bytes))

    # -- broker: client management ---------------------------------------------------------------
    async def heartbeat(self, addr: str, data: dict[str, Any]) -> None:
        resp = await self.invoke(
            addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(data))
        )
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        ext = {"clientID": client_id}
        if producer_group:
            ext["producerGroup"] = producer_group
        if consumer_group:
            ext["consumerGroup"] = consumer_group
        resp = await self.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, ext))
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)

    async def get_consumer_id_list(self, addr: str, group: str) -> list[str]:
        resp = await self.invoke(
            addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        )
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        if not resp.body:
            return []
        return [str(c) for c in loads_lenient(resp.body_bytes).get("consumerIdList") or []]

    # -- broker: offsets -------------------------------------------------------------------------
    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        """-1 when the broker has no offset for the group (QUERY_NOT_FOUND)."""
        ext = {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id)}
        resp = await self.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        return int(resp.ext_fields.get("offset", -1))

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        ext = {
            "consumerGroup": group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "commitOffset": str(offset),
        }
        await self.remoting.invoke_oneway(
            addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        )

    async def _offset_call(self, code: int, addr: str, ext: dict[str, str], key: str = "offset") -> int:
        resp = await self.invoke(addr, RemotingCommand.request(code, ext))
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        return int(resp.ext_fields.get(key, 0))

    async def get_max_offset(self, addr: str, mq: MessageQueue) -> int:
        return await self._offset_call(
            RequestCode.GET_MAX_OFFSET, addr, {"topic": mq.topic, "queueId": str(mq.queue_id)}
        )

    async def get_min_offset(self, addr: str, mq: MessageQueue) -> int:
        return await self._offset_call(
            RequestCode.GET_MIN_OFFSET, addr, {"topic": mq.topic, "queueId": str(mq.queue_id)}
        )

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        ext = {"topic": mq.topic, "queueId": str(mq.queue_id), "timestamp": str(timestamp_ms)}
        return await self._offset_call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, ext)

    # -- broker: retry ---------------------------------------------------------------------------
    async def consumer_send_msg_back(
        self,
        addr: str,
        *,
        commit_log_offset: int,
        group: str,
        delay_level: int,
        origin_msg_id: str,
        origin_topic: str,
        max_reconsume_times: int,
        timeout_s: float = 5.0,
    ) -> None:
        ext = {
            "offset": str(commit_log_offset),
            "group": group,
            "delayLevel": str(delay_level),
            "originMsgId": origin_msg_id,
            "originTopic": origin_topic,
            "unitMode": "false",
            "maxReconsumeTimes": str(max_reconsume_times),
        }
        resp = await self.invoke(
            addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext), timeout_s
        )
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)

    async def check_client_config(self, addr: str, group: str, client_id: str, sub: dict[str, Any]) -> None:
        """CHECK_CLIENT_CONFIG: does the broker accept this (SQL92) subscription?"""
        body = orjson.dumps({"clientId": client_id, "group": group, "subscriptionData": sub})
        resp = await self.invoke(addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body))
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)

    # -- broker: orderly -------------------------------------------------------------------------
    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        body = orjson.dumps(
            {"consumerGroup": group, "clientId": client_id, "mqSet": [m.to_json() for m in mqs]}
        )
        resp = await self.invoke(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, body))
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        if not resp.body:
            return set()
        return {MessageQueue.from_json(o) for o in loads_lenient(resp.body_bytes).get("lockOKMQSet") or []}

    async def unlock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Sequence[MessageQueue]
    ) -> None:
        body = orjson.dumps(
            {"consumerGroup": group, "clientId": client_id, "mqSet": [m.to_json() for m in mqs]}
        )
        await self.remoting.invoke_oneway(
            addr, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, {}, body)
        )
