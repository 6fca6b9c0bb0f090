"""Portable SQL builders: Python functions that return sqlglot-rendered SQL, exposed to templates.

sqlglot transpiles syntax, not semantics. These builders pick the spelling that means the same on
every engine we run (DuckDB, PostgreSQL, Spark) and on T-SQL:

* ``log2``: DuckDB's ``LOG2`` becomes ``LOG(2, x)`` on PostgreSQL, which has no double overload;
  ``LN(x) / LN(2)`` is exact enough and exists everywhere (T-SQL spells it ``LOG(x)``, sqlglot knows).
* ``fdiv``: ``a / b`` is integer division on PostgreSQL and T-SQL when both sides are integers.
* ``concat``: ``||`` becomes ``+`` on T-SQL, which turns a NULL operand into NULL like ``||`` does,
  so NULLs are coalesced to the empty string first.
* ``hash_text``: a keyed HMAC-SHA-256 (RFC 2104) in lower-case hex. No engine spells HMAC the same
  way (and PostgreSQL's ``hmac`` needs pgcrypto), so the canonical SQL holds a placeholder call,
  ``SQLANON_HMAC_SHA256(text, ipad, opad)``, that :func:`expand_hmac` replaces, per dialect, by
  H(K' xor opad || H(K' xor ipad || m)) written with that engine's own SHA-256 and byte functions.
* ``uniform``: a number in (0, 1) from the MD5 of a text (the perturbation's seed, column, draw and
  row key): the first 32 bits of the digest, (h + 1/2) / 2^32. Same text, same number, on every
  engine and at every read of a view, and never 0 or 1 (so ``LN(u)`` is finite). Each engine turns
  hex into an integer its own way, so the canonical SQL holds ``SQLANON_UNIFORM(text)``, expanded
  by :func:`expand_placeholders`.
"""

from __future__ import annotations

import hashlib

import sqlglot
from sqlglot import exp

from sqlanon.errors import SqlanonError
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


HMAC = "SQLANON_HMAC_SHA256"
_BLOCK = 64  # SHA-256's block size in bytes (RFC 2104's B)

#: HMAC-SHA-256 of the UTF-8 bytes of X, per dialect; {i} and {o} are the hex of K' xor ipad and
#: K' xor opad. Each is parsed by sqlglot in its own dialect and spliced into the statement.
HMAC_SQL = {
    "duckdb": "SHA256(UNHEX('{o}') || UNHEX(SHA256(UNHEX('{i}') || ENCODE(X))))",
    "postgres": (
        "ENCODE(SHA256(DECODE('{o}', 'hex') || SHA256(DECODE('{i}', 'hex') || CONVERT_TO(X, 'UTF8'))), 'hex')"
    ),
    "spark": "SHA2(CONCAT(UNHEX('{o}'), UNHEX(SHA2(CONCAT(UNHEX('{i}'), ENCODE(X, 'UTF-8')), 256))), 256)",
    # T-SQL (compiled, not executed here): a UTF-8 collation gives the UTF-8 bytes (SQL Server 2019+).
    "tsql": (
        "LOWER(CONVERT(VARCHAR(64), HASHBYTES('SHA2_256', 0x{o} + HASHBYTES('SHA2_256', 0x{i} + "
        "CAST(CAST(X AS VARCHAR(MAX)) COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS VARBINARY(MAX)))), 2))"
    ),
}
HMAC_PARENT = {"databricks": "spark", "spark2": "spark", "fabric": "tsql", "redshift": "postgres"}


def hmac_pads(key: bytes) -> tuple[str, str]:
    """(K' xor ipad, K' xor opad) in hex, K' the key padded to the block (hashed first if longer).

    >>> hmac_pads(b"k" * 3)[0][:8], len(hmac_pads(b"k" * 100)[1])
    ('5d5d5d36', 128)
    """
    k = hashlib.sha256(key).digest() if len(key) > _BLOCK else key
    k = k.ljust(_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in k).hex(), bytes(b ^ 0x5C for b in k).hex()


