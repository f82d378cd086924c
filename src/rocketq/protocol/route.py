"""NameServer bodies: topic routes, topic configs, broker registration, cluster info, topic lists, KV tables.

JSON names follow RocketMQ 4.9.x. ``encode()`` writes standard JSON (modern Java, ali-ons and Go clients
parse it); ``decode()`` is lenient (fastjson's unquoted numeric keys, unknown fields ignored, missing
fields defaulted).
"""

from __future__ import annotations

import struct
import zlib

import orjson

from ._jsonmodel import JsonModel, jfield, json_model
from .codes import PERM_READ, PERM_WRITE
from .crc import body_crc as body_crc32  # the name the register header's field uses
from .frame import ProtocolError
from .lenient_json import loads

MASTER_ID = 0
DEFAULT_TOPIC_FILTER_TYPE = "SINGLE_TAG"
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")

__all__ = [
    "MASTER_ID",
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "KVTable",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicRouteData",
    "body_crc32",
]


@json_model
class QueueData(JsonModel):
    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = PERM_READ | PERM_WRITE
    # Java releases before 4.9 spelled it "topicSynFlag".
    topic_sys_flag: int = jfield(default=0, aliases=("topicSynFlag",))

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


@json_model
class BrokerData(JsonModel):
    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = jfield(default_factory=dict)  # brokerId -> "ip:port"; 0 = master

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_addr(self) -> str | None:
        """The master if present, else the lowest-id slave."""
        addr = self.broker_addrs.get(MASTER_ID)
        if addr is None and self.broker_addrs:
            addr = self.broker_addrs[min(self.broker_addrs)]
        return addr


@json_model
class TopicRouteData(JsonModel):
    broker_datas: list[BrokerData] = jfield(default_factory=list)
    queue_datas: list[QueueData] = jfield(default_factory=list)
    filter_server_table: dict[str, list[str]] = jfield(default_factory=dict)
    order_topic_conf: str | None = None  # "brokerA:4;brokerB:4"


@json_model
class TopicConfig(JsonModel):
    topic_name: str = ""
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = DEFAULT_TOPIC_FILTER_TYPE
    topic_sys_flag: int = 0
    order: bool = False

    def encode_compact(self) -> str:
        """Space-separated form used by the compressed RegisterBrokerBody (loses sysFlag and order)."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type}"
        )

    @classmethod
    def decode_compact(cls, text: str) -> TopicConfig:
        # 5.x appends the topic attributes as JSON (which may itself contain spaces): ignore it.
        parts = text.split(" ", 5)
        if len(parts) < 5:
            raise ProtocolError(f"compact topic config needs 5 fields, got {len(parts)}")
        name, r, w, perm, filter_type = parts[:5]
        if filter_type not in TOPIC_FILTER_TYPES:
            raise ProtocolError(f"unknown topicFilterType {filter_type[:40]!r}")
        try:
            return cls(name, int(r), int(w), int(perm), filter_type)
        except ValueError:
            raise ProtocolError(f"bad number in compact topic config {text[:80]!r}") from None


@json_model
class DataVersion(JsonModel):
    timestamp: int = 0
    counter: int = 0

    def next_version(self, now_ms: int) -> DataVersion:
        return DataVersion(now_ms, self.counter + 1)


@json_model
class TopicConfigSerializeWrapper(JsonModel):
    topic_config_table: dict[str, TopicConfig] = jfield(default_factory=dict)
    data_version: DataVersion = jfield(default_factory=DataVersion)


_I32 = struct.Struct(">i")
MAX_INFLATED_SIZE = 64 * 1024 * 1024
MAX_TOPICS = 1_000_000


@json_model
class RegisterBrokerBody(JsonModel):
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = jfield(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = jfield(default_factory=list)

    @property
    def topic_config_table(self) -> dict[str, TopicConfig]:
        return self.topic_config_serialize_wrapper.topic_config_table

    @property
    def data_version(self) -> DataVersion:
        return self.topic_config_serialize_wrapper.data_version

    def encode_body(self, compressed: bool = False) -> bytes:
        """The REGISTER_BROKER body; ``compressed`` must match the request header's ``compressed`` field."""
        return self.encode_compressed() if compressed else self.encode()

    @classmethod
    def decode_body(
        cls, data: bytes | bytearray | memoryview, compressed: bool = False
    ) -> RegisterBrokerBody:
        return cls.decode_compressed(data) if compressed else cls.decode(data)

    def encode_compressed(self) -> bytes:
        parts: list[bytes] = []

        def put(blob: bytes) -> None:
            parts.append(_I32.pack(len(blob)))
            parts.append(blob)

        put(self.data_version.encode())
        table = self.topic_config_table
        parts.append(_I32.pack(len(table)))
        for cfg in table.values():
            put(cfg.encode_compact().encode())
        put(orjson.dumps(self.filter_server_list))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode_compressed(cls, data: bytes | bytearray | memoryview) -> RegisterBrokerBody:
        raw = _inflate(data)
        pos = 0

        def take_int() -> int:
            nonlocal pos
            if pos + 4 > len(raw):
                raise ProtocolError("compressed register body truncated")
            (n,) = _I32.unpack_from(raw, pos)
            pos += 4
            return n

        def take_blob() -> bytes:
            nonlocal pos
            n = take_int()
            if n < 0 or pos + n > len(raw):
                raise ProtocolError("compressed register body: length out of bounds")
            blob = raw[pos : pos + n]
            pos += n
            return blob

        version = DataVersion.decode(take_blob())
        count = take_int()
        if count < 0 or count > MAX_TOPICS:
            raise ProtocolError(f"compressed register body: bad topic count {count}")
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            try:
                text = take_blob().decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolError("compressed register body: topic config is not UTF-8") from None
            cfg = TopicConfig.decode_compact(text)
            table[cfg.topic_name] = cfg
        servers = loads(take_blob())
        if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
            raise ProtocolError("compressed register body: filterServerList is not a list of strings")
        return cls(TopicConfigSerializeWrapper(table, version), servers)


def _inflate(data: bytes | bytearray | memoryview) -> bytes:
    """zlib-inflate (Java's DeflaterOutputStream writes the zlib wrapper) with a bound on the output."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(bytes(data), MAX_INFLATED_SIZE)
    except zlib.error as exc:
        raise ProtocolError(f"compressed register body: {exc}") from None
    if d.unconsumed_tail:
        raise ProtocolError(f"compressed register body inflates beyond {MAX_INFLATED_SIZE} bytes")
    if not d.eof:
        raise ProtocolError("compressed register body: truncated deflate stream")
    return out


@json_model
class ClusterInfo(JsonModel):
    broker_addr_table: dict[str, BrokerData] = jfield(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = jfield(default_factory=dict)


@json_model
class TopicList(JsonModel):
    topic_list: set[str] = jfield(default_factory=set)
    broker_addr: str | None = None


@json_model
class KVTable(JsonModel):
    table: dict[str, str] = jfield(default_factory=dict)
