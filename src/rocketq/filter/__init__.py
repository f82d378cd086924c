"""Message filtering: tag hash codes and tag expressions (tags.py), SQL92 property filters (sql92.py).

A leaf layer: it imports nothing else of rocketq, so protocol, store, broker and client all use it.
"""

from .sql92 import SqlError, compile_sql
from .tags import SUB_ALL, TagExpression, TagExpressionError, parse_tag_expression, tag_hash, tag_hash_code

__all__ = [
    "SUB_ALL",
    "SqlError",
    "TagExpression",
    "TagExpressionError",
    "compile_sql",
    "parse_tag_expression",
    "tag_hash",
    "tag_hash_code",
]
