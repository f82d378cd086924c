"""The index dispatch fast path against the plain definitions: byte-level hashing vs Java String.hashCode,
the in-place property scan vs a full record decode, and build_index_raw vs build_index (identical files)."""

from __future__ import annotations

import mmap
import os
import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.protocol import sysflag as sf
from rocketq.protocol.properties import encode_properties
from rocketq.protocol.record import MAGIC_CODE_V1, MAGIC_CODE_V2, decode_record
from rocketq.store.dispatch import _index_fields_raw
from rocketq.store.index_file import (
    IndexService,
    _raw_prefix_hash,
    build_key,
    index_key_hash,
    java_string_hash,
    raw_key_hash,
    topic_key_hash,
)

T0 = 1_700_000_000_000


def ref_java_hash(s: str) -> int:
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


text = st.text(st.characters(codec="utf-8"), max_size=40) | st.text(max_size=700)


@settings(max_examples=400, deadline=None)
@given(text)
def test_java_string_hash_matches_reference(s):
    assert java_string_hash(s) == ref_java_hash(s)


@settings(max_examples=400, deadline=None)
@given(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=30),
    st.binary(min_size=1, max_size=40) | st.binary(min_size=500, max_size=700) | text.map(str.encode),
)
def test_raw_key_hash_equals_hash_of_decoded_key(topic, key):
    if not key:
        return
    ph = _raw_prefix_hash(topic.encode())
    want = index_key_hash(build_key(topic, key.decode("utf-8", "replace")))
    assert raw_key_hash(ph, key) == want == topic_key_hash(topic, key.decode("utf-8", "replace"))


def test_raw_prefix_hash_rejects_non_utf8_topic():
    assert _raw_prefix_hash(b"\xff\xfe") is None


def build_record(
    body: bytes, topic: bytes, props: bytes, sys_flag: int, v2: bool, store_ts: int, phys: int = 0
) -> bytes:
    """A record field by field, in any of the V1/V2 x IPv4/IPv6 layouts."""

    def host(v6: bool) -> bytes:
        return (bytes(range(16)) if v6 else b"\x7f\x00\x00\x01") + struct.pack(">i", 10911)

    rest = (
        struct.pack(">q", T0)
        + host(bool(sys_flag & sf.BORNHOST_V6_FLAG))
        + struct.pack(">q", store_ts)
        + host(bool(sys_flag & sf.STOREHOST_ADDRESS_V6_FLAG))
        + struct.pack(">iqi", 0, 0, len(body))
        + body
        + (struct.pack(">h", len(topic)) if v2 else bytes([len(topic)]))
        + topic
        + struct.pack(">h", len(props))
        + props
    )
    size = 36 + 4 + len(rest)
    magic = MAGIC_CODE_V2 if v2 else MAGIC_CODE_V1
    head = struct.pack(">iiiiiqqi", size, magic, zlib.crc32(body) & 0x7FFFFFFF, 1, 0, 7, phys, sys_flag)
    return head + rest


prop_names = st.sampled_from(["KEYS", "UNIQ_KEY", "XKEYS", "UNIQ_KEYS", "TAGS", "WAIT", "K"])
prop_values = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=20)


@settings(max_examples=400, deadline=None)
@given(
    props=st.dictionaries(prop_names, prop_values, max_size=5),
    body=st.binary(max_size=64).map(lambda b: b + b"KEYS\x01x\x02UNIQ_KEY\x01y"),  # lookalikes in the body
    topic=st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    sys_flag=st.sampled_from([0, sf.BORNHOST_V6_FLAG, sf.STOREHOST_ADDRESS_V6_FLAG, 0x30, 0x4, 0x8, 0xC]),
    v2=st.booleans(),
)
def test_index_fields_raw_matches_full_decode(props, body, topic, sys_flag, v2):
    rec = build_record(body, topic.encode(), encode_properties(props), sys_flag, v2, T0 + 5)
    got = _index_fields_raw(rec, memoryview(rec), 0, len(rec), MAGIC_CODE_V2 if v2 else MAGIC_CODE_V1)
    m = decode_record(memoryview(rec))
    keys, uniq = m.properties.get("KEYS"), m.properties.get("UNIQ_KEY")
    if (sys_flag & sf.TRANSACTION_TYPE_MASK) == sf.TRANSACTION_ROLLBACK_TYPE or not (keys or uniq):
        assert got is None
        return
    assert got is not None
    t, k, u, ts = got
    assert (t.decode(), ts) == (m.topic, m.store_timestamp)
    assert (k.decode() if k else k) == (keys or (None if keys is None else b""))
    assert (u.decode() if u else u) == (uniq or (None if uniq is None else b""))


