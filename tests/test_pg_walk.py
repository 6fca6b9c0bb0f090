"""Issue 33, the local walk's fixed costs on a warehouse (sqlanon/lattice/plan.py ``prepare``,
sqlanon/search_where.py ``prefetch``).

- The search's preparation reads the coded table once after building it (its rows, the coverage
  bits and every level's number of labels in one statement): each statement is a scan and a round
  trip, ~0.07 s apiece on PostgreSQL at 1e6 rows. The figures it reads are checked against counts
  made here in Python from the rows loaded.
- The local walk's imports (pyarrow, DuckDB) start on a thread while the warehouse builds the
  search's tables, on the engines where ``auto`` may walk locally, and not where the search is
  kept in the database.

tests/test_local_walk.py proves the local and in-database walks still choose the same node;
tests/test_bad_input.py that a value a hierarchy does not cover is still refused (the bits).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from sqlanon import search_where
from sqlanon.engines import session
from sqlanon.lattice import plan as plan_module
from sqlanon.lattice import prepare
from sqlanon.policy import parse_policy
from tests.conftest import ADULT_COLUMNS, ADULT_DIR, read_adult

QIS = ["sex", "age", "race", "education"]
ROWS = 2000


def _policy(where: str = "auto") -> dict:
    cols: dict = {
        c: {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}} for c in QIS
    }
    cols["occupation"] = {"role": "sensitive"}
    return {
        "source": "main.adult",
        "columns": cols,
        "privacy": {"k": 5},
        "search": {"algorithm": "flash", "metric": "precision", "where": where},
    }


def _load(db: Any) -> list[dict[str, Any]]:
    rows = read_adult()[:ROWS]
    types = ["INTEGER" if c == "age" else "VARCHAR" for c in ADULT_COLUMNS]
    db.load("adult", ADULT_COLUMNS, [[r[c] for c in ADULT_COLUMNS] for r in rows], types)
    return rows


def test_prepare_reads_the_coded_table_once(db: Any) -> None:
    rows = _load(db)
    with session(db.url) as be:
        plan = prepare(be, parse_policy(_policy()))
        coded = plan.coded.name
        made = next(i for i, s in enumerate(be.log) if coded in s and "CREATE" in s.upper())
        reads = [s for s in be.log[made + 1 :] if coded in s]
    assert len(reads) == 1, reads  # before: three (coverage bits, cardinalities, row count)
    # The coded table has one row per distinct combination of the QIs' and the sensitive values.
    assert plan.base_rows == len({tuple(str(r[c]) for c in [*QIS, "occupation"]) for r in rows})
    assert plan.n_rows == ROWS
    # Level 0 of ARX's Adult hierarchies is the value itself: its labels are the distinct values.
    for j, c in enumerate(QIS):
        assert plan.card[(j, 0)] == len({str(r[c]) for r in rows}), c
    # The top level of sex (height 1: value, '*') has no code column; level 0 two labels.
    assert plan.card[(0, 0)] == 2 and (0, 1) not in plan.card


def test_coded_dictionaries_read_the_base_table_once_on_postgres(db: Any) -> None:
    """On PostgreSQL the coded table's dictionaries take their values from one GROUPING SETS scan
    of the base frequency table (before: one DISTINCT scan per quasi-identifier, nine at 1e6
    rows); the codes themselves are checked by test_prepare_reads_the_coded_table_once and
    tests/test_local_walk.py."""
    _load(db)
    with session(db.url) as be:
        plan = prepare(be, parse_policy(_policy()))
        made = next(s for s in be.log if plan.coded.name in s and "CREATE" in s.upper())
    reads = made.count(plan.base.freq.name)
    # PostgreSQL: the GROUPING SETS scan and the join; DuckDB: a DISTINCT per QI and the join.
    assert reads == (2 if db.kind == "postgres" else len(QIS) + 1), made


def test_prepare_starts_the_local_imports_where_the_walk_may_be_local(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _load(db)
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(plan_module, "prefetch", lambda dialect, where: calls.append((dialect, where)))
    for where in ("auto", "database"):
        with session(db.url) as be:
            prepare(be, parse_policy(_policy(where)))
    assert calls == [(db.kind, "auto"), (db.kind, "database")]


def test_prefetch_imports_on_a_thread_on_warehouses_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert search_where.prefetch("duckdb", "auto") is None  # in-process: auto never copies
    assert search_where.prefetch("postgres", "database") is None  # kept in the warehouse
    # What the walk imports first (sqlanon/lattice/local.py, the in-memory DuckDB's dialect).
    assert set(search_where.LOCAL_MODULES) >= {"pyarrow", "pyarrow.csv", "duckdb", "duckdb_engine"}
    # Two small standard modules stand in for them (a C extension such as pyarrow cannot be
    # imported twice in one process).
    monkeypatch.setattr(search_where, "LOCAL_MODULES", ("colorsys", "wave"))
    for name in ("colorsys", "wave"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    for dialect, where in (("postgres", "auto"), ("spark", "local")):
        thread = search_where.prefetch(dialect, where)
        assert thread is not None and not thread.daemon  # an early exit waits for it
        thread.join(timeout=30)
        assert "colorsys" in sys.modules and "wave" in sys.modules


def test_prefetch_leaves_a_missing_module_to_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that cannot be imported ends the thread quietly: location() reports it."""
    monkeypatch.setattr(search_where, "LOCAL_MODULES", ("sqlanon_no_such_module", "colorsys"))
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    thread = search_where.prefetch("postgres", "local")
    assert thread is not None
    thread.join(timeout=30)
    assert "colorsys" not in sys.modules  # it stopped at the first missing module
