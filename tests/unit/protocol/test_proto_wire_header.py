"""The msgspec fast path of the JSON header decode gives what the lenient path gives, for any header."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import frame, wire_header
from rocketq.protocol.frame import ProtocolError, RemotingCommand

pytestmark = pytest.mark.skipif(wire_header.decode_wire_header is None, reason="msgspec not installed")

_FIELDS = ("code", "opaque", "flag", "version", "ext_fields", "body", "remark", "language", "serialize_type")


def _decode(path, raw: bytes, body: bytes = b"") -> tuple | str:
    try:
        cmd = path(memoryview(raw), memoryview(body))
    except ProtocolError:
        return "ProtocolError"
    assert type(cmd) is RemotingCommand
    return tuple(getattr(cmd, f) for f in _FIELDS)


def _both(raw: bytes, body: bytes = b"") -> tuple | str:
    fast = _decode(frame._command_from_wire_header, raw, body)
    lenient = _decode(frame._command_from_json_lenient, raw, body)
    assert fast == lenient, (raw, fast, lenient)
    return fast


def test_the_fast_path_is_the_one_in_use() -> None:
    assert frame._command_from_json is frame._command_from_wire_header


def test_a_producer_request_and_a_broker_answer() -> None:
    req = (
        b'{"code":310,"language":"JAVA","version":409,"opaque":10,"flag":0,"extFields":{"a":"pg","b":"T",'
        b'"e":"0","i":"UNIQ_KEY\\u0001C0A8\\u0002WAIT\\u0001true"},"serializeTypeCurrentRPC":"JSON"}'
    )
    got = _both(req, b"body")
    assert got[:4] == (310, 10, 0, 409)
    assert got[4]["i"] == "UNIQ_KEY\x01C0A8\x02WAIT\x01true"
    assert got[5] == b"body"


@pytest.mark.parametrize(
    "raw",
    [
        b"{}",
        b'{"code":1,"code":2}',  # the last duplicate wins on both paths
        b'{"code":"12","opaque":"7"}',  # quoted numbers: lenient only
        b'{"code":true}',
        b'{"code":1.0}',
        b'{"code":2147483648}',
        b'{"code":-2147483648,"opaque":2147483647}',
        b'{"code":-2147483649}',
        b'{"code":99999999999999999999999}',
        b'{"language":null}',
        b'{"language":7}',
        b'{"remark":null}',
        b'{"remark":12}',
        b'{"extFields":null}',
        b'{"extFields":[]}',
        b'{"extFields":{"a":1,"b":true,"c":null,"d":1.5}}',  # ali-ons' raw JS values: coerced
        b'{"extFields":{"a":{"x":1}}}',
        b'{"remark":"\\ud800"}',
        b'{"remark":"\xff"}',
        b'{"code":1}x',
        b"[1,2]",
        b"",
        b'{"code":1,}',
    ],
)
def test_unusual_headers_agree(raw: bytes) -> None:
    _both(raw)


_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_keys = st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields", "x"])


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(
        _keys,
        st.one_of(
            _scalar, st.dictionaries(st.text(max_size=6), _scalar, max_size=4), st.lists(_scalar, max_size=2)
        ),
        max_size=8,
    ),
    st.binary(max_size=8),
)
def test_any_header_agrees(obj: dict, body: bytes) -> None:
    _both(orjson.dumps(obj), body)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_any_bytes_agree(raw: bytes) -> None:
    _both(raw)
