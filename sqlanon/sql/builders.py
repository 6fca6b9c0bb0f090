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
  ``SQLANON_HMAC_SHA256(text, 'hash')``, that :func:`expand_placeholders` replaces, per dialect, by
  H(K' xor opad || H(K' xor ipad || m)) written with that engine's own SHA-256 and byte functions,
  the pads read from the session's secret relation (:mod:`sqlanon.sql.secrets`), never spelled out.
* ``keyed_uniform``: a number in (0, 1) from the HMAC of a text under the perturbation key, with
  53 bits (every random number of a release: nobody without the key can recompute it).
* ``uniform``: a public number in (0, 1) from the MD5 of a text, (h + 1/2) / 2^32: for measuring
  only (the utility's train/test split), never for a release.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.sql import secrets
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

#: HMAC-SHA-256 (RFC 2104) of the UTF-8 bytes of X in lower-case hex, per dialect; I and O are the
#: hex of K' xor ipad and K' xor opad, read from the secret relation (:mod:`sqlanon.sql.secrets`),
#: never written into the statement. Each is parsed by sqlglot in its own dialect and spliced in.
HMAC_SQL = {
    "duckdb": "SHA256(UNHEX(O) || UNHEX(SHA256(UNHEX(I) || ENCODE(X))))",
    "postgres": (
        "ENCODE(SHA256(DECODE(O, 'hex') || SHA256(DECODE(I, 'hex') || CONVERT_TO(X, 'UTF8'))), 'hex')"
    ),
    "spark": "SHA2(CONCAT(UNHEX(O), UNHEX(SHA2(CONCAT(UNHEX(I), ENCODE(X, 'UTF-8')), 256))), 256)",
    # T-SQL (compiled, not executed here): a UTF-8 collation gives the UTF-8 bytes (SQL Server 2019+).
    "tsql": (
        "LOWER(CONVERT(VARCHAR(64), HASHBYTES('SHA2_256', CONVERT(VARBINARY(64), O, 2) + "
        "HASHBYTES('SHA2_256', CONVERT(VARBINARY(64), I, 2) + "
        "CAST(CAST(X AS VARCHAR(MAX)) COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS VARBINARY(MAX)))), 2))"
    ),
}
HMAC_PARENT = {"databricks": "spark", "spark2": "spark", "fabric": "tsql", "redshift": "postgres"}


def hash_text(x: object, purpose: str = "hash") -> Sql:
    """Keyed pseudonym of the value's text: hex HMAC-SHA-256 under the ``purpose``'s secret key
    (a NULL stays NULL). The canonical SQL names the purpose, not the key.

    >>> print(hash_text('"name"'))
    SQLANON_HMAC_SHA256(CAST("name" AS TEXT), 'hash')
    """
    return _out(
        exp.Anonymous(
            this=HMAC,
            expressions=[exp.cast(_e(x), exp.DataType.build("text")), exp.Literal.string(purpose)],
        )
    )


UNIFORM = "SQLANON_UNIFORM"
#: The first 32 bits of MD5(X) as an unsigned integer, per dialect (MD5 of the UTF-8 bytes; T-SQL
#: hashes the VARCHAR's bytes, the same for ASCII keys). Public randomness: only for measuring
#: (the utility's train/test split of a release), never for a release.
UNIFORM_SQL = {
    "duckdb": "CAST('0x' || SUBSTRING(MD5(X), 1, 8) AS UBIGINT)",
    "postgres": "CAST(CAST('x' || SUBSTRING(MD5(X), 1, 8) AS BIT(32)) AS BIGINT)",
    "spark": "CAST(CONV(SUBSTRING(MD5(X), 1, 8), 16, 10) AS BIGINT)",
    "tsql": "CAST(CONVERT(BINARY(4), SUBSTRING(HASHBYTES('MD5', CAST(X AS VARCHAR(MAX))), 1, 4)) AS BIGINT)",
}


def uniform(text: object) -> Sql:
    """A reproducible uniform number in (0, 1) from ``text`` (public: see UNIFORM_SQL).

    >>> uniform("'train|42'")
    "SQLANON_UNIFORM('train|42')"
    """
    return _out(exp.Anonymous(this=UNIFORM, expressions=[_e(text)]))


KEYED_UNIFORM = "SQLANON_KEYED_UNIFORM"
#: The first 56 bits of a lower-case hex digest H as an integer, shifted right by 3: 53 bits, the
#: precision of a double, so every uniform is exact (per dialect; T-SQL compiled only).
BITS53_SQL = {
    "duckdb": "CAST('0x' || SUBSTRING(H, 1, 14) AS UBIGINT) >> 3",
    "postgres": "CAST(CAST('x' || SUBSTRING(H, 1, 14) AS BIT(56)) AS BIGINT) >> 3",
    "spark": "SHIFTRIGHT(CAST(CONV(SUBSTRING(H, 1, 14), 16, 10) AS BIGINT), 3)",
    "tsql": "CONVERT(BIGINT, CONVERT(VARBINARY(7), SUBSTRING(H, 1, 14), 2)) / 8",
}
#: 2^53, and the largest double below 1 (a uniform is clamped to it: m + 1/2 rounds up to 2^53 for
#: the largest m, and 1 would make Laplace's LN(1 - 2 |u - 1/2|) infinite).
_TWO53 = 9007199254740992.0
_BELOW_ONE = 0.9999999999999999


def keyed_uniform(text: object) -> Sql:
    """A uniform number in (0, 1) that only the holder of the perturbation key can compute:
    u = (m + 1/2) / 2^53, m the first 53 bits of HMAC-SHA-256(K, text). A double holds every
    value of u exactly (its grid, 2^-53, is the doubles' own spacing in [1/2, 1)), so the published
    noise carries no coarser grid than doubles do.

    >>> keyed_uniform("'a'")
    "SQLANON_KEYED_UNIFORM('a')"
    """
    return _out(exp.Anonymous(this=KEYED_UNIFORM, expressions=[_e(text)]))


def _template(table: dict[str, str], dialect: str, what: str) -> str:
    template = table.get(dialect) or table.get(HMAC_PARENT.get(dialect, ""))
    if template is None:
        raise SqlanonError(f"{what}: not available for dialect {dialect!r}")
    return template


def _splice(template: str, dialect: str, values: dict[str, exp.Expression]) -> exp.Expression:
    tree = sqlglot.parse_one(template, read=dialect)
    for col in list(tree.find_all(exp.Column)):
        if not col.table and col.name in values:
            col.replace(values[col.name].copy())
    return tree


def _hmac(x: exp.Expression, purpose: str, dialect: str) -> exp.Expression:
    return _splice(
        _template(HMAC_SQL, dialect, f"HMAC-SHA-256 ({purpose})"),
        dialect,
        {
            "X": x,
            "I": secrets.pad_expr(purpose, "i", dialect),
            "O": secrets.pad_expr(purpose, "o", dialect),
        },
    )


def _expand_uniform(call: exp.Anonymous, dialect: str) -> exp.Expression:
    bits = _splice(
        _template(UNIFORM_SQL, dialect, "MD5-based random numbers"), dialect, {"X": call.expressions[0]}
    )
    num = exp.Add(this=exp.cast(bits, exp.DataType.build("double")), expression=exp.Literal.number(0.5))
    return exp.Paren(this=exp.Div(this=exp.Paren(this=num), expression=exp.Literal.number(4294967296.0)))


def _expand_keyed_uniform(call: exp.Anonymous, dialect: str) -> exp.Expression:
    digest = _hmac(call.expressions[0], "perturb", dialect)
    bits = _splice(_template(BITS53_SQL, dialect, "keyed random numbers"), dialect, {"H": digest})
    num = exp.Add(
        this=exp.cast(exp.Paren(this=bits), exp.DataType.build("double")), expression=exp.Literal.number(0.5)
    )
    u = exp.Div(this=exp.Paren(this=num), expression=exp.Literal.number(_TWO53))
    if dialect in ("tsql", "fabric"):  # no LEAST before SQL Server 2022: the T-SQL pass writes a CASE
        return exp.Least(this=u, expressions=[exp.Literal.number(_BELOW_ONE)])
    # A plain call elsewhere: sqlglot writes DuckDB's LEAST as a NULL-guarding CASE that would
    # compute the two HMACs twice (u is never NULL: the row key is checked to be non-NULL).
    return exp.Anonymous(this="LEAST", expressions=[u, exp.Literal.number(_BELOW_ONE)])


def expand_placeholders(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Expand the placeholders (HMAC, keyed and public uniforms) for ``dialect``."""
    for call in list(tree.find_all(exp.Anonymous)):
        name = str(call.this).upper()
        if name == UNIFORM:
            call.replace(_expand_uniform(call, dialect))
        elif name == KEYED_UNIFORM:
            call.replace(_expand_keyed_uniform(call, dialect))
    for call in list(tree.find_all(exp.Anonymous)):
        if str(call.this).upper() == HMAC:
            x, purpose = call.expressions
            call.replace(_hmac(x, purpose.name, dialect))
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
    "keyed_uniform": keyed_uniform,
}
