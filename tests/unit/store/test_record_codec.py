"""Record codec (spec §5), property strings (§5/§6), batch body and compression helpers."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import sysflag as sf
from rocketq.protocol.frame import ProtocolError
from rocketq.protocol.properties import (
    MAX_PROPERTIES_LENGTH,
    decode_properties,
    encode_properties,
    properties_to_string,
)
from rocketq.protocol.record import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    compress_body,
    decode_batch,
    decode_record,
    decode_records,
    decode_records_lenient,
    decompress_body,
    encode_batch,
    encode_record,
    encode_record_into,
    ip4_bytes,
    record_size,
)


def golden_record() -> bytes:
    """Built field by field from the spec table, independently of the codec's Structs."""
    body = b"hello rocketq"
    topic = b"TopicTest"
    props = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x017F0000010001000000000000000A0001"
    total = (
        4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + 8
        + 8
        + 8
        + 4
        + 8
        + 4
        + len(body)
        + 1
        + len(topic)
        + 2
        + len(props)
    )
    parts = [
        struct.pack(">i", total),  # 1 TOTALSIZE
        struct.pack(">I", 0xDAA320A7),  # 2 MAGICCODE
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),  # 3 BODYCRC
        struct.pack(">i", 3),  # 4 QUEUEID
        struct.pack(">i", 7),  # 5 FLAG
        struct.pack(">q", 42),  # 6 QUEUEOFFSET
        struct.pack(">q", 1024),  # 7 PHYSICALOFFSET
        struct.pack(">i", 0),  # 8 SYSFLAG
        struct.pack(">q", 1_700_000_000_123),  # 9 BORNTIMESTAMP
        bytes([10, 0, 0, 9]) + struct.pack(">i", 5555),  # 10 BORNHOST
        struct.pack(">q", 1_700_000_000_456),  # 11 STORETIMESTAMP
        bytes([127, 0, 0, 1]) + struct.pack(">i", 10091),  # 12 STOREHOST
        struct.pack(">i", 2),  # 13 RECONSUMETIMES
        struct.pack(">q", 99),  # 14 PREPARED_TRANSACTION_OFFSET
        struct.pack(">i", len(body)) + body,  # 15 BODY
        struct.pack(">b", len(topic)) + topic,  # 16 TOPIC
        struct.pack(">h", len(props)) + props,  # 17 PROPERTIES
    ]
    rec = b"".join(parts)
    assert len(rec) == total == 91 + len(body) + len(topic) + len(props)
    return rec


def test_golden_record_decodes_field_by_field():
    rec = golden_record()
    m = decode_record(rec, verify_crc=True)
    assert m.store_size == len(rec)
    assert m.magic == MAGIC_CODE_V1 == -626843481
    assert m.body_crc == zlib.crc32(b"hello rocketq") & 0x7FFFFFFF
    assert (m.queue_id, m.flag, m.queue_offset, m.commit_log_offset) == (3, 7, 42, 1024)
    assert m.sys_flag == 0
    assert m.born_timestamp == 1_700_000_000_123
    assert m.born_host == ("10.0.0.9", 5555)
    assert m.store_timestamp == 1_700_000_000_456
    assert m.store_host == ("127.0.0.1", 10091)
    assert m.reconsume_times == 2
    assert m.prepared_transaction_offset == 99
    assert bytes(m.body) == b"hello rocketq"
    assert isinstance(m.body, memoryview)  # no copy of the body
    assert m.topic == "TopicTest"
    assert m.tags == "TagA"
    assert m.keys == ["k1", "k2"]
    assert m.msg_id == "7F0000010001000000000000000A0001"  # UNIQ_KEY wins
    assert m.offset_msg_id == "7F0000010000276B0000000000000400"  # spec §5 example


def test_golden_record_is_what_the_encoder_writes():
    rec = golden_record()
    props = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x017F0000010001000000000000000A0001"
    out = encode_record(
        b"hello rocketq", "TopicTest", props, queue_id=3, flag=7, queue_offset=42, phys_offset=1024,
        born_timestamp=1_700_000_000_123, born_host=("10.0.0.9", 5555), store_timestamp=1_700_000_000_456,
        store_host=("127.0.0.1", 10091), reconsume_times=2, prepared_transaction_offset=99,
    )  # fmt: skip
    assert out == rec


