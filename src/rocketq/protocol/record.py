"""The 17-field message record (spec §5): CommitLog entries, pull / query / view-by-id bodies.

Encoding writes straight into a writable buffer (the CommitLog mmap) with precompiled Structs; the body is
copied exactly once (into the buffer). Decoding reads from a memoryview and never copies the body: the
returned MessageExt holds a slice of the caller's buffer, so keep that buffer alive while you use it.

Layout (big-endian), offsets for IPv4 hosts:
  0 TOTALSIZE i | 4 MAGICCODE i | 8 BODYCRC i | 12 QUEUEID i | 16 FLAG i | 20 QUEUEOFFSET q
  28 PHYSICALOFFSET q | 36 SYSFLAG i | 40 BORNTIMESTAMP q | 48 BORNHOST 4s+i | 56 STORETIMESTAMP q
  64 STOREHOST 4s+i | 72 RECONSUMETIMES i | 76 PREPARED_TRANSACTION_OFFSET q | 84 BODYLEN i | 88 BODY
  then TOPICLEN b + TOPIC, PROPERTIESLEN h + PROPERTIES.          size = 91 + body + topic + properties
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Iterable

from . import sysflag as sf
from .crc import crc32
from .frame import ProtocolError
from .message_id import encode_offset_msg_id
from .properties import (
    MAX_PROPERTIES_LENGTH,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    decode_properties,
    split_keys,
)

MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
MAGIC_CODE_V2 = -626843477  # 0xDAA320AB (5.x: int16 topic length)
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194: end of a CommitLog file
END_FILE_MIN_BLANK_LENGTH = 8  # TOTALSIZE + MAGICCODE of the blank record

HEADER = struct.Struct(">iiiiiqqiq4siq4siiqi")  # fields 1..14 + BODYLEN, IPv4 hosts
HEADER_SIZE = HEADER.size  # 88
FIXED_SIZE = HEADER_SIZE + 1 + 2  # 91: + topic length byte + properties length
BLANK = struct.Struct(">ii")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TOPIC_PROPS = struct.Struct(">B")
_PROPS_LEN = struct.Struct(">h")
_OFFSET_MSG_ID = struct.Struct(">4siq")
_MAX_TOPIC_LENGTH_V1 = 127

# Field offsets used by readers that only need one field (recovery, dispatch, time search).
POS_TOTAL_SIZE = 0
POS_MAGIC = 4
POS_BODY_CRC = 8
POS_QUEUE_ID = 12
POS_QUEUE_OFFSET = 20
POS_PHYSICAL_OFFSET = 28
POS_SYS_FLAG = 36
POS_BORN_TIMESTAMP = 40
POS_STORE_TIMESTAMP = 56  # IPv4 born host only; use store_timestamp_pos() otherwise


def record_size(body_len: int, topic_len: int, props_len: int) -> int:
    return FIXED_SIZE + body_len + topic_len + props_len


def store_timestamp_pos(sys_flag: int) -> int:
    return 56 if not sys_flag & sf.BORNHOST_V6_FLAG else 68


_ip_cache: dict[str, bytes] = {}


def ip4_bytes(host: str) -> bytes:
    """4-byte IPv4 address of a host string (cached; non-IPv4 maps to 0.0.0.0: records stay IPv4)."""
    b = _ip_cache.get(host)
    if b is None:
        try:
            b = socket.inet_aton(host)
        except OSError:
            if host.startswith("::ffff:"):
                try:
                    b = socket.inet_aton(host[7:])
                except OSError:
                    b = b"\0\0\0\0"
            else:
                b = b"\0\0\0\0"
        if len(_ip_cache) > 4096:
            _ip_cache.clear()
        _ip_cache[host] = b
    return b


def encode_record_into(
    buf,
    pos: int,
    body,
    topic_bytes: bytes,
    props_bytes: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    phys_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_ip4: bytes,
    born_port: int,
    store_timestamp: int,
    store_ip4: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    crc: int | None = None,
) -> int:
    """Write one V1/IPv4 record at buf[pos:]; returns its size. The caller checked that it fits.

    Positional on purpose (hot path). ``crc`` may be passed when already known (batches re-encoded).
    """
    blen = len(body)
    tlen = len(topic_bytes)
    plen = len(props_bytes)
    size = FIXED_SIZE + blen + tlen + plen
    if crc is None:
        crc = crc32(body) & 0x7FFFFFFF
    HEADER.pack_into(
        buf,
        pos,
        size,
        MAGIC_CODE_V1,
        crc,
        queue_id,
        flag,
        queue_offset,
        phys_offset,
        sys_flag & ~(sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG),
        born_timestamp,
        born_ip4,
        born_port,
        store_timestamp,
        store_ip4,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        blen,
    )
    p = pos + HEADER_SIZE
    buf[p : p + blen] = body
    p += blen
    buf[p] = tlen
    p += 1
    buf[p : p + tlen] = topic_bytes
    p += tlen
    _PROPS_LEN.pack_into(buf, p, plen)
    if plen:
        buf[p + 2 : p + 2 + plen] = props_bytes
    return size


def encode_record(
    body,
    topic: str,
    properties: bytes | str = b"",
    *,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    phys_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """Convenience (tests, tools): a standalone record as bytes."""
    tb = topic.encode()
    pb = properties.encode() if isinstance(properties, str) else properties
    if len(tb) > _MAX_TOPIC_LENGTH_V1 or len(pb) > MAX_PROPERTIES_LENGTH:
        raise ValueError("topic or properties too long for a V1 record")
    out = bytearray(record_size(len(body), len(tb), len(pb)))
    encode_record_into(
        out, 0, body, tb, pb, queue_id, flag, queue_offset, phys_offset, sys_flag, born_timestamp,
        ip4_bytes(born_host[0]), born_host[1], store_timestamp, ip4_bytes(store_host[0]), store_host[1],
        reconsume_times, prepared_transaction_offset,
    )  # fmt: skip
    return bytes(out)


class MessageExt:
    """A decoded record. ``body`` is a memoryview into the decoded buffer (no copy);
    ``properties`` is parsed on first access."""

    __slots__ = (
        "_props",
        "_props_raw",
        "body",
        "body_crc",
        "born_host",
        "born_timestamp",
        "commit_log_offset",
        "flag",
        "magic",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
        "topic",
    )

    def __init__(self) -> None:
        self._props: dict[str, str] | None = None

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            self._props = decode_properties(self._props_raw) if len(self._props_raw) else {}
        return self._props

    @property
    def properties_raw(self) -> memoryview:
        return self._props_raw

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.properties.get(PROPERTY_KEYS))

    @property
    def offset_msg_id(self) -> str:
        host, port = self.store_host
        return encode_offset_msg_id(host, port, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """What Java's getMsgId() returns: UNIQ_KEY when present, else the offsetMsgId."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    def decompressed_body(self) -> bytes:
        return decompress_body(self.body, self.sys_flag)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"commit_log_offset={self.commit_log_offset}, size={self.store_size})"
        )


