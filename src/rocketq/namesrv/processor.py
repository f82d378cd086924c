"""NameServer request processors: decode headers/bodies, call RouteInfoManager / KVConfigManager.

Handlers are plain functions (run inline on the event loop: all work is in-memory) except the KV
writes, which wait for the file to be persisted before answering. A raised exception becomes a
SYSTEM_ERROR response with the message as remark (done by the remoting layer).
"""

from __future__ import annotations

import logging

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import ProtocolError, RemotingCommand
from rocketq.protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rocketq.protocol.route import (
    MASTER_ID,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    body_crc32,
)
from rocketq.remoting import Channel, RemotingServer

from .config import UPDATABLE_KEYS, NamesrvConfig, parse_properties
from .kvconfig import KVConfigManager
from .route_info import RouteInfoManager

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
MAX_NAME_LEN = 255
MAX_ADDR_LEN = 300


class HeaderError(ValueError):
    pass


def _name(value: str | None, key: str, *, required: bool = True, limit: int = MAX_NAME_LEN) -> str:
    """Bound a name from the wire (typed headers already checked presence and types)."""
    if not value:
        if required:
            raise HeaderError(f"the custom field <{key}> is empty")
        return ""
    if len(value) > limit:
        raise HeaderError(f"the custom field <{key}> is longer than {limit} characters")
    return value


def _addr(value: str, key: str) -> str:
    _name(value, key, limit=MAX_ADDR_LEN)
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HeaderError(f"the custom field <{key}> is not HOST:PORT: {value[:60]!r}")
    return value


def _ok(req: RemotingCommand, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return req.response(ResponseCode.SUCCESS, None, ext, body)


class NamesrvProcessor:
    """Registers every NameServer request code on a RemotingServer."""

    def __init__(
        self, routes: RouteInfoManager, kv: KVConfigManager, config: NamesrvConfig | None = None
    ) -> None:
        self.routes = routes
        self.kv = kv
        self.config = config or NamesrvConfig()

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
            C.GET_UNIT_TOPIC_LIST: lambda ch, req: _ok(req, body=self.routes.get_unit_topics().encode()),
            C.GET_HAS_UNIT_SUB_TOPIC_LIST: lambda ch, req: _ok(
                req, body=self.routes.get_has_unit_sub_topic_list().encode()
            ),
            C.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: lambda ch, req: _ok(
                req, body=self.routes.get_has_unit_sub_un_unit_topic_list().encode()
            ),
            C.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            C.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
        }
        for code, handler in table.items():
            server.register_processor(code, handler)
        server.on_channel_close(self.on_channel_close)

    def on_channel_close(self, channel: Channel) -> None:
        for addr in self.routes.on_channel_destroy(channel):
            log.info("broker %s removed: its connection %s closed", addr, channel.remote_addr)

    # -- brokers -----------------------------------------------------------------------------
    def register_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext(req.ext_fields)
        broker_name = _name(h.broker_name, "brokerName")
        broker_addr = _addr(h.broker_addr, "brokerAddr")
        cluster_name = _name(h.cluster_name, "clusterName")
        ha_server_addr = _name(h.ha_server_addr, "haServerAddr", required=False, limit=MAX_ADDR_LEN)
        broker_id, compressed, crc = h.broker_id, h.compressed, h.body_crc32
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
        ext = RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        ).to_ext()
        order = self.kv.list_namespace(ORDER_TOPIC_CONFIG)
        return _ok(req, ext, KVTable(order).encode() if order else b"")

    def unregister_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = UnregisterBrokerRequestHeader.from_ext(req.ext_fields)
        self.routes.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        return _ok(req)

    def query_data_version(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        broker_addr = QueryDataVersionRequestHeader.from_ext(req.ext_fields).broker_addr
        try:
            version = DataVersion.decode(req.body_bytes) if req.body else DataVersion()
        except ProtocolError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"bad data version body: {exc}")
        changed, held = self.routes.query_data_version(broker_addr, version)
        ext = QueryDataVersionResponseHeader(changed=changed).to_ext()
        return _ok(req, ext, held.encode() if held else b"")

    # -- routes ------------------------------------------------------------------------------
    def get_route_info_by_topic(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        topic = _name(GetRouteInfoRequestHeader.from_ext(req.ext_fields).topic, "topic")
        route = self.routes.pick_topic_route_data(topic)
        if route is None:
            return req.response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
            )
        if self.config.order_message_enable:
            route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, topic)
        # Standard JSON for every client version (Java ≥ 4.9.4, ali-ons and Go parse it).
        return _ok(req, body=route.encode())

    def get_broker_cluster_info(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=self.routes.get_all_cluster_info().encode())

    def get_all_topic_list(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=self.routes.get_all_topic_list().encode())

    def get_topics_by_cluster(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        cluster = GetTopicsByClusterRequestHeader.from_ext(req.ext_fields).cluster
        return _ok(req, body=self.routes.get_topics_by_cluster(cluster).encode())

    def delete_topic(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicFromNamesrvRequestHeader.from_ext(req.ext_fields)
        self.routes.delete_topic(h.topic, h.cluster_name or None)
        return _ok(req)

    def wipe_write_perm(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = WipeWritePermOfBrokerRequestHeader.from_ext(req.ext_fields)
        count = self.routes.wipe_write_perm_of_broker(h.broker_name)
        return _ok(req, WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext())

    def add_write_perm(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = AddWritePermOfBrokerRequestHeader.from_ext(req.ext_fields)
        count = self.routes.add_write_perm_of_broker(h.broker_name)
        return _ok(req, AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext())

    # -- NameServer config (mqadmin getNamesrvConfig / updateNamesrvConfig) ---------------------
    def get_namesrv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=self.config.to_properties().encode())

    def update_namesrv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        try:
            props = parse_properties(req.body_bytes.decode("utf-8"))
        except UnicodeDecodeError:
            return req.response(ResponseCode.SYSTEM_ERROR, "config body is not UTF-8")
        # Only runtime-safe keys from the network; paths and the listen address stay as started.
        unknown = sorted(set(props) - UPDATABLE_KEYS)
        if unknown:
            return req.response(
                ResponseCode.NO_PERMISSION, f"can not update config keys: {', '.join(unknown)[:200]}"
            )
        self.config.apply_properties(props)
        self.routes.broker_channel_expired_s = self.config.broker_channel_expired_s
        return _ok(req)

    # -- KV config ---------------------------------------------------------------------------
    async def put_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = PutKVConfigRequestHeader.from_ext(req.ext_fields)
        self.kv.put(h.namespace, h.key, h.value)
        await self.kv.persist()
        return _ok(req)

    def get_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = GetKVConfigRequestHeader.from_ext(req.ext_fields)
        namespace, key = h.namespace, h.key
        value = self.kv.get(namespace, key)
        if value is None:
            return req.response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}"
            )
        return _ok(req, GetKVConfigResponseHeader(value=value).to_ext())

    async def delete_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = DeleteKVConfigRequestHeader.from_ext(req.ext_fields)
        if self.kv.delete(h.namespace, h.key):
            await self.kv.persist()
        return _ok(req)

    def get_kv_list_by_namespace(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        namespace = GetKVListByNamespaceRequestHeader.from_ext(req.ext_fields).namespace
        table = self.kv.list_namespace(namespace)
        if table is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return _ok(req, body=KVTable(table).encode())


__all__ = ["MASTER_ID", "ORDER_TOPIC_CONFIG", "HeaderError", "NamesrvProcessor"]
