"""One PostgreSQL scan in parallel parts (issue 33): the groups of a plain table read as a UNION ALL
of GROUP BYs over disjoint ranges of its pages, which PostgreSQL runs as a Parallel Append.

PostgreSQL plans the search's one GROUP BY of the source (nine QIs, 276,373 groups at 1e6 rows)
without parallel workers: a partial aggregation per worker would be merged by a second, serial
one over every worker's groups, which its cost model rightly finds no cheaper. So the scan ran on
one core: 1.1 s at 1e6 rows, the floor of issue 33's goals. Where the groups are copied out (the
local walk, :mod:`sqlanon.lattice.localdb`), the merge can be left to the reader: each branch
groups the rows of one range of the table's pages (``ctid``, a TID Range Scan, PostgreSQL 14+),
the branches run as one Parallel Append (each in a worker or the leader, one snapshot: one
statement), and the local DuckDB sums the groups that several ranges share. The ranges cover
every tuple identifier exactly once (the last one is open, so pages added since are read too),
so each row is counted once. Only a plain table or materialised view has such ranges; a view, a
foreign or partitioned table is read as one GROUP BY.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlanon.engines.base import Backend
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql

#: A part is at least this many pages (8 MB: ``min_parallel_table_scan_size``'s default, below
#: which PostgreSQL itself plans no parallel scan).
PART_MIN_PAGES = 1024
#: At most this many parts, whatever the workers allowed (each adds groups for the reader to merge).
MAX_PARTS = 8


def page_parts(be: Backend, source: Relation) -> list[Sql] | None:
    """The predicates of the parts (one per worker a statement may use,
    ``max_parallel_workers_per_gather``, at least two: the leader runs a branch where no second
    worker is free), or None where the scan stays one GROUP BY (see the module docstring). One part
    per worker, not one more for the leader, which also gathers the rows and writes the COPY: at
    1e6 rows on two cores two parts copied in 0.87 s, three in 0.95 s, one GROUP BY in 1.16 s."""
    if be.dialect != "postgres":
        return None
    rows = be.query("catalog/pages", name=source.name, schema=source.schema)
    if len(rows) != 1:
        return None
    kind, size, block, workers, version, whole = rows[0]
    pages = int(size) // int(block)
    if str(kind) not in ("r", "m") or int(version) < 140000 or int(workers) < 1 or not whole:
        return None  # (not whole: a role granted some columns only may not read ctid)
    n = min(max(int(workers), 2), pages // PART_MIN_PAGES, MAX_PARTS)
    if n < 2:
        return None
    cuts = [pages * i // n for i in range(1, n)]
    lows = [None, *cuts]
    highs = [*cuts, None]
    parts = []
    for lo, hi in zip(lows, highs, strict=True):
        bounds = ([f"ctid >= '({lo},0)'"] if lo is not None else []) + (
            [f"ctid < '({hi},0)'"] if hi is not None else []
        )
        parts.append(Sql(" AND ".join(bounds)))
    return parts


@contextlib.contextmanager
def planner_settings(be: Backend, values: dict[str, str]) -> Iterator[None]:
    """PostgreSQL's planner settings ``values`` for the statements run meanwhile, each setting's
    previous value in the session (``SET`` or the role's, whatever it was) put back afterwards; a
    failed statement's transaction, rolled back, undoes the change itself."""
    raw = be._conn.connection.driver_connection
    names = list(values)
    row = raw.execute("SELECT " + ", ".join("current_setting(%s)" for _ in names), names).fetchone()
    before = dict(zip(names, (str(v) for v in row or ()), strict=True))
    for name, value in values.items():
        raw.execute("SELECT set_config(%s, %s, false)", (name, value))
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            for name, value in before.items():
                raw.execute("SELECT set_config(%s, %s, false)", (name, value))


def parallel_plan(be: Backend) -> contextlib.AbstractContextManager[None]:
    """PostgreSQL's costs of starting workers and of passing them tuples set to nothing while the
    parts' statement is planned and run: its cost model finds a Gather of every part's groups
    dearer than one process (three parts of the 1e6-row table: a plain Append), though the parts
    run in parallel at no more cost than the groups they pass anyway. The settings are the
    session's as before afterwards (:func:`planner_settings`)."""
    return planner_settings(be, {"parallel_setup_cost": "0", "parallel_tuple_cost": "0"})


def hashed_plan(be: Backend) -> contextlib.AbstractContextManager[None]:
    """PostgreSQL plans the statements run meanwhile with ``enable_sort`` off (issue 33: publishing
    plus re-verification at most one scan more): a GROUP BY is then hashed wherever a hash can do
    it, and sorted only where nothing else can (a window, an ORDER BY).

    Why: re-verifying the 1e7-row release at 5 % (node 0,2,0,..., 316,921 groups of the release's
    QIs, 105,070 kept) PostgreSQL estimates ~1 million groups, more than a hash table within
    ``work_mem`` x ``hash_mem_multiplier`` (64 MB x 2) would hold, and sorts each worker's third of
    the rows instead: three external merge sorts of 3.3 million rows (~310 MB each on disk), 41.7 s
    of a 41.7 s statement (EXPLAIN ANALYZE, load ~5). Hashed, the same statement ran in 9.1-9.5 s
    in memory (49 MB per worker, 70 MB in the leader's final aggregation, no temporary file), and
    the floor of issue 33 (one GROUP BY of the nine QIs) is itself such a sort. No memory setting
    changes: a hash table that outgrows ``work_mem`` x ``hash_mem_multiplier`` spills to disk in
    batches (PostgreSQL 13+), so the server's bound per process is the administrator's, as a sort's
    is. The planner setting only, no result: the rows are the same whatever the plan.

    The session's value is restored afterwards (:func:`planner_settings`). Other engines: nothing."""
    if be.dialect != "postgres":
        return contextlib.nullcontext()
    return planner_settings(be, {"enable_sort": "off"})


def hashed_create(be: Backend) -> Callable[..., Relation] | None:
    """``be.create_temp`` with its one statement run under :func:`hashed_plan` (PostgreSQL; else
    None: ``create_temp`` itself), for the frequency table a re-verification groups. That
    statement only: the catalog's queries planned without sorts took ~0.35 s each instead of a few
    ms (five of them in a verification at 1e6 rows, +1.3 s), so ``enable_sort`` is off for no
    other statement."""
    if be.dialect != "postgres":
        return None

    def create(stem: str, template: str, **context: Any) -> Relation:
        with hashed_plan(be):
            return be.create_temp(stem, template, **context)

    return create
