"""Mondrian's rounds on the local copy of the frequency table (issue 33; ``search.where``, as the
lattice search's local walk, :mod:`sqlanon.lattice.local`).

Mondrian (:mod:`sqlanon.lattice.mondrian`) works on the base frequency table in rounds of a few
statements each: about 7 s a round of Spark's fixed cost per statement (1e5 rows: 291 s, 234x a
scan) and 132x a scan on PostgreSQL. Here the warehouse builds the frequency table as for any
search (one scan of the source), the table crosses over the driver's bulk path into the local
walk's in-memory DuckDB, every round runs there, and what comes back is the cut tree (a Python
plan) with the release's metrics. Publishing (the CASE tree, or the partition map) and
re-verification run in the warehouse, from the warehouse's tables.

A published table (``table``) finds each record's partition through a map of the final working
table (:func:`~sqlanon.lattice.mondrian.mondrian_release`), which must then be in the warehouse.
The warehouse numbers the frequency table's rows once (``templates/mondrian/values.sql.j2``, the
table Mondrian itself numbers); the copy carries that number as ``wrid``, and the pairs (number,
final partition), integers only, are sent back over the warehouse's bulk path (``Backend.load``:
PostgreSQL ``COPY ... FROM STDIN``, a Spark DataFrame of Arrow batches, a DuckDB Arrow scan) as a
temporary table that stands for the working table: the map is then built in the warehouse exactly
as after an in-database run.

Which rows cross: the frequency table, and the coded table only if a statement of the rounds reads
it (the whole table's check before the first round does): personal data, held as the lattice
walk holds it (memory only, never printed, gone when the rounds end).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice.local import LocalBackend, copy_table, freq_columns, local_plan, location
from sqlanon.lattice.mondrian import MondrianResult, mondrian
from sqlanon.lattice.plan import Plan, Progress
from sqlanon.relation import Relation
from sqlanon.sql.compile import ident

#: The warehouse's row number of a frequency-table row in the local copy (beside Mondrian's own
#: ``rid``, which numbers the rows of the copy).
WRID = "sqlanon_wrid"


def where_mondrian(plan: Plan, table: bool = False) -> str:
    """Where Mondrian's rounds run: :func:`~sqlanon.lattice.local.location` (the policy's
    ``search.where``, which ``--search-in`` sets), except that a read-only connection
    (``Backend.inline``) cannot take the partition map a published table needs back: ``auto``
    stays in the database there and ``local`` is refused."""
    where = location(plan)  # a column the local copy holds inexactly: in the warehouse, or refused
    if where == "local" and table and plan.be.inline:
        if plan.policy.search.where == "auto":
            return "database"
        raise SqlanonError(
            "search.where: local: Mondrian's partition map needs a temporary table in the warehouse, "
            "which this read-only connection cannot create; set search.where: database"
        )
    return where


def run_mondrian(
    plan: Plan, progress: Progress | None = None, *, table: bool = False
) -> tuple[MondrianResult, dict[str, Any]]:
    """:func:`~sqlanon.lattice.mondrian.mondrian` where ``search.where`` says, and the output's
    ``search_location`` and ``rows_transferred``. The result serves
    :func:`~sqlanon.lattice.mondrian.mondrian_release` on ``plan`` (the warehouse): its cut tree
    and metrics are the same wherever the rounds ran; with ``table`` its working table and values
    are the warehouse's (see the module docstring), else they name tables of the closed local copy
    and must not be read."""
    if where_mondrian(plan, table) == "database":
        return mondrian(plan, progress), {"search_location": "database", "rows_transferred": 0}
    be = plan.be
    numbered = be.create_temp("mvalues", "mondrian/values", base=plan.base.freq) if table else None
    with local_plan(plan, lazy_coded=True) as lp:
        local = lp.be
        assert isinstance(local, LocalBackend)
        if numbered is not None:
            freq = plan.base.freq
            cols = freq_columns(plan, local)
            local.pending[freq.name] = lambda: _copy_numbered(be, local, numbered, freq, cols)
        res = _rounds(lp, progress)
        if numbered is not None:
            assert res.values is not None
            pairs = _pairs(local, res)
            res = dataclasses.replace(res, work=upload_pairs(be, pairs), values=numbered)
        moved = local.moved
    return res, {"search_location": "local", "rows_transferred": moved}


def _rounds(lp: Plan, progress: Progress | None) -> MondrianResult:
    """The rounds on the local copy. Past the local DuckDB's ``memory_limit`` (DuckDB's default,
    80 % of RAM: it may not spill the copy, personal data, to disk) a statement fails; the error
    then names the limit and the way out, the rounds in the warehouse. The rounds hold about three
    working tables (each ~100 bytes a frequency-table row), so a limit that fails is rare."""
    try:
        return mondrian(lp, progress, scratch=True)
    except SqlanonError as e:
        if "(OutOfMemoryException)" not in str(e):  # Backend._fail names DuckDB's exception only
            raise
        lp.be.rollback()
        limit = lp.be._conn.exec_driver_sql("SELECT current_setting('memory_limit')").scalar()
        raise SqlanonError(
            f"search.where: local: Mondrian's rounds outgrew the local DuckDB's memory_limit ({limit}; "
            "it holds personal data and may not spill to disk); set search.where: database"
        ) from None


def _copy_numbered(
    be: Backend, local: LocalBackend, numbered: Relation, freq: Relation, cols: list[tuple[Any, str]]
) -> int:
    """Copy the warehouse's numbered frequency table, and stand a view for the frequency table
    over it whose first column is the warehouse's number (:data:`WRID`); the rows copied."""
    rid = ident("rid")
    moved = copy_table(be, local, numbered, [(rid, "int64"), *cols])
    listed = ", ".join(str(a) for a, _ in cols)
    _raw(
        local,
        "mondrian/values",
        f"CREATE VIEW {freq.table().sql('duckdb')} AS SELECT {rid} AS {ident(WRID)}, {listed} "
        f"FROM {numbered.table().sql('duckdb')}",
    )
    return moved


