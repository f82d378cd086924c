"""Java ``.properties`` parsing (the broker.conf format): comments, separators, escapes, continuations.

Returns ``(key, value, line_number)`` triples so that config errors can name the offending line.
"""

from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"


class PropertiesError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines (odd number of trailing backslashes); skip blanks and comments."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i + 1
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_WS)
            i += 1
        if _continues(line):
            line = line[:-1]
        out.append((start, line))
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str, line: int) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if len(hexdigits) != 4 or any(h not in "0123456789abcdefABCDEF" for h in hexdigits):
                raise PropertiesError(line, f"malformed \\u escape {s[i - 1 : i + 5]!r}")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key ends at the first unescaped '=', ':' or whitespace; then optional ws, one separator, ws."""
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WS)
    return key, rest


def parse_properties(text: str) -> list[tuple[str, str, int]]:
    result: list[tuple[str, str, int]] = []
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        key = _unescape(raw_key, lineno)
        if not key:
            raise PropertiesError(lineno, f"missing key in {line!r}")
        result.append((key, _unescape(raw_value, lineno).rstrip(), lineno))
    return result
