"""Typed extFields headers: every header round-trips, required fields are enforced, input is lenient."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import ProtocolError, RequestCode
from rocketq.protocol.frame import RemotingCommand, decode_frame
from rocketq.protocol.headers import (
    ALL_HEADERS,
    CreateTopicRequestHeader,
    EndTransactionRequestHeader,
    GetRouteInfoRequestHeader,
    Header,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
    QueryMessageRequestHeader,
    RegisterBrokerRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    _decode,
)

_VALUES = {
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
    "str": st.text(max_size=30),
}


def _kind(f) -> str:  # type: ignore[no-untyped-def]
    from rocketq.protocol import headers as h

    return {h._parse_i32: "int32", h._parse_i64: "int64", h._parse_bool: "bool", h._parse_str: "str"}[f.parse]


def instances(cls: type[Header]) -> st.SearchStrategy[Header]:
    kwargs = {}
    for f in cls._fields:
        value = _VALUES[_kind(f)]
        kwargs[f.attr] = st.none() | value if f.optional else value
    return st.builds(cls, **kwargs)


any_header = st.sampled_from(ALL_HEADERS).flatmap(instances)


def test_there_is_a_header_for_every_spec_section() -> None:
    names = {c.__name__ for c in ALL_HEADERS}
    assert len(names) >= 50
    for needed in (
        "SendMessageRequestHeader",
        "SendMessageRequestHeaderV2",
        "SendMessageResponseHeader",
        "PullMessageRequestHeader",
        "PullMessageResponseHeader",
        "QueryConsumerOffsetRequestHeader",
        "QueryConsumerOffsetResponseHeader",
        "UpdateConsumerOffsetRequestHeader",
        "GetMaxOffsetRequestHeader",
        "GetMinOffsetResponseHeader",
        "SearchOffsetRequestHeader",
        "GetEarliestMsgStoretimeResponseHeader",
        "ViewMessageRequestHeader",
        "QueryMessageResponseHeader",
        "ConsumerSendMsgBackRequestHeader",
        "EndTransactionRequestHeader",
        "CheckTransactionStateRequestHeader",
        "GetConsumerListByGroupRequestHeader",
        "NotifyConsumerIdsChangedRequestHeader",
        "UnregisterClientRequestHeader",
        "CreateTopicRequestHeader",
        "DeleteTopicRequestHeader",
        "GetTopicStatsInfoRequestHeader",
        "GetConsumeStatsRequestHeader",
        "ResetOffsetRequestHeader",
        "GetConsumerConnectionListRequestHeader",
        "GetConsumerRunningInfoRequestHeader",
        "RegisterBrokerRequestHeader",
        "RegisterBrokerResponseHeader",
        "UnregisterBrokerRequestHeader",
        "GetRouteInfoRequestHeader",
        "PutKVConfigRequestHeader",
        "GetKVConfigResponseHeader",
        "DeleteKVConfigRequestHeader",
        "DeleteTopicFromNamesrvRequestHeader",
        "QueryDataVersionRequestHeader",
        "QueryDataVersionResponseHeader",
        "WipeWritePermOfBrokerRequestHeader",
        "AddWritePermOfBrokerResponseHeader",
        "GetTopicsByClusterRequestHeader",
        "ReplyMessageRequestHeader",
    ):
        assert needed in names


@settings(max_examples=400, deadline=None)
@given(any_header)
def test_every_header_round_trips_through_ext(h: Header) -> None:
    ext = h.to_ext()
    assert all(type(k) is str and type(v) is str for k, v in ext.items())
    assert type(h).from_ext(ext) == h
    # The generated fast path and the reference loop agree.
    assert _decode(type(h), type(h)._fields, ext) == h


@settings(max_examples=200, deadline=None)
@given(any_header)
def test_every_header_round_trips_through_a_real_frame(h: Header) -> None:
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, h.to_ext())
    back = decode_frame(cmd.encode()[4:])
    assert type(h).from_ext(back.ext_fields) == h


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_missing_required_field_names_header_and_field(cls: type[Header]) -> None:
    required = [f for f in cls._fields if f.required]
    if not required:
        assert cls.from_ext({}) == cls()
        return
    for f in required:
        ext = {g.key: {"int32": "1", "int64": "1", "bool": "true", "str": "x"}[_kind(g)] for g in cls._fields}
        cls.from_ext(ext)  # complete: fine
        del ext[f.key]
        with pytest.raises(ProtocolError) as err:
            cls.from_ext(ext)
        assert cls.__name__ in str(err.value) and repr(f.key) in str(err.value)


def test_send_v2_short_names_match_the_spec_table() -> None:
    spec = {
        "a": "producerGroup",
        "b": "topic",
        "c": "defaultTopic",
        "d": "defaultTopicQueueNums",
        "e": "queueId",
        "f": "sysFlag",
        "g": "bornTimestamp",
        "h": "flag",
        "i": "properties",
        "j": "reconsumeTimes",
        "k": "unitMode",
        "l": "maxReconsumeTimes",
        "m": "batch",
        "n": "bname",
    }
    v1 = {f.attr: f.key for f in SendMessageRequestHeader._fields}
    v2 = {f.attr: f.key for f in SendMessageRequestHeader._v2_fields}
    assert {v2[a]: v1[a] for a in v1} == spec
    assert [f.key for f in SendMessageRequestHeaderV2._fields] == list(spec)


@settings(deadline=None)
@given(instances(SendMessageRequestHeader))
def test_send_v1_v2_conversions_are_inverse(h: SendMessageRequestHeader) -> None:
    assert h.to_v2().to_v1() == h
    assert SendMessageRequestHeaderV2.from_ext(h.to_ext_v2()).to_v1() == h
    assert SendMessageRequestHeader.from_ext_v2(h.to_v2().to_ext()) == h
    assert SendMessageRequestHeader.from_request(RequestCode.SEND_MESSAGE_V2, h.to_ext_v2()) == h
    assert SendMessageRequestHeader.from_request(RequestCode.SEND_BATCH_MESSAGE, h.to_ext_v2()) == h
    assert SendMessageRequestHeader.from_request(RequestCode.SEND_REPLY_MESSAGE_V2, h.to_ext_v2()) == h
    assert SendMessageRequestHeader.from_request(RequestCode.SEND_MESSAGE, h.to_ext()) == h


def test_ali_ons_raw_json_values_in_a_hand_built_frame() -> None:
    # ali-ons sends extFields values as raw JS types: numbers and a JSON boolean for "k".
    header = (
        b'{"code":310,"language":"JAVA","version":121,"opaque":7,"flag":0,"extFields":{"a":"PG","b":"TopicTest",'
        b'"c":"TBW102","d":4,"e":2,"f":0,"g":1700000000123,"h":0,"i":"TAGS\\u0001TagA\\u0002","j":0,"k":false}}'
    )
    frame = len(header).to_bytes(4, "big") + header + b"hello"
    cmd = decode_frame(frame)
    h = SendMessageRequestHeader.from_request(cmd.code, cmd.ext_fields)
    assert h == SendMessageRequestHeader(
        producer_group="PG",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=2,
        sys_flag=0,
        born_timestamp=1700000000123,
        flag=0,
        properties="TAGS\x01TagA\x02",
        reconsume_times=0,
        unit_mode=False,
    )
    # The same values handed over un-coerced (an in-process dict) decode the same way.
    raw = {"a": "PG", "b": "TopicTest", "d": 4, "e": 2, "g": 1700000000123, "k": True, "m": 0}
    h2 = SendMessageRequestHeader.from_ext_v2(raw)
    assert (h2.queue_id, h2.born_timestamp, h2.unit_mode, h2.batch, h2.default_topic) == (
        2,
        1700000000123,
        True,
        False,
        "TBW102",
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("false", False), ("1", True), ("0", False), ("TRUE", True), ("False", False)],
)
def test_booleans_are_lenient(text: str, value: bool) -> None:
    h = GetRouteInfoRequestHeader.from_ext({"topic": "T", "acceptStandardJsonOnly": text})
    assert h.accept_standard_json_only is value


@pytest.mark.parametrize("bad", ["yes", "2", "", "tru", "null"])
def test_bad_boolean_raises(bad: str) -> None:
    with pytest.raises(ProtocolError, match="compressed"):
        RegisterBrokerRequestHeader.from_ext(
            {
                "brokerName": "b",
                "brokerAddr": "a",
                "clusterName": "c",
                "haServerAddr": "h",
                "brokerId": "0",
                "compressed": bad,
            }
        )


@pytest.mark.parametrize("bad", ["x", "", "1.5", "2147483648", "-2147483649", "9" * 40, "0x10"])
def test_bad_int32_raises(bad: str) -> None:
    ext = PullMessageRequestHeader(
        consumer_group="g", topic="t", queue_id=0, queue_offset=0, sys_flag=0, commit_offset=0
    ).to_ext()
    ext["queueId"] = bad
    with pytest.raises(ProtocolError, match="queueId"):
        PullMessageRequestHeader.from_ext(ext)


def test_int64_bounds() -> None:
    ok = PullMessageResponseHeader.from_ext(
        {"nextBeginOffset": str(2**63 - 1), "minOffset": str(-(2**63)), "maxOffset": "0"}
    )
    assert ok.next_begin_offset == 2**63 - 1 and ok.suggest_which_broker_id == 0
    with pytest.raises(ProtocolError):
        PullMessageResponseHeader.from_ext(
            {"nextBeginOffset": str(2**63), "minOffset": "0", "maxOffset": "0"}
        )


def test_to_ext_emits_all_non_none_fields_and_java_keys() -> None:
    assert SendMessageResponseHeader(msg_id="ID", queue_id=1, queue_offset=2).to_ext() == {
        "msgId": "ID",
        "queueId": "1",
        "queueOffset": "2",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    assert UnregisterClientRequestHeader(client_id="1.2.3.4@1", consumer_group="G").to_ext() == {
        "clientID": "1.2.3.4@1",
        "consumerGroup": "G",
    }
    q = QueryMessageRequestHeader(
        topic="T", key="K", max_num=32, begin_timestamp=0, end_timestamp=1, unique_key_query=True
    )
    assert q.to_ext()["_UNIQUE_KEY_QUERY"] == "true"
    c = CreateTopicRequestHeader(topic="T", read_queue_nums=4, write_queue_nums=4, perm=6)
    assert c.to_ext() == {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
    }


def test_unknown_keys_are_ignored() -> None:
    ext = {
        "producerGroup": "P",
        "tranStateTableOffset": "1",
        "commitLogOffset": "2",
        "commitOrRollback": "8",
        "msgId": "M",
        "bname": "x",
        "ns": "y",
        "oway": "true",
    }
    h = EndTransactionRequestHeader.from_ext(ext)
    assert (h.commit_or_rollback, h.from_transaction_check, h.transaction_id) == (8, False, None)


def test_headers_are_keyword_only_slotted_dataclasses() -> None:
    for cls in ALL_HEADERS:
        assert dataclasses.is_dataclass(cls)
        assert "__slots__" in cls.__dict__
    with pytest.raises(TypeError):
        PullMessageRequestHeader("g", "t")  # type: ignore[misc]


def test_pull_sys_flag_bits() -> None:
    assert PullSysFlag.build(commit_offset=True, suspend=True, subscription=True) == 7
    assert PullSysFlag.build(suspend=True, subscription=True) == 6
    assert PullSysFlag.build(class_filter=True, lite_pull=True) == 24
    assert PullSysFlag.clear_commit_offset(7) == 6
    h = PullMessageRequestHeader(
        consumer_group="g", topic="t", queue_id=0, queue_offset=0, sys_flag=6, commit_offset=-1
    )
    assert (h.has_commit_offset, h.has_suspend, h.has_subscription) == (False, True, True)
    assert (h.max_msg_nums, h.suspend_timeout_millis, h.sub_version) == (32, 15000, 0)


_junk_value = st.one_of(
    st.text(max_size=30),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.binary(max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(ALL_HEADERS),
    st.dictionaries(st.text(max_size=25), _junk_value, max_size=12),
    st.data(),
)
def test_from_ext_with_garbage_raises_only_protocol_error(cls: type[Header], junk: dict, data) -> None:  # type: ignore[no-untyped-def]
    # Mix real keys with junk values so the field parsers are exercised too.
    for f in cls._fields:
        if data.draw(st.booleans()):
            junk[f.key] = data.draw(_junk_value)
    try:
        h = cls.from_ext(junk)
    except ProtocolError:
        return
    assert isinstance(h, cls)
    assert cls.from_ext(h.to_ext()) == h


@pytest.mark.parametrize("bad", [None, 5, "str", b"bytes", [("a", "b")]])
def test_from_ext_of_non_mapping_raises_protocol_error(bad: object) -> None:
    with pytest.raises(ProtocolError):
        PullMessageRequestHeader.from_ext(bad)  # type: ignore[arg-type]


_number_like = st.one_of(
    st.sampled_from(["0", "-0", "+1", "01", " 1", "1 ", "-1", "-2", "255", "256", "1_0", "٣", "true", ""]),
    st.integers(-(2**64), 2**64).map(str),
    st.integers(-3, 300),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL_HEADERS), st.data())
def test_compiled_decoders_agree_with_the_reference_decoder(cls: type[Header], data) -> None:  # type: ignore[no-untyped-def]
    """The generated fast decoders (small-number table, inline int()) decode as headers._decode does; the
    SEND_MESSAGE_V2 short-name form too."""
    from rocketq.protocol.headers import SendMessageRequestHeader, _decode

    tables = [cls._fields]
    if cls is SendMessageRequestHeader:
        tables.append(cls._v2_fields)
    for table in tables:
        ext = {
            f.key: data.draw(_number_like | st.text(max_size=4)) for f in table if data.draw(st.booleans())
        }
        try:
            want = _decode(cls, table, ext)
        except ProtocolError:
            want = None
        try:
            fast = (cls._v2_decode if table is not cls._fields else cls._fast_decode)(ext)
        except Exception:
            fast = None  # from_ext/from_request then run _decode: same answer by construction
        if fast is not None:
            assert want is not None and fast == want, ext
        try:
            got = cls.from_request(310, ext) if table is not cls._fields else cls.from_ext(ext)
        except ProtocolError:
            got = None
        assert got == want
