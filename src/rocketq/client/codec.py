"""Client-side message codecs: send-side encoding, pull-body records as client MessageExt, ids.

The wire facts (property strings, record layout, sysflag bits, compression, offsetMsgId) live in
rocketq.protocol; this module adapts them to the client's data model and keeps the names the client exports.
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Callable, Sequence

from rocketq.protocol import sysflag as _sf
from rocketq.protocol.crc import crc32 as _crc32
from rocketq.protocol.message_id import UniqIdGenerator as _UniqIdGenerator
from rocketq.protocol.message_id import decode_offset_msg_id as _decode_offset_msg_id
from rocketq.protocol.properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    properties_to_string,
    string_to_properties,
)
from rocketq.protocol.record import FIXED_SIZE as _FIXED_SIZE
from rocketq.protocol.record import HEADER_SIZE as _HEADER_SIZE
from rocketq.protocol.record import MAGIC_CODE_V1 as MAGIC_V1
from rocketq.protocol.record import MAGIC_CODE_V2 as MAGIC_V2
from rocketq.protocol.record import decode_record, decompress_body, ip4_bytes

from .message import PROPERTY_UNIQ_KEY, Message, MessageExt

__all__ = [
    "MAGIC_V1",
    "MAGIC_V2",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "SYSFLAG_BORNHOST_V6",
    "SYSFLAG_COMPRESSED",
    "SYSFLAG_COMPRESSION_MASK",
    "SYSFLAG_LZ4",
    "SYSFLAG_MULTI_TAGS",
    "SYSFLAG_STOREHOST_V6",
    "SYSFLAG_TRANSACTION_PREPARED",
    "SYSFLAG_ZLIB",
    "SYSFLAG_ZSTD",
    "UNIQ_IDS",
    "UniqIdGenerator",
    "batch_item_size",
    "compress_body",
    "decode_offset_msg_id",
    "decode_records",
    "decompress_body",
    "encode_batch",
    "encode_batch_item",
    "local_ip_str",
    "offset_msg_id",
    "properties_to_string",
    "string_to_properties",
]

SYSFLAG_COMPRESSED = _sf.COMPRESSED_FLAG
SYSFLAG_MULTI_TAGS = _sf.MULTI_TAGS_FLAG
SYSFLAG_TRANSACTION_PREPARED = _sf.TRANSACTION_PREPARED_TYPE
SYSFLAG_BORNHOST_V6 = _sf.BORNHOST_V6_FLAG
SYSFLAG_STOREHOST_V6 = _sf.STOREHOST_ADDRESS_V6_FLAG
SYSFLAG_COMPRESSION_MASK = _sf.COMPRESSION_TYPE_MASK
SYSFLAG_ZLIB = _sf.COMPRESSION_ZLIB
SYSFLAG_LZ4 = _sf.COMPRESSION_LZ4
SYSFLAG_ZSTD = _sf.COMPRESSION_ZSTD
_V6_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
# What decode_records needs of a V1 record header with IPv4 hosts (protocol.record.HEADER without the rest):
# total size, magic, body CRC, queue offset, sysflag, body length. Unpacking all 17 fields costs a dozen int
# objects per message that a draining consumer never reads; the header's bytes are kept for those instead.
_FAST_HEADER = struct.Struct(">iii8xq8xi44xi")
_I64 = struct.Struct(">q")
_BATCH_HEAD = struct.Struct(">iiiii")


# -- ids ---------------------------------------------------------------------------------------------------
def offset_msg_id(store_ip: bytes, store_port: int, commit_log_offset: int) -> str:
    """storeHost(4) + port(int32) + commitLogOffset(int64) as uppercase hex (32 chars for IPv4)."""
    return (store_ip + _I32.pack(store_port) + _I64.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """offsetMsgId → ("ip:port", commitLogOffset); IPv6 hosts in brackets."""
    decoded = _decode_offset_msg_id(msg_id)
    return decoded.addr, decoded.offset


def _local_ip() -> bytes:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; picks the outgoing interface
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


def local_ip_str() -> str:
    return socket.inet_ntoa(_local_ip())


class UniqIdGenerator(_UniqIdGenerator):
    """MessageClientIDSetter ids (32 uppercase hex chars) with this host's IP in the prefix."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(_local_ip())


UNIQ_IDS = UniqIdGenerator()


# -- compression ------------------------------------------------------------------------------------------
def compress_body(body: bytes, level: int = 5) -> bytes:
    return zlib.compress(body, level)


