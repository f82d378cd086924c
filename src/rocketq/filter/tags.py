"""Tag hash codes and tag subscription expressions ("*", "TagA || TagB").

The consume queue stores, per message, Java's ``String.hashCode()`` of its TAGS property (a signed int32
over UTF-16 code units, so a non-BMP character counts as two surrogate units). Brokers filter by code,
clients re-filter by string, and heartbeats carry both sets (SubscriptionData.tagsSet / codeSet).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "SUB_ALL",
    "TagExpression",
    "TagExpressionError",
    "parse_tag_expression",
    "tag_hash",
    "tag_hash_code",
    "tags_code",
]

SUB_ALL = "*"


class TagExpressionError(ValueError):
    """A tag expression with no usable tag (the broker answers SUBSCRIPTION_PARSE_FAILED)."""


def _java_string_hash(s: str) -> int:
    if s.isascii():
        units: bytes | tuple[int, ...] = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h = 0
    for c in units:
        h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# Tags repeat heavily (every message of a topic usually carries one of a few): cache the hash.
tag_hash = lru_cache(maxsize=8192)(_java_string_hash)
tag_hash.__doc__ = "Java String.hashCode(tag) as a signed int32 (UTF-16 code units)."


def tags_code(tags: str | None) -> int:
    """The consume-queue tag code of a message: hash of its TAGS property, 0 when it has none."""
    return tag_hash(tags) if tags else 0


# the name the store and the send path use
tag_hash_code = tags_code


@dataclass(frozen=True, slots=True)
class TagExpression:
    """A parsed TAG subscription. ``sub_string`` is normalized ("*" for match-all)."""

    sub_string: str
    tags: frozenset[str]
    codes: frozenset[int]

    @property
    def is_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def matches_code(self, code: int | None) -> bool:
        """Broker side: the consume-queue tag code. Messages without a code always match."""
        return self.is_all or code is None or code in self.codes

    def matches_tag(self, tag: str | None) -> bool:
        """Client side: the message's TAGS string (exact, re-checking hash collisions)."""
        return self.is_all or not self.tags or tag in self.tags

    # Java sets (HashSet) serialize in no particular order; emit sorted lists for stable bodies.
    def tags_list(self) -> list[str]:
        return sorted(self.tags)

    def codes_list(self) -> list[int]:
        return sorted(self.codes)


_ALL = TagExpression(SUB_ALL, frozenset(), frozenset())


@lru_cache(maxsize=1024)
def parse_tag_expression(expr: str | None) -> TagExpression:
    """Parse "*" / "" / None (everything) or "A || B || C" into tags and their hash codes.

    Like RocketMQ's FilterAPI: split on "||", trim, drop empty pieces. An expression that leaves no tag
    (e.g. "||") raises TagExpressionError.
    """
    if expr is None:
        return _ALL
    stripped = expr.strip()
    if not stripped or stripped == SUB_ALL:
        return _ALL
    tags = []
    for piece in expr.split("||"):
        t = piece.strip()
        if t and t not in tags:
            tags.append(t)
    if not tags:
        raise TagExpressionError(f"tag expression {expr[:80]!r} names no tag")
    return TagExpression(expr, frozenset(tags), frozenset(tag_hash(t) for t in tags))
