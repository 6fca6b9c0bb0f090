"""The release of a Mondrian partitioning (local recoding, seed 002 section 4.3) as SQL.

The cut tree becomes one nested CASE over the quasi-identifiers (``value <= median`` goes left;
along a hierarchy, one branch per label of the level below the partition's common label), which
gives every record its partition at read time, so the release is a view as well as a table
and rows added later fall into the partition their values belong to. Each record's QIs are then
replaced by its partition's summary, computed from the records of the partition: ``[lo-hi]`` for
a QI cut on its numbers (the value alone when lo = hi), the lowest common label of its hierarchy
for a QI with one, and the set of its values ``{a,b}`` (sorted; one value shown alone) otherwise.

NULL stays NULL: a partition whose only value is NULL publishes NULL, and a set label is a
PostgreSQL array literal (its documentation, *Arrays*, "Array Value Input"): NULL is the bare word
``NULL`` and a value that could be read otherwise (``NULL`` in any case, empty, holding a brace,
comma, double quote, backslash or control character, or space at either end) is double-quoted,
its double quotes and backslashes escaped by a backslash, so
``{French,NULL}`` (a NULL record) and ``{French,"NULL"}`` (the text 'NULL') differ, and
``label::text[]`` on PostgreSQL gives the set's values back.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from sqlanon.engines import Column
from sqlanon.errors import SqlanonError
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.builders import as_text, concat
from sqlanon.sql.compile import CANONICAL, Sql, ident, lit
from sqlanon.transform.hierarchy import Hierarchy

#: Characters that make a set element quoted (PostgreSQL's array_out quotes these, and any
#: whitespace; inner spaces read back unquoted, so only spaces at either end count here).
_QUOTED = '{},"\\\t\n\r\f\v'

#: Partitions a release written as a CASE tree may hold (a view, the printed SQL): one branch per
#: cut, and engines bind the whole expression for every query (65,536 leaves: 10 s to create a
#: DuckDB view, 14 s to read 1e5 rows through it). A published table joins a partition map instead
#: and has no limit.
TREE_LIMIT = 20_000


@dataclass(frozen=True)
class TreeCut:
    """A cut as the release needs it: the QI's column, how to compare, the median, the children.

    With ``labels`` (a cut along the hierarchy ``hierarchy``) child i takes the records whose
    level-``int(med)`` label is ``labels[i]`` (None: NULL); the last child takes the rest."""

    column: str
    numeric: bool  # compare as numbers (the median is ``med``) or as values (``med_text``)
    med: float
    med_text: str | None
    children: tuple[int, ...]
    labels: tuple[str | None, ...] | None = None
    hierarchy: Hierarchy | None = None


#: A 32-bit float as DuckDB, PostgreSQL and Spark name it (PostgreSQL's catalogue says ``real``).
_FLOAT32_TYPE = re.compile(r"^(FLOAT4?|REAL)$", re.IGNORECASE)
#: A DECIMAL's precision and scale.
_DECIMAL_TYPE = re.compile(r"^(DECIMAL|NUMERIC)\s*\(\s*\d+\s*(?:,\s*(\d+)\s*)?\)", re.IGNORECASE)


def double_exact(col: Column, lo: float, hi: float) -> bool:
    """Whether a double tells the values of ``col`` (a numeric column, lo and hi its least and
    greatest value as doubles) apart and writes each back exactly, so Mondrian may cut them as
    doubles (mondrian/round.sql.j2) and publish a median as the double's shortest text: a
    floating-point column; integers in (-2^53, 2^53); a DECIMAL of scale s > 0 within 10^(15 - s)
    (at most 15 significant digits, which a double's shortest text gives back). Anything else (a
    BIGINT or DECIMAL(38, 0) past 2^53, more digits, PostgreSQL's ``numeric`` of unknown scale) is
    cut on its values' ranks, its median published from its exact text. The bounds are strict: a
    value at or past one is a double at or past it, as the conversion is monotone."""
    if col.floating:
        return True
    t = col.type.strip()
    bound = 2.0**53
    if not col.integral:
        m = _DECIMAL_TYPE.match(t)
        scale = int(m.group(2) or 0) if m else 16
        if scale > 15:
            return False
        bound = bound if scale == 0 else 10.0 ** (15 - scale)
    return -bound < lo and hi < bound


def _number(text: str, col: Column) -> exp.Expression:
    """The literal of a numeric column's value from its exact text (a median cut on ranks): the
    digits as they are, where a double would round them (2^60 + 1 is 2^60 as a double). A
    fraction is a cast of its text to a DECIMAL of its own digits: Spark's compilation makes every
    number literal with a point a DOUBLE (sql/compile.py ``_spark_double_literals``), which gave
    ``a <= CAST(1.00000000000000000003 AS DOUBLE)``, every DECIMAL(38, 20) value near 1 on one side.
    A double's text stays its shortest form; a float's (FLOAT, REAL: 32 bits) is the double of the
    float it names, as engines compare a float with a number as doubles (PostgreSQL's ``real <=
    0.1`` is false for the real 0.1, 0.10000000149...). Infinity and NaN (no literal in SQL) a
    cast of the text."""
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        raise SqlanonError(f"mondrian: the median of a {col.type} column is not a number") from None
    if not number.is_finite():
        return exp.cast(exp.Literal.string(str(number)), exp.DataType.build("double"))
    t = col.type.strip()
    if col.floating:
        value = float(number)
        if _FLOAT32_TYPE.match(t):
            value = struct.unpack("f", struct.pack("f", value))[0]
        return _double(value)
    digits = format(number, "f")
    if "." not in digits:
        return exp.Literal.number(digits)
    whole, scale = digits.lstrip("-").split(".")[0].lstrip("0"), -number.as_tuple().exponent
    precision = max(len(whole) + int(scale), 1)
    return exp.cast(exp.Literal.string(digits), exp.DataType.build(f"DECIMAL({precision}, {scale})"))


def _double(value: float) -> exp.Expression:
    """A double's literal: a whole number as its digits below 10^16, else the shortest text, whose
    exponent keeps a double such as 1e300 from being written as 301 digits (more than the 38 a
    DECIMAL literal holds on Spark)."""
    whole = value.is_integer() and abs(value) < 1e16
    return exp.Literal.number(repr(int(value)) if whole else repr(value))


def _median_literal(cut: TreeCut, col: Column | None) -> exp.Expression:
    if col is not None and col.numeric and cut.med_text is not None:
        return _number(cut.med_text, col)
    if cut.numeric or (col is not None and col.numeric):
        return _double(float(cut.med if cut.numeric else float(cut.med_text or 0)))
    text = exp.Literal.string(cut.med_text or "")
    if col is not None and col.temporal:
        return exp.cast(text, exp.DataType.build("timestamp" if "time" in col.type.lower() else "date"))
    return text


def set_element(v: str) -> Sql:
    """The text of value ``v`` (text, or NULL) as an element of a set label: ``NULL`` for NULL,
    double-quoted and escaped where it could read as something else (see the module docstring).

    >>> print(set_element("v")[:90])
    CASE WHEN v IS NULL THEN 'NULL' WHEN v = '' OR UPPER(v) = 'NULL' OR LEFT(v, 1) = ' ' OR RI
    """
    contains = [f"STRPOS({v}, CHR({ord(c)})) > 0" for c in _QUOTED]
    ends = [f"{v} = ''", f"UPPER({v}) = 'NULL'", f"LEFT({v}, 1) = ' '", f"RIGHT({v}, 1) = ' '"]
    needs = " OR ".join([*ends, *contains])
    escaped = f"REPLACE(REPLACE({v}, CHR(92), CHR(92) || CHR(92)), CHR(34), CHR(92) || CHR(34))"
    quoted = concat("CHR(34)", escaped, "CHR(34)")
    return Sql(f"CASE WHEN {v} IS NULL THEN 'NULL' WHEN {needs} THEN {quoted} ELSE {v} END")


def set_label(v: str) -> Sql:
    """A partition's set label, an aggregate over its distinct values ``v`` (text, one row per
    value, NULL included): the value alone when there is one (NULL stays NULL), else the array
    literal of :func:`set_element` of each, in value order, NULL last."""
    agg = f"STRING_AGG({set_element(v)}, ',' ORDER BY {v} NULLS LAST)"
    return Sql(f"CASE WHEN COUNT(*) = 1 THEN MIN({v}) ELSE '{{' || {agg} || '}}' END")


def tree_sql(cuts: Mapping[int, TreeCut], types: Mapping[str, Column], table: str, partitions: int) -> Sql:
    """The partition id of a record of ``table``: a CASE per cut, the leaves' ids at the bottom.

    Written as text (tens of thousands of branches: building and copying sqlglot trees cost more
    than the search). A cut along a hierarchy is one simple CASE on the record's label, computed
    once per cut; the child whose label is NULL (``CASE x WHEN`` never matches NULL), else the
    last child, is the ELSE branch, which also takes values added later."""
    if partitions > TREE_LIMIT:
        raise SqlanonError(
            f"mondrian: {partitions:,} partitions; a view or printed SQL holds at most {TREE_LIMIT:,} "
            "(one CASE branch per cut): publish a table (--as table), or raise k"
        )
    labels: dict[tuple[str, int], str] = {}
    columns: dict[str, str] = {}

    def column(name: str) -> str:
        if name not in columns:
            columns[name] = exp.column(exp.to_identifier(name, quoted=True), table=table).sql(CANONICAL)
        return columns[name]

    def label_sql(cut: TreeCut) -> str:
        key = (cut.column, int(cut.med))
        if key not in labels:
            assert cut.hierarchy is not None
            labels[key] = str(as_text(cut.hierarchy.sql(int(cut.med), Sql(column(cut.column)))))
        return labels[key]

    def build(pid: int) -> str:
        cut = cuts.get(pid)
        if cut is None:
            return str(pid)
        if cut.labels is None:
            med = _median_literal(cut, types.get(cut.column)).sql(CANONICAL)
            left, right = build(cut.children[0]), build(cut.children[1])
            return f"CASE WHEN {column(cut.column)} <= {med} THEN {left} ELSE {right} END"
        kids = list(zip(cut.children, cut.labels, strict=True))
        nulls = [kid for kid in kids if kid[1] is None]
        last = nulls[0] if nulls else kids[-1]
        whens = " ".join(
            f"WHEN {exp.Literal.string(text).sql(CANONICAL)} THEN {build(child)}"
            for child, text in kids
            if (child, text) != last
        )
        return f"CASE {label_sql(cut)} {whens} ELSE {build(last[0])} END"

    return Sql(build(0))


def float_columns(hierarchies: Sequence[Hierarchy], types: Mapping[str, Column]) -> list[bool]:
    """Per QI (in the hierarchies' order): whether its column is floating-point (:func:`map_key`)."""
    return [h.column in types and types[h.column].floating for h in hierarchies]


def map_key(columns: list[str], floats: Sequence[bool] = ()) -> Sql:
    """One text key for a combination of quasi-identifier values (``columns``: SQL expressions),
    which a published table joins the partition map on (templates/mondrian/map.sql.j2 builds the
    map's side from the frequency table, the release the records' side from the source).

    One equality, not two per QI: PostgreSQL multiplies the selectivities of a join's conditions
    as if independent, so 18 of them (nine QIs) estimated one row where there were 1e5, and the
    plan built on that estimate looped over the partitions (a HashAggregate run 304,500 times at
    1,500 rows; 86 s to publish 1e5). The key is injective: each value is ``~`` for NULL, else its
    length, ``:`` and its text, so no two combinations share one (a value's text cannot spill into
    the next's). A floating-point QI (``floats``: per column) is keyed by its value plus 0.0, which
    is 0.0 for -0.0 (IEEE 754): GROUP BY holds -0.0 and 0.0 as one value, written as whichever
    came first, so the frequency table's side had '-0.0' where the source's rows had '0.0' too, and
    the table's records of the other zero found no partition (re-verification refused the table).

    >>> print(map_key(['"a"'])[:75])
    CASE WHEN "a" IS NULL THEN '~' ELSE CAST(LENGTH(CAST("a" AS TEXT)) AS TEXT)
    """
    parts = []
    for j, c in enumerate(columns):
        t = as_text(f"({c} + 0.0)" if j < len(floats) and floats[j] else c)
        parts.append(f"CASE WHEN {c} IS NULL THEN '~' ELSE {as_text(f'LENGTH({t})')} || ':' || {t} END")
    return Sql(" || ".join(parts))


def partition_context(
    policy: Policy,
    hierarchies: list[Hierarchy],
    cuts: Mapping[int, TreeCut],
    numeric: Mapping[str, bool],
    types: Mapping[str, Column],
    internal: str,
    partitions: int,
    map_rel: Relation | None = None,
) -> dict[str, Any]:
    """Context for the partition CTEs of ``templates/publish/_release.sql.j2`` and the output
    expression of each QI (its label column). With ``map_rel`` (a table of each distinct QI
    combination's partition, templates/mondrian/map.sql.j2) records find their partition by a join
    on one key of their QIs (:func:`map_key`, hash-joinable on every engine), not through the CASE
    tree."""
    pid = ident(f"{internal}pid")
    labels, sets, label_cols = [], [], {}
    for j, h in enumerate(hierarchies):
        col = ident(h.column)
        alias = ident(f"{internal}label_{j}")
        label_cols[h.column] = alias
        spec = next(c for c in policy.quasi if c.name == h.column)
        if numeric.get(h.column):
            lo, hi = f"MIN({col})", f"MAX({col})"
            rng = concat(lit("["), as_text(lo), lit("-"), as_text(hi), lit("]"))
            expr = Sql(f"CASE WHEN {lo} = {hi} THEN {as_text(lo)} ELSE {rng} END")
            labels.append({"alias": alias, "expr": expr})
        elif spec.hierarchy is not None:
            whens = []
            for lvl in range(h.height):
                # The lowest level whose label every record shares (all NULL counts as shared: the
                # rule of Mondrian's codes, where NULL is a label of its own).
                e = as_text(h.sql(lvl, col))
                whens.append(
                    f"WHEN COUNT({e}) = 0 OR (COUNT(*) = COUNT({e}) AND MIN({e}) = MAX({e})) THEN MIN({e})"
                )
            labels.append({"alias": alias, "expr": Sql(f"CASE {' '.join(whens)} ELSE '*' END")})
        else:
            sets.append(
                {
                    "alias": alias,
                    "name": ident(f"{internal}set_{j}"),
                    "value": as_text(col),
                    "label": set_label("v"),
                }
            )
    key = map_key([f"s.{ident(h.column)}" for h in hierarchies], float_columns(hierarchies, types))
    return {
        "pid": pid,
        "tree": None if map_rel is not None else tree_sql(cuts, types, "s", partitions),
        "map": None if map_rel is None else {"rel": map_rel, "key": key},
        "base": ident(f"{internal}parts"),
        "labels_cte": ident(f"{internal}labels"),
        "out": ident(f"{internal}local"),
        "labels": labels,
        "sets": sets,
        "label_cols": label_cols,
    }