# -- records -----------------------------------------------------------------------------------------------
def decode_records(
    data: bytes | bytearray | memoryview,
    broker_name: str = "",
    extra: dict[str, str] | None = None,
    check_crc: bool = False,
    on_corrupt: Callable[[int, int], None] | None = None,
) -> list[MessageExt]:
    """Decode the concatenated message records of a pull / query body. Stops at the first record that does
    not decode (like RocketMQ's clients). ``extra``: properties every message gets on top of its own
    (PullResult's MIN_OFFSET / MAX_OFFSET), shared by the messages and applied when they are parsed.
    ``check_crc``: a record whose body does not match its BODYCRC is left out (it is whole, so the records
    after it still decode) and reported to ``on_corrupt(queue_offset, commit_log_offset)``.

    Hot path of every consumer: V1 records with IPv4 hosts (what rocketq brokers store) get topic, body and
    queue_offset set and keep the unpacked header for the other fields; properties, tags, keys, msg_id,
    offset_msg_id and the header fields are filled by MessageExt on first access. ``body`` is a bytes slice
    (one copy, users keep bytes)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    n = len(data)
    pos = 0
    out: list[MessageExt] = []
    topics: dict[bytes, str] = {}
    unpack = _FAST_HEADER.unpack_from
    i16 = _I16.unpack_from
    new = object.__new__
    append = out.append
    small_crc, big_crc = zlib.crc32, _crc32  # zlib's call is cheaper below ~512 bytes, isal's above
    view: memoryview | None = None
    while n - pos >= _FIXED_SIZE:
        size, magic, crc, queue_offset, sysflag, body_len = unpack(data, pos)
        end = pos + size
        if magic != MAGIC_V1 or sysflag & _V6_FLAGS or size < _FIXED_SIZE or end > n:
            if view is None:
                view = memoryview(data)
            try:
                msg = _decode_one(view, pos, broker_name)
            except (ValueError, zlib.error):  # ProtocolError and UnicodeDecodeError are ValueErrors
                break
            if check_crc and not _raw_body_ok(view, pos):
                if on_corrupt is not None:
                    on_corrupt(msg.queue_offset, msg.commit_log_offset)
                pos += msg.store_size
                continue
            if extra:
                msg.properties.update(extra)
            append(msg)
            pos += msg.store_size
            continue
        p = pos + _HEADER_SIZE
        q = p + body_len
        if q < p or q + 3 > end:
            break
        t1 = q + 1 + data[q]
        if t1 + 2 + i16(data, t1)[0] != end:  # also rejects a negative length
            break
        tb = data[q + 1 : t1]
        topic = topics.get(tb)
        if topic is None:
            try:
                topic = topics[tb] = tb.decode()
            except UnicodeDecodeError:
                break
        body = data[p:q]
        if check_crc and ((small_crc if body_len < 512 else big_crc)(body) & 0x7FFFFFFF) != crc:
            if on_corrupt is not None:
                on_corrupt(queue_offset, _I64.unpack_from(data, pos + 28)[0])
            pos = end
            continue
        if sysflag & SYSFLAG_COMPRESSED:
            try:
                body = decompress_body(body, sysflag)
            except (ValueError, zlib.error):
                break
        m = new(MessageExt)
        m.topic = topic
        m.body = body
        m.queue_offset = queue_offset
        m._h = data[pos:p]
        m._praw = data[t1 + 2 : end]
        m._pextra = extra
        m.broker_name = broker_name
        append(m)
        pos = end
    return out


def _raw_body_ok(view: memoryview, pos: int) -> bool:
    """The stored (possibly compressed) body of the record at pos against its BODYCRC."""
    r = decode_record(view, pos)
    return (_crc32(r.body) & 0x7FFFFFFF) == r.body_crc


def _decode_one(view: memoryview, pos: int, broker_name: str) -> MessageExt:
    r = decode_record(view, pos)
    sysflag = r.sys_flag
    body = bytes(r.body)
    if sysflag & SYSFLAG_COMPRESSED:
        body = decompress_body(body, sysflag)
    raw = r._props_raw  # the property costs a call per message
    props = string_to_properties(str(raw, "utf-8")) if len(raw) else {}
    m = MessageExt(r.topic, body, props)
    m.store_size = r.store_size
    m.body_crc = r.body_crc
    m.queue_id = r.queue_id
    m.flag = r.flag
    m.queue_offset = r.queue_offset
    m.commit_log_offset = phy = r.commit_log_offset
    m.sys_flag = sysflag
    m.born_timestamp = r.born_timestamp
    born_ip, born_port = r.born_host
    m.born_host = f"{born_ip}:{born_port}"
    m.store_timestamp = r.store_timestamp
    store_ip, store_port = r.store_host
    if sysflag & SYSFLAG_STOREHOST_V6:
        m.store_host = f"[{store_ip}]:{store_port}"
        store_ip_raw = socket.inet_pton(socket.AF_INET6, store_ip)
    else:
        m.store_host = f"{store_ip}:{store_port}"
        store_ip_raw = ip4_bytes(store_ip)
    m.reconsume_times = r.reconsume_times
    m.prepared_transaction_offset = r.prepared_transaction_offset
    m.broker_name = broker_name
    m.offset_msg_id = offset_msg_id(store_ip_raw, store_port, phy)
    m.msg_id = props.get(PROPERTY_UNIQ_KEY) or m.offset_msg_id
    return m


# -- batch -------------------------------------------------------------------------------------------------
def encode_batch_item(body: bytes, flag: int, props: str) -> bytes:
    pb = props.encode()
    total = _BATCH_HEAD.size + len(body) + 2 + len(pb)
    return b"".join((_BATCH_HEAD.pack(total, 0, 0, flag, len(body)), body, _I16.pack(len(pb)), pb))


def encode_batch(messages: Sequence[Message], prop_strings: Sequence[str]) -> bytes:
    return b"".join(encode_batch_item(m.body, m.flag, p) for m, p in zip(messages, prop_strings, strict=True))


def batch_item_size(body_len: int, props: str) -> int:
    return _BATCH_HEAD.size + body_len + 2 + len(props.encode())
