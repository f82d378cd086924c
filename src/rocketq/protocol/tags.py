"""Moved to rocketq.filter.tags (the filter layer owns tag hashing); this name keeps old imports working."""

from rocketq.filter.tags import (
    SUB_ALL,
    TagExpression,
    TagExpressionError,
    parse_tag_expression,
    tag_hash,
    tag_hash_code,
    tags_code,
)

__all__ = [
    "SUB_ALL",
    "TagExpression",
    "TagExpressionError",
    "parse_tag_expression",
    "tag_hash",
    "tag_hash_code",
    "tags_code",
]