def test_index_fields_raw_garbled_lengths():
    rec = bytearray(build_record(b"body", b"T", encode_properties({"KEYS": "k"}), 0, False, T0))
    struct.pack_into(">h", rec, len(rec) - 8, 200)  # properties length beyond the record
    assert _index_fields_raw(rec, memoryview(rec), 0, len(rec), MAGIC_CODE_V1) is None
    assert _index_fields_raw(rec, memoryview(rec), 0, 60, MAGIC_CODE_V1) is None


def test_index_fields_raw_record_ending_at_the_map_end(tmp_path):
    """A record whose properties end at the last byte of a real file mapping (a segment's last record):
    both keys are found, and nothing reads past the map."""
    rec = build_record(b"body", b"T", encode_properties({"KEYS": "k1 k2", "UNIQ_KEY": "U1"}), 0, False, T0)
    path = tmp_path / "seg"
    path.write_bytes(rec)
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), len(rec)) as mm:
        view = memoryview(mm)
        try:
            got = _index_fields_raw(mm, view, 0, len(rec), MAGIC_CODE_V1)
        finally:
            view.release()
    assert got == (b"T", b"k1 k2", b"U1", T0)


def service(root: str, num: int) -> IndexService:
    svc = IndexService(root, 16, num, clock_ms=lambda: T0)
    svc.load()
    return svc


def snapshot(svc: IndexService) -> list[bytes]:
    svc.flush()
    out = []
    for f in svc.files():
        with open(f.path, "rb") as fh:
            out.append(fh.read())
    return out


key_text = st.text(st.sampled_from("ab \u4e2d"), max_size=6)
records = st.lists(
    st.tuples(
        st.sampled_from(["T", "Topic\u4e2d", "T2"]),
        st.none() | key_text,
        st.none() | key_text,
        st.integers(0, 3),  # offset step: 0 repeats an offset (replay of the newest record)
        st.integers(-2000, 5000),  # store time step (may go backwards)
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(records, min_size=1, max_size=4),
    replay_back=st.integers(0, 5),
    num=st.sampled_from([4, 64]),
)
def test_build_index_raw_writes_what_build_index_writes(tmp_path_factory, batches, replay_back, num):
    root = str(tmp_path_factory.mktemp("idx"))
    a = service(os.path.join(root, "a"), num)
    b = service(os.path.join(root, "b"), num)
    phy, ts = 100, T0
    history: list[tuple[str, str | None, str | None, int, int]] = []
    for batch in batches:
        recs = []
        for topic, keys, uniq, dphy, dts in batch:
            phy += dphy
            ts = max(0, ts + dts)
            recs.append((topic, keys, uniq, phy, ts))
        # each batch may start by re-sending a few already indexed records, as recovery does
        recs = history[len(history) - replay_back :] + recs if replay_back else recs
        history += recs
        for r in recs:
            a.build_index(*r)
        b.build_index_raw(
            [(t.encode(), k.encode() if k is not None else None, u.encode() if u is not None else None, p, s)
             for t, k, u, p, s in recs]
        )  # fmt: skip
        assert snapshot(a) == snapshot(b)
        assert [f.name for f in a.files()] == [f.name for f in b.files()]
    for topic in ("T", "Topic\u4e2d", "T2"):
        for k in ("a", "b", "ab", "\u4e2d"):
            assert a.query_offsets(topic, k, 64, 0, 1 << 62) == b.query_offsets(topic, k, 64, 0, 1 << 62)
    a.close()
    b.close()


def test_raw_key_hash_at_the_table_boundary():
    ph = _raw_prefix_hash(b"T")
    for n in (1, 2, 510, 511, 512, 513, 5000):
        key = bytes(33 + (i * 7) % 94 for i in range(n))
        assert raw_key_hash(ph, key) == index_key_hash("T#" + key.decode()), n
        assert java_string_hash(key.decode()) == ref_java_hash(key.decode()), n
