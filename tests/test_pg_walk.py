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
from sqlanon.engines.postgres import CopyStream
from sqlanon.errors import SqlanonError
from sqlanon.lattice import local, localdb, prepare
from sqlanon.lattice import plan as plan_module
from sqlanon.policy import parse_policy
from tests.conftest import ADULT_COLUMNS, ADULT_DIR, ENGINES_SPARK, read_adult

#: The engines that stage the coding (DuckDB is in-process: coded where it is).
WAREHOUSES = ["postgres", pytest.param("spark", marks=pytest.mark.spark)]
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


def _node_results(plan: Any) -> dict:
    """Every node of the plan's lattice evaluated on the plan's backend (the bottom node first)."""
    import itertools

    from sqlanon.lattice.evaluator import Evaluator

    nodes = list(itertools.product(*(range(h + 1) for h in plan.heights)))
    return Evaluator(plan).evaluate(nodes)


#: Hierarchy forms whose labels the local DuckDB computes when PostgreSQL's coding is staged: ARX's
#: files, intervals on the integer age (division, rounding), masking of the text education.
FORMS = {
    "files": {},
    "interval_mask": {
        "age": {"interval": {"widths": [5, 10, 20]}},
        "education": {"mask": "right", "levels": 3},
    },
}


@pytest.mark.parametrize("db", ENGINES_SPARK, indirect=True)
@pytest.mark.parametrize("form", list(FORMS))
def test_staged_coding_keeps_the_coded_table_out_of_postgres(
    db: Any, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """Where the walk will be local on PostgreSQL (sqlanon/lattice/local.py ``stage_coded``), the
    frequency table's values are copied and coded in the local DuckDB: PostgreSQL never builds
    the coded table (before: built there, then its codes copied). The coded table coded locally
    must group every level as the warehouse's does: the same numbers of labels and the same
    result for every node of the lattice as the warehouse-coded plan (``search.where:
    database``), evaluated in PostgreSQL. Spark stages the same way (its labels then computed by
    DuckDB's arithmetic and string functions instead of Spark's)."""
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)  # the test table is small

    def pol(where: str) -> dict:
        out = _policy(where)
        for c, h in FORMS[form].items():
            out["columns"][c]["hierarchy"] = h
        return out

    with session(db.url) as be:
        plan = prepare(be, parse_policy(pol("auto")))
        made = [s for s in be.log if plan.coded.name in s]
        staged = be.staged is not None and be.staged[0] == plan.coded.name
        with local.local_plan(plan) as lp:
            assert lp.be.moved == plan.base_rows  # the frequency table's rows crossed, once
            here = _node_results(lp)
        assert be.staged is None and lp.be._conn.closed  # taken by the walk, closed after it
    with session(db.url) as be:
        inside = prepare(be, parse_policy(pol("database")))
        there = _node_results(inside)
        assert (inside.card, inside.base_rows) == (plan.card, plan.base_rows)
    if db.kind in ("postgres", "spark"):
        assert staged and made == []  # before: CREATE TEMPORARY TABLE ...coded... AS
    else:
        assert not staged and made  # DuckDB is in-process: coded where it is
    assert here == there


