"""Decoding of stored message records (pull / view / query bodies) into :class:`StoredMessage`.

A small self-contained reader so the admin tool does not depend on the client library; it accepts the
V1 layout with IPv4 or IPv6 hosts and stops at the first record it cannot decode (as 4.x clients do).
"""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass, field

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20

_HEAD = struct.Struct(">iiiiiqqiq")  # size, magic, crc, queueId, flag, queueOffset, physOffset, sysFlag, born
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">H")
_ID = struct.Struct(">4siq")


@dataclass(slots=True)
class StoredMessage:
    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    store_size: int
    body_crc: int
    prepared_transaction_offset: int
    offset_msg_id: str = ""
    broker_name: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def msg_id(self) -> str:
        """What Java's ``getMsgId()`` returns: the UNIQ_KEY when present, else the offsetMsgId."""
        return self.properties.get("UNIQ_KEY") or self.offset_msg_id


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for seg in text.split("\x02"):
        if len(seg) < 3:
            continue
        k, sep, v = seg.partition("\x01")
        if sep:
            props[k] = v
    return props


def encode_properties(props: dict[str, str]) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in props.items())


def _host(buf: memoryview, pos: int, v6: bool) -> tuple[str, int]:
    n = 16 if v6 else 4
    ip = socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, bytes(buf[pos : pos + n]))
    (port,) = _I32.unpack_from(buf, pos + n)
    return (f"[{ip}]:{port}" if v6 else f"{ip}:{port}"), pos + n + 4


def offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """32 hex chars: IPv4(4) + port(int32) + commit log offset(int64)."""
    host, _, port = store_host.rpartition(":")
    try:
        ip = socket.inet_aton(host)
    except OSError:
        ip = b"\0\0\0\0"
    return _ID.pack(ip, int(port or 0), commit_log_offset).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(broker address, commit log offset) of an offsetMsgId; ValueError if it is not one."""
    msg_id = msg_id.strip()
    if len(msg_id) == 32:
        ip, port, offset = _ID.unpack(bytes.fromhex(msg_id))
        return f"{socket.inet_ntoa(ip)}:{port}", offset
    if len(msg_id) == 56:  # IPv6 store host
        raw = bytes.fromhex(msg_id)
        ip6 = socket.inet_ntop(socket.AF_INET6, raw[:16])
        (port,) = _I32.unpack_from(raw, 16)
        (offset,) = _I64.unpack_from(raw, 20)
        return f"[{ip6}]:{port}", offset
    raise ValueError(f"not an offsetMsgId (expected 32 hex characters): {msg_id!r}")


def decode_records(data: bytes | bytearray | memoryview, *, decompress: bool = True) -> list[StoredMessage]:
    buf = memoryview(data)
    out: list[StoredMessage] = []
    pos = 0
    total = len(buf)
    while total - pos >= _HEAD.size:
        try:
            msg, size = _decode_one(buf, pos, decompress)
        except (struct.error, ValueError, UnicodeDecodeError, zlib.error, OSError):
            break
        out.append(msg)
        pos += size
    return out


def _decode_one(buf: memoryview, start: int, decompress: bool) -> tuple[StoredMessage, int]:
    size, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = _HEAD.unpack_from(buf, start)
    if magic not in (MAGIC_V1, MAGIC_V2) or size <= 0 or start + size > len(buf):
        raise ValueError("bad record")
    pos = start + _HEAD.size
    born_host, pos = _host(buf, pos, bool(sys_flag & SYSFLAG_BORNHOST_V6))
    (store_ts,) = _I64.unpack_from(buf, pos)
    pos += 8
    store_host, pos = _host(buf, pos, bool(sys_flag & SYSFLAG_STOREHOST_V6))
    (reconsume,) = _I32.unpack_from(buf, pos)
    (prepared,) = _I64.unpack_from(buf, pos + 4)
    (body_len,) = _I32.unpack_from(buf, pos + 12)
    pos += 16
    if body_len < 0 or pos + body_len > start + size:
        raise ValueError("bad body length")
    body = bytes(buf[pos : pos + body_len])
    pos += body_len
    if magic == MAGIC_V2:
        (topic_len,) = _I16.unpack_from(buf, pos)
        pos += 2
    else:
        topic_len = buf[pos]
        pos += 1
    topic = bytes(buf[pos : pos + topic_len]).decode()
    pos += topic_len
    (props_len,) = _I16.unpack_from(buf, pos)
    pos += 2
    props = parse_properties(bytes(buf[pos : pos + props_len]).decode())
    if decompress and sys_flag & SYSFLAG_COMPRESSED and body:
        body = zlib.decompress(body)
    msg = StoredMessage(
        topic=topic,
        body=body,
        properties=props,
        queue_id=queue_id,
        queue_offset=queue_offset,
        commit_log_offset=phys,
        sys_flag=sys_flag,
        flag=flag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=store_host,
        reconsume_times=reconsume,
        store_size=size,
        body_crc=crc,
        prepared_transaction_offset=prepared,
    )
    msg.offset_msg_id = offset_msg_id(store_host, phys) if not store_host.startswith("[") else ""
    return msg, size
