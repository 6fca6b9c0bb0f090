"""The canonical dialect and the two ways a value may enter SQL text: an identifier quoted by
sqlglot (:func:`ident`) or a literal rendered by sqlglot (:func:`lit`). Everything that builds SQL
(the compile path, the builders, the hierarchies) stands on this module.
"""

from __future__ import annotations

from sqlglot import exp

CANONICAL = "duckdb"


class Sql(str):
    """SQL text that was produced by sqlglot (safe to splice into a template)."""

    __slots__ = ()


def ident(name: str) -> Sql:
    """Quote one identifier for the canonical dialect.

    >>> ident('we"ird; name')
    '"we""ird; name"'
    """
    return Sql(exp.to_identifier(str(name), quoted=True).sql(CANONICAL))


def lit(value: object) -> Sql:
    """Render a Python value as a SQL literal.

    >>> lit("O'Brien"), lit(3), lit(None)
    ("'O''Brien'", '3', 'NULL')
    """
    if isinstance(value, float):
        # repr keeps every digit; exp.convert would do the same but spell out e-notation oddly.
        return Sql(exp.Literal.number(repr(value)).sql(CANONICAL))
    return Sql(exp.convert(value).sql(CANONICAL))