def hash_text(x: object, key: bytes) -> Sql:
    """Keyed pseudonym of the value's text: hex HMAC-SHA-256 under ``key`` (a NULL stays NULL).

    >>> print(hash_text('"name"', b"0123456789abcdef")[:48])
    SQLANON_HMAC_SHA256(CAST("name" AS TEXT), '06070
    """
    ipad, opad = hmac_pads(key)
    return _out(
        exp.Anonymous(
            this=HMAC,
            expressions=[
                exp.cast(_e(x), exp.DataType.build("text")),
                exp.Literal.string(ipad),
                exp.Literal.string(opad),
            ],
        )
    )


UNIFORM = "SQLANON_UNIFORM"
#: The first 32 bits of MD5(X) as an unsigned integer, per dialect (MD5 of the UTF-8 bytes; T-SQL
#: hashes the VARCHAR's bytes, the same for ASCII keys).
UNIFORM_SQL = {
    "duckdb": "CAST('0x' || SUBSTRING(MD5(X), 1, 8) AS UBIGINT)",
    "postgres": "CAST(CAST('x' || SUBSTRING(MD5(X), 1, 8) AS BIT(32)) AS BIGINT)",
    "spark": "CAST(CONV(SUBSTRING(MD5(X), 1, 8), 16, 10) AS BIGINT)",
    "tsql": "CAST(CONVERT(BINARY(4), SUBSTRING(HASHBYTES('MD5', CAST(X AS VARCHAR(MAX))), 1, 4)) AS BIGINT)",
}


def uniform(text: object) -> Sql:
    """A reproducible uniform number in (0, 1) from ``text`` (see the module docstring).

    >>> uniform("'7|Age|a|42'")
    "SQLANON_UNIFORM('7|Age|a|42')"
    """
    return _out(exp.Anonymous(this=UNIFORM, expressions=[_e(text)]))


def _expand_uniform(call: exp.Anonymous, dialect: str) -> exp.Expression:
    template = UNIFORM_SQL.get(dialect) or UNIFORM_SQL.get(HMAC_PARENT.get(dialect, ""))
    if template is None:
        raise SqlanonError(f"perturb: no MD5-based random numbers for dialect {dialect!r}")
    bits = sqlglot.parse_one(template, read=dialect)
    for col in list(bits.find_all(exp.Column)):
        if col.name == "X" and not col.table:
            col.replace(call.expressions[0].copy())
    num = exp.Add(this=exp.cast(bits, exp.DataType.build("double")), expression=exp.Literal.number(0.5))
    return exp.Paren(this=exp.Div(this=exp.Paren(this=num), expression=exp.Literal.number(4294967296.0)))


def expand_placeholders(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Expand both placeholders (HMAC and uniform) for ``dialect``."""
    for call in list(tree.find_all(exp.Anonymous)):
        if str(call.this).upper() == UNIFORM:
            call.replace(_expand_uniform(call, dialect))
    return expand_hmac(tree, dialect)


def expand_hmac(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Replace each ``SQLANON_HMAC_SHA256`` placeholder by ``dialect``'s HMAC (see HMAC_SQL)."""
    for call in list(tree.find_all(exp.Anonymous)):
        if str(call.this).upper() != HMAC:
            continue
        template = HMAC_SQL.get(dialect) or HMAC_SQL.get(HMAC_PARENT.get(dialect, ""))
        if template is None:
            raise SqlanonError(f"action hash: no HMAC-SHA-256 for dialect {dialect!r}")
        x, ipad, opad = call.expressions
        text = template.format(i=ipad.name, o=opad.name)
        new = sqlglot.parse_one(text, read=dialect)
        for col in list(new.find_all(exp.Column)):
            if col.name == "X" and not col.table:
                col.replace(x.copy())
        call.replace(new)
    return tree


TEMPLATE_GLOBALS = {
    "double": double,
    "fdiv": fdiv,
    "log2": log2,
    "xlog2y": xlog2y,
    "concat": concat,
    "as_text": as_text,
    "hash_text": hash_text,
    "uniform": uniform,
}
