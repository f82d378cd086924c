from __future__ import annotations

import pytest

from rocketq.filter.sql92 import SqlError, compile_sql

MSG = {"a": "10", "b": "abc", "c": "true", "f": "3.5", "TAGS": "TagA", "q": "it's"}


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("a > 5 AND b = 'abc'", True),
        ("a > 50 AND b = 'abc'", False),
        ("a >= 10", True),
        ("a < 10", False),
        ("a <= 10 and f < 4", True),
        ("a = 10", True),
        ("a <> 10", False),
        ("b <> 'abd'", True),
        ("a BETWEEN 1 AND 10", True),
        ("a NOT BETWEEN 1 AND 10", False),
        ("b IN ('x', 'abc')", True),
        ("b NOT IN ('x', 'abc')", False),
        ("missing IS NULL", True),
        ("a IS NOT NULL", True),
        ("missing = 1", False),  # unknown is not a match
        ("NOT missing = 1", False),  # NOT unknown is still unknown
        ("missing = 1 OR a = 10", True),
        ("c = TRUE", True),
        ("c", True),
        ("NOT (a > 5)", False),
        ("(a > 5 OR b = 'x') AND TAGS = 'TagA'", True),
        ("b CONTAINS 'bc'", True),
        ("b STARTSWITH 'ab' AND b ENDSWITH 'c'", True),
        ("b NOT CONTAINS 'z'", True),
        ("q = 'it''s'", True),
        ("b > 5", False),  # a string is not a number
        ("f = 3.5", True),
        ("a = -1", False),
    ],
)
def test_sql92_evaluation(expr, expected):
    assert compile_sql(expr)(MSG) is expected


@pytest.mark.parametrize("bad", ["", "a >", "a = 'x", "a ==", "(a = 1", "a = 1)", "AND", "a IN ()", "a ~ 1",
                                 "a BETWEEN 1", "x" * 5000, "(" * 100 + "a=1" + ")" * 100])  # fmt: skip
def test_sql92_errors(bad):
    with pytest.raises(SqlError):
        compile_sql(bad)
