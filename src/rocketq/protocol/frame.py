"""RemotingCommand and the length-prefixed frame codec (sans-IO).

Frame layout (big-endian):
    int32 length        = 4 + headerLen + bodyLen (does not count itself)
    int32 headerMark    = (serializeType << 24) | headerLen
    header              JSON (serializeType 0) or ROCKETMQ binary (1)
    body
"""

from __future__ import annotations

import operator
import re
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from . import wire_header
from .codes import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    SerializeType,
)

MAX_FRAME_SIZE = 16 * 1024 * 1024
MAX_HEADER_SIZE = 4 * 1024 * 1024

_INT = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")

_DECIMAL = re.compile(r"-?[0-9]{1,19}")
_LANG_BY_ORDINAL = {lc.value: lc.name for lc in LanguageCode}


class ProtocolError(ValueError):
    """Raised for any malformed or out-of-bounds input from the wire."""


Body = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]


def _coerce_ext_value(value: Any) -> str:
    # ali-ons sends raw JS numbers and booleans; Java expects strings.
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)
    raise ProtocolError(f"extFields value of type {type(value).__name__} is not a scalar")


class RemotingCommand:
    """One request or response on the remoting wire.

    ``body`` may be bytes or a sequence of buffers (e.g. memoryview slices of mapped files) that
    are written back to back without being joined.
    """

    __slots__ = (
        "body",
        "code",
        "ext_fields",
        "flag",
        "language",
        "opaque",
        "remark",
        "serialize_type",
        "version",
    )

    def __init__(
        self,
        code: int,
        *,
        opaque: int = 0,
        flag: int = 0,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        remark: str | None = None,
        language: str = "JAVA",
        version: int = CURRENT_VERSION,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.ext_fields = ext_fields if ext_fields is not None else {}
        self.body = body
        self.remark = remark
        self.language = language
        self.version = version
        self.serialize_type = serialize_type

    # -- construction helpers -------------------------------------------------------------
    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        return cls(code, flag=FLAG_ONEWAY if oneway else 0, ext_fields=ext_fields, body=body)

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
    ) -> RemotingCommand:
        """A response to this request: same opaque and serialize type."""
        # What RemotingCommand(code, opaque=..., flag=FLAG_RESPONSE, ...) does, without the keyword call
        # (one per answered request).
        resp = _new_command(RemotingCommand)
        resp.code = code
        resp.opaque = self.opaque
        resp.flag = FLAG_RESPONSE
        resp.ext_fields = ext_fields if ext_fields is not None else {}
        resp.body = body
        resp.remark = remark
        resp.language = "JAVA"
        resp.version = CURRENT_VERSION
        resp.serialize_type = self.serialize_type
        return resp

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @property
    def body_bytes(self) -> bytes:
        body = self.body
        if isinstance(body, bytes):
            return body
        if isinstance(body, bytearray | memoryview):
            return bytes(body)
        return b"".join(body)

    @property
    def body_length(self) -> int:
        body = self.body
        if isinstance(body, bytes | bytearray):
            return len(body)
        if isinstance(body, memoryview):
            return body.nbytes
        return sum(len(b) if not isinstance(b, memoryview) else b.nbytes for b in body)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} remark={self.remark!r} "
            f"ext={self.ext_fields!r} body={self.body_length}B)"
        )

    # -- encoding -------------------------------------------------------------------------
    def encode_header(self) -> bytes:
        if self.serialize_type == SerializeType.ROCKETMQ:
            return self._encode_binary_header()
        header: dict[str, Any] = {
            "code": self.code,
            "language": self.language,
            "version": self.version,
            "opaque": self.opaque,
            "flag": self.flag,
            "extFields": self.ext_fields,
            "serializeTypeCurrentRPC": "JSON",
        }
        if self.remark is not None:
            header["remark"] = self.remark
        return orjson.dumps(header)

    def _encode_binary_header(self) -> bytes:
        try:
            lang = LanguageCode[self.language].value
        except KeyError:
            lang = LanguageCode.OTHER.value
        parts = [_BIN_FIXED.pack(self.code, lang, self.version, self.opaque, self.flag)]
        if self.remark is None:
            parts.append(_INT.pack(0))
        else:
            remark = self.remark.encode()
            parts.append(_INT.pack(len(remark)))
            parts.append(remark)
        ext = bytearray()
        for key, value in self.ext_fields.items():
            k = key.encode()
            v = str(value).encode()
            ext += _I16.pack(len(k)) + k + _INT.pack(len(v)) + v
        parts.append(_INT.pack(len(ext)))
        parts.append(bytes(ext))
        return b"".join(parts)

    def frame_parts(self) -> list[bytes | bytearray | memoryview]:
        """The frame as buffers for ``transport.writelines`` (no join of the body)."""
        header = self.encode_header()
        body = self.body
        if type(body) is bytes:  # the common case, as below without the generic length walk
            length = 4 + len(header) + len(body)
            if length > MAX_FRAME_SIZE:
                raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME_SIZE} byte limit")
            prefix = _PREFIX.pack(length, (self.serialize_type << 24) | len(header))
            return [prefix + header, body] if body else [prefix + header]
        if isinstance(body, bytes | bytearray | memoryview):
            bodies: Iterable[bytes | bytearray | memoryview] = (body,) if len(body) else ()
        else:
            bodies = body
        length = 4 + len(header) + self.body_length
        if length > MAX_FRAME_SIZE:
            raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME_SIZE} byte limit")
        prefix = _PREFIX.pack(length, (self.serialize_type << 24) | len(header))
        return [prefix + header, *bodies]

    def encode(self) -> bytes:
        return b"".join(self.frame_parts())


