"""The search's base frequency table counted by the warehouse straight into the local walk's DuckDB
(issue 33; the DuckDB and its guarantees: :mod:`sqlanon.lattice.localdb`).

Where :func:`~sqlanon.lattice.plan.prepare` will code the frequency table locally
(:func:`~sqlanon.lattice.localdb.stage_coded`) on PostgreSQL or Spark, the warehouse does not
build the frequency table at all: its SELECT (templates/freq/base.sql.j2, the one scan of the
source) is copied out as it is computed (PostgreSQL's ``COPY (SELECT ...) TO STDOUT``, Spark's
``toArrow``) into the local DuckDB, under the name the warehouse's table would have had, and
``prepare`` reads its row total and distinct counts there. The warehouse builds its own frequency
table only if a later statement there names it
(``Backend.deferred``: the coded table's build, a table-wide risk bound, a walk kept in the
warehouse); a statement that does pays the scan then, once.

Why: at 1e6 rows (nine QIs, 276,373 frequency rows) ``CREATE TEMPORARY TABLE ... AS SELECT``
cost PostgreSQL 1.24 s and the copy of the table written 0.44 s more (the table is written, then
read again, and the copy waits for both). The search's prepare (warm, in-process, interleaved with
the code before, 2-core machine at load 3-6): 1.82-2.00 -> 1.58-1.71 s against a 0.85-0.92 s
scan; the whole first anonymise of a process 6.8-8.0 -> 6.3-6.9 s. What is left beyond the scan:
the rows' transfer (~0.4 s: a COPY message a row, read by psycopg a row at a time) and the
coding in DuckDB (~0.2 s). Neither statement gets a parallel plan; forced (parallel costs 0),
the copy took 1.69 s against 1.36 s: each worker's partial aggregate holds nearly every group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import threading
from typing import Any

from sqlanon.engines import Backend, Column
from sqlanon.engines.pgparts import page_parts, parallel_plan
from sqlanon.lattice import localdb
from sqlanon.lattice.localdb import (
    EXACT_TYPES,
    LocalBackend,
    compared_exactly,
    copy_select,
    source_freq_cols,
)
from sqlanon.measure.assessment import FrequencyTables
from sqlanon.relation import Relation
from sqlanon.search_where import LOCAL_MAX_ROWS

#: Engines whose frequency table :class:`DirectCopy` copies as it is counted. On Spark the SELECT's
#: Arrow batches (``toArrow``) are one job, where a checkpoint of the table and its copy were a
#: write and a second read of it: the 1e6-row prepare 2.7-3.1 -> 2.3-2.7 s (warm, 2-core machine).
DIRECT_ENGINES = frozenset({"postgres", "spark"})
#: What the copy imports (checked without importing them: ``prefetch``'s thread imports them
#: while the warehouse scans).
DIRECT_MODULES = ("pyarrow", "duckdb", "duckdb_engine")


@dataclasses.dataclass
class DirectCopy:
    """``create`` stands in for ``Backend.create_temp`` in
    :func:`~sqlanon.measure.assessment.build_frequency_tables`: it copies the SELECT into
    ``local`` (a fresh DuckDB, the session's staged one until the coded table is staged) and
    defers the warehouse's build. More than LOCAL_MAX_ROWS rows under ``search.where: auto`` (the
    walk would stay in the warehouse): the copy is dropped and the table built there."""

    be: Backend
    policy: Any
    columns: list[Column]
    qi_names: list[str]
    s_names: list[str]
    local: LocalBackend | None = None

    def create(self, stem: str, template: str, **context: Any) -> Relation:
        be = self.be
        rel = be.temp_relation(stem)
        src = self.policy.source
        shape = FrequencyTables(
            rel,
            rel,
            context["q_aliases"],
            context["s_aliases"],
            context["sid_aliases"],
            self.qi_names,
            self.s_names,
        )
        cols = source_freq_cols(self.columns, shape)
        cap = LOCAL_MAX_ROWS if self.policy.search.where == "auto" else None
        be.close_staged()  # one per session (localdb.stage_coded)
        # the scan in parallel parts where PostgreSQL can (engines/pgparts.py), merged here
        parts = None if context["s_aliases"] else page_parts(be, src)
        opening = Opening(be, src, self.columns)
        try:
            if parts:
                sql = " UNION ALL ".join(be._sql(template, "select", {**context, "part": p}) for p in parts)
            else:
                sql = be._sql(template, "select", context)
            # the ranges' rows, each combination up to once per range, are capped as many times,
            # and summed by the local DuckDB as they arrive (localdb.sum_rows)
            part_cap = cap * len(parts) if cap is not None and parts else cap
            sums = list(context["q_aliases"]) if parts else None
            with parallel_plan(be) if parts else contextlib.nullcontext():
                moved = copy_select(be, opening.result, rel, sql, cols, part_cap, what=template, sums=sums)
            local = opening.result()
            if moved is not None and parts and cap is not None:
                if int(local.query("search/row_count", rel=rel)[0][0]) > cap:
                    moved = None
        except BaseException:
            opening.discard()
            raise
        if moved is None:  # too many rows for auto's local walk: counted in the warehouse
            local.close()
            return be.create_temp(stem, template, **context)
        local.moved = moved

        def build_in_warehouse() -> None:
            be.create_temp_as(rel, template, **context)

        be.deferred[rel.name] = build_in_warehouse  # before the coded table's, which reads it
        be.staged = (rel.name, local)  # closed with the session should prepare stop here
        self.local = local
        return rel


class Opening:
    """:func:`~sqlanon.lattice.localdb.open_local` on a thread of its own, started at once: the
    local DuckDB (its import and its settings, ~0.1 s at 1e6 rows on a loaded 2-core machine) is
    opened while the warehouse counts, the main thread waiting on the server's socket without
    the GIL. :meth:`result` is the DuckDB (or the thread's error); :meth:`discard` closes it."""

    def __init__(self, be: Backend, src: Relation, columns: list[Column]) -> None:
        self._out: list[Any] = []
        self._thread = threading.Thread(
            target=self._open, args=(be, src, columns), name="sqlanon-local-open", daemon=True
        )
        self._thread.start()

    def _open(self, be: Backend, src: Relation, columns: list[Column]) -> None:
        try:
            self._out.append(localdb.open_local(be, src, columns))
        except BaseException as e:  # noqa: BLE001 - raised on the main thread by result()
            self._out.append(e)

    def result(self) -> LocalBackend:
        self._thread.join()
        out = self._out[0]
        if isinstance(out, BaseException):
            raise out
        return out

    def discard(self) -> None:
        self._thread.join()
        if self._out and isinstance(self._out[0], LocalBackend):
            self._out[0].close()


def direct_copy(
    be: Backend, policy: Any, qi_names: list[str], s_names: list[str], walk: bool
) -> DirectCopy | None:
    """A :class:`DirectCopy` where :func:`~sqlanon.lattice.localdb.stage_coded` will stage the
    coded table (the same conditions, the source's row count read from at most STAGE_MIN_ROWS of
    its rows), else None: the frequency table is built in the warehouse as before. Nor with a
    sensitive attribute: re-verifying the release reads the search's frequency table for the
    attribute's distribution (templates/assess/sensitive_classes.sql.j2, ``ref_freq``), which the
    warehouse would then build after all, a second scan of the source."""
    if (
        not walk
        or policy.sensitive
        or be.dialect not in DIRECT_ENGINES
        or be.inline
        or policy.search.where == "database"
        or policy.search.algorithm == "mondrian"
    ):
        return None
    if any(importlib.util.find_spec(m) is None for m in DIRECT_MODULES):
        return None  # stage_coded / location() decide as before
    src = policy.source
    if not compared_exactly(be, src, qi_names, EXACT_TYPES):
        return None
    least = localdb.STAGE_MIN_ROWS
    if least > 0 and int(be.query("search/at_least", rel=src, n=least)[0][0]) < least:
        return None
    return DirectCopy(be, policy, be.require_columns(src, "source"), list(qi_names), list(s_names))
