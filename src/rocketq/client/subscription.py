"""SubscriptionData: a parsed tag expression ("*", "TagA || TagB") with Java hash codes of the tags."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rocketq.filter.tags import SUB_ALL, tag_hash

EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """MessageSelector.bySql / byTag: ``consumer.subscribe("T", MessageSelector.by_sql("a > 5"))``.
    SQL92 needs ``enablePropertyFilter=true`` on the broker and is filtered there only."""

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        return cls(EXPRESSION_SQL92, sql)

    @classmethod
    def by_tag(cls, tags: str) -> MessageSelector:
        return cls(EXPRESSION_TAG, tags)


# Java String.hashCode over UTF-16 code units, as a signed int32 (the tag codes of a subscription).
java_string_hash = tag_hash


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1000)
    expression_type: str = EXPRESSION_TAG

    @classmethod
    def build(cls, topic: str, expression: str | MessageSelector | None) -> SubscriptionData:
        if isinstance(expression, MessageSelector):
            if expression.expression_type == EXPRESSION_SQL92:
                sql = expression.expression.strip()
                if not sql:
                    raise ValueError("empty SQL92 expression")
                return cls(topic, sql, expression_type=EXPRESSION_SQL92)
            expression = expression.expression
        expr = (expression or "").strip()
        if not expr or expr == SUB_ALL:
            return cls(topic, SUB_ALL)
        tags = []
        for t in expr.split("||"):
            t = t.strip()
            if t and t not in tags:
                tags.append(t)
        if not tags:
            raise ValueError(f"subscription expression {expression!r} has no tags")
        return cls(topic, expr, tags, [java_string_hash(t) for t in tags])

    @property
    def matches_all(self) -> bool:
        return not self.tags_set

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": False,
            "codeSet": self.code_set,
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags_set,
            "topic": self.topic,
        }