# -- decoding -----------------------------------------------------------------------------
def _decode_json_header(raw: memoryview) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"invalid JSON header: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("JSON header is not an object")
    return obj


def _header_int(obj: dict[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        # Lenient about quoted numbers, but only plain ASCII decimals (int() alone accepts "1_0", " 5", "٣").
        if not isinstance(value, str) or _DECIMAL.fullmatch(value) is None:
            raise ProtocolError(f"header field {key!r} must be an integer, got {value!r:.40}")
        value = int(value)
    if not -(2**31) <= value < 2**31:
        raise ProtocolError(f"header field {key!r} out of int32 range")
    return value


_new_command = RemotingCommand.__new__
_JSON = SerializeType.JSON
_get_ints = operator.itemgetter("code", "opaque", "flag", "version")
_loads = orjson.loads
JSONDecodeError = orjson.JSONDecodeError


def _command_from_json_lenient(raw: memoryview, body: memoryview) -> RemotingCommand:
    """Any JSON header: quoted numbers and ali-ons' raw extFields values are accepted and coerced, anything
    malformed raises ProtocolError. Every header when msgspec is missing, else those it would not take."""
    try:
        obj = _loads(raw)
    except JSONDecodeError as exc:
        raise ProtocolError(f"invalid JSON header: {exc}") from None
    if type(obj) is not dict:
        raise ProtocolError("JSON header is not an object")
    # Plain ints and string extFields first (the common case without msgspec); anything unusual takes the
    # coercing, validating steps below.
    get = obj.get
    try:
        code, opaque, flag, version = _get_ints(obj)
    except KeyError:  # Java always sends all four; others may leave some out (0)
        code, opaque, flag, version = get("code", 0), get("opaque", 0), get("flag", 0), get("version", 0)
    if not (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and -2147483648 <= code <= 2147483647
        and -2147483648 <= opaque <= 2147483647
        and -2147483648 <= flag <= 2147483647
        and -2147483648 <= version <= 2147483647
    ):
        code = _header_int(obj, "code")
        opaque = _header_int(obj, "opaque")
        flag = _header_int(obj, "flag")
        version = _header_int(obj, "version")
    ext_raw = get("extFields")
    if ext_raw is None:
        ext: dict[str, str] = {}
    elif type(ext_raw) is dict:
        ext = ext_raw
        for v in ext_raw.values():
            if type(v) is not str:
                # A null value means "absent" (Java's header decoding skips nulls), not "".
                ext = {k: _coerce_ext_value(v) for k, v in ext_raw.items() if v is not None}
                break
    else:
        raise ProtocolError("extFields must be an object")
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        remark = str(remark)
    language = get("language", "JAVA")
    if type(language) is not str:
        language = "OTHER"
    cmd = _new_command(RemotingCommand)
    cmd.code = code
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.ext_fields = ext
    cmd.body = bytes(body) if len(body) else b""
    cmd.remark = remark
    cmd.language = language
    cmd.version = version
    cmd.serialize_type = _JSON
    return cmd


_decode_wire_header = wire_header.decode_wire_header


def _command_from_wire_header(raw: memoryview, body: memoryview) -> RemotingCommand:
    # A well-formed header, decoded and checked by msgspec (wire_header.py); anything else is decoded,
    # coerced or rejected by the lenient path, as before.
    try:
        h = _decode_wire_header(raw)  # type: ignore[misc]
    except Exception:
        return _command_from_json_lenient(raw, body)
    cmd = _new_command(RemotingCommand)
    cmd.code = h.code
    cmd.opaque = h.opaque
    cmd.flag = h.flag
    ext = h.extFields
    cmd.ext_fields = ext if ext is not None else {}
    cmd.body = bytes(body) if len(body) else b""
    cmd.remark = h.remark
    cmd.language = h.language
    cmd.version = h.version
    cmd.serialize_type = _JSON
    return cmd


_command_from_json = (
    _command_from_wire_header if _decode_wire_header is not None else _command_from_json_lenient
)


class SendV2Request(RemotingCommand):
    """A SEND_MESSAGE_V2 request whose extFields were decoded into a struct (wire_header.SendV2Fields):
    SendMessageRequestHeader.of_request reads ``v2`` directly. ``ext_fields``, the dict the generic path
    gives (the same keys and values; nothing reads their order), is built on first access only."""

    __slots__ = ("_ext", "v2")

    _ext: dict[str, str] | None
    v2: Any

    @property  # type: ignore[override]
    def ext_fields(self) -> dict[str, str]:
        ext = self._ext
        if ext is None:
            v2 = self.v2
            ext = self._ext = {k: v for k in _SEND_V2_FIELDS if (v := getattr(v2, k)) is not None}
        return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, str]) -> None:
        self._ext = value