def _raw(local: LocalBackend, what: str, sql: str, arrow: bool = False) -> Any:
    """A statement written here rather than from a template, run on the local DuckDB's own
    connection; a failure is one line naming DuckDB's exception, never its message (a copied value:
    :meth:`~sqlanon.engines.base.Backend._fail`), and no traceback."""
    try:
        run = local._conn.connection.driver_connection
        return run.sql(sql).to_arrow_table() if arrow else run.execute(sql)
    except Exception as e:  # noqa: BLE001 - any driver error becomes one line
        raise local._fail("statement", what, e) from None


def _pairs(local: LocalBackend, res: MondrianResult) -> Any:
    """(the warehouse's row number, the final partition) of every row of the working table, as an
    Arrow table (integers only)."""
    assert res.values is not None
    work, vals = res.work.table().sql("duckdb"), res.values.table().sql("duckdb")
    sql = (
        f"SELECT CAST(v.{ident(WRID)} AS BIGINT) AS rid, CAST(w.pid AS BIGINT) AS pid "
        f"FROM {work} AS w JOIN {vals} AS v ON v.rid = w.rid"
    )
    return _raw(local, "mondrian/map", sql, arrow=True)


def upload_pairs(be: Backend, pairs: Any) -> Relation:
    """The pairs (``rid``, ``pid``: BIGINT) as a temporary table of the warehouse, loaded over its
    bulk path (``Backend.load``) and dropped with the session's others. The rows are integers (row
    and partition numbers), never a value."""
    rel = be.temp_relation("mwork")
    try:
        be.load(rel.table(), [("rid", "BIGINT"), ("pid", "BIGINT")], pairs)
    except SqlanonError:
        raise
    except Exception as e:  # noqa: BLE001 - a driver error becomes one line
        raise SqlanonError(
            f"search.where: local: returning Mondrian's partitions to {be.dialect} failed "
            f"({type(e).__name__}); set search.where: database"
        ) from None
    be._temps.append(rel.name)
    return rel
