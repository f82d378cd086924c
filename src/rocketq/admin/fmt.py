"""Output and argument helpers shared by the mqadmin commands."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TextIO


def table(out: TextIO, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Plain aligned columns, headers prefixed with '#' like RocketMQ's mqadmin."""
    cells = [[f"#{h}" for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def fmt_ms(ms: int) -> str:
    """yyyy-MM-dd HH:mm:ss,SSS (RocketMQ's UtilAll.timeMillisToHumanString2 style); '-' for 0."""
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def parse_timestamp(text: str) -> int:
    """Milliseconds from 'now', a millisecond number, or yyyy-MM-dd#HH:mm:ss:SSS (local time)."""
    text = text.strip()
    if text.lower() == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S"):
        try:
            dt = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return int(dt.timestamp() * 1000)
    raise ValueError(f"bad timestamp {text!r}: use milliseconds, 'now' or yyyy-MM-dd#HH:mm:ss:SSS")


def parse_bool(text: str | bool | None, default: bool = False) -> bool:
    if text is None:
        return default
    if isinstance(text, bool):
        return text
    t = text.strip().lower()
    if t in ("true", "1", "yes", "y"):
        return True
    if t in ("false", "0", "no", "n"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def body_text(body: bytes, charset: str = "UTF-8") -> str:
    try:
        return body.decode(charset)
    except (UnicodeDecodeError, LookupError):
        return body.decode("utf-8", "replace")
