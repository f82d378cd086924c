"""Client-side message codecs: property strings, pull-body records, batch bodies, compression, ids.

Kept inside the client so it depends only on the record layout (specs/remoting-v4.md §5), not on the
storage engine's internals.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from datetime import datetime

from .message import PROPERTY_UNIQ_KEY, Message, MessageExt

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_COMPRESSION_MASK = 0x700
SYSFLAG_ZLIB = 3 << 8
SYSFLAG_LZ4 = 1 << 8
SYSFLAG_ZSTD = 2 << 8

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477

_HEAD = struct.Struct(">iiiiiqqiq")  # size, magic, crc, qid, flag, qoffset, phyoffset, sysflag, born
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_HOST4 = struct.Struct(">4si")
_BATCH_HEAD = struct.Struct(">iiiii")


def properties_to_string(props: Mapping[str, str]) -> str:
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def string_to_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if not text:
        return out
    for seg in text.split(PROPERTY_SEPARATOR):
        if len(seg) < 3:
            continue
        k, sep, v = seg.partition(NAME_VALUE_SEPARATOR)
        if sep and k:
            out[k] = v
    return out


# -- ids ---------------------------------------------------------------------------------------------------
def offset_msg_id(store_ip: bytes, store_port: int, commit_log_offset: int) -> str:
    """storeHost(4) + port(int32) + commitLogOffset(int64) as uppercase hex (32 chars for IPv4)."""
    return (store_ip + _I32.pack(store_port) + _I64.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """offsetMsgId → ("ip:port", commitLogOffset)."""
    raw = bytes.fromhex(msg_id)
    if len(raw) == 16:
        ip = socket.inet_ntoa(raw[:4])
        (port,) = _I32.unpack_from(raw, 4)
        (off,) = _I64.unpack_from(raw, 8)
    elif len(raw) == 28:
        ip = "[" + socket.inet_ntop(socket.AF_INET6, raw[:16]) + "]"
        (port,) = _I32.unpack_from(raw, 16)
        (off,) = _I64.unpack_from(raw, 20)
    else:
        raise ValueError(f"not an offsetMsgId: {msg_id!r}")
    return f"{ip}:{port}", off


def _local_ip() -> bytes:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; picks the outgoing interface
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


def local_ip_str() -> str:
    return socket.inet_ntoa(_local_ip())


class UniqIdGenerator:
    """MessageClientIDSetter: ip(4) + pid(int16) + instance hash(int32) + ms since month start(int32) +
    counter(int16), 32 uppercase hex chars. Thread-safe."""

    def __init__(self) -> None:
        fix = _local_ip() + struct.pack(">hi", os.getpid() & 0x7FFF, id(self) & 0x7FFFFFFF)
        self._prefix = fix.hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._set_start(time.time())

    def _set_start(self, now_s: float) -> None:
        dt = datetime.fromtimestamp(now_s)
        start = dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        self._start_ms = int(start.timestamp() * 1000)
        nxt = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        self._next_start_ms = int(nxt.timestamp() * 1000)

    def next_id(self) -> str:
        now_ms = int(time.time() * 1000)
        with self._lock:
            if now_ms >= self._next_start_ms:
                self._set_start(now_ms / 1000)
            n = next(self._counter) & 0xFFFF
            diff = (now_ms - self._start_ms) & 0xFFFFFFFF
        return self._prefix + f"{diff:08X}{n:04X}"


UNIQ_IDS = UniqIdGenerator()


# -- compression ------------------------------------------------------------------------------------------
def compress_body(body: bytes, level: int = 5) -> bytes:
    return zlib.compress(body, level)


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    ctype = sys_flag & SYSFLAG_COMPRESSION_MASK
    if ctype in (0, SYSFLAG_ZLIB):
        return zlib.decompress(body)
    if ctype == SYSFLAG_LZ4:
        import lz4.frame  # optional

        return lz4.frame.decompress(body)
    if ctype == SYSFLAG_ZSTD:
        import zstandard  # optional

        return zstandard.ZstdDecompressor().decompress(body)
    raise ValueError(f"unknown compression type in sysFlag {sys_flag:#x}")


# -- records -----------------------------------------------------------------------------------------------
def decode_records(data: bytes | bytearray | memoryview, broker_name: str = "") -> list[MessageExt]:
    """Decode the concatenated message records of a pull / query body. Stops at the first record that does
    not decode (like RocketMQ's clients)."""
    view = memoryview(data)
    n = len(view)
    pos = 0
    out: list[MessageExt] = []
    while n - pos >= _HEAD.size:
        try:
            msg, size = _decode_one(view, pos, n, broker_name)
        except (struct.error, ValueError, UnicodeDecodeError, zlib.error):
            break
        if msg is None:
            break
        out.append(msg)
        pos += size
    return out


def _decode_one(view: memoryview, pos: int, n: int, broker_name: str) -> tuple[MessageExt | None, int]:
    size, magic, crc, qid, flag, qoff, phy, sysflag, born = _HEAD.unpack_from(view, pos)
    if size <= 0 or pos + size > n or magic not in (MAGIC_V1, MAGIC_V2):
        return None, 0
    end = pos + size
    p = pos + _HEAD.size
    if sysflag & SYSFLAG_BORNHOST_V6:
        born_ip = socket.inet_ntop(socket.AF_INET6, bytes(view[p : p + 16]))
        (born_port,) = _I32.unpack_from(view, p + 16)
        p += 20
    else:
        bip, born_port = _HOST4.unpack_from(view, p)
        born_ip = socket.inet_ntoa(bip)
        p += 8
    (store_ts,) = _I64.unpack_from(view, p)
    p += 8
    if sysflag & SYSFLAG_STOREHOST_V6:
        store_ip_raw = bytes(view[p : p + 16])
        store_ip = "[" + socket.inet_ntop(socket.AF_INET6, store_ip_raw) + "]"
        (store_port,) = _I32.unpack_from(view, p + 16)
        p += 20
    else:
        store_ip_raw, store_port = _HOST4.unpack_from(view, p)
        store_ip = socket.inet_ntoa(store_ip_raw)
        p += 8
    (reconsume,) = _I32.unpack_from(view, p)
    (prep,) = _I64.unpack_from(view, p + 4)
    p += 12
    (blen,) = _I32.unpack_from(view, p)
    p += 4
    if blen < 0 or p + blen > end:
        return None, 0
    body = bytes(view[p : p + blen])
    p += blen
    if magic == MAGIC_V2:
        (tlen,) = _I16.unpack_from(view, p)
        p += 2
    else:
        tlen = view[p]
        p += 1
    topic = bytes(view[p : p + tlen]).decode()
    p += tlen
    (plen,) = _I16.unpack_from(view, p)
    p += 2
    if plen < 0 or p + plen > end:
        return None, 0
    props = string_to_properties(bytes(view[p : p + plen]).decode()) if plen else {}
    if sysflag & SYSFLAG_COMPRESSED:
        body = decompress_body(body, sysflag)
    m = MessageExt(topic, body, props)
    m.store_size = size
    m.body_crc = crc
    m.queue_id = qid
    m.flag = flag
    m.queue_offset = qoff
    m.commit_log_offset = phy
    m.sys_flag = sysflag
    m.born_timestamp = born
    m.born_host = f"{born_ip}:{born_port}"
    m.store_timestamp = store_ts
    m.store_host = f"{store_ip}:{store_port}"
    m.reconsume_times = reconsume
    m.prepared_transaction_offset = prep
    m.broker_name = broker_name
    m.offset_msg_id = offset_msg_id(store_ip_raw, store_port, phy)
    m.msg_id = props.get(PROPERTY_UNIQ_KEY) or m.offset_msg_id
    return m, size


# -- batch -------------------------------------------------------------------------------------------------
def encode_batch_item(body: bytes, flag: int, props: str) -> bytes:
    pb = props.encode()
    total = _BATCH_HEAD.size + len(body) + 2 + len(pb)
    return b"".join((_BATCH_HEAD.pack(total, 0, 0, flag, len(body)), body, _I16.pack(len(pb)), pb))


def encode_batch(messages: Sequence[Message], prop_strings: Sequence[str]) -> bytes:
    return b"".join(encode_batch_item(m.body, m.flag, p) for m, p in zip(messages, prop_strings, strict=True))


def batch_item_size(body_len: int, props: str) -> int:
    return _BATCH_HEAD.size + body_len + 2 + len(props.encode())
