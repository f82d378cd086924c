"""Route / registration bodies: golden JSON, fastjson quirks, compressed RegisterBrokerBody."""

from __future__ import annotations

import struct
import zlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import ProtocolError
from rocketq.protocol.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    body_crc32,
)

SPEC_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)


def _route() -> TopicRouteData:
    return TopicRouteData(
        [BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})],
        [QueueData("broker-a", 4, 4, 6, 0)],
    )


def test_route_encodes_exactly_like_the_spec_example() -> None:
    assert _route().encode() == SPEC_ROUTE


def test_route_decodes_spec_example() -> None:
    r = TopicRouteData.decode(SPEC_ROUTE)
    assert r == _route()
    assert r.broker_datas[0].master_addr == "127.0.0.1:10911"
    assert r.queue_datas[0].readable and r.queue_datas[0].writable
    assert r.order_topic_conf is None


def test_route_order_conf_emitted_only_when_set() -> None:
    r = _route()
    r.order_topic_conf = "broker-a:4"
    obj = orjson.loads(r.encode())
    assert obj["orderTopicConf"] == "broker-a:4"
    assert "orderTopicConf" not in orjson.loads(_route().encode())


def test_route_fastjson_unquoted_numeric_keys_and_old_field_name() -> None:
    raw = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b",'
        b'"cluster":"C"}],"queueDatas":[{"brokerName":"b","perm":"4","readQueueNums":8,'
        b'"topicSynFlag":2,"writeQueueNums":8,"extra":1}],"unknownField":[1,2]}'
    )
    r = TopicRouteData.decode(raw)
    assert r.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    q = r.queue_datas[0]
    assert (q.perm, q.topic_sys_flag, q.readable, q.writable) == (4, 2, True, False)


def test_broker_data_select_addr_falls_back_to_a_slave() -> None:
    assert BrokerData("c", "b", {2: "s2", 1: "s1"}).select_addr() == "s1"
    assert BrokerData("c", "b", {}).select_addr() is None


def test_register_body_plain_json_golden() -> None:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper({"T": TopicConfig("T", 4, 4)}, DataVersion(1700000000000, 1)), []
    )
    assert body.encode() == (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,'
        b'"timestamp":1700000000000},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,'
        b'"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}}'
    )
    assert RegisterBrokerBody.decode_body(body.encode_body(False), False) == body


def _java_style_compressed(version: bytes, topics: list[str], servers: bytes) -> bytes:
    out = struct.pack(">i", len(version)) + version + struct.pack(">i", len(topics))
    for t in topics:
        out += struct.pack(">i", len(t.encode())) + t.encode()
    out += struct.pack(">i", len(servers)) + servers
    return zlib.compress(out, 9)


def test_register_body_compressed_hand_built_decodes() -> None:
    blob = _java_style_compressed(
        b'{"counter":7,"timestamp":42}', ["TopicA 8 4 6 SINGLE_TAG", "TBW102 8 8 7 MULTI_TAG"], b'["fs:1"]'
    )
    body = RegisterBrokerBody.decode_body(blob, compressed=True)
    assert body.data_version == DataVersion(42, 7)
    assert body.topic_config_table["TopicA"] == TopicConfig("TopicA", 8, 4, 6, "SINGLE_TAG")
    assert body.topic_config_table["TBW102"].perm == 7
    assert body.topic_config_table["TBW102"].topic_filter_type == "MULTI_TAG"
    assert body.filter_server_list == ["fs:1"]


def test_register_body_compressed_accepts_5x_attributes_suffix() -> None:
    blob = _java_style_compressed(b"{}", ['T 4 4 6 SINGLE_TAG {"+message.type": "NORMAL"}'], b"[]")
    body = RegisterBrokerBody.decode_compressed(blob)
    assert body.topic_config_table["T"] == TopicConfig("T", 4, 4, 6, "SINGLE_TAG")


