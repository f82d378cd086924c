"""Client/admin bodies: golden JSON, fastjson object keys, property round trips for every body."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import ProtocolError, bodies, route
from rocketq.protocol._jsonmodel import JsonModel, _fields_of
from rocketq.protocol.bodies import (
    ConsumerConnection,
    ConsumerData,
    ConsumeStats,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    OffsetWrapper,
    ProducerData,
    ResetOffsetBody,
    SubscriptionData,
    TopicOffset,
    TopicStatsTable,
)


def test_message_queue_is_hashable_and_ordered_like_java() -> None:
    a, b, c = MessageQueue("A", "b", 1), MessageQueue("A", "b", 0), MessageQueue("A", "a", 9)
    assert sorted([a, b, c]) == [c, b, a]
    assert MessageQueue("B", "a", 0) > MessageQueue("A", "z", 99)
    assert {a: 1}[MessageQueue("A", "b", 1)] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.queue_id = 3  # type: ignore[misc]
    assert a.encode() == b'{"brokerName":"b","queueId":1,"topic":"A"}'


def test_heartbeat_golden_and_java_input() -> None:
    hb = HeartbeatData(
        "10.0.0.1@4242",
        [ProducerData("PG")],
        [ConsumerData("CG", subscription_data_set=[SubscriptionData.of_tags("T", "TagA || TagB", 17)])],
    )
    assert orjson.loads(hb.encode()) == {
        "clientID": "10.0.0.1@4242",
        "consumerDataSet": [
            {
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "consumeType": "CONSUME_PASSIVELY",
                "groupName": "CG",
                "messageModel": "CLUSTERING",
                "subscriptionDataSet": [
                    {
                        "classFilterMode": False,
                        "codeSet": [2598919, 2598920],
                        "expressionType": "TAG",
                        "subString": "TagA || TagB",
                        "subVersion": 17,
                        "tagsSet": ["TagA", "TagB"],
                        "topic": "T",
                    }
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": "PG"}],
    }
    # What a Java 4.9 / ali-ons client sends: extra fields, no expressionType, a Set of producers.
    java = (
        b'{"clientID":"192.168.0.2@9876#123","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
        b'"consumeType":"CONSUME_ACTIVELY","groupName":"G","messageModel":"BROADCASTING","subscriptionDataSet":'
        b'[{"classFilterMode":false,"codeSet":[],"subString":"*","subVersion":1700000000000,"tagsSet":[],'
        b'"topic":"%RETRY%G"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],'
        b'"heartbeatFingerprint":5}'
    )
    got = HeartbeatData.decode(java)
    assert got.client_id == "192.168.0.2@9876#123"
    c = got.consumer_data_set[0]
    assert (c.consume_type, c.message_model, c.consume_from_where) == (
        "CONSUME_ACTIVELY",
        "BROADCASTING",
        "CONSUME_FROM_FIRST_OFFSET",
    )
    s = c.subscription_data_set[0]
    assert (s.topic, s.sub_string, s.expression_type, s.sub_version) == (
        "%RETRY%G",
        "*",
        "TAG",
        1700000000000,
    )


def test_lock_bodies() -> None:
    mqs = {MessageQueue("T", "b", 1), MessageQueue("T", "a", 0)}
    req = LockBatchRequestBody("CG", "cid", False, mqs)
    assert req.encode() == (
        b'{"clientId":"cid","consumerGroup":"CG","mqSet":[{"brokerName":"a","queueId":0,"topic":"T"},'
        b'{"brokerName":"b","queueId":1,"topic":"T"}],"onlyThisBroker":false}'
    )
    assert LockBatchRequestBody.decode(req.encode()) == req
    resp = LockBatchResponseBody.decode(b'{"lockOKMQSet":[{"topic":"T","brokerName":"a","queueId":0}]}')
    assert resp.lock_ok_mq_set == {MessageQueue("T", "a", 0)}


def test_fastjson_object_keys_in_admin_bodies() -> None:
    raw = (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":5,'
        b'"maxOffset":10,"minOffset":0},{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":0,'
        b'"maxOffset":3,"minOffset":1}}}'
    )
    t = TopicStatsTable.decode(raw)
    assert t.offset_table == {
        MessageQueue("T", "broker-a", 0): TopicOffset(0, 10, 5),
        MessageQueue("T", "broker-a", 1): TopicOffset(1, 3, 0),
    }
    assert t.encode() == raw  # the writer produces exactly fastjson's form
    cs = ConsumeStats.decode(
        b'{"consumeTps":2.5,"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:'
        b'{"brokerOffset":100,"consumerOffset":60,"lastTimestamp":9}}}'
    )
    assert cs.consume_tps == 2.5 and cs.compute_total_diff() == 40
    assert cs.offset_table[MessageQueue("T", "b", 3)] == OffsetWrapper(100, 60, 9)
    r = ResetOffsetBody.decode(b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:42}}')
    assert r.offset_table == {MessageQueue("T", "b", 0): 42}
    assert r.encode() == b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:42}}'


def test_message_queue_keys_as_json_strings_are_accepted() -> None:
    # Some non-Java tools write the key as a JSON string instead of an object key.
    raw = orjson.dumps({"offsetTable": {'{"topic":"T","brokerName":"b","queueId":2}': 7}})
    assert ResetOffsetBody.decode(raw).offset_table == {MessageQueue("T", "b", 2): 7}
    with pytest.raises(ProtocolError):
        ResetOffsetBody.decode(orjson.dumps({"offsetTable": {"not an object": 7}}))


def test_consumer_connection_and_list() -> None:
    raw = (
        b'{"connectionSet":[{"clientAddr":"127.0.0.1:5000","clientId":"c1","language":"JAVA","version":409}],'
        b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
        b'"messageModel":"CLUSTERING","subscriptionTable":{"T":{"subString":"*","topic":"T","subVersion":1}}}'
    )
    cc = ConsumerConnection.decode(raw)
    assert cc.connection_set[0].version == 409 and cc.subscription_table["T"].sub_string == "*"
    assert ConsumerConnection.decode(cc.encode()) == cc
    body = GetConsumerListByGroupResponseBody(["a", "b"])
    assert body.encode() == b'{"consumerIdList":["a","b"]}'


# -- properties: every body model round-trips --------------------------------------------------------
def _models() -> list[type[JsonModel]]:
    out = []
    for mod in (bodies, route):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, JsonModel):
                out.append(obj)
    return out


MODELS = _models()
_text = st.text(max_size=12)
_i64 = st.integers(-(2**63), 2**63 - 1)


def _strategy(tp) -> st.SearchStrategy:  # type: ignore[no-untyped-def]
    import types
    import typing

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is int:
        return _i64
    if tp is str:
        return _text
    if tp is bool:
        return st.booleans()
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(tp, type) and issubclass(tp, JsonModel):
        return st.deferred(lambda: _model_strategy(tp))
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | _strategy(inner)
    if origin is list:
        return st.lists(_strategy(args[0]), max_size=3)
    if origin is set:
        return st.sets(_strategy(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(_strategy(args[0]), _strategy(args[1]), max_size=3)
    raise TypeError(tp)


def _model_strategy(cls: type[JsonModel]) -> st.SearchStrategy:
    import typing

    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{f.attr: _strategy(hints[f.attr]) for f in _fields_of(cls)})


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_body_round_trips(cls: type[JsonModel], data: st.DataObject) -> None:
    obj = data.draw(_model_strategy(cls))
    encoded = obj.encode()
    assert cls.decode(encoded) == obj
    if not cls.__fastjson__:
        orjson.loads(encoded)  # standard JSON


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(junk=st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_every_body_rejects_junk_with_protocol_error_only(cls: type[JsonModel], junk: bytes) -> None:
    try:
        cls.decode(junk)
    except ProtocolError:
        pass


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(value=st.dictionaries(st.text(max_size=24), _json_values, max_size=6), data=st.data())
def test_every_body_with_wrong_types_raises_protocol_error_only(
    cls: type[JsonModel], value: dict, data: st.DataObject
) -> None:
    for f in _fields_of(cls):
        if data.draw(st.booleans()):
            value[f.key] = data.draw(_json_values)
    try:
        obj = cls.from_obj(value)
    except ProtocolError:
        return
    assert cls.decode(obj.encode()) == obj
