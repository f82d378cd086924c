"""SubscriptionData (what a consumer subscribed) and the consume-queue tag filter built from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketq.filter.sql92 import compile_sql
from rocketq.filter.tags import SUB_ALL, tag_hash
from rocketq.protocol.frame import ProtocolError
from rocketq.protocol.record import decode_record

# Java String.hashCode (UTF-16 code units, signed int32): the consume queue's tag code.
java_string_hash = tag_hash


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    @classmethod
    def build(
        cls, topic: str, sub_string: str | None, sub_version: int = 0, expression_type: str | None = None
    ):
        sub = (sub_string or "").strip() or SUB_ALL
        sd = cls(topic, sub, sub_version=sub_version, expression_type=(expression_type or "TAG").upper())
        if sd.expression_type == "TAG" and sub != SUB_ALL:
            for tag in sub.split("||"):
                tag = tag.strip()
                if tag:
                    sd.tags_set.add(tag)
                    sd.code_set.add(java_string_hash(tag))
            if not sd.tags_set:
                sd.sub_string = SUB_ALL
        return sd

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> SubscriptionData:
        topic = str(obj.get("topic") or "")
        sd = cls.build(
            topic, obj.get("subString"), int(obj.get("subVersion") or 0), obj.get("expressionType")
        )
        codes = obj.get("codeSet")
        if isinstance(codes, list) and codes and sd.tags_set:
            try:
                sd.code_set = {int(c) for c in codes}
            except (TypeError, ValueError):
                pass
        sd.class_filter_mode = bool(obj.get("classFilterMode"))
        return sd

    def to_obj(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }


class TagFilter:
    """MessageFilter for the store: match the consume queue's tag hash against the subscription."""

    __slots__ = ("codes",)

    def __init__(self, codes: set[int]) -> None:
        self.codes = codes

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return tags_code is None or tags_code in self.codes

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        return True


class SqlFilter:
    """MessageFilter for SQL92 subscriptions: evaluated on the record's properties (no bloom filter)."""

    __slots__ = ("matches",)

    def __init__(self, matches: Callable[[dict[str, str]], bool]) -> None:
        self.matches = matches

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return True

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        try:
            return self.matches(decode_record(record).properties)
        except ProtocolError:
            return False


_sql_cache: dict[str, SqlFilter] = {}


def sql_filter(expression: str) -> SqlFilter:
    """Compiled (and cached) SQL92 filter; raises SqlError."""
    f = _sql_cache.get(expression)
    if f is None:
        if len(_sql_cache) > 1024:
            _sql_cache.clear()
        f = _sql_cache[expression] = SqlFilter(compile_sql(expression))
    return f


def filter_for(sd: SubscriptionData | None) -> TagFilter | SqlFilter | None:
    """None means 'everything matches' (no filter work in the store). SQL92 subscriptions raise SqlError
    when the expression does not compile."""
    if sd is None or sd.class_filter_mode:
        return None
    if sd.expression_type == "SQL92":
        return sql_filter(sd.sub_string)
    if sd.expression_type != "TAG" or sd.sub_string == SUB_ALL:
        return None
    return TagFilter(sd.code_set)