def test_register_body_compressed_round_trip_loses_only_sysflag_and_order() -> None:
    cfg = TopicConfig("T", 2, 3, 6, "SINGLE_TAG", topic_sys_flag=1, order=True)
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({"T": cfg}, DataVersion(5, 9)), ["a:1"])
    back = RegisterBrokerBody.decode_compressed(body.encode_compressed())
    assert back.topic_config_table["T"] == TopicConfig("T", 2, 3, 6, "SINGLE_TAG")
    assert back.data_version == DataVersion(5, 9)
    assert back.filter_server_list == ["a:1"]


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"not zlib at all",
        zlib.compress(b"\x00\x00"),  # truncated length
        zlib.compress(struct.pack(">i", 1000) + b"{}"),  # length beyond data
        zlib.compress(struct.pack(">i", -1)),
        zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", -5)),  # negative topic count
        zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 3) + b"a b"),
        zlib.compress(struct.pack(">iii", 0, 1, 12) + b"T 1 1 6 NOPE"),
        zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 0) + struct.pack(">i", 2) + b"{}"),
        zlib.compress(struct.pack(">i", 2) + b"[]" + struct.pack(">i", 0) + struct.pack(">i", 2) + b"[]"),
        zlib.compress(b"x" * 100)[:-4],  # truncated stream
    ],
)
def test_register_body_compressed_junk_raises_protocol_error(blob: bytes) -> None:
    with pytest.raises(ProtocolError):
        RegisterBrokerBody.decode_compressed(blob)


def test_register_body_compressed_bomb_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import rocketq.protocol.route as route

    monkeypatch.setattr(route, "MAX_INFLATED_SIZE", 1024)
    with pytest.raises(ProtocolError):
        RegisterBrokerBody.decode_compressed(zlib.compress(b"\x00" * 100_000))


def test_body_crc32_is_masked_to_non_negative_int32() -> None:
    assert body_crc32(b"") == 0
    assert body_crc32(b"hello") == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert all(0 <= body_crc32(bytes([i]) * 7) < 2**31 for i in range(256))


def test_cluster_info_golden_and_round_trip() -> None:
    ci = ClusterInfo(
        {"broker-a": BrokerData("DefaultCluster", "broker-a", {0: "ip:port"})},
        {"DefaultCluster": {"broker-a"}},
    )
    assert ci.encode() == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"ip:port"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    assert ClusterInfo.decode(ci.encode()) == ci


def test_topic_list_and_kv_table() -> None:
    assert TopicList({"b", "a"}).encode() == b'{"topicList":["a","b"]}'
    assert TopicList.decode(b'{"topicList":["x"],"brokerAddr":"1:2"}') == TopicList({"x"}, "1:2")
    assert KVTable({"k": "v"}).encode() == b'{"table":{"k":"v"}}'
    assert KVTable.decode(b'{"table":{"k":"v"}}').table == {"k": "v"}


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b"{",
        b'{"brokerDatas":{}}',
        b'{"queueDatas":[{"perm":"x"}]}',
        b'{"brokerDatas":[1]}',
        b"\xff",
    ],
)
def test_route_junk_raises_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        TopicRouteData.decode(raw)


def test_data_version_next() -> None:
    assert DataVersion(1, 5).next_version(99) == DataVersion(99, 6)


# -- properties / fuzz for the compressed form ----------------------------------------------------------

_name = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=12)
_cfg = st.builds(
    TopicConfig,
    _name,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 15),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
)
_bodies = st.builds(
    RegisterBrokerBody,
    st.builds(
        TopicConfigSerializeWrapper,
        st.lists(_cfg, max_size=6).map(lambda cs: {c.topic_name: c for c in cs}),
        st.builds(DataVersion, st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)),
    ),
    st.lists(st.text(max_size=10), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(_bodies)
def test_compressed_register_body_round_trip(body: RegisterBrokerBody) -> None:
    assert RegisterBrokerBody.decode_body(body.encode_body(True), True) == body
    assert RegisterBrokerBody.decode_body(body.encode_body(False), False) == body


@settings(max_examples=300, deadline=None)
@given(_bodies, st.data())
def test_compressed_register_body_truncated_or_corrupted(
    body: RegisterBrokerBody, data: st.DataObject
) -> None:
    blob = body.encode_compressed()
    cut = data.draw(st.integers(0, len(blob) - 1))
    with pytest.raises(ProtocolError):
        RegisterBrokerBody.decode_compressed(blob[:cut])
    # Corrupt the inflated payload (valid deflate stream, wrong contents).
    raw = bytearray(zlib.decompress(blob))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        RegisterBrokerBody.decode_compressed(zlib.compress(bytes(raw)))
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_compressed_register_body_random_bytes(data: bytes, wrap: bool) -> None:
    try:
        RegisterBrokerBody.decode_compressed(zlib.compress(data) if wrap else data)
    except ProtocolError:
        pass
