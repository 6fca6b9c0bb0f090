"""Count once in the warehouse, walk locally (issue 33; the policy key ``search.where``,
:mod:`sqlanon.search_where`).

After :func:`~sqlanon.lattice.plan.prepare` has scanned the source once into the base frequency
table and coded it, every statement of the lattice walk reads only those two small tables (and the
rollups it keeps of them): :class:`~sqlanon.lattice.evaluator.Evaluator` the coded table (the
sensitive domains of t-closeness, entropy l and likeness read the frequency table's ``sid`` and
``cnt``), the metrics' tables (:func:`sqlanon.metrics.scoring.tables`, for the bounds of the
per-record metrics) the frequency table's values. On PostgreSQL a statement costs ~10-50 ms and
on Spark ~0.3-1 s whatever its size, so a walk of ~100 statements costs several scans there.

:func:`local_plan` copies the coded table over the driver's bulk path (``Backend.read_arrow``:
PostgreSQL ``COPY ... TO STDOUT``, CSV parsed by pyarrow in C; Spark ``DataFrame.toArrow``; DuckDB
Arrow; then the local DuckDB's ``Backend.load``) into an embedded
DuckDB under the same name, and yields a :class:`~sqlanon.lattice.plan.Plan` whose backend is that
DuckDB: the same templates walk the lattice there. The frequency table is copied only if a
statement of the walk reads it (:class:`LocalBackend`). Publishing and verification then run in
the warehouse with the original plan.

On PostgreSQL from :data:`~sqlanon.lattice.localdb.STAGE_MIN_ROWS` source records, ``prepare``
does not build the coded table there at all: it copies the frequency table's values and codes them
in the local DuckDB (:func:`~sqlanon.lattice.localdb.stage_coded`), which :func:`local_plan` then
walks (the session's ``Backend.staged``, taken here); the warehouse builds its own coded table
only if one of its statements reads it. Without a sensitive attribute it builds no frequency table
either: the one scan is copied out as it is counted (:mod:`sqlanon.lattice.localfreq`).

The copied tables are personal data (aggregates of the source), so the local DuckDB is
``:memory:`` with ``temp_directory=''`` (DuckDB cannot offload a block to disk: past its
``memory_limit``, 80 % of RAM by default, a statement fails with DuckDB's out-of-memory error
instead of spilling) and ``enable_external_access=false`` (no statement can read or write a
file), nothing of it is printed or logged, and it is closed when the search ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from sqlanon.errors import SqlanonError
from sqlanon.lattice.localdb import (
    LocalBackend,
    copy_table,
    freq_cols,
    inexact_column,
    open_local,
    require_arrow,
    take_staged,
)
from sqlanon.lattice.plan import INT_CODES_BELOW, Plan
from sqlanon.search_where import LOCAL_ENGINES, LOCAL_MAX_ROWS
from sqlanon.sql.compile import Sql, ident

__all__ = ["LocalBackend", "copy_table", "freq_columns", "local_plan", "location"]


def location(plan: Plan, where: str | None = None) -> str:
    """Where the search walks: ``database`` or ``local`` (``where``: the CLI's ``--search-in``,
    else the policy's ``search.where``; ``auto``, see :mod:`sqlanon.search_where`)."""
    where = where or plan.policy.search.where
    if where != "auto":
        if where == "local":
            require_arrow()
            inexact_column(plan.be, plan.policy, plan.qi_names, refuse=True)
        return where
    if plan.be.dialect not in LOCAL_ENGINES or plan.base_rows > LOCAL_MAX_ROWS:
        return "database"
    if inexact_column(plan.be, plan.policy, plan.qi_names, refuse=False):
        return "database"
    try:
        require_arrow()
    except SqlanonError:
        return "database"
    return "local"


@contextlib.contextmanager
def local_plan(plan: Plan, *, lazy_coded: bool = False) -> Iterator[Plan]:
    """The plan on an in-memory DuckDB holding a copy of the coded table (see the module
    docstring); ``plan.be.moved`` of the yielded plan counts the rows copied so far. Where
    :func:`~sqlanon.lattice.localdb.stage_coded` already coded the frequency table locally, that DuckDB.
    ``lazy_coded``: the coded table too is copied only if a statement reads it (Mondrian works on
    the frequency table, :mod:`sqlanon.lattice.mondrian_local`)."""
    require_arrow()
    staged = take_staged(plan.be, plan.coded)
    if staged is not None:
        try:
            yield dataclasses.replace(plan, be=staged)
        finally:
            staged.close()
        return
    src = plan.policy.source
    local = open_local(plan.be, src)
    try:
        code_type = "int32" if plan.n_rows < INT_CODES_BELOW else "int64"
        coded_cols = [(a, code_type) for a in plan.code_alias.values()]
        coded_cols += [(a, "int64") for a in [*plan.base.sid_aliases, ident("cnt")]]
        if lazy_coded:
            local.pending[plan.coded.name] = lambda: copy_table(plan.be, local, plan.coded, coded_cols)
        else:
            local.moved = copy_table(plan.be, local, plan.coded, coded_cols)
        f_cols = freq_cols(local, src, plan.base)
        local.pending[plan.base.freq.name] = lambda: copy_table(plan.be, local, plan.base.freq, f_cols)
        yield dataclasses.replace(plan, be=local)
    finally:
        local.close()


def freq_columns(plan: Plan, local: LocalBackend) -> list[tuple[Sql, str]]:
    """The base frequency table's columns as :func:`copy_table` takes them (Mondrian's local
    rounds, :mod:`sqlanon.lattice.mondrian_local`)."""
    return freq_cols(local, plan.policy.source, plan.base)
