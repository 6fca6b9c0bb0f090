"""Portable SQL builders: Python functions that return sqlglot-rendered SQL, exposed to templates.

sqlglot transpiles syntax, not semantics. These builders pick the spelling that means the same on
every engine we run (DuckDB, PostgreSQL, Spark) and on T-SQL:

* ``log2``: DuckDB's ``LOG2`` becomes ``LOG(2, x)`` on PostgreSQL, which has no double overload;
  ``LN(x) / LN(2)`` is exact enough and exists everywhere (T-SQL spells it ``LOG(x)``, sqlglot knows).
* ``fdiv``: ``a / b`` is integer division on PostgreSQL and T-SQL when both sides are integers.
* ``concat``: ``||`` becomes ``+`` on T-SQL, which turns a NULL operand into NULL like ``||`` does,
  so NULLs are coalesced to the empty string first.
* ``hash_text``: ``MD5`` is ``HASHBYTES('MD5', ...)`` on T-SQL (binary), sqlglot handles it.
"""

from __future__ import annotations

from sqlglot import exp

from sqlanon.sql.base import CANONICAL, Sql


def _e(x: object) -> exp.Expression:
    if isinstance(x, exp.Expression):
        return x
    if isinstance(x, int | float) and not isinstance(x, bool):
        return exp.Literal.number(x)
    return exp.maybe_parse(str(x), dialect=CANONICAL)


def _out(e: exp.Expression) -> Sql:
    return Sql(e.sql(CANONICAL))


def double(x: object) -> Sql:
    """Cast to a double.

    >>> double('"n"')
    'CAST("n" AS DOUBLE)'
    """
    return _out(exp.cast(_e(x), exp.DataType.build("double")))


def fdiv(a: object, b: object) -> Sql:
    """Floating-point division on every engine.

    >>> fdiv('"c"', '"n"')
    'CAST("c" AS DOUBLE) / "n"'
    """
    return _out(exp.Div(this=exp.cast(_e(a), exp.DataType.build("double")), expression=_e(b)))


def log2(x: object) -> Sql:
    """Base-2 logarithm as ``LN(x) / LN(2)`` (portable; see module docstring).

    >>> log2('"p"')
    'LN(CAST("p" AS DOUBLE)) / LN(2)'
    """
    return _out(
        exp.Div(
            this=exp.Ln(this=exp.cast(_e(x), exp.DataType.build("double"))),
            expression=exp.Ln(this=exp.Literal.number(2)),
        )
    )


def xlog2y(x: object, y: object) -> Sql:
    """``x * log2(y)``, taken as 0 when ``x`` is 0 (the entropy convention 0 log 0 = 0).

    >>> xlog2y('"q"', '"q"')
    'CASE WHEN "q" > 0 THEN "q" * (LN(CAST("q" AS DOUBLE)) / LN(2)) ELSE 0 END'
    """
    xe = _e(x)
    term = exp.Mul(this=xe.copy(), expression=exp.Paren(this=_e(log2(y))))
    return _out(
        exp.Case(
            ifs=[exp.If(this=exp.GT(this=xe.copy(), expression=exp.Literal.number(0)), true=term)],
            default=exp.Literal.number(0),
        )
    )


def concat(*parts: object) -> Sql:
    """NULL-safe string concatenation.

    >>> print(concat('LEFT("p", 3)', "'**'"))
    COALESCE(LEFT("p", 3), '') || '**'
    """
    exprs = []
    for p in parts:
        e = _e(p)
        if not isinstance(e, exp.Literal):
            e = exp.Coalesce(this=e, expressions=[exp.Literal.string("")])
        exprs.append(e)
    out = exprs[0]
    for e in exprs[1:]:
        out = exp.DPipe(this=out, expression=e, safe=True)
    return _out(out)


def as_text(x: object) -> Sql:
    """Cast to text (VARCHAR).

    >>> as_text('"age"')
    'CAST("age" AS TEXT)'
    """
    return _out(exp.cast(_e(x), exp.DataType.build("text")))


def hash_text(x: object) -> Sql:
    """Hex MD5 of the value's text form (a NULL stays NULL).

    >>> hash_text('"name"')
    'MD5(CAST("name" AS TEXT))'
    """
    return _out(exp.MD5(this=exp.cast(_e(x), exp.DataType.build("text"))))


TEMPLATE_GLOBALS = {
    "double": double,
    "fdiv": fdiv,
    "log2": log2,
    "xlog2y": xlog2y,
    "concat": concat,
    "as_text": as_text,
    "hash_text": hash_text,
}
