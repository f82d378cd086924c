"""The index dispatch fast path against the plain definitions: byte-level hashing vs Java String.hashCode."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.store.index_file import (
    _raw_prefix_hash,
    build_key,
    index_key_hash,
    java_string_hash,
    raw_key_hash,
    topic_key_hash,
)


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


def test_raw_key_hash_at_the_table_boundary():
    ph = _raw_prefix_hash(b"T")
    for n in (1, 2, 510, 511, 512, 513, 5000):
        key = bytes(33 + (i * 7) % 94 for i in range(n))
        assert raw_key_hash(ph, key) == index_key_hash("T#" + key.decode()), n
        assert java_string_hash(key.decode()) == ref_java_hash(key.decode()), n
