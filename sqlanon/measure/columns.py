"""Checking a policy's columns against the relation before any scan: each declared column exists
(with a "did you mean" for a slip), and each quasi-identifier and sensitive attribute can be grouped
on the engine at hand, so that a failure names the column instead of quoting the driver.
"""

from __future__ import annotations

import re
from difflib import get_close_matches

from sqlanon.engines import Backend, Column
from sqlanon.errors import SqlanonError
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.compile import ident


def check_columns(be: Backend, policy: Policy, rel: Relation | None = None) -> dict[str, Column]:
    """Every declared column must exist in the relation (exact, case-sensitive names), and every
    quasi-identifier and sensitive attribute must be groupable: the base frequency table is a GROUP
    BY over them, so a type without equality would fail there with the driver's words, no column named."""
    rel = rel or policy.source
    cols = {c.name: c for c in be.require_columns(rel, "source")}
    grouped: list[Column] = []
    for spec in policy.columns:
        if spec.name not in cols:  # a case slip first, then the closest spelling (`marital`: `maritl`)
            alt = [c for c in cols if c.lower() == spec.name.lower()] or get_close_matches(spec.name, cols, 1)
            hint = f" (did you mean {alt[0]!r}?)" if alt else ""
            raise SqlanonError(f"columns.{spec.name}: no such column in {str(rel)!r}{hint}")
        col = cols[spec.name]
        if spec.role in ("quasi", "sensitive"):
            if be.dialect == "postgres" and col.type.strip().lower() in UNGROUPABLE:
                raise SqlanonError(
                    f"columns.{spec.name}: type {col.type} has no equality, so records cannot be grouped "
                    f"by it; {CAST_HINT}"
                )
            grouped.append(col)
        if spec.order:
            _check_order(spec.name, spec.order, col)
    _check_groupable(be, rel, grouped)
    return cols


#: Text types: a declared order of numbers would be compared with them as numbers (PostgreSQL:
#: "operator does not exist: text = integer"; DuckDB casts each value and fails on the first word).
TEXTUAL = re.compile(r"^(VARCHAR|TEXT|STRING|CHAR|CHARACTER|BPCHAR|NVARCHAR)\b", re.IGNORECASE)


def _check_order(name: str, order: tuple, col: Column) -> None:
    """A sensitive attribute's declared order lists values of the column's kind: numbers for a
    numeric column, text (quoted in YAML) for a text one, named in one line before any statement."""
    numbers = [v for v in order if isinstance(v, int | float) and not isinstance(v, bool)]
    if numbers and TEXTUAL.match(col.type.strip()):
        raise SqlanonError(
            f"columns.{name}.order: lists numbers ({', '.join(map(str, numbers[:3]))}) but {name} is "
            f"{col.type}, compared as text; quote them in the policy as the column holds them"
        )
    if col.numeric:
        for v in (v for v in order if v is not None):
            try:
                float(v)
            except (TypeError, ValueError):
                raise SqlanonError(
                    f"columns.{name}.order: {v!r} is not a number, but {name} is {col.type}"
                ) from None


#: PostgreSQL types without an equality operator: GROUP BY fails on them (refused without a
#: query; :func:`_check_groupable` asks the engine about the rest). PostgreSQL only: DuckDB's JSON
#: is text underneath and groups.
UNGROUPABLE = frozenset({"json", "xml", "point", "line", "lseg", "box", "path", "polygon", "circle"})
CAST_HINT = "cast it to text in a view (e.g. CAST(x AS TEXT)) and name the view as the source"


def _check_groupable(be: Backend, rel: Relation, cols: list[Column]) -> None:
    """Ask the engine whether it can group by ``cols`` (``templates/assess/groupable.sql.j2``, which
    reads no row), and name the first column it cannot group by.

    The catalogue's type name does not say enough: information_schema reports ``ARRAY`` for
    ``json[]`` and ``int[]`` alike and ``USER-DEFINED`` for a composite holding a json field, and
    types such as ``txid_snapshot`` lack equality too; only the engine knows. One query in the
    usual case; after a failure (which aborts the transaction: rolled back before the next query)
    one per column, and a column is blamed only when the same query without GROUP BY succeeds.
    """
    if not cols:
        return
    try:
        be.query("assess/groupable", source=rel, cols=[ident(c.name) for c in cols], group=True)
        return
    except SqlanonError as first:
        be.rollback()
        failure = first
    for col in cols:
        try:
            be.query("assess/groupable", source=rel, cols=[ident(col.name)], group=True)
            continue
        except SqlanonError as e:
            be.rollback()
            reason = str(e).split(f" failed on {be.dialect}: ", 1)[-1]
        try:
            be.query("assess/groupable", source=rel, cols=[ident(col.name)], group=False)
        except SqlanonError:
            be.rollback()
            break  # the column cannot even be read: not a grouping problem
        raise SqlanonError(
            f"columns.{col.name}: type {col.type} cannot be grouped on {be.dialect} ({reason}); {CAST_HINT}"
        ) from None
    raise failure
