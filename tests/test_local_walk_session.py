"""Issue 33, the local walk's staged copy (sqlanon/lattice/localdb.py ``stage_coded``) and the
engines' bulk path (``Backend.load`` / ``Backend.read_arrow``).

- The staged in-memory DuckDB, a copy of the frequency table (personal aggregates), belongs to the
  warehouse session that staged it (``Backend.staged``): two sessions staging at once each walk
  their own and never take the other's, and a closed session leaves no open local DuckDB (before:
  a module-global registry keyed by the coded table's name, owned by ``id()`` of the session).
- It is staged only where a walk follows: ``evaluate`` and ``anonymise --levels`` above
  ``STAGE_MIN_ROWS`` read the coded table in the warehouse, so nothing is copied for them (before:
  the copy and the local coding, ~0.7 s of CPU at 1e6 rows, for nothing).
- One bulk load per engine serves the secret relation, the local walk's copies and Mondrian's
  partition pairs: the same rows arrive whichever form (Arrow or Python rows) they come in.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from sqlanon import api
from sqlanon.engines import session
from sqlanon.lattice import local, localdb, prepare
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.policy import parse_policy
from sqlanon.relation import Relation
from tests.test_pg_walk import _load, _policy


def open_local_duckdbs() -> list[Any]:
    """Every local walk's DuckDB still open in this process (found by the garbage collector, not
    by any registry of the code under test)."""
    gc.collect()
    return [
        o
        for o in gc.get_objects()
        if isinstance(o, localdb.LocalBackend) and o._conn is not None and not o._conn.closed
    ]


def test_two_sessions_staging_at_once_keep_their_own_copy(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if db.kind != "postgres":
        pytest.skip("staging is PostgreSQL's")
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)  # the test table is small
    with session(db.url) as one, session(db.url) as two:
        p1 = prepare(one, parse_policy(_policy("auto")))
        p2 = prepare(two, parse_policy(_policy("auto")))
        assert one.staged is not None and two.staged is not None
        assert one.staged[0] == p1.coded.name and two.staged[0] == p2.coded.name
        mine = two.staged[1]
        assert one.staged[1] is not mine
        # A session never takes another's copy, even given that plan's coded table.
        assert localdb.take_staged(one, p2.coded) is None and two.staged[1] is mine
        top = tuple(p1.heights)
        with local.local_plan(p1) as lp1:
            assert lp1.be is not mine and one.staged is None  # its own, taken
            first = Evaluator(lp1).evaluate([top])
        assert two.staged is not None and not mine._conn.closed  # the other's walk left it alone
        with local.local_plan(p2) as lp2:
            assert lp2.be is mine and lp2.be.moved == p2.base_rows  # no second copy
            assert Evaluator(lp2).evaluate([top]) == first
        # Neither walk needed the coded table in PostgreSQL.
        assert not any(p1.coded.name in s and "CREATE" in s.upper() for s in one.log)
        assert not any(p2.coded.name in s and "CREATE" in s.upper() for s in two.log)
    assert not open_local_duckdbs()


def test_a_closed_session_leaves_no_open_local_duckdb(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prepared but never walked (and a second plan replacing the first): closing the session
    closes the copy; a session closed with a copy still staged holds none afterwards."""
    if db.kind != "postgres":
        pytest.skip("staging is PostgreSQL's")
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)
    assert not open_local_duckdbs()
    be = session(db.url)
    with be as conn:
        prepare(conn, parse_policy(_policy("auto")))
        prepare(conn, parse_policy(_policy("auto")))
        assert len(open_local_duckdbs()) == 1  # one per session: the first was closed
        staged = conn.staged
    assert staged is not None and staged[1]._conn.closed and conn.staged is None
    assert not open_local_duckdbs()


@pytest.mark.parametrize("command", ["evaluate", "levels"])
def test_no_copy_where_no_walk_follows(db: Any, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """``evaluate`` and ``anonymise --levels`` on PostgreSQL above the staging bound copy nothing
    into a local DuckDB (before: the frequency table crossed and was coded locally, then the
    warehouse built its own coded table anyway)."""
    if db.kind != "postgres":
        pytest.skip("staging is PostgreSQL's")
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)  # 2,000 rows: above the lowered bound
    opened: list[Any] = []
    real = localdb.open_local

    def spy(*a: Any, **k: Any) -> Any:
        opened.append(real(*a, **k))
        return opened[-1]

    monkeypatch.setattr(localdb, "open_local", spy)
    levels = "sex=1,age=3,race=1,education=2"
    pol = _policy("auto")
    pol["privacy"]["suppression"] = 0.05  # the node suppresses a few records
    if command == "evaluate":
        out = api.evaluate(pol, levels, db.url).to_dict()
        assert out["rows"] == 2000
    else:
        out = api.anonymise(pol, db.url, dry_run=True, levels=levels).to_dict()
        assert out.get("rows_transferred", 0) == 0
    assert opened == []
    # The search itself still stages (the walk follows): the spy sees it.
    walked = api.anonymise(_policy("auto"), db.url, dry_run=True).to_dict()
    assert walked["search_location"] == "local" and len(opened) == 1
    assert not open_local_duckdbs()


def test_one_bulk_load_takes_arrow_and_python_rows(db: Any) -> None:
    """Each engine's ``Backend.load`` (the one the secret relation, the local walk and Mondrian's
    pairs go through) loads the same rows from Arrow and from Python rows, NULLs and an empty
    string kept apart, and its statements never carry a value."""
    import pyarrow as pa

    rows = [(1, "a"), (2, None), (3, ""), (2**40, "x,y\n'z\"")]
    cols = [("n", "BIGINT"), ("s", "VARCHAR")]
    arrow = pa.table({"n": pa.array([r[0] for r in rows], pa.int64()), "s": [r[1] for r in rows]})
    with session(db.url) as be:
        got = []
        for i, data in enumerate((rows, arrow, arrow.to_reader())):
            rel = Relation(f"sqlanon_bulk_{i}")
            assert be.load(rel.table(), cols, data) == len(rows)
            be._temps.append(rel.name)
            got.append(sorted(be._run(f'SELECT n, s FROM "{rel.name}"').fetchall()))
        assert got[0] == got[1] == got[2] == sorted(rows)
        text = "\n".join(be.log)
        assert "x,y" not in text and str(2**40) not in text
