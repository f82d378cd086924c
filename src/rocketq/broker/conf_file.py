"""Saving UPDATE_BROKER_CONFIG changes into the broker.conf the broker was started with, as RocketMQ's
``mqadmin updateBrokerConfig`` does, so that they outlive a restart.

Only the changed keys' lines are touched: a key set on one line is rewritten in place (each such line, so
the last one, which wins, holds the new value), a key the file does not set is appended; comments, order
and every other line stay as they were. The new file replaces the old one atomically (written beside it,
fsynced, renamed). Blocking: call it off the event loop.
"""

from __future__ import annotations

import os

from rocketq.atomic_file import replace_atomically

from .javaprops import parse_properties

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}
# characters str.splitlines() breaks at (the reader's line split) other than the four escaped by name
_BREAKS = frozenset("\x0b\x1c\x1d\x1e\x85\u2028\u2029")


def _escape(text: str, key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in _NAMED:
            out.append(_NAMED[c])
        elif c in _BREAKS:
            out.append(f"\\u{ord(c):04x}")
        elif (key and c in "=: #!") or (not key and i == 0 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def persist_changes(path: str, changes: dict[str, str]) -> None:
    """Write ``changes`` (key -> value as given) into the properties file at ``path``. Raises OSError or
    javaprops.PropertiesError (the file no longer parses: it is left alone)."""
    with open(path, encoding="utf-8", newline="") as f:  # line breaks as they are in the file
        text = f.read()
    lines = text.splitlines(keepends=True)  # the reader's split, so its line numbers index this list
    last_in_place: dict[str, bool] = {}  # key -> whether its last entry (the one that wins) was rewritten
    for key, _value, lineno in parse_properties(text):
        if key in changes:
            line = lines[lineno - 1]
            body = line.splitlines()[0]  # without its line break, whichever it is
            one_line = not _continues(body)  # an entry continued over lines is left alone
            if one_line:
                lines[lineno - 1] = f"{_escape(key, True)}={_escape(changes[key], False)}{line[len(body) :]}"
            last_in_place[key] = one_line
    if lines and lines[-1].splitlines()[0] == lines[-1]:  # the last line has no line break
        lines[-1] += "\n"
    lines.extend(
        f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in changes.items() if not last_in_place.get(k)
    )
    mode = os.stat(path).st_mode & 0o7777
    replace_atomically(path, "".join(lines).encode("utf-8"), prefix=".broker.conf.", mode=mode)
