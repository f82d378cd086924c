"""A SEND_MESSAGE_V2 header decoded into a struct (frame.SendV2Request) gives what the generic path gives:
the same command, the same extFields, the same SendMessageRequestHeader or the same ProtocolError."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import frame, wire_header
from rocketq.protocol.frame import FrameDecoder, ProtocolError, RemotingCommand, SendV2Request
from rocketq.protocol.headers import SendMessageRequestHeader

pytestmark = pytest.mark.skipif(wire_header.decode_send_v2_header is None, reason="msgspec not installed")

_FIELDS = ("code", "opaque", "flag", "version", "ext_fields", "body", "remark", "language", "serialize_type")


def _frame(header: bytes, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _header_of(cmd: RemotingCommand) -> SendMessageRequestHeader | str:
    try:
        return SendMessageRequestHeader.of_request(cmd)
    except ProtocolError as exc:
        return f"ProtocolError: {exc}"


def _generic_header(cmd: RemotingCommand) -> SendMessageRequestHeader | str:
    try:
        return SendMessageRequestHeader.from_request(cmd.code, cmd.ext_fields)
    except ProtocolError as exc:
        return f"ProtocolError: {exc}"


def _agree(header: bytes, body: bytes = b"") -> RemotingCommand | None:
    """Decode through FrameDecoder (which picks the path) and through the generic path; compare."""
    try:
        generic = frame._command_from_json(memoryview(header), memoryview(body))
    except ProtocolError:
        generic = None
    try:
        (got,) = FrameDecoder().feed(_frame(header, body))
    except ProtocolError:
        got = None
    if generic is None or got is None:
        assert generic is None and got is None, (header, generic, got)
        return None
    # the header first: of_request must not depend on ext_fields having been built
    assert _header_of(got) == _generic_header(generic), header
    assert tuple(getattr(got, f) for f in _FIELDS) == tuple(getattr(generic, f) for f in _FIELDS), header
    return got


def _send_header(ext: dict, **top) -> bytes:
    # the field order rocketq's producer writes: "code" first
    return orjson.dumps(
        {"code": 310, "language": "JAVA", "version": 409, "opaque": 7, "flag": 0, **top, "extFields": ext}
    )


_PRODUCER_EXT = {
    "a": "pg", "b": "TopicA", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
    "i": "UNIQ_KEY\x01C0A8\x02WAIT\x01true", "j": "0", "k": "false", "m": "false",
}  # fmt: skip


def test_a_producer_request_takes_the_struct_path() -> None:
    cmd = _agree(_send_header(_PRODUCER_EXT), b"body")
    assert type(cmd) is SendV2Request
    h = SendMessageRequestHeader.of_request(cmd)
    assert (h.topic, h.queue_id, h.born_timestamp, h.unit_mode, h.batch) == (
        "TopicA",
        3,
        1700000000000,
        False,
        False,
    )
    assert cmd.ext_fields == _PRODUCER_EXT
    cmd.ext_fields["x"] = "1"  # built once, then it is the command's dict
    assert cmd.ext_fields["x"] == "1"
    cmd.ext_fields = {"b": "other"}
    assert cmd.ext_fields == {"b": "other"}


@pytest.mark.parametrize(
    "header",
    [
        _send_header({**_PRODUCER_EXT, "AccessKey": "ak", "Signature": "s"}),  # ACL fields: the dict path
        _send_header({**_PRODUCER_EXT, "e": 3}),  # ali-ons' raw JS number
        b'{"code":310,"code":10,"extFields":{"a":"pg","b":"T","e":"0","g":"1"}}',  # the last code wins
        b'{"code":310,"opaque":"7","extFields":{"a":"pg","b":"T","e":"0","g":"1"}}',  # a quoted number
        b'{"code":310,"extFields":null}',
    ],
)
def test_headers_the_struct_does_not_take_go_the_generic_way(header: bytes) -> None:
    cmd = _agree(header)
    assert cmd is not None and type(cmd) is RemotingCommand


@pytest.mark.parametrize(
    "ext",
    [
        {},  # every required field missing
        {**_PRODUCER_EXT, "e": "1e3"},
        {**_PRODUCER_EXT, "e": " 3"},
        {**_PRODUCER_EXT, "e": "2147483648"},
        {**_PRODUCER_EXT, "g": "99999999999999999999"},
        {**_PRODUCER_EXT, "k": "TRUE"},
        {**_PRODUCER_EXT, "k": "yes"},
        {**_PRODUCER_EXT, "c": None, "d": None, "i": None},  # null is absent
        {k: v for k, v in _PRODUCER_EXT.items() if k != "b"},
    ],
)
def test_odd_values_agree(ext: dict) -> None:
    _agree(_send_header(ext))


_value = st.one_of(
    st.none(),
    st.sampled_from(["0", "1", "-1", "4", "255", "256", "1700000000000", "2147483647", "2147483648", "-0"]),
    st.sampled_from([" 1", "+1", "01", "1e3", "1.0", "", "true", "false", "TRUE", "1_0", "\u0663"]),
    st.text(max_size=8),
    st.integers(min_value=-(2**33), max_value=2**33),
    st.booleans(),
)
_key = st.sampled_from([*wire_header.SEND_V2_FIELDS, "AccessKey", "topic", "x"])


@settings(max_examples=600, deadline=None)
@given(
    st.booleans(),
    st.dictionaries(_key, _value, max_size=6),
    st.sets(_key, max_size=3),
    st.fixed_dictionaries(
        {}, optional={"opaque": st.integers(-(2**32), 2**32), "remark": st.none() | st.text(max_size=4)}
    ),
    st.binary(max_size=8),
)
def test_any_send_header_agrees(
    from_producer: bool, changed: dict, dropped: set, top: dict, body: bytes
) -> None:
    # mostly a producer's header with a few fields changed or dropped, so the decode gets past the
    # required fields and the parsing of each value is compared; sometimes nothing but the random fields
    ext = {**_PRODUCER_EXT, **changed} if from_producer else dict(changed)
    for k in dropped:
        ext.pop(k, None)
    _agree(_send_header(ext, **top), body)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.binary(max_size=300)), min_size=1, max_size=6),
    st.lists(st.integers(0, 4000), max_size=10),
)
def test_sends_cut_anywhere_decode_the_same(frames: list[tuple[bool, bytes]], cut_at: list[int]) -> None:
    """A stream of sends (and other requests) cut into reads anywhere: the same commands as each frame
    decoded alone, whether a body was borrowed from a read or copied out of the decoder's buffer, and the
    borrowed bodies still hold their bytes once every read has been decoded."""
    wire = []
    for i, (is_send, body) in enumerate(frames):
        if is_send:
            wire.append(_frame(_send_header({**_PRODUCER_EXT, "g": str(i)}), body))
        else:
            wire.append(RemotingCommand.request(11, {"topic": "T", "n": str(i)}, body).encode())
    stream = b"".join(wire)
    cuts = sorted({c for c in cut_at if c < len(stream)} | {len(stream)})
    dec = FrameDecoder()
    got: list[RemotingCommand] = []
    prev = 0
    for cut in cuts:
        got += dec.feed(stream[prev:cut])  # a fresh bytes object per read, as a socket gives
        prev = cut
    assert dec.buffered == 0 and len(got) == len(frames)
    for cmd, raw, (is_send, body) in zip(got, wire, frames, strict=True):
        (alone,) = FrameDecoder().feed(raw)
        assert type(cmd) is type(alone) is (SendV2Request if is_send else RemotingCommand)
        assert bytes(cmd.body) == bytes(alone.body) == body
        assert (cmd.code, cmd.opaque, cmd.ext_fields) == (alone.code, alone.opaque, alone.ext_fields)


def test_a_body_is_borrowed_from_a_read_and_copied_from_the_buffer() -> None:
    one = _frame(_send_header(_PRODUCER_EXT), b"x" * 100)
    dec = FrameDecoder()
    (a,) = dec.feed(one)
    assert type(a.body) is memoryview and a.body.obj is one and bytes(a.body) == b"x" * 100
    assert dec.feed(one[:50]) == []
    (b,) = dec.feed(one[50:])  # straddled two reads: completed in the buffer, so copied
    assert type(b.body) is bytes and b.body == b"x" * 100
    (c,) = dec.feed(bytearray(one))  # a mutable input is never borrowed from
    assert type(c.body) is bytes
