"""fastjson-style reader/writer: quirks, bounds, and 'ProtocolError and nothing else' on junk."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import ProtocolError
from rocketq.protocol.bodies import MessageQueue
from rocketq.protocol.lenient_json import MAX_DEPTH, FrozenKey, dumps, loads


def test_standard_json_takes_the_orjson_path() -> None:
    assert loads(b'{"a":[1,2.5,"x",true,null]}') == {"a": [1, 2.5, "x", True, None]}
    assert loads('{"k":"v"}') == {"k": "v"}
    assert loads(memoryview(b"[1]")) == [1]


def test_unquoted_numeric_keys() -> None:
    assert loads(b'{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}}') == {
        "brokerAddrs": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    }
    assert loads(b"{-1:2, 1.5:3}") == {-1: 2, 1.5: 3}


def test_object_keys_become_frozen_keys() -> None:
    got = loads(b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":5}}}')
    ((key, value),) = got["offsetTable"].items()
    assert isinstance(key, FrozenKey)
    assert key.to_dict() == {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert value == {"maxOffset": 5}
    # Equal regardless of field order; usable as a dict key.
    other = loads(b'{{"topic":"T","queueId":0,"brokerName":"b"}:1}')
    assert next(iter(other)) == key and hash(next(iter(other))) == hash(key)


def test_key_hook_builds_message_queues() -> None:
    got = loads(
        b'{{"brokerName":"b","queueId":3,"topic":"T"}:7, {"brokerName":"a","queueId":0,"topic":"T"}:8}',
        key_hook=MessageQueue.from_obj,
    )
    assert got == {MessageQueue("T", "b", 3): 7, MessageQueue("T", "a", 0): 8}


def test_nested_object_key_values_are_frozen_recursively() -> None:
    got = loads(b'{{"a":{"b":[1,{"c":2}]}}:0}')
    key = next(iter(got))
    assert key.to_dict() == {"a": {"b": [1, {"c": 2}]}}


def test_other_fastjson_leniencies() -> None:
    assert loads(b"{a:1,'b':'x',c:[1,2,],}") == {"a": 1, "b": "x", "c": [1, 2]}
    assert loads(b' \n{ "s" : "\\u4e2d\\ud83d\\ude00\\n" } ') == {"s": "中😀\n"}
    assert loads(b'{0:"x"}'.decode()) == {0: "x"}


@pytest.mark.parametrize(
    "junk",
    [
        b"",
        b"{",
        b"}",
        b"{0:}",
        b"{0 1}",
        b'{"a":1 "b":2}',
        b'{"a":tru}',
        b"[1,2",
        b'"unterminated',
        b"{'unterminated:1}",
        b'{"a":"\\x"}',
        b"\xff\xfe",
        b"{[1]:2}",
        b"{1:2}x",
        b"nul",
        b"-",
        b"1" * 500,
        b'{{"a":[1]}:1}{',
        b"{,}",
    ],
)
def test_junk_raises_protocol_error(junk: bytes) -> None:
    with pytest.raises(ProtocolError):
        loads(junk)


def test_depth_limit_on_both_paths() -> None:
    deep_std = b"[" * (MAX_DEPTH + 2) + b"]" * (MAX_DEPTH + 2)
    with pytest.raises(ProtocolError):
        loads(deep_std)
    deep_lenient = b"{0:" * (MAX_DEPTH + 2) + b"1" + b"}" * (MAX_DEPTH + 2)
    with pytest.raises(ProtocolError):
        loads(deep_lenient)
    very_deep = b"{0:" * 100_000 + b"1" + b"}" * 100_000
    with pytest.raises(ProtocolError):
        loads(very_deep)
    ok = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert loads(ok) is not None


def test_size_limit() -> None:
    with pytest.raises(ProtocolError):
        loads(b"[" + b"1," * 100 + b"1]", max_size=50)
    assert len(loads(b"[" + b"1," * 100 + b"1]")) == 101


def test_writer_matches_fastjson_form() -> None:
    body = {"offsetTable": {MessageQueue("T", "b", 0): {"maxOffset": 5}, "plain": [1, "x", None]}}
    assert dumps(body) == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":5},"plain":[1,"x",null]}}'
    )
    assert dumps({0: "a", True: 1}) == b'{"0":"a","true":1}'
    key = FrozenKey.of({"topic": "T", "queueId": 1})
    assert dumps({key: 2}) == b'{{"queueId":1,"topic":"T"}:2}'


# -- properties -----------------------------------------------------------------------------------------
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_mq = st.builds(MessageQueue, st.text(max_size=6), st.text(max_size=6), st.integers(0, 2**31 - 1))


@settings(deadline=None)
@given(_json)
def test_standard_json_round_trip(value: object) -> None:
    assert loads(dumps(value)) == value
    assert loads(json.dumps(value, ensure_ascii=False)) == value


@settings(deadline=None)
@given(st.dictionaries(_mq, _json, max_size=5))
def test_message_queue_keyed_round_trip(table: dict) -> None:
    text = dumps({"offsetTable": table})
    back = loads(text, key_hook=MessageQueue.from_obj)
    assert back == {"offsetTable": table}


@settings(deadline=None)
@given(st.dictionaries(st.integers(-(2**31), 2**31 - 1), st.text(max_size=5), max_size=5))
def test_unquoted_int_keys_round_trip(table: dict[int, str]) -> None:
    text = "{" + ",".join(f"{k}:{orjson.dumps(v).decode()}" for k, v in table.items()) + "}"
    assert loads(text) == table


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_protocol_error_only(data: bytes) -> None:
    try:
        loads(data)
    except ProtocolError:
        pass


_alphabet = st.sampled_from(list("{}[]:,\"'0123456789-.eE truefalsnl\\ab\n"))


@settings(max_examples=400, deadline=None)
@given(st.lists(_alphabet, max_size=80).map("".join))
def test_json_like_junk_raises_protocol_error_only(text: str) -> None:
    try:
        loads(text)
    except ProtocolError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_mq, _json, min_size=1, max_size=3), st.data())
def test_truncated_fastjson_raises_protocol_error(table: dict, data: st.DataObject) -> None:
    text = dumps({"offsetTable": table})
    cut = data.draw(st.integers(0, len(text) - 1))
    with pytest.raises(ProtocolError):
        loads(text[:cut])


def test_c_scanner_fallback_work_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    # Standard containers are handed to the stdlib C scanner; one that fails deep inside must not be
    # re-scanned level by level (which would be quadratic in depth x size).
    import rocketq.protocol.lenient_json as lj

    real = lj._scan_standard
    scanned = 0

    def counting(s: str, pos: int):  # type: ignore[no-untyped-def]
        nonlocal scanned
        try:
            v, end = real(s, pos)
        except json.JSONDecodeError as exc:
            scanned += exc.pos - pos
            raise
        except StopIteration as exc:
            scanned += exc.value - pos
            raise
        scanned += end - pos
        return v, end

    monkeypatch.setattr(lj, "_scan_standard", counting)
    depth = 50
    filler = "[" + ",".join(["12345"] * 2000) + "]"
    text = "".join(f'{{"f{i}":{filler},"n":' for i in range(depth)) + "{0:1}" + "}" * depth
    got = loads(text)
    assert got["n"]["n"]["f2"][0] == 12345
    assert scanned <= 3 * len(text)
