"""Message encoding for send (properties, batch body, compression flags) and record decoding."""

from __future__ import annotations

import socket
import struct
import zlib

from rocketq.client.codec import (
    MAGIC_V1,
    SYSFLAG_COMPRESSED,
    SYSFLAG_ZLIB,
    UniqIdGenerator,
    decode_offset_msg_id,
    decode_records,
    encode_batch,
    offset_msg_id,
    properties_to_string,
    string_to_properties,
)
from rocketq.client.message import Message, MessageQueue
from rocketq.client.subscription import SubscriptionData, java_string_hash


def test_properties_round_trip_and_lenient_parse() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "a": "1"}
    s = properties_to_string(props)
    assert s == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02a\x011"
    assert string_to_properties(s) == props
    # ali-ons appends a trailing separator; junk segments are skipped
    assert string_to_properties(s + "\x02") == props
    assert string_to_properties("x\x02ab\x02k\x01v\x02") == {"k": "v"}


def test_offset_msg_id_matches_spec_example() -> None:
    mid = offset_msg_id(socket.inet_aton("127.0.0.1"), 10091, 1024)
    assert mid == "7F0000010000276B0000000000000400"
    assert decode_offset_msg_id(mid) == ("127.0.0.1:10091", 1024)


def test_uniq_ids_are_unique_32_hex() -> None:
    gen = UniqIdGenerator()
    ids = [gen.next_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) == 32 and i == i.upper() and int(i, 16) >= 0 for i in ids)


def test_message_wire_properties() -> None:
    m = Message("T", "hello", tags="TagA", keys=["K1", "K2"], properties={"a": "1"}, delay_level=3)
    assert m.body == b"hello"
    assert m.wire_properties() == {"a": "1", "TAGS": "TagA", "KEYS": "K1 K2", "DELAY": "3"}
    assert Message("T", b"x", keys="A B").keys == ["A", "B"]


def test_batch_body_layout() -> None:
    msgs = [Message("T", b"abc", flag=7), Message("T", b"")]
    body = encode_batch(msgs, ["k\x01v", ""])
    total, magic, crc, flag, blen = struct.unpack_from(">iiiii", body, 0)
    assert (total, magic, crc, flag, blen) == (20 + 3 + 2 + 3, 0, 0, 7, 3)
    assert body[20:23] == b"abc"
    assert struct.unpack_from(">h", body, 23) == (3,)
    assert body[25:28] == b"k\x01v"
    assert struct.unpack_from(">iiiii", body, 28)[0] == 22
    assert len(body) == 28 + 22


def record(
    topic: str, body: bytes, props: str, *, qid: int = 1, qoff: int = 5, phy: int = 4096, sysflag: int = 0
) -> bytes:
    t = topic.encode()
    p = props.encode()
    size = 91 + len(body) + len(t) + len(p)
    return b"".join(
        [
            struct.pack(
                ">iiiiiqqiq", size, MAGIC_V1, zlib.crc32(body) & 0x7FFFFFFF, qid, 0, qoff, phy, sysflag, 111
            ),
            socket.inet_aton("10.0.0.1") + struct.pack(">i", 5555),
            struct.pack(">q", 222),
            socket.inet_aton("127.0.0.1") + struct.pack(">i", 10911),
            struct.pack(">iq", 2, 0),
            struct.pack(">i", len(body)) + body,
            struct.pack(">b", len(t)) + t,
            struct.pack(">h", len(p)) + p,
        ]
    )


def test_decode_records_including_compressed_and_garbage_tail() -> None:
    big = b"z" * 5000
    data = (
        record("T", b"hello", "TAGS\x01TagA\x02UNIQ_KEY\x01ABC")
        + record("T", zlib.compress(big), "", qoff=6, phy=5000, sysflag=SYSFLAG_COMPRESSED | SYSFLAG_ZLIB)
        + b"\x00\x00\x00\x10garbage"
    )
    out = decode_records(data, "broker-a")
    assert len(out) == 2
    a, b = out
    assert (a.topic, a.body, a.tags, a.queue_id, a.queue_offset, a.commit_log_offset) == (
        "T",
        b"hello",
        "TagA",
        1,
        5,
        4096,
    )
    assert a.msg_id == "ABC"
    assert a.offset_msg_id == offset_msg_id(socket.inet_aton("127.0.0.1"), 10911, 4096)
    assert (a.born_timestamp, a.store_timestamp, a.reconsume_times) == (111, 222, 2)
    assert a.born_host == "10.0.0.1:5555" and a.store_host == "127.0.0.1:10911"
    assert a.broker_name == "broker-a" and a.queue == MessageQueue("T", "broker-a", 1)
    assert b.body == big and b.msg_id == b.offset_msg_id


def test_tag_expression_and_java_hash() -> None:
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("") == 0
    assert java_string_hash("hello world, a long string") == -1695001410  # wraps like Java int
    assert java_string_hash("标签") == 0x6807 * 31 + 0x7B7E
    sub = SubscriptionData.build("T", " TagA || TagB ||TagA")
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [java_string_hash("TagA"), java_string_hash("TagB")]
    assert SubscriptionData.build("T", "*").matches_all
    assert SubscriptionData.build("T", "").sub_string == "*"


_FIELDS = (
    "topic", "body", "flag", "properties", "tags", "keys", "delay_level", "msg_id", "offset_msg_id",
    "queue_id", "queue_offset", "commit_log_offset", "sys_flag", "born_timestamp", "born_host",
    "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "store_size",
    "body_crc", "broker_name",
)  # fmt: skip


