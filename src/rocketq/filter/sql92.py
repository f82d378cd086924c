"""SQL92 property filters (RocketMQ's MessageSelector.bySql): the subset RocketMQ defines.

    numeric comparison  > >= < <= = <> BETWEEN a AND b      (property strings are compared as numbers)
    string comparison   = <> IN ('a', 'b')  CONTAINS / STARTSWITH / ENDSWITH 'x'
    IS NULL, IS NOT NULL, AND, OR, NOT, parentheses
    constants           123, 3.14, 'abc' (single quotes, '' escapes a quote), NULL, TRUE, FALSE

Evaluation is three-valued like SQL: a comparison involving a missing property (NULL) is unknown, and a
message matches only when the whole expression is TRUE. ``compile_sql(text)`` raises SqlError on bad input;
the result is a function ``props -> bool``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MAX_EXPRESSION_LENGTH = 4096
MAX_DEPTH = 64


class SqlError(ValueError):
    pass


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d+(?:[eE][-+]?\d+)?|-?\.\d+)
      | (?P<str>'(?:[^']|'')*')
      | (?P<op><>|>=|<=|!=|=|>|<|\(|\)|,)
      | (?P<ident>[A-Za-z_$][A-Za-z0-9_$.]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {
    "AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "STARTSWITH", "ENDSWITH",
}  # fmt: skip

Expr = Callable[[dict[str, str]], Any]  # returns True / False / None (unknown) or a value


def _tokenize(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    n = len(text)
    while pos < n:
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SqlError(f"unexpected character {text[pos : pos + 10]!r} at {pos}")
        pos = m.end()
        if m.group("num") is not None:
            raw = m.group("num")
            try:
                out.append(("val", int(raw) if re.fullmatch(r"-?\d+", raw) else float(raw)))
            except ValueError:
                raise SqlError(f"bad number {raw!r}") from None
        elif m.group("str") is not None:
            out.append(("val", m.group("str")[1:-1].replace("''", "'")))
        elif m.group("op") is not None:
            op = m.group("op")
            out.append(("op", "<>" if op == "!=" else op))
        else:
            word = m.group("ident")
            up = word.upper()
            if up in _KEYWORDS:
                out.append(("kw", up))
            else:
                out.append(("id", word))
    return out


def _num(v: Any) -> int | float | None:
    """A property string or constant as a number (None if it is not one)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return v
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return None


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        low = v.lower()
        if low == "true":
            return True
        if low == "false":
            return False
    return None


def _equal(a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    if isinstance(a, bool) or isinstance(b, bool):
        x, y = _bool(a), _bool(b)
        return None if x is None or y is None else x == y
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    x, y = _num(a), _num(b)
    if x is None or y is None:
        return False
    return x == y


def _order(a: Any, b: Any) -> tuple[Any, Any] | None:
    x, y = _num(a), _num(b)
    if x is None or y is None:
        return None
    return x, y


class _Parser:
    def __init__(self, tokens: list[tuple[str, Any]]) -> None:
        self.t = tokens
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, Any] | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> tuple[str, Any]:
        tok = self.peek()
        if tok is None:
            raise SqlError("unexpected end of expression")
        self.i += 1
        return tok

    def accept(self, kind: str, value: Any = None) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == kind and (value is None or tok[1] == value):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, value: Any = None) -> Any:
        tok = self.take()
        if tok[0] != kind or (value is not None and tok[1] != value):
            raise SqlError(f"expected {value or kind}, got {tok[1]!r}")
        return tok[1]

    # expr := or
    def parse(self) -> Expr:
        e = self.or_()
        if self.peek() is not None:
            raise SqlError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return e

    def or_(self) -> Expr:
        left = self.and_()
        while self.accept("kw", "OR"):
            right = self.and_()
            left = _or(left, right)
        return left

    def and_(self) -> Expr:
        left = self.not_()
        while self.accept("kw", "AND"):
            right = self.not_()
            left = _and(left, right)
        return left

    def not_(self) -> Expr:
        if self.accept("kw", "NOT"):
            inner = self.not_()
            return lambda p: None if (v := inner(p)) is None else not v
        return self.predicate()

    def predicate(self) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SqlError("expression nested too deeply")
        try:
            if self.accept("op", "("):
                e = self.or_()
                self.expect("op", ")")
                return e
            left = self.operand()
            tok = self.peek()
            if tok is None or tok[0] not in ("op", "kw") or tok[1] in ("AND", "OR", ")"):
                return lambda p: _bool(left(p))  # a bare boolean property or constant
            return self.comparison(left)
        finally:
            self.depth -= 1

    def operand(self) -> Expr:
        kind, value = self.take()
        if kind == "val":
            return lambda p, v=value: v
        if kind == "id":
            return lambda p, k=value: p.get(k)
        if kind == "kw" and value in ("TRUE", "FALSE"):
            return lambda p, v=(value == "TRUE"): v
        if kind == "kw" and value == "NULL":
            return lambda p: None
        raise SqlError(f"expected a property or a constant, got {value!r}")

    def comparison(self, left: Expr) -> Expr:
        negate = self.accept("kw", "NOT")
        kind, op = self.take()
        if kind == "op" and not negate and op in ("=", "<>", ">", ">=", "<", "<="):
            right = self.operand()
            return _compare(op, left, right)
        if kind == "kw" and op == "IS":
            neg = self.accept("kw", "NOT")
            self.expect("kw", "NULL")
            return (lambda p: left(p) is not None) if neg else (lambda p: left(p) is None)
        if kind == "kw" and op == "BETWEEN":
            lo = self.operand()
            self.expect("kw", "AND")
            hi = self.operand()
            e = _between(left, lo, hi)
        elif kind == "kw" and op == "IN":
            self.expect("op", "(")
            items = [self.operand()]
            while self.accept("op", ","):
                items.append(self.operand())
            self.expect("op", ")")
            e = _in(left, items)
        elif kind == "kw" and op in ("CONTAINS", "STARTSWITH", "ENDSWITH"):
            e = _text(op, left, self.operand())
        else:
            raise SqlError(f"unexpected {op!r}")
        if negate:
            return lambda p: None if (v := e(p)) is None else not v
        return e


