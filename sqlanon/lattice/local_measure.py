"""Measure a release locally: the warehouse groups it once, the checks run in the local DuckDB
(issue 33: publishing plus re-verification at most one scan more).

Re-verifying a release (:func:`sqlanon.metrics.verify.verify`) builds its frequency and class tables in
the warehouse (one scan of the release, or of its source for a count-only view) and then runs a
dozen small statements on them: the summary, the size histogram, l, t, the risks, the wildcard
check. On Spark each of those costs a job's fixed overhead (~0.3-1 s on the 2-core machine), on
PostgreSQL a round trip and a plan (10-50 ms). Here those two tables cross once over the driver's
bulk path into an in-memory DuckDB (:mod:`sqlanon.lattice.localdb`: no spill, no file access,
closed when the measurement ends) and the same templates measure them there; a table the checks
name that has not crossed yet (the source's frequency tables, for a t or likeness verdict) crosses
on first use. The verdict and every figure are the same (tests/test_local_measure.py).

Where: as the search (``search.where``, :mod:`sqlanon.search_where`). ``database`` keeps every
statement in the warehouse; ``auto`` measures locally on PostgreSQL and Spark when the source's
frequency table is at most :data:`~sqlanon.search_where.LOCAL_MAX_ROWS` rows and pyarrow is
installed; a policy with a population table (its classes are counted against a warehouse table),
a read-only connection (its tables are CTEs) and a column DuckDB would compare otherwise than the
warehouse (a case-insensitive collation or citext on PostgreSQL, a numeric DuckDB holds as a
double: :func:`~sqlanon.lattice.localdb.compared_exactly`) stay in the warehouse.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice.localdb import (
    COMPARED_TYPES,
    LocalBackend,
    compared_exactly,
    copy_table,
    open_local,
    require_arrow,
)
from sqlanon.measure.assessment import FrequencyTables
from sqlanon.relation import Relation
from sqlanon.search_where import LOCAL_ENGINES, LOCAL_MAX_ROWS
from sqlanon.sql.compile import ident

#: Integer types whose values cross as Arrow integers (the rest as the warehouse's type).
_INTEGERS = {"integer": "int64", "bigint": "int64", "int": "int64", "smallint": "int64"}


#: ``auto`` measures locally from this many source records: on PostgreSQL a statement on a small
#: table costs milliseconds, less than opening the local DuckDB and its imports (~0.5 s of CPU);
#: on Spark each costs a job.
MIN_ROWS = {"postgres": 100_000, "spark": 0}


def _may_measure_locally(be: Backend, policy: Any) -> bool:
    """What :func:`measures_locally` decides without a statement: the policy's ``search.where``,
    the connection (read-only: its tables are CTEs), a population table, the engine."""
    where = policy.search.where
    if where == "database" or be.inline or policy.population is not None:
        return False
    return where == "local" or be.dialect in LOCAL_ENGINES


def measures_locally(be: Backend, policy: Any, base_rows: int, n_rows: int) -> bool:
    """Whether a release of ``policy`` on ``be`` is measured in the local DuckDB (module docstring);
    ``base_rows``: the source's frequency table's rows, an upper bound of the release's;
    ``n_rows``: the source's records."""
    where = policy.search.where
    if not _may_measure_locally(be, policy):
        return False
    if where != "local":
        if base_rows > LOCAL_MAX_ROWS:
            return False
        if n_rows < MIN_ROWS.get(be.dialect, 0):
            return False
    names = [c.name for c in policy.columns if c.role in ("quasi", "sensitive")]
    if not compared_exactly(be, policy.source, names, COMPARED_TYPES):
        return False  # a value DuckDB would compare otherwise (or DuckDB itself): the warehouse
    try:
        require_arrow()
    except SqlanonError:
        return False
    return True


def _cols(be: Backend, rel: Relation) -> list[tuple[Any, str]]:
    return [(ident(c.name), _INTEGERS.get(c.type.strip().lower(), c.type)) for c in be.columns(rel)]


class LocalMeasure:
    """For :func:`sqlanon.measure.assessment.assess` (``local``): given the release's frequency
    tables built in the warehouse, a local DuckDB where they (and ``references``' tables) cross
    when a statement first names them; ``relations``' columns are answered from the warehouse.
    ``moved`` counts the rows that crossed."""

    def __init__(self, be: Backend, relations: list[Relation], references: list[FrequencyTables]) -> None:
        self.be, self.relations, self.references = be, relations, references
        self.moved = 0

    @contextlib.contextmanager
    def __call__(self, ft: FrequencyTables) -> Iterator[Backend]:
        require_arrow()
        be = self.be
        local: LocalBackend = open_local(be, self.relations[0])
        try:
            for rel in self.relations[1:]:
                local.known[rel] = be.columns(rel)
            tables = [ft.freq, ft.classes]
            for ref in self.references:
                tables += [ref.freq, ref.classes]
            for rel in dict.fromkeys(tables):
                local.pending[rel.name] = _copier(be, local, rel)
            yield local
        finally:
            self.moved += local.moved
            local.close()


def _copier(be: Backend, local: LocalBackend, rel: Relation) -> Callable[[], int]:
    return lambda: copy_table(be, local, rel, _cols(be, rel))


class SourceMeasure(LocalMeasure):
    """For ``assess`` of a policy's source: where the checks run is known only once the warehouse
    has grouped it (the source's records and frequency rows decide, as for a release: two
    statements), so the choice of :func:`measures_locally` is made then; a source it keeps in the
    warehouse is measured there with the backend itself. On Spark this turns ~15 jobs of
    ``assess`` into two copies."""

    def __init__(self, be: Backend, policy: Any) -> None:
        super().__init__(be, [policy.source], [])
        self.policy = policy

    @staticmethod
    def applies(be: Backend, policy: Any) -> bool:
        """Whether the checks may leave ``be`` at all (DuckDB: never): else ``assess`` is given
        no measure, and numbers its classes as it groups them, in one statement."""
        return _may_measure_locally(be, policy)

    @contextlib.contextmanager
    def __call__(self, ft: FrequencyTables) -> Iterator[Backend]:
        be, pol = self.be, self.policy
        if not _may_measure_locally(be, pol):
            yield be  # decided without counting (DuckDB, a search kept in the warehouse)
            return
        rows = int(be.query("search/row_count", rel=ft.freq)[0][0])
        records = int(be.query("search/total", base=ft.freq)[0][0] or 0)
        if not measures_locally(be, pol, rows, records):
            yield be
            return
        with super().__call__(ft) as near:
            yield near
