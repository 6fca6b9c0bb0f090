"""Issue 33: the search's scan in page ranges on PostgreSQL (sqlanon/engines/pgparts.py) is summed
by the local DuckDB as the ranges' groups arrive (sqlanon/lattice/localdb.py ``sum_rows``), not
loaded into a table first and summed after the copy: no table of the ranges' rows is written, and
the frequency table is PostgreSQL's own GROUP BY of the source, combination for combination. The
rows reported as copied stay the ranges' rows (a combination once per range that holds it)."""

from __future__ import annotations

from typing import Any

import pytest

from sqlanon.engines import pgparts, session
from sqlanon.errors import SqlanonError
from sqlanon.lattice import localdb, prepare
from sqlanon.relation import Relation
from tests.test_local_freq import QIS, _policy, _small, pg  # noqa: F401 - the fixtures
from tests.test_local_walk_session import open_local_duckdbs


def test_the_ranges_groups_are_summed_as_they_arrive(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 1)  # the test table has a few dozen pages
    cols = ", ".join(f'"{c}"' for c in QIS)
    with session(pg.url) as be:
        plan = prepare(be, _policy())
        parts = pgparts.page_parts(be, Relation("adult", "main"))
        assert be.staged is not None and parts is not None and len(parts) == 2
        local = be.staged[1]
        # Nothing but the frequency table is written from the stream (before: a table of the
        # ranges' rows, then the frequency table summed from it).
        created = [s for s in local.log if s.upper().startswith(("CREATE TABLE", "CREATE TEMPORARY TABLE"))]
        assert [s for s in created if "sqlanon_freq_" in s.split(" AS ")[0]] == created[:1]
        assert not any("sqlanon_parts_" in s for s in local.log)
        raw = local._conn.connection.driver_connection
        aliases = ", ".join(str(a) for a in plan.base.q_aliases)
        got = sorted(map(repr, raw.execute(f"SELECT {aliases}, cnt FROM {plan.base.freq.name}").fetchall()))
        moved = local.moved
    want = sorted(map(repr, pg.sql(f"SELECT {cols}, COUNT(*) FROM main.adult GROUP BY {cols}")))
    assert got == want
    per_range = sum(
        int(pg.sql(f"SELECT COUNT(*) FROM (SELECT 1 FROM main.adult WHERE {p} GROUP BY {cols}) AS g")[0][0])
        for p in parts
    )
    assert moved == per_range > len(want)


def test_a_failed_sum_is_one_line_and_closes_the_duckdb(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A value the stream cannot be cast to (here every text column read as an integer) fails the
    summing statement: one line naming no value, and no local DuckDB left open."""
    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 1)
    monkeypatch.setattr(localdb, "_cast", lambda type_name, dialect: "INTEGER")
    with session(pg.url) as be, pytest.raises(SqlanonError) as err:
        prepare(be, _policy())
    assert "copying the search's table failed" in str(err.value) and "Female" not in str(err.value)
    assert "\n" not in str(err.value)
    assert not open_local_duckdbs()