def test_encode_into_writes_only_its_range():
    buf = bytearray(b"\xee" * 400)
    n = encode_record_into(
        buf,
        50,
        b"abc",
        b"T",
        b"",
        0,
        0,
        0,
        50,
        0,
        0,
        ip4_bytes("1.2.3.4"),
        1,
        0,
        ip4_bytes("127.0.0.1"),
        2,
        0,
        0,
    )
    assert n == record_size(3, 1, 0) == 95
    assert buf[:50] == b"\xee" * 50 and buf[50 + n :] == b"\xee" * (400 - 50 - n)
    assert decode_record(memoryview(buf)[50 : 50 + n]).born_host == ("1.2.3.4", 1)


def test_offset_msg_id_without_uniq_key():
    rec = encode_record(b"x", "T", b"", phys_offset=1024, store_host=("127.0.0.1", 10091))
    assert decode_record(rec).msg_id == "7F0000010000276B0000000000000400"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:50],  # truncated
        lambda b: b[:4] + struct.pack(">i", 0x12345678) + b[8:],  # bad magic
        lambda b: struct.pack(">i", len(b) + 10) + b[4:],  # size beyond buffer
        lambda b: struct.pack(">i", 20) + b[4:],  # size too small
    ],
)
def test_corrupt_records_raise_protocol_error(mutate):
    rec = golden_record()
    with pytest.raises(ProtocolError):
        decode_records(mutate(rec))


def test_body_crc_checked_on_request():
    rec = bytearray(golden_record())
    rec[88] ^= 1  # first body byte
    decode_record(bytes(rec))  # structure intact
    with pytest.raises(ProtocolError):
        decode_record(bytes(rec), verify_crc=True)


def test_strict_and_lenient_multi_record_decoding():
    a = encode_record(b"one", "T", b"", queue_offset=0)
    b = encode_record(b"two", "T", b"", queue_offset=1)
    ms = decode_records(a + b)
    assert [bytes(m.body) for m in ms] == [b"one", b"two"]
    with pytest.raises(ProtocolError):
        decode_records(a + b + b"\x00\x00\x00")
    assert [bytes(m.body) for m in decode_records_lenient(a + b + b"\x00\x00\x00")] == [b"one", b"two"]
    assert decode_records_lenient(b"garbage" + a) == []


def test_blank_magic_is_not_a_message():
    blank = struct.pack(">ii", 100, BLANK_MAGIC_CODE) + bytes(92)
    with pytest.raises(ProtocolError):
        decode_record(blank)


def test_ipv6_hosts_decode():
    # 4.x stores IPv4; a V6 record (sysflag 0x10|0x20) must still decode: hosts are 16 + 4 bytes
    body, topic = b"b", b"T"
    v6 = bytes(15) + b"\x01"
    rec = b"".join([
        struct.pack(">iiiiiqqiq", 0, MAGIC_CODE_V1, zlib.crc32(body) & 0x7FFFFFFF, 1, 0, 5, 0,
                    sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG, 11),
        v6, struct.pack(">i", 7), struct.pack(">q", 12), v6, struct.pack(">i", 8),
        struct.pack(">iqi", 0, 0, 1), body, struct.pack(">b", 1), topic, struct.pack(">h", 0),
    ])  # fmt: skip
    rec = struct.pack(">i", len(rec)) + rec[4:]
    m = decode_record(rec, verify_crc=True)
    assert m.born_host == ("::1", 7) and m.store_host == ("::1", 8)
    assert m.store_timestamp == 12 and m.queue_offset == 5 and bytes(m.body) == b"b"


# --- properties ---


def test_properties_layout_java_and_ali_ons():
    assert properties_to_string({"A": "1", "B": "2"}) == "A\x011\x02B\x012"  # Java: no trailing \x02
    assert decode_properties("A\x011\x02B\x012\x02") == {"A": "1", "B": "2"}  # ali-ons trailing \x02
    assert decode_properties(b"\x02\x02A\x01\x02xx\x02B\x01v") == {"B": "v"}  # short / malformed skipped
    with pytest.raises(ValueError):
        encode_properties({"K": "v" * MAX_PROPERTIES_LENGTH})


_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)


@given(st.dictionaries(_text.filter(lambda k: len(k) >= 2), _text, max_size=6))
def test_properties_round_trip(props):
    assert decode_properties(encode_properties(props)) == props