def test_lazy_decode_equals_eager_decode() -> None:
    from rocketq.client.codec import _decode_one

    data = record("T", b"hello", "TAGS\x01TagA\x02KEYS\x01k1 k2\x02DELAY\x013\x02a\x011") + record(
        "T", b"x" * 100, "", qoff=6, phy=5000
    )
    lazy = decode_records(data, "broker-a")
    view = memoryview(data)
    eager = [_decode_one(view, 0, "broker-a"), _decode_one(view, lazy[0].store_size, "broker-a")]
    assert len(lazy) == 2 and lazy[1].store_size == 91 + 100 + 1
    for lz, eg in zip(lazy, eager, strict=True):
        assert lz._praw is not None  # still unparsed
        assert type(lz.body) is bytes
        assert type(lz._h) is bytes and len(lz._h) == 88  # its own header bytes: the pull body is not kept
        for name in _FIELDS:
            assert getattr(lz, name) == getattr(eg, name), name
    a = lazy[0]
    assert (a.tags, a.keys, a.delay_level, a.properties["a"]) == ("TagA", ["k1", "k2"], 3, "1")
    assert a.offset_msg_id == "7F00000100002A9F0000000000001000"  # 127.0.0.1:10911 @ 4096
    assert a.msg_id == a.offset_msg_id  # no UNIQ_KEY


def test_lazy_properties_pending_extras_and_user_writes() -> None:
    import copy
    import pickle

    from rocketq.client.message import put_properties_lazily

    data = record("T", b"a", "UNIQ_KEY\x01U1") + record("T", b"b", "TAGS\x01X", qoff=6)
    a, b = decode_records(data)
    b.tags = "mine"  # written before the first read: kept
    put_properties_lazily([a, b], {"MIN_OFFSET": "0"})
    put_properties_lazily([a], {"CONSUME_START_TIME": "9"})
    assert a._pextra is not b._pextra
    clone = pickle.loads(pickle.dumps(a))
    shallow = copy.copy(b)
    assert a.properties == {"UNIQ_KEY": "U1", "MIN_OFFSET": "0", "CONSUME_START_TIME": "9"}
    assert a.msg_id == "U1" and a._praw is None
    assert clone.properties == a.properties and clone.msg_id == "U1"
    assert b.tags == "mine" and b.properties == {"TAGS": "X", "MIN_OFFSET": "0"}
    assert shallow.tags == "mine" and shallow.properties == b.properties
    put_properties_lazily([a], {"K": "v"})  # already parsed: written straight into the dict
    assert a.properties["K"] == "v"
    try:
        a.no_such_field  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("unknown attributes must still raise")


def test_lazy_header_fields_keep_user_writes_and_extras_given_at_decode() -> None:
    data = record("T", b"a", "TAGS\x01X", qoff=7, phy=4096) + record("T", b"b", "", qoff=8)
    a, b = decode_records(data, "bk", {"MIN_OFFSET": "1"})
    assert a.queue_offset == 7 and a.topic == "T" and a.body == b"a"
    a.reconsume_times = 5  # written before any header field was read: kept
    a.store_host = "10.0.0.1:1"
    assert (a.queue_id, a.commit_log_offset, a.reconsume_times, a.store_host) == (1, 4096, 5, "10.0.0.1:1")
    assert (a.born_host, a.born_timestamp, a.store_timestamp, a.store_size) == ("10.0.0.1:5555", 111, 222, 99)
    b.reconsume_times += 1  # read-modify-write of a lazy field
    assert b.reconsume_times == 3 and b.store_host == "127.0.0.1:10911"
    assert a.properties == {"TAGS": "X", "MIN_OFFSET": "1"} and b.properties == {"MIN_OFFSET": "1"}
    assert a.broker_name == "bk"


def test_lazy_decode_stops_at_corrupt_record_and_handles_ipv6_fallback() -> None:
    good = record("T", b"hello", "")
    bad = bytearray(record("T", b"hello", ""))
    struct.pack_into(">h", bad, len(bad) - 2, 5)  # properties length beyond the record
    assert len(decode_records(good + bytes(bad) + good)) == 1
    assert len(decode_records(good[:-1])) == 0


def test_check_crc_leaves_out_a_corrupt_body_and_keeps_the_records_after_it() -> None:
    from rocketq.protocol.record import MAGIC_CODE_V2

    good = record("T", b"first", "", qoff=1)
    bad = bytearray(record("T", b"second", "", qoff=2, phy=9000))
    bad[88] ^= 0x01  # one bit of the body
    last = record("T", zlib.compress(b"third"), "", qoff=3, sysflag=SYSFLAG_COMPRESSED | SYSFLAG_ZLIB)
    v2 = bytearray(record("T", b"fourth", "", qoff=4))  # the general decoder's path (V2 magic, int16 topic)
    v2[4:8] = struct.pack(">i", MAGIC_CODE_V2)
    v2[88 + 6 : 89 + 6] = b"\x00"
    v2[89 + 6 : 89 + 6] = b"\x01"
    struct.pack_into(">i", v2, 0, len(v2))
    v2_bad = bytearray(v2)
    struct.pack_into(">q", v2_bad, 20, 5)
    v2_bad[89] ^= 0x01
    data = good + bytes(bad) + last + bytes(v2) + bytes(v2_bad)
    assert [m.body for m in decode_records(data)][1] == bytes(bad[88:94])  # unchecked: served as stored
    seen: list[tuple[int, int]] = []
    out = decode_records(data, check_crc=True, on_corrupt=lambda qoff, phy: seen.append((qoff, phy)))
    assert [m.body for m in out] == [b"first", b"third", b"fourth"]
    assert seen == [(2, 9000), (5, 4096)]
