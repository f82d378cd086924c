"""Reader and writer for fastjson-style bodies.

Old Java servers and admin tools serialize maps with non-string keys the fastjson way: numbers unquoted
(``{0:"127.0.0.1:10911"}``) and objects as keys (``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``).
``loads`` tries orjson first (standard JSON, the common case) and only falls back to a small bounded
recursive-descent parser when that fails. Object keys become ``FrozenKey`` (hashable, ``to_dict()``) unless a
``key_hook`` turns them into something else (e.g. ``MessageQueue.from_obj``).

``dumps`` writes objects whose map keys may be objects (MessageQueue, dicts) in the same fastjson form,
which is what Java's admin tools parse for TopicStatsTable / ConsumeStats / ResetOffsetBody "offsetTable".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.decoder import JSONDecodeError, scanstring
from json.scanner import make_scanner
from typing import Any

import orjson

from .frame import ProtocolError

MAX_DEPTH = 64
MAX_SIZE = 16 * 1024 * 1024

__all__ = ["MAX_DEPTH", "MAX_SIZE", "FrozenKey", "dumps", "loads"]


class FrozenKey(tuple):
    """An object used as a map key: a hashable, order-insensitive view of its (key, value) pairs."""

    __slots__ = ()

    @classmethod
    def of(cls, obj: dict[Any, Any]) -> FrozenKey:
        return cls(sorted(((k, _freeze(v)) for k, v in obj.items()), key=lambda kv: str(kv[0])))

    def to_dict(self) -> dict[Any, Any]:
        return {k: _thaw(v) for k, v in self}

    def __repr__(self) -> str:
        return f"FrozenKey({self.to_dict()!r})"


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return FrozenKey.of(v)
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _thaw(v: Any) -> Any:
    if isinstance(v, FrozenKey):
        return v.to_dict()
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_MAX_NUMBER_LEN = 400


def _reject_constant(name: str) -> Any:
    raise ProtocolError(f"{name} is not JSON")


# The stdlib's C scanner parses one standard JSON value at an offset. The parser below hands it every
# container it meets and only walks by hand the ones that are not standard (object keys, unquoted keys).
_scan_standard = make_scanner(json.JSONDecoder(parse_constant=_reject_constant, strict=True))


class _Parser:
    __slots__ = ("c_floor", "key_hook", "max_depth", "s")

    def __init__(self, s: str, key_hook: Callable[[dict[Any, Any]], Any] | None, max_depth: int) -> None:
        self.s = s
        self.key_hook = key_hook
        self.max_depth = max_depth
        # The C scanner failed at this offset: it is retried only on values that start at or after it, so
        # the work it wastes on failures is bounded by one pass over the input.
        self.c_floor = 0

    def container(self, pos: int, depth: int) -> tuple[Any, int]:
        """The object or array at ``pos`` (whose own nesting level is depth + 1)."""
        if pos >= self.c_floor:
            try:
                v, end = _scan_standard(self.s, pos)
            except StopIteration as exc:
                self.c_floor = max(self.c_floor, exc.value if isinstance(exc.value, int) else pos)
            except JSONDecodeError as exc:
                self.c_floor = max(self.c_floor, exc.pos)
            except RecursionError:
                raise self.fail(pos, "nesting too deep") from None
            else:
                room = self.max_depth - depth
                if end - pos >= 2 * room:  # long enough to nest past the limit: check
                    _check_depth(v, room)
                return v, end
        if self.s[pos] == "{":
            return self.obj(pos + 1, depth + 1)
        return self.arr(pos + 1, depth + 1)

    def fail(self, pos: int, what: str) -> ProtocolError:
        near = self.s[pos : pos + 20]
        return ProtocolError(f"malformed JSON at offset {pos}: {what} (near {near!r})")

    def ws(self, pos: int) -> int:
        return _WS.match(self.s, pos).end()  # type: ignore[union-attr]

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        s = self.s
        if pos >= len(s):
            raise self.fail(pos, "unexpected end of input")
        c = s[pos]
        if c == "{" or c == "[":
            return self.container(pos, depth)
        if c == '"' or c == "'":
            return self.string(pos)
        m = _NUMBER.match(s, pos)
        if m is not None:
            text = m.group()
            if len(text) > _MAX_NUMBER_LEN:
                raise self.fail(pos, "number too long")
            if m.group(1) or m.group(2):
                return float(text), m.end()
            return int(text), m.end()
        m = _IDENT.match(s, pos)
        if m is not None:
            word = m.group()
            if word == "true":
                return True, m.end()
            if word == "false":
                return False, m.end()
            if word == "null":
                return None, m.end()
        raise self.fail(pos, "unexpected character")

    def string(self, pos: int) -> tuple[str, int]:
        s = self.s
        if s[pos] == "'":
            # fastjson accepts single quotes; no escapes other than \' and \\ are expected in them.
            end = pos + 1
            out = []
            while True:
                if end >= len(s):
                    raise self.fail(pos, "unterminated string")
                ch = s[end]
                if ch == "'":
                    return "".join(out), end + 1
                if ch == "\\" and end + 1 < len(s):
                    out.append(s[end + 1])
                    end += 2
                    continue
                out.append(ch)
                end += 1
        try:
            return scanstring(s, pos + 1, True)
        except ValueError as exc:
            raise self.fail(pos, f"bad string ({exc.args[0].split(':')[0]})") from None

    def check_depth(self, pos: int, depth: int) -> None:
        if depth > self.max_depth:
            raise self.fail(pos, f"nesting deeper than {self.max_depth}")

    def key(self, pos: int, depth: int) -> tuple[Any, int]:
        s = self.s
        c = s[pos] if pos < len(s) else ""
        if c == "{":
            obj, end = self.container(pos, depth)
            return (self.key_hook(obj) if self.key_hook is not None else FrozenKey.of(obj)), end
        if c == '"' or c == "'":
            return self.string(pos)
        m = _NUMBER.match(s, pos)
        if m is not None:
            text = m.group()
            if len(text) > _MAX_NUMBER_LEN:
                raise self.fail(pos, "number too long")
            return (float(text) if m.group(1) or m.group(2) else int(text)), m.end()
        m = _IDENT.match(s, pos)
        if m is not None:  # fastjson allows bare identifiers as keys
            return m.group(), m.end()
        raise self.fail(pos, "expected an object key")

    def obj(self, pos: int, depth: int) -> tuple[dict[Any, Any], int]:
        self.check_depth(pos, depth)
        s = self.s
        out: dict[Any, Any] = {}
        pos = self.ws(pos)
        if pos < len(s) and s[pos] == "}":
            return out, pos + 1
        while True:
            k, pos = self.key(pos, depth)
            pos = self.ws(pos)
            if pos >= len(s) or s[pos] != ":":
                raise self.fail(pos, "expected ':'")
            pos = self.ws(pos + 1)
            v, pos = self.value(pos, depth)
            try:
                out[k] = v
            except TypeError:
                raise self.fail(pos, "unhashable object key") from None
            pos = self.ws(pos)
            if pos >= len(s):
                raise self.fail(pos, "unterminated object")
            c = s[pos]
            if c == "}":
                return out, pos + 1
            if c != ",":
                raise self.fail(pos, "expected ',' or '}'")
            pos = self.ws(pos + 1)
            if pos < len(s) and s[pos] == "}":  # trailing comma
                return out, pos + 1

    def arr(self, pos: int, depth: int) -> tuple[list[Any], int]:
        self.check_depth(pos, depth)
        s = self.s
        out: list[Any] = []
        pos = self.ws(pos)
        if pos < len(s) and s[pos] == "]":
            return out, pos + 1
        while True:
            v, pos = self.value(pos, depth)
            out.append(v)
            pos = self.ws(pos)
            if pos >= len(s):
                raise self.fail(pos, "unterminated array")
            c = s[pos]
            if c == "]":
                return out, pos + 1
            if c != ",":
                raise self.fail(pos, "expected ',' or ']'")
            pos = self.ws(pos + 1)
            if pos < len(s) and s[pos] == "]":
                return out, pos + 1


def _check_depth(v: Any, limit: int) -> None:
    """orjson accepts up to 1024 levels; enforce our (smaller) bound on its result too (iteratively)."""
    stack = [(v, 0)]
    while stack:
        x, d = stack.pop()
        if d >= limit:
            raise ProtocolError(f"JSON nesting deeper than {limit}")
        for y in x.values() if isinstance(x, dict) else x:
            if isinstance(y, dict | list):
                stack.append((y, d + 1))


def _bracket_count(data: bytes | bytearray | memoryview | str) -> int:
    if isinstance(data, str):
        return data.count("{") + data.count("[")
    raw = data if not isinstance(data, memoryview) else data.tobytes()
    return raw.count(b"{") + raw.count(b"[")


def loads(
    data: bytes | bytearray | memoryview | str,
    *,
    key_hook: Callable[[dict[Any, Any]], Any] | None = None,
    max_depth: int = MAX_DEPTH,
    max_size: int = MAX_SIZE,
) -> Any:
    """Parse standard or fastjson-style JSON. Raises ProtocolError (only) on bad or oversized input."""
    size = len(data) if not isinstance(data, memoryview) else data.nbytes
    if size > max_size:
        raise ProtocolError(f"JSON body of {size} bytes exceeds the {max_size} byte limit")
    try:
        result = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        # Only a body with more brackets than the limit can nest deeper: skip the walk for the rest.
        if isinstance(result, dict | list) and _bracket_count(data) > max_depth:
            _check_depth(result, max_depth)
        return result
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("JSON body is not valid UTF-8") from None
    p = _Parser(text, key_hook, max_depth)
    try:
        value, pos = p.value(p.ws(0), 0)
    except RecursionError:
        raise ProtocolError("JSON nesting too deep") from None
    pos = p.ws(pos)
    if pos != len(text):
        raise p.fail(pos, "trailing data")
    return value


# -- writer ---------------------------------------------------------------------------------------
def _dump(v: Any, out: list[bytes], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError("structure nested too deeply to encode")
    if isinstance(v, dict):
        out.append(b"{")
        first = True
        for k, x in v.items():
            if not first:
                out.append(b",")
            first = False
            if isinstance(k, str):
                out.append(orjson.dumps(k))
            elif isinstance(k, bool):
                out.append(b'"true"' if k else b'"false"')
            elif isinstance(k, int | float):
                out.append(b'"%s"' % str(k).encode())
            else:
                # Object key, written unquoted as fastjson does.
                to_obj = getattr(k, "to_obj", None)
                key_obj = to_obj() if to_obj is not None else (k.to_dict() if isinstance(k, FrozenKey) else k)
                _dump(key_obj, out, depth + 1)
            out.append(b":")
            _dump(x, out, depth + 1)
        out.append(b"}")
    elif isinstance(v, list | tuple):
        out.append(b"[")
        for i, x in enumerate(v):
            if i:
                out.append(b",")
            _dump(x, out, depth + 1)
        out.append(b"]")
    else:
        to_obj = getattr(v, "to_obj", None)
        if to_obj is not None:
            _dump(to_obj(), out, depth + 1)
        else:
            out.append(orjson.dumps(v))


def dumps(obj: Any) -> bytes:
    """JSON bytes; maps keyed by objects (MessageQueue, FrozenKey) get fastjson's object keys."""
    out: list[bytes] = []
    _dump(obj, out, 0)
    return b"".join(out)
