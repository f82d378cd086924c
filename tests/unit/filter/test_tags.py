"""Java String.hashCode vectors and tag expressions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.filter.tags import (
    SUB_ALL,
    TagExpressionError,
    parse_tag_expression,
    tag_hash,
    tags_code,
)


def _reference_hash(s: str) -> int:
    # Straight from the Java spec: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, int32 wrap.
    units = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    h = sum(u * pow(31, n - 1 - i) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(
    ("tag", "code"),
    [
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("", 0),
        ("a", 97),
        ("中文", 646394),  # 0x4E2D * 31 + 0x6587
        ("😀", 1772899),  # U+1F600 = surrogates D83D DE00: 0xD83D * 31 + 0xDE00
        ("hello world", 1794106052),
        ("polygenelubricants", -2147483648),  # a well-known Integer.MIN_VALUE hash
        ("null", 3392903),
    ],
)
def test_java_string_hash_vectors(tag: str, code: int) -> None:
    assert tag_hash(tag) == code
    assert _reference_hash(tag) == code


@settings(deadline=None)
@given(st.text(max_size=40))
def test_hash_matches_reference_for_any_text(s: str) -> None:
    h = tag_hash(s)
    assert -(2**31) <= h < 2**31
    assert h == _reference_hash(s)


def test_tags_code_of_missing_tags_is_zero() -> None:
    assert tags_code(None) == 0 and tags_code("") == 0 and tags_code("TagA") == 2598919


@pytest.mark.parametrize("expr", [None, "", "*", "  *  ", "   "])
def test_match_all_expressions(expr: str | None) -> None:
    e = parse_tag_expression(expr)
    assert e.is_all and e.sub_string == SUB_ALL and not e.tags and not e.codes
    assert e.matches_tag("anything") and e.matches_tag(None) and e.matches_code(12345)


def test_or_expression() -> None:
    e = parse_tag_expression(" TagA ||TagB|| TagA || ")
    assert e.tags == {"TagA", "TagB"}
    assert e.codes == {2598919, 2598920}
    assert e.tags_list() == ["TagA", "TagB"] and e.codes_list() == [2598919, 2598920]
    assert e.matches_tag("TagA") and not e.matches_tag("TagC") and not e.matches_tag(None)
    assert e.matches_code(2598920) and not e.matches_code(1) and e.matches_code(None)
    assert not e.is_all


@pytest.mark.parametrize("expr", ["||", " || || "])
def test_expression_without_tags_is_an_error(expr: str) -> None:
    with pytest.raises(TagExpressionError):
        parse_tag_expression(expr)


@settings(deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(blacklist_characters="|"), min_size=1, max_size=8), min_size=1)
)
def test_parse_round_trip(tags: list[str]) -> None:
    cleaned = {t.strip() for t in tags if t.strip()}
    expr = " || ".join(tags)
    if not expr.strip():  # blank, like "" and None: everything
        assert parse_tag_expression(expr).is_all
        return
    if not cleaned:
        with pytest.raises(TagExpressionError):
            parse_tag_expression(expr)
        return
    e = parse_tag_expression(expr)
    if cleaned == {"*"} and len(tags) == 1:
        assert e.is_all
        return
    assert e.tags == cleaned
    assert e.codes == {tag_hash(t) for t in cleaned}


def test_old_import_paths_name_the_filter_layer_objects() -> None:
    # rocketq.protocol.tags, rocketq.broker.sql92 and rocketq.store.dispatch.tag_hash_code predate filter/
    from rocketq.broker import sql92 as old_sql92
    from rocketq.filter import sql92
    from rocketq.filter import tags as new_tags
    from rocketq.protocol import tags as old_tags
    from rocketq.store.dispatch import tag_hash_code

    assert old_tags.parse_tag_expression is new_tags.parse_tag_expression
    assert old_tags.tag_hash is new_tags.tag_hash
    assert old_sql92.compile_sql is sql92.compile_sql and old_sql92.SqlError is sql92.SqlError
    assert tag_hash_code is new_tags.tag_hash_code
    assert tag_hash_code("TagA") == 2598919 and tag_hash_code(None) == 0 and tag_hash_code("") == 0