# How rocketq's, Java's (fastjson sorts the keys) and ali-ons' encoders start a SEND_MESSAGE_V2 header; any
# other spelling takes the generic path, which gives the same command
SEND_V2_PREFIX = b'{"code":310,'
_SEND_V2_FIELDS = wire_header.SEND_V2_FIELDS
_decode_send_v2 = wire_header.decode_send_v2_header
_new_send_v2 = SendV2Request.__new__


def _command_from_send_v2(raw: memoryview, body: memoryview, borrow: bool = False) -> RemotingCommand:
    """borrow: body is a slice of an immutable read (bytes), kept as the command's body instead of copied;
    the send processor only measures it and copies it into the CommitLog."""
    try:
        h = _decode_send_v2(raw)  # type: ignore[misc]
    except Exception:
        return _command_from_json(raw, body)
    if h.code != 310 or h.extFields is None:  # a second "code" key, no extFields: the generic path decides
        return _command_from_json(raw, body)
    cmd = _new_send_v2(SendV2Request)
    cmd.code = 310
    cmd.opaque = h.opaque
    cmd.flag = h.flag
    cmd._ext = None
    cmd.v2 = h.extFields
    cmd.body = (body if borrow else bytes(body)) if len(body) else b""
    cmd.remark = h.remark
    cmd.language = h.language
    cmd.version = h.version
    cmd.serialize_type = _JSON
    return cmd


if _decode_send_v2 is None:  # without msgspec every header is generic

    def _command_from_send_v2(raw: memoryview, body: memoryview, borrow: bool = False) -> RemotingCommand:
        return _command_from_json(raw, body)