# --- record round trip ---


@settings(max_examples=150, deadline=None)
@given(
    body=st.binary(max_size=600),
    topic=st.text(alphabet="abcXYZ%_-|0123456789", min_size=1, max_size=127),
    props=st.dictionaries(_text.filter(lambda k: len(k) >= 2), _text, max_size=4),
    ints=st.tuples(
        st.integers(0, 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(0, 0xFF),
        st.integers(0, 2**62),
        st.integers(0, 65535),
    ),
)
def test_record_round_trip(body, topic, props, ints):
    qid, flag, qoff, phys, sysflag, ts, port = ints
    sysflag &= ~(sf.BORNHOST_V6_FLAG | sf.STOREHOST_ADDRESS_V6_FLAG)
    rec = encode_record(
        body, topic, encode_properties(props), queue_id=qid, flag=flag, queue_offset=qoff, phys_offset=phys,
        sys_flag=sysflag, born_timestamp=ts, born_host=("192.168.1.2", port), store_timestamp=ts + 1,
        store_host=("10.1.2.3", port), reconsume_times=qid % 17, prepared_transaction_offset=phys // 2,
    )  # fmt: skip
    m = decode_record(rec, verify_crc=True)
    assert (m.topic, bytes(m.body), m.properties) == (topic, body, props)
    assert (m.queue_id, m.flag, m.queue_offset, m.commit_log_offset, m.sys_flag) == (
        qid,
        flag,
        qoff,
        phys,
        sysflag,
    )
    assert (m.born_timestamp, m.store_timestamp) == (ts, ts + 1)
    assert m.born_host == ("192.168.1.2", port) and m.store_host == ("10.1.2.3", port)
    assert m.reconsume_times == qid % 17 and m.prepared_transaction_offset == phys // 2
    assert (
        m.store_size == len(rec) == record_size(len(body), len(topic.encode()), len(encode_properties(props)))
    )


# --- batch body ---


@given(
    st.lists(
        st.tuples(
            st.binary(max_size=200),
            st.integers(-(2**31), 2**31 - 1),
            st.dictionaries(_text.filter(lambda k: len(k) >= 2), _text, max_size=3),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_batch_round_trip(items):
    decoded = decode_batch(encode_batch(items))
    assert [(bytes(m.body), m.flag, m.properties) for m in decoded] == items


def test_batch_layout_and_errors():
    raw = encode_batch([(b"ab", 5, {"K": "v"})])
    # totalSize, magic 0, bodyCRC 0, flag, bodyLen + body, propsLen + props
    assert raw == struct.pack(">iiiii", 22 + 2 + 3, 0, 0, 5, 2) + b"ab" + struct.pack(">h", 3) + b"K\x01v"
    with pytest.raises(ProtocolError):
        decode_batch(raw[:-1])
    with pytest.raises(ProtocolError):
        decode_batch(struct.pack(">iiiii", 10, 0, 0, 0, 50) + bytes(40))


# --- compression ---


def test_compression_flags_and_decompression():
    body = b"rocketq " * 1000
    packed, bits = compress_body(body)
    assert bits == sf.COMPRESSED_FLAG | sf.COMPRESSION_ZLIB == 0x301
    assert decompress_body(packed, bits) == body
    assert decompress_body(packed, sf.COMPRESSED_FLAG) == body  # old Java / ali-ons: type bits 0 = zlib
    raw_deflate = zlib.compressobj(5, zlib.DEFLATED, -15)
    raw = raw_deflate.compress(body) + raw_deflate.flush()
    assert decompress_body(raw, sf.COMPRESSED_FLAG) == body  # raw deflate tolerated
    assert decompress_body(b"plain", 0) == b"plain"
    with pytest.raises(ProtocolError):
        decompress_body(b"not zlib at all", sf.COMPRESSED_FLAG)


def test_sysflag_helpers():
    assert (
        sf.transaction_type(sf.TRANSACTION_ROLLBACK_TYPE | sf.COMPRESSED_FLAG) == sf.TRANSACTION_ROLLBACK_TYPE
    )
    assert sf.reset_transaction_value(0x4 | 0x1, sf.TRANSACTION_NOT_TYPE) == 0x1
    assert sf.compression_type(sf.COMPRESSED_FLAG) == sf.COMPRESSION_ZLIB
