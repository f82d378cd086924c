"""Moved to rocketq.filter.sql92 (the filter layer owns SQL92); this name keeps old imports working."""

from rocketq.filter.sql92 import MAX_DEPTH, MAX_EXPRESSION_LENGTH, Expr, SqlError, compile_sql

__all__ = ["MAX_DEPTH", "MAX_EXPRESSION_LENGTH", "Expr", "SqlError", "compile_sql"]
