"""frame.py: golden frames built by hand, round trips (JSON + ROCKETMQ headers), chunking, fuzz."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import FrameDecoder, ProtocolError, RemotingCommand, decode_frame
from rocketq.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, SerializeType
from rocketq.protocol.frame import MAX_FRAME_SIZE

# -- golden frames -------------------------------------------------------------------------------------


def test_hand_built_rocketmq_json_frame() -> None:
    # Exactly what a Java 4.9.8 client writes for GET_ROUTEINFO_BY_TOPIC, assembled byte by byte.
    header = (
        b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    body = b""
    frame = (
        (4 + len(header) + len(body)).to_bytes(4, "big")
        + bytes([0x00])  # serialize type JSON
        + len(header).to_bytes(3, "big")
        + header
        + body
    )
    cmds = FrameDecoder().feed(frame)
    assert len(cmds) == 1
    cmd = cmds[0]
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.language) == (105, 3, 0, 409, "JAVA")
    assert cmd.ext_fields == {"topic": "TopicTest"} and cmd.remark is None and cmd.body_bytes == b""
    assert cmd.serialize_type == SerializeType.JSON and not cmd.is_response and not cmd.is_oneway


def test_hand_built_response_with_remark_and_body() -> None:
    header = (
        b'{"code":17,"flag":1,"language":"JAVA","opaque":99,"remark":"No topic route info","version":409}'
    )
    frame = struct.pack(">ii", 4 + len(header) + 3, len(header)) + header + b"xyz"
    cmd = decode_frame(frame[4:])
    assert cmd.is_response and cmd.code == 17 and cmd.remark == "No topic route info"
    assert cmd.ext_fields == {} and cmd.body_bytes == b"xyz"


def test_ali_ons_style_ext_fields_are_coerced_to_strings() -> None:
    header = orjson.dumps(
        {
            "code": 310,
            "language": "JAVA",
            "version": 121,
            "opaque": 1,
            "flag": 0,
            "extFields": {"e": 3, "g": 1700000000123, "k": False, "m": True, "f": 0.0, "x": None, "i": "s"},
        }
    )
    cmd = decode_frame(struct.pack(">i", len(header)) + header)
    assert cmd.ext_fields == {"e": "3", "g": "1700000000123", "k": "false", "m": "true", "f": "0", "i": "s"}


def test_unknown_language_and_missing_fields_are_accepted() -> None:
    header = b'{"code":34,"language":"KOTLIN","opaque":5}'
    cmd = decode_frame(struct.pack(">i", len(header)) + header)
    assert (cmd.language, cmd.version, cmd.flag, cmd.ext_fields) == ("KOTLIN", 0, 0, {})


def test_hand_built_rocketmq_binary_header() -> None:
    remark = b"hi"
    ext = b""
    for k, v in (("topic", "T"), ("queueId", "3"), ("中", "文")):
        kb, vb = k.encode(), v.encode()
        ext += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    header = (
        struct.pack(">h", 11)  # code PULL_MESSAGE
        + struct.pack(">b", 9)  # language GO
        + struct.pack(">h", 409)  # version
        + struct.pack(">i", 77)  # opaque
        + struct.pack(">i", FLAG_ONEWAY)  # flag
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", len(ext))
        + ext
    )
    body = b"\x00\x01"
    frame = struct.pack(">i", 4 + len(header) + len(body)) + struct.pack(">i", (1 << 24) | len(header))
    frame += header + body
    cmd = FrameDecoder().feed(frame)[0]
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (11, "GO", 409, 77, FLAG_ONEWAY)
    assert cmd.remark == "hi" and cmd.body_bytes == body and cmd.is_oneway
    assert cmd.ext_fields == {"topic": "T", "queueId": "3", "中": "文"}
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    # A response keeps the request's serialize type, and re-encodes to the same header bytes.
    assert cmd.response(0).serialize_type == SerializeType.ROCKETMQ
    again = RemotingCommand(
        11, opaque=77, flag=FLAG_ONEWAY, ext_fields=cmd.ext_fields, body=body, remark="hi",
        language="GO", version=409, serialize_type=SerializeType.ROCKETMQ,
    )  # fmt: skip
    assert again.encode() == frame


def test_encoded_json_header_shape() -> None:
    cmd = RemotingCommand.request(105, {"topic": "T"})
    raw = cmd.encode()
    length, mark = struct.unpack_from(">ii", raw)
    assert length == len(raw) - 4 and mark >> 24 == 0 and (mark & 0xFFFFFF) == len(raw) - 8
    header = orjson.loads(raw[8:])
    assert header["extFields"] == {"topic": "T"} and header["language"] == "JAVA"
    assert "remark" not in header and header["flag"] == 0


# -- round trips -------------------------------------------------------------------------------------------
_i32 = st.integers(-(2**31), 2**31 - 1)
_i16 = st.integers(-(2**15), 2**15 - 1)
_text = st.text(max_size=20)
_ext = st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=30), max_size=6)
_langs = st.sampled_from([lc.name for lc in LanguageCode])


@st.composite
def commands(draw: st.DrawFn, serialize_type: int | None = None) -> RemotingCommand:
    stype = draw(st.sampled_from([0, 1])) if serialize_type is None else serialize_type
    binary = stype == SerializeType.ROCKETMQ
    return RemotingCommand(
        draw(_i16 if binary else _i32),
        opaque=draw(_i32),
        flag=draw(st.sampled_from([0, FLAG_RESPONSE, FLAG_ONEWAY]) | _i32),
        ext_fields=draw(_ext),
        body=draw(st.binary(max_size=64)),
        # An empty remark is "no remark" in the binary header.
        remark=draw(st.none() | (st.text(min_size=1, max_size=20) if binary else _text)),
        language=draw(_langs),
        version=draw(_i16 if binary else _i32),
        serialize_type=stype,
    )


def _same(a: RemotingCommand, b: RemotingCommand) -> None:
    assert (a.code, a.opaque, a.flag, a.ext_fields, a.body_bytes, a.remark, a.language, a.version) == (
        b.code,
        b.opaque,
        b.flag,
        b.ext_fields,
        b.body_bytes,
        b.remark,
        b.language,
        b.version,
    )
    assert a.serialize_type == b.serialize_type


@settings(max_examples=300, deadline=None)
@given(commands())
def test_frame_round_trip(cmd: RemotingCommand) -> None:
    raw = cmd.encode()
    assert struct.unpack_from(">i", raw)[0] == len(raw) - 4
    _same(decode_frame(raw[4:]), cmd)


@settings(deadline=None)
@given(commands(), st.lists(st.binary(max_size=8), max_size=3))
def test_scattered_body_parts_encode_like_a_joined_body(cmd: RemotingCommand, parts: list[bytes]) -> None:
    cmd.body = [memoryview(p) for p in parts]
    joined = RemotingCommand(
        cmd.code, opaque=cmd.opaque, flag=cmd.flag, ext_fields=cmd.ext_fields, body=b"".join(parts),
        remark=cmd.remark, language=cmd.language, version=cmd.version, serialize_type=cmd.serialize_type,
    )  # fmt: skip
    assert cmd.encode() == joined.encode()
    assert cmd.body_length == len(b"".join(parts))


@settings(max_examples=200, deadline=None)
@given(st.lists(commands(), min_size=1, max_size=6), st.data())
def test_decoder_handles_arbitrary_chunking(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    stream = b"".join(c.encode() for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out += dec.feed(stream[prev:cut])
        prev = cut
    assert len(out) == len(cmds) and dec.buffered == 0
    for got, want in zip(out, cmds, strict=True):
        _same(got, want)


@settings(max_examples=300, deadline=None)
@given(commands(), st.data())
def test_stream_decoder_agrees_with_decode_frame(cmd: RemotingCommand, data: st.DataObject) -> None:
    """FrameDecoder.feed decodes JSON frames inline: same command, or the same ProtocolError, as decode_frame
    (also for corrupted header marks and headers)."""
    raw = bytearray(cmd.encode())
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(4, len(raw) - 1))  # keep the length prefix: both see the same frame
        raw[i] = data.draw(st.integers(0, 255))
    try:
        want: RemotingCommand | str = decode_frame(bytes(raw[4:]))
    except ProtocolError as exc:
        want = str(exc)
    try:
        got: RemotingCommand | str = FrameDecoder().feed(bytes(raw))[0]
    except ProtocolError as exc:
        got = str(exc)
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
    else:
        _same(got, want)


def test_decoder_byte_at_a_time_and_partial_buffering() -> None:
    cmd = RemotingCommand.request(11, {"topic": "T"}, b"body")
    raw = cmd.encode()
    dec = FrameDecoder()
    for b in raw[:-1]:
        assert dec.feed(bytes([b])) == []
    assert dec.buffered == len(raw) - 1
    (got,) = dec.feed(raw[-1:])
    _same(got, cmd)


# -- fuzz: ProtocolError and nothing else ------------------------------------------------------------------
@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", 3),  # length < 4
        struct.pack(">i", -1),
        struct.pack(">i", MAX_FRAME_SIZE + 1),
        struct.pack(">ii", 4, 5),  # header longer than frame (apache/rocketmq#3474)
        struct.pack(">ii", 4, 0),  # empty JSON header
        struct.pack(">ii", 6, 2) + b"[]",  # header not an object
        struct.pack(">ii", 8, 4) + b"null",
        struct.pack(">ii", 6, (7 << 24) | 2) + b"{}",  # unknown serialize type
        struct.pack(">ii", 6, (1 << 24) | 2) + b"\x00\x01",  # binary header too short
        struct.pack(">ii", 16, 12) + b'{"code":1.5}',
        struct.pack(">ii", 17, 13) + b'{"code":"x1"}',
        struct.pack(">ii", 24, 20) + b'{"code":99999999999}',
        struct.pack(">ii", 20, 16) + b'{"extFields":[]}',
        struct.pack(">ii", 26, 22) + b'{"extFields":{"a":[]}}',
        struct.pack(">ii", 8, 4) + b"\xff\xfe{}",
    ],
)
def test_bad_frames_raise_protocol_error(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(frame)


def _binary_header(remark_len: int, ext_len: int, ext: bytes) -> bytes:
    return (
        struct.pack(">hbhii", 1, 0, 1, 1, 0)
        + struct.pack(">i", remark_len)
        + struct.pack(">i", ext_len)
        + ext
    )


@pytest.mark.parametrize(
    "header",
    [
        _binary_header(-1, 0, b""),
        _binary_header(1000, 0, b""),
        _binary_header(0, -1, b""),
        _binary_header(0, 10, b""),  # ext length beyond header
        _binary_header(0, 1, b"\x00"),  # key length truncated
        _binary_header(0, 2, b"\x00\x05"),  # key beyond ext
        _binary_header(0, 7, b"\x00\x01k\xff\xff\xff\xff"),  # negative value length
        _binary_header(0, 7, b"\x00\x01k\x00\x00\x00\x09"),  # value beyond ext
        _binary_header(0, 0, b"") + b"trailing",
    ],
)
def test_bad_binary_headers_raise_protocol_error(header: bytes) -> None:
    frame = struct.pack(">i", (1 << 24) | len(header)) + header
    with pytest.raises(ProtocolError):
        decode_frame(frame)


@settings(max_examples=300, deadline=None)
@given(commands(), st.data())
def test_truncated_or_corrupted_frames_raise_protocol_error_only(
    cmd: RemotingCommand, data: st.DataObject
) -> None:
    raw = bytearray(cmd.encode()[4:])
    # Truncation of the frame body (the length prefix would make a stream decoder wait; decode directly).
    cut = data.draw(st.integers(0, len(raw)))
    try:
        decode_frame(bytes(raw[:cut]))
    except ProtocolError:
        pass
    # Random corruption of a few bytes.
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    try:
        decode_frame(bytes(raw))
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_streams_raise_protocol_error_only(data: bytes) -> None:
    dec = FrameDecoder()
    try:
        dec.feed(data)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([0, 1]))
def test_random_header_bytes_raise_protocol_error_only(header: bytes, stype: int) -> None:
    frame = struct.pack(">i", (stype << 24) | len(header)) + header
    try:
        decode_frame(frame)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda x: st.lists(x, max_size=3) | st.dictionaries(st.text(max_size=5), x, max_size=3),
    max_leaves=10,
), st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields"]))  # fmt: skip
def test_json_header_with_wrong_types_raises_protocol_error_only(value: object, key: str) -> None:
    try:
        header = orjson.dumps({"code": 1, key: value})
    except orjson.JSONEncodeError:
        return
    try:
        decode_frame(struct.pack(">i", len(header)) + header)
    except ProtocolError:
        pass


def test_oversized_frame_is_refused_before_buffering() -> None:
    dec = FrameDecoder(max_frame_size=1024)
    with pytest.raises(ProtocolError):
        dec.feed(struct.pack(">i", 1025))
    with pytest.raises(ProtocolError):
        RemotingCommand.request(1, body=b"x" * (MAX_FRAME_SIZE + 1)).encode()


@pytest.mark.parametrize("value", ["²", "--5", "1_0", " 5", "٣", "0x10", "", True, 1.5, [1], {"a": 1}])
def test_non_integer_header_numbers_raise_protocol_error(value: object) -> None:
    header = orjson.dumps({"code": value})
    with pytest.raises(ProtocolError, match="code"):
        decode_frame(struct.pack(">i", len(header)) + header)


def test_quoted_header_numbers_are_accepted() -> None:
    header = b'{"code":"105","opaque":"-7","flag":"0","version":"409"}'
    cmd = decode_frame(struct.pack(">i", len(header)) + header)
    assert (cmd.code, cmd.opaque, cmd.version) == (105, -7, 409)