@pytest.mark.parametrize("db", WAREHOUSES, indirect=True)
def test_staged_plan_builds_the_coded_table_in_postgres_when_it_is_read_there(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that prepares a plan and evaluates in the warehouse (``--levels``, a choice
    with a table-wide risk bound) still finds the coded table there: it is built by the first
    statement that names it (``Backend.deferred``), once."""
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)
    from sqlanon.lattice.evaluator import Evaluator

    with session(db.url) as be:
        plan = prepare(be, parse_policy(_policy("auto")))
        bottom = tuple(0 for _ in plan.heights)
        top = tuple(plan.heights)
        first = Evaluator(plan).evaluate([bottom, top])
        Evaluator(plan).evaluate([top])
        built = [s for s in be.log if plan.coded.name in s and "CREATE" in s.upper()]
        assert len(built) == 1 and not be.deferred
        with local.local_plan(plan) as lp:
            assert Evaluator(lp).evaluate([bottom, top]) == first
    assert first[top].rows == ROWS


def test_stage_keeps_coding_in_postgres_for_other_types_and_small_tables(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quasi-identifier of a type DuckDB may compare otherwise (numeric, a date, char(n)'s
    padding) keeps the coding in the warehouse; so does a small source and a search kept in the
    database."""
    if db.kind != "postgres":
        pytest.skip("staging is PostgreSQL's")
    _load(db)
    exact_pg = localdb.EXACT_TYPES["postgres"]
    for min_rows, exact, where in (
        (0, exact_pg - {"integer"}, "auto"),  # age is an integer column
        (ROWS + 1, exact_pg, "auto"),
        (0, exact_pg, "database"),
    ):
        monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", min_rows)
        monkeypatch.setitem(localdb.EXACT_TYPES, "postgres", exact)
        with session(db.url) as be:
            plan = prepare(be, parse_policy(_policy(where)))
            assert be.staged is None
            assert any(plan.coded.name in s and "CREATE" in s.upper() for s in be.log)


def test_copy_stream_fills_the_reader_buffer() -> None:
    """PostgreSQL's COPY arrives a row per chunk: one read takes as many chunks as the buffer
    holds (before: one chunk a read, 276,373 Python calls at 1e6 rows)."""
    chunks = [b"ab", memoryview(b"cde"), b"", b"fghij", b"k"]
    raw = CopyStream(iter(chunks))
    buf = bytearray(4)
    assert raw.readinto(buf) == 4 and buf == b"abcd"  # before: 2 (b"ab")
    buf = bytearray(100)
    assert raw.readinto(buf) == 7 and buf[:7] == b"efghijk"
    assert raw.readinto(buf) == 0
    import io

    assert io.BufferedReader(CopyStream(iter(chunks)), buffer_size=3).read() == b"abcdefghijk"


def test_staged_coding_still_refuses_an_uncovered_value(
    db: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The coverage bits come from the local DuckDB's dictionaries when PostgreSQL's coding is
    staged; the refusal still names the value, read from the warehouse's frequency table."""
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)
    (tmp_path / "sex.csv").write_text("Male;*\n", encoding="utf-8")  # no 'Female'
    pol = _policy("auto")
    pol["columns"]["sex"]["hierarchy"] = {"file": str(tmp_path / "sex.csv")}
    with session(db.url) as be:
        with pytest.raises(SqlanonError, match=r"columns.sex.hierarchy: .*'Female'"):
            prepare(be, parse_policy(pol))
        staged = [be.staged[1]] if be.staged is not None else []
        assert len(staged) == (1 if db.kind == "postgres" else 0)
    # The refused plan's local DuckDB went with the session.
    assert be.staged is None and all(b._conn.closed for b in staged)


def test_one_staged_duckdb_per_session(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that prepares again (``evaluate`` over several policies) keeps one staged local
    DuckDB, the latest: an earlier plan walked afterwards copies its coded table from the
    warehouse, built there on first use, and counts the same."""
    if db.kind != "postgres":
        pytest.skip("staging is PostgreSQL's")
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)
    from sqlanon.lattice.evaluator import Evaluator

    with session(db.url) as be:
        first = prepare(be, parse_policy(_policy("auto")))
        assert be.staged is not None and be.staged[0] == first.coded.name
        early = be.staged[1]
        second = prepare(be, parse_policy(_policy("auto")))
        assert be.staged[0] == second.coded.name and early._conn.closed
        top = tuple(first.heights)
        with local.local_plan(first) as lp1:
            one = Evaluator(lp1).evaluate([top])
        assert any(first.coded.name in s and "CREATE" in s.upper() for s in be.log)  # built in PostgreSQL
        with local.local_plan(second) as lp2:
            assert Evaluator(lp2).evaluate([top]) == one
    assert not any(second.coded.name in s and "CREATE" in s.upper() for s in be.log)


def test_a_staged_duckdb_never_walked_closes_with_the_session(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan prepared but never walked (``evaluate``, ``--levels``) leaves its staged DuckDB, a
    copy of the frequency table, open no longer than the session (it waited for the garbage
    collector)."""
    if db.kind != "postgres":
        pytest.skip("staging is PostgreSQL's")
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)
    with session(db.url) as be:
        plan = prepare(be, parse_policy(_policy("auto")))
        assert be.staged is not None and be.staged[0] == plan.coded.name
        staged = be.staged[1]
        keep = be  # the session object outlives its close: only close() may release the copy
    assert keep.staged is None and staged._conn.closed