def _command_from_binary(raw: memoryview, body: memoryview) -> RemotingCommand:
    n = len(raw)
    if n < _BIN_FIXED.size + 8:
        raise ProtocolError("binary header too short")
    code, lang, version, opaque, flag = _BIN_FIXED.unpack_from(raw, 0)
    pos = _BIN_FIXED.size
    (remark_len,) = _INT.unpack_from(raw, pos)
    pos += 4
    if remark_len < 0 or pos + remark_len > n:
        raise ProtocolError("binary header remark length out of bounds")
    remark = bytes(raw[pos : pos + remark_len]).decode("utf-8", "replace") if remark_len else None
    pos += remark_len
    if pos + 4 > n:
        raise ProtocolError("binary header truncated before extFields")
    (ext_len,) = _INT.unpack_from(raw, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != n:
        raise ProtocolError("binary header extFields length does not match header length")
    ext: dict[str, str] = {}
    end = pos + ext_len
    while pos < end:
        if pos + 2 > end:
            raise ProtocolError("binary extFields key length truncated")
        (klen,) = _U16.unpack_from(raw, pos)
        pos += 2
        if pos + klen + 4 > end:
            raise ProtocolError("binary extFields key out of bounds")
        key = bytes(raw[pos : pos + klen]).decode("utf-8", "replace")
        pos += klen
        (vlen,) = _INT.unpack_from(raw, pos)
        pos += 4
        if vlen < 0 or pos + vlen > end:
            raise ProtocolError("binary extFields value out of bounds")
        ext[key] = bytes(raw[pos : pos + vlen]).decode("utf-8", "replace")
        pos += vlen
    return RemotingCommand(
        code,
        opaque=opaque,
        flag=flag,
        ext_fields=ext,
        body=bytes(body),
        remark=remark,
        language=_LANG_BY_ORDINAL.get(lang, "OTHER"),
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode_frame(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame *without* its 4-byte length prefix."""
    view = memoryview(frame)
    n = len(view)
    if n < 4:
        raise ProtocolError("frame shorter than its header mark")
    (mark,) = _INT.unpack_from(view, 0)
    serialize_type = (mark >> 24) & 0xFF
    header_len = mark & 0xFFFFFF
    if header_len > n - 4 or header_len > MAX_HEADER_SIZE:
        raise ProtocolError(f"header length {header_len} exceeds frame length {n - 4}")
    header = view[4 : 4 + header_len]
    body = view[4 + header_len :]
    if serialize_type == SerializeType.JSON:
        return _command_from_json(header, body)
    if serialize_type == SerializeType.ROCKETMQ:
        return _command_from_binary(header, body)
    raise ProtocolError(f"unknown serialize type {serialize_type}")


class FrameDecoder:
    """Incremental decoder: feed arbitrary chunks, get whole commands back."""

    __slots__ = ("_buf", "max_frame_size")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self.max_frame_size = max_frame_size

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        buf = self._buf
        out: list[RemotingCommand] = []
        if type(data) is not bytes:  # a bytearray or a view may change after this call: decode a copy
            buf += data
            return self._decode_buffer(out)
        start = 0
        if buf:
            # A frame is partly buffered: complete it with the head of this read and decode it from the
            # buffer, then decode the rest straight from the read. Only the straddling frame is copied, not
            # the whole read (4 KiB to 64 KiB sends make most reads end inside a frame).
            missing = -1
            if len(buf) >= 4:
                (length,) = _INT.unpack_from(buf, 0)
                if 4 <= length <= self.max_frame_size:
                    missing = 4 + length - len(buf)
            if missing < 0 or missing > len(data):  # still incomplete, or a bad length the decode rejects
                buf += data
                return self._decode_buffer(out)
            buf += memoryview(data)[:missing]
            self._decode(buf, 0, False, out)
            buf.clear()
            start = missing
        pos = self._decode(data, start, True, out)
        if pos < len(data):
            buf += memoryview(data)[pos:]
        return out

    def _decode_buffer(self, out: list[RemotingCommand]) -> list[RemotingCommand]:
        buf = self._buf
        pos = self._decode(buf, 0, False, out)
        if pos:
            del buf[:pos]
        return out

    def _decode(self, src: bytes | bytearray, pos: int, borrow: bool, out: list[RemotingCommand]) -> int:
        """Append the whole frames of src from pos on to out; returns where the first incomplete one starts.
        borrow: src is an immutable read, so a send's body may stay a view of it (never of the buffer, which
        is resized afterwards)."""
        total = len(src)
        max_frame = self.max_frame_size
        unpack = _INT.unpack_from
        with memoryview(src) as view:
            while total - pos >= 4:
                (length,) = unpack(view, pos)
                if length < 4 or length > max_frame:
                    raise ProtocolError(f"frame length {length} outside 4..{max_frame}")
                end = pos + 4 + length
                if end > total:
                    break
                # decode_frame inlined (one call and one memoryview less per frame); same checks
                (mark,) = unpack(view, pos + 4)
                header_len = mark & 0xFFFFFF
                if header_len > length - 4 or header_len > MAX_HEADER_SIZE:
                    raise ProtocolError(f"header length {header_len} exceeds frame length {length - 4}")
                start = pos + 8
                if mark >> 24 == 0:  # SerializeType.JSON (the mark is non-negative: high byte 0)
                    if src.startswith(SEND_V2_PREFIX, start):
                        out.append(
                            _command_from_send_v2(
                                view[start : start + header_len], view[start + header_len : end], borrow
                            )
                        )
                    else:
                        out.append(
                            _command_from_json(
                                view[start : start + header_len], view[start + header_len : end]
                            )
                        )
                else:
                    with view[pos + 4 : end] as frame:
                        out.append(decode_frame(frame))
                pos = end
        return pos
