"""NameServer request processors: decode headers/bodies, call RouteInfoManager / KVConfigManager.

Handlers are plain functions (run inline on the event loop: all work is in-memory) except the KV
writes, which wait for the file to be persisted before answering. A raised exception becomes a
SYSTEM_ERROR response with the message as remark (done by the remoting layer).
"""

from __future__ import annotations

import logging

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.route import (
    MASTER_ID,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    body_crc32,
)
from rocketq.remoting import Channel, RemotingServer

from .kvconfig import KVConfigManager
from .route_info import RouteInfoManager

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
MAX_NAME_LEN = 255
MAX_ADDR_LEN = 300


class HeaderError(ValueError):
    pass


def _str(req: RemotingCommand, key: str, *, required: bool = True, limit: int = MAX_NAME_LEN) -> str:
    value = req.ext_fields.get(key)
    if value is None or value == "":
        if required:
            raise HeaderError(f"the custom field <{key}> is null")
        return ""
    if len(value) > limit:
        raise HeaderError(f"the custom field <{key}> is longer than {limit} characters")
    return value


def _int(req: RemotingCommand, key: str, default: int | None = None) -> int:
    value = req.ext_fields.get(key)
    if value is None or value == "":
        if default is None:
            raise HeaderError(f"the custom field <{key}> is null")
        return default
    try:
        n = int(value)
    except ValueError:
        raise HeaderError(f"the custom field <{key}> is not an integer: {value[:40]!r}") from None
    if not -(2**63) <= n < 2**63:
        raise HeaderError(f"the custom field <{key}> is out of range")
    return n


def _bool(req: RemotingCommand, key: str) -> bool:
    return req.ext_fields.get(key, "").strip().lower() == "true"


def _addr(req: RemotingCommand, key: str) -> str:
    value = _str(req, key, limit=MAX_ADDR_LEN)
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HeaderError(f"the custom field <{key}> is not HOST:PORT: {value[:60]!r}")
    return value


def _ok(req: RemotingCommand, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return req.response(ResponseCode.SUCCESS, None, ext, body)


class NamesrvProcessor:
    """Registers every NameServer request code on a RemotingServer."""

    def __init__(self, routes: RouteInfoManager, kv: KVConfigManager) -> None:
        self.routes = routes
        self.kv = kv

    def register(self, server: RemotingServer) -> None:
        C = RequestCode
        table = {
            C.REGISTER_BROKER: self.register_broker,
            C.UNREGISTER_BROKER: self.unregister_broker,
            C.QUERY_DATA_VERSION: self.query_data_version,
            C.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            C.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            C.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            C.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            C.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            C.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            C.PUT_KV_CONFIG: self.put_kv_config,
            C.GET_KV_CONFIG: self.get_kv_config,
            C.DELETE_KV_CONFIG: self.delete_kv_config,
            C.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
        }
        for code, handler in table.items():
            server.register_processor(code, handler)
        server.on_channel_close(self.on_channel_close)

    def on_channel_close(self, channel: Channel) -> None:
        for addr in self.routes.on_channel_destroy(channel):
            log.info("broker %s removed: its connection %s closed", addr, channel.remote_addr)

    # -- brokers -----------------------------------------------------------------------------
    def register_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        broker_name = _str(req, "brokerName")
        broker_addr = _addr(req, "brokerAddr")
        cluster_name = _str(req, "clusterName")
        ha_server_addr = _str(req, "haServerAddr", required=False, limit=MAX_ADDR_LEN)
        broker_id = _int(req, "brokerId")
        compressed = _bool(req, "compressed")
        crc = _int(req, "bodyCrc32", 0)
        body = req.body_bytes
        if crc != 0 and body_crc32(body) != crc:
            log.warning(
                "register from %s: body crc32 %d does not match header %d",
                ch.remote_addr,
                body_crc32(body),
                crc,
            )
            return req.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if body:
            try:
                reg = RegisterBrokerBody.decode_body(body, compressed)
            except ProtocolError as exc:
                return req.response(ResponseCode.SYSTEM_ERROR, f"bad register broker body: {exc}")
            wrapper = reg.topic_config_serialize_wrapper
            filters = reg.filter_server_list
            for name in wrapper.topic_config_table:
                if not name or len(name) > MAX_NAME_LEN:
                    return req.response(ResponseCode.SYSTEM_ERROR, f"invalid topic name {name[:60]!r}")
        else:
            wrapper = TopicConfigSerializeWrapper({}, DataVersion())
            filters = []
        result = self.routes.register_broker(
            cluster_name, broker_addr, broker_name, broker_id, ha_server_addr, wrapper, filters, ch
        )
        ext: dict[str, str] = {}
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        order = self.kv.list_namespace(ORDER_TOPIC_CONFIG)
        return _ok(req, ext, KVTable(order).encode() if order else b"")

    def unregister_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        self.routes.unregister_broker(
            _str(req, "clusterName"), _addr(req, "brokerAddr"), _str(req, "brokerName"), _int(req, "brokerId")
        )
        return _ok(req)

    def query_data_version(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        broker_addr = _addr(req, "brokerAddr")
        try:
            version = DataVersion.decode(req.body_bytes) if req.body else DataVersion()
        except ProtocolError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"bad data version body: {exc}")
        changed, held = self.routes.query_data_version(broker_addr, version)
        return _ok(req, {"changed": "true" if changed else "false"}, held.encode() if held else b"")

    # -- routes ------------------------------------------------------------------------------
    def get_route_info_by_topic(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        topic = _str(req, "topic")
        route = self.routes.pick_topic_route_data(topic)
        if route is None:
            return req.response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
            )
        route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, topic)
        # Standard JSON for every client version (Java ≥ 4.9.4, ali-ons and Go parse it).
        return _ok(req, body=route.encode())

    def get_broker_cluster_info(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=self.routes.get_all_cluster_info().encode())

    def get_all_topic_list(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=self.routes.get_all_topic_list().encode())

    def get_topics_by_cluster(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=self.routes.get_topics_by_cluster(_str(req, "cluster")).encode())

    def delete_topic(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        self.routes.delete_topic(_str(req, "topic"), _str(req, "clusterName", required=False) or None)
        return _ok(req)

    def wipe_write_perm(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.wipe_write_perm_of_broker(_str(req, "brokerName"))
        return _ok(req, {"wipeTopicCount": str(count)})

    def add_write_perm(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.add_write_perm_of_broker(_str(req, "brokerName"))
        return _ok(req, {"addTopicCount": str(count)})

    # -- KV config ---------------------------------------------------------------------------
    async def put_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        namespace, key = _str(req, "namespace"), _str(req, "key", limit=1024)
        value = req.ext_fields.get("value")
        if value is None:
            raise HeaderError("the custom field <value> is null")
        self.kv.put(namespace, key, value)
        await self.kv.persist()
        return _ok(req)

    def get_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        namespace, key = _str(req, "namespace"), _str(req, "key", limit=1024)
        value = self.kv.get(namespace, key)
        if value is None:
            return req.response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}"
            )
        return _ok(req, {"value": value})

    async def delete_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        if self.kv.delete(_str(req, "namespace"), _str(req, "key", limit=1024)):
            await self.kv.persist()
        return _ok(req)

    def get_kv_list_by_namespace(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        namespace = _str(req, "namespace")
        table = self.kv.list_namespace(namespace)
        if table is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return _ok(req, body=KVTable(table).encode())


__all__ = ["MASTER_ID", "ORDER_TOPIC_CONFIG", "HeaderError", "NamesrvProcessor"]