def _host(view: memoryview, pos: int, v6: bool) -> tuple[tuple[str, int], int]:
    if v6:
        ip = socket.inet_ntop(socket.AF_INET6, bytes(view[pos : pos + 16]))
        return (ip, _I32.unpack_from(view, pos + 16)[0]), pos + 20
    ip = socket.inet_ntoa(bytes(view[pos : pos + 4]))
    return (ip, _I32.unpack_from(view, pos + 4)[0]), pos + 8


def decode_record(view, pos: int = 0, verify_crc: bool = False) -> MessageExt:
    """Decode the record at view[pos:]. Raises ProtocolError if it is not a complete, sane record."""
    if not isinstance(view, memoryview):
        view = memoryview(view)
    end = len(view)
    if end - pos < FIXED_SIZE:
        raise ProtocolError("truncated record header")
    size, magic = BLANK.unpack_from(view, pos)
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        raise ProtocolError(f"bad record magic {magic:#x}")
    if size < FIXED_SIZE or size > end - pos:
        raise ProtocolError(f"bad record size {size}")
    m = MessageExt()
    m.magic = magic
    m.store_size = size
    sys_flag = _I32.unpack_from(view, pos + POS_SYS_FLAG)[0]
    if not sys_flag & (sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG):
        (
            _,
            _,
            m.body_crc,
            m.queue_id,
            m.flag,
            m.queue_offset,
            m.commit_log_offset,
            m.sys_flag,
            m.born_timestamp,
            bip,
            bport,
            m.store_timestamp,
            sip,
            sport,
            m.reconsume_times,
            m.prepared_transaction_offset,
            blen,
        ) = HEADER.unpack_from(view, pos)
        m.born_host = (socket.inet_ntoa(bip), bport)
        m.store_host = (socket.inet_ntoa(sip), sport)
        p = pos + HEADER_SIZE
    else:
        # IPv6 hosts make the fixed part 12 bytes longer each: check it fits before reading it
        fixed = (
            FIXED_SIZE
            + 12 * bool(sys_flag & sf.BORNHOST_V6_FLAG)
            + 12 * bool(sys_flag & sf.STOREHOST_ADDRESS_V6_FLAG)
        )
        if size < fixed:
            raise ProtocolError(f"bad record size {size} for its IPv6 hosts")
        m.body_crc, m.queue_id, m.flag = struct.unpack_from(">iii", view, pos + 8)
        m.queue_offset, m.commit_log_offset = struct.unpack_from(">qq", view, pos + 20)
        m.sys_flag = sys_flag
        m.born_timestamp = _I64.unpack_from(view, pos + 40)[0]
        m.born_host, p = _host(view, pos + 48, bool(sys_flag & sf.BORNHOST_V6_FLAG))
        m.store_timestamp = _I64.unpack_from(view, p)[0]
        m.store_host, p = _host(view, p + 8, bool(sys_flag & sf.STOREHOST_ADDRESS_V6_FLAG))
        m.reconsume_times, m.prepared_transaction_offset, blen = struct.unpack_from(">iqi", view, p)
        p += 16
    rec_end = pos + size
    if blen < 0 or p + blen > rec_end:
        raise ProtocolError("bad body length")
    m.body = view[p : p + blen]
    p += blen
    if magic == MAGIC_CODE_V1:
        if p + 1 > rec_end:
            raise ProtocolError("truncated topic length")
        tlen = view[p]
        p += 1
    else:
        if p + 2 > rec_end:
            raise ProtocolError("truncated topic length")
        tlen = _I16.unpack_from(view, p)[0]
        p += 2
    if tlen < 0 or p + tlen + 2 > rec_end:
        raise ProtocolError("bad topic length")
    try:
        m.topic = str(view[p : p + tlen], "utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError("topic is not UTF-8") from e
    p += tlen
    plen = _I16.unpack_from(view, p)[0]
    p += 2
    if plen < 0 or p + plen != rec_end:
        raise ProtocolError("bad properties length")
    m._props_raw = view[p : p + plen]
    if verify_crc and (crc32(m.body) & 0x7FFFFFFF) != m.body_crc:
        raise ProtocolError("body CRC mismatch")
    return m


def decode_records(buffer, verify_crc: bool = False) -> list[MessageExt]:
    """All records of a pull/query body; ProtocolError on any corruption (servers, tests)."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    out: list[MessageExt] = []
    pos, end = 0, len(view)
    while pos < end:
        m = decode_record(view, pos, verify_crc)
        out.append(m)
        pos += m.store_size
    return out


def decode_records_lenient(buffer, verify_crc: bool = False) -> list[MessageExt]:
    """Client behaviour: stop silently at the first record that fails to decode."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    out: list[MessageExt] = []
    pos, end = 0, len(view)
    while pos < end:
        try:
            m = decode_record(view, pos, verify_crc)
        except ProtocolError:
            break
        out.append(m)
        pos += m.store_size
    return out


# --- batch send body (request code 320) ---

_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic 0, bodyCRC 0, flag, bodyLen


class BatchMessage:
    """One inner message of a batch body; ``body`` is a memoryview into the batch body."""

    __slots__ = ("body", "flag", "properties", "properties_raw")

    def __init__(self, body, flag: int, properties_raw) -> None:
        self.body = body
        self.flag = flag
        self.properties_raw = properties_raw
        self.properties = decode_properties(properties_raw) if len(properties_raw) else {}

    def __repr__(self) -> str:
        return f"BatchMessage(flag={self.flag}, body={bytes(self.body)!r}, properties={self.properties!r})"


def encode_batch(messages: Iterable[tuple[bytes, int, dict[str, str] | str]]) -> bytes:
    """(body, flag, properties) per inner message -> batch body."""
    from .properties import properties_to_string

    parts: list[bytes] = []
    for body, flag, props in messages:
        pb = (props if isinstance(props, str) else properties_to_string(props)).encode()
        if len(pb) > MAX_PROPERTIES_LENGTH:
            raise ValueError("properties too long")
        parts.append(_BATCH_HEAD.pack(22 + len(body) + len(pb), 0, 0, flag, len(body)))
        parts.append(bytes(body))
        parts.append(_I16.pack(len(pb)))
        parts.append(pb)
    return b"".join(parts)


def decode_batch(buffer) -> list[BatchMessage]:
    """Inner messages of a batch body; ProtocolError on malformed input."""
    return [BatchMessage(body, flag, props) for body, flag, props in decode_batch_raw(buffer)]


def decode_batch_raw(buffer) -> list[tuple[memoryview, int, memoryview]]:
    """(body, flag, property bytes) of each inner message, views into the batch body, properties not
    parsed; ProtocolError on malformed input."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    out: list[tuple[memoryview, int, memoryview]] = []
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < 22:
            raise ProtocolError("truncated batch message")
        total, _magic, _crc, flag, blen = _BATCH_HEAD.unpack_from(view, pos)
        if blen < 0 or total < 22 + blen or pos + total > end:
            raise ProtocolError("bad batch message size")
        p = pos + 20
        body = view[p : p + blen]
        p += blen
        plen = _I16.unpack_from(view, p)[0]
        p += 2
        if plen < 0 or p + plen > pos + total:
            raise ProtocolError("bad batch properties length")
        out.append((body, flag, view[p : p + plen]))
        pos += total
    return out


# --- body compression ---

COMPRESS_LEVEL = 5
COMPRESS_OVER = 4096  # Java 4.x / ali-ons default compressMsgBodyOverHowmuch


def compress_body(body, level: int = COMPRESS_LEVEL) -> tuple[bytes, int]:
    """zlib-compress a body; returns (compressed, sysflag bits to OR in: COMPRESSED | ZLIB)."""
    return zlib.compress(body, level), sf.COMPRESSED_FLAG | sf.COMPRESSION_ZLIB


def decompress_body(body, sys_flag: int) -> bytes:
    """Body as the producer sent it. Honours COMPRESSED with type 0 (old Java) or ZLIB; tolerates raw
    deflate streams. Raises ProtocolError for corrupt data or algorithms we do not ship (LZ4, ZSTD)."""
    if not sys_flag & sf.COMPRESSED_FLAG:
        return bytes(body)
    ctype = sf.compression_type(sys_flag)
    if ctype == sf.COMPRESSION_ZLIB:
        try:
            return zlib.decompress(body)
        except zlib.error:
            try:
                return zlib.decompress(body, -15)
            except zlib.error as e:
                raise ProtocolError(f"corrupt zlib body: {e}") from e
    if ctype == sf.COMPRESSION_ZSTD:
        try:
            import zstandard  # type: ignore[import-not-found]
        except ImportError as e:
            raise ProtocolError("ZSTD body but zstandard is not installed") from e
        return zstandard.ZstdDecompressor().decompress(bytes(body))
    if ctype == sf.COMPRESSION_LZ4:
        try:
            import lz4.frame  # type: ignore[import-not-found]
        except ImportError as e:
            raise ProtocolError("LZ4 body but lz4 is not installed") from e
        return lz4.frame.decompress(bytes(body))
    raise ProtocolError(f"unknown compression type {ctype >> 8}")