def _or(a: Expr, b: Expr) -> Expr:
    def f(p: dict[str, str]) -> bool | None:
        x = a(p)
        if x is True:
            return True
        y = b(p)
        if y is True:
            return True
        return None if x is None or y is None else False

    return f


def _and(a: Expr, b: Expr) -> Expr:
    def f(p: dict[str, str]) -> bool | None:
        x = a(p)
        if x is False:
            return False
        y = b(p)
        if y is False:
            return False
        return None if x is None or y is None else True

    return f


def _compare(op: str, left: Expr, right: Expr) -> Expr:
    if op == "=":
        return lambda p: _equal(left(p), right(p))
    if op == "<>":
        return lambda p: None if (v := _equal(left(p), right(p))) is None else not v

    def f(p: dict[str, str]) -> bool | None:
        a, b = left(p), right(p)
        if a is None or b is None:
            return None
        pair = _order(a, b)
        if pair is None:
            return False
        x, y = pair
        if op == ">":
            return x > y
        if op == ">=":
            return x >= y
        if op == "<":
            return x < y
        return x <= y

    return f


def _between(v: Expr, lo: Expr, hi: Expr) -> Expr:
    def f(p: dict[str, str]) -> bool | None:
        a, x, y = v(p), lo(p), hi(p)
        if a is None or x is None or y is None:
            return None
        na, nx, ny = _num(a), _num(x), _num(y)
        if na is None or nx is None or ny is None:
            return False
        return nx <= na <= ny

    return f


def _in(v: Expr, items: list[Expr]) -> Expr:
    def f(p: dict[str, str]) -> bool | None:
        a = v(p)
        if a is None:
            return None
        return any(_equal(a, it(p)) for it in items)

    return f


def _text(op: str, v: Expr, pattern: Expr) -> Expr:
    def f(p: dict[str, str]) -> bool | None:
        a, b = v(p), pattern(p)
        if a is None or b is None:
            return None
        if not isinstance(a, str) or not isinstance(b, str):
            return False
        if op == "CONTAINS":
            return b in a
        if op == "STARTSWITH":
            return a.startswith(b)
        return a.endswith(b)

    return f


def compile_sql(text: str | None) -> Callable[[dict[str, str]], bool]:
    if not text or not text.strip():
        raise SqlError("empty SQL92 expression")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise SqlError(f"SQL92 expression longer than {MAX_EXPRESSION_LENGTH} characters")
    expr = _Parser(_tokenize(text)).parse()
    return lambda props: expr(props) is True
