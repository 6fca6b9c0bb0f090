"""Issue 33: on PostgreSQL, where the walk is local and its coding staged, the search's base frequency
table is counted straight into the local DuckDB (sqlanon/lattice/localfreq.py): PostgreSQL builds
no frequency table for the search (before: ``CREATE TEMPORARY TABLE sqlanon_freq_... AS SELECT ...
GROUP BY``, then a COPY of the table written; at 1e6 rows 1.24 s + 0.44 s against one scan of
~1.1 s), unless a later statement there names it (``Backend.deferred``: then built once).

The expected node and published rows are the in-database search's (``search.where: database``),
which tests/test_search_adult.py checks against an exhaustive search; the row counts are counted
here in Python from the rows loaded. The test table is small: STAGE_MIN_ROWS is lowered as in
tests/test_pg_walk.py.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.errors import SqlanonError
from sqlanon.lattice import local, localdb, localfreq, prepare
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.policy import parse_policy
from sqlanon.publish import anonymise
from sqlanon.relation import Relation
from tests.conftest import ADULT_DIR, read_adult
from tests.helpers import adult_db
from tests.test_local_walk_session import open_local_duckdbs

QIS = ["sex", "age", "race", "education"]
ROWS = 2000


@pytest.fixture(scope="module", params=["postgres"])
def pg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The first 2,000 Adult rows as main.adult on PostgreSQL (the direct copy is PostgreSQL's)."""
    yield from adult_db(request, tmp_path_factory, ROWS)


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)  # the test table is small


def _policy(
    where: str = "auto", suppression: float = 0.0, target: str = "adult_anon", sensitive: bool = False
) -> Any:
    cols: dict = {
        c: {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}} for c in QIS
    }
    if sensitive:
        cols["occupation"] = {"role": "sensitive"}
    return parse_policy(
        {
            "source": "main.adult",
            "target": f"main.{target}",
            "columns": cols,
            "privacy": {"k": 5, "suppression": suppression},
            "search": {"algorithm": "flash", "metric": "precision", "where": where},
            "publish": {"as": "table"},
        }
    )


def _freq_builds(log: list[str], name: str | None = None) -> list[str]:
    """The statements of ``log`` that create a frequency table (``name``: that one)."""
    made = re.compile(r'CREATE TEMPORARY TABLE "(sqlanon_freq_\w+)"', re.IGNORECASE)
    return [s for s in log if (m := made.match(s)) and (name is None or m.group(1) == name)]


def _distinct() -> int:
    """The frequency table's rows: distinct QI combinations of the rows loaded."""
    rows = read_adult()[:ROWS]
    return len({tuple(str(r[c]) for c in QIS) for r in rows})


@pytest.mark.parametrize("suppression", [0.0, 0.05])
def test_the_search_builds_no_frequency_table_in_postgres(pg: Any, suppression: float) -> None:
    """The same node and the same published rows as the search in the database, with one
    frequency table fewer built in PostgreSQL (before: as many: the search's own was built
    there and copied); the verification's own is still built there."""
    runs = {}
    for where in ("database", "auto"):
        target = f"anon_{where}_{int(suppression * 100)}"
        with session(pg.url) as be:
            out = anonymise(be, _policy(where, suppression, target), replace=True)
            runs[where] = (out["node"], _freq_builds(be.log), list(be.log))
        assert not open_local_duckdbs()
    (node_db, built_db, _), (node_auto, built_auto, log_auto) = runs["database"], runs["auto"]
    assert node_auto == node_db
    assert len(built_auto) == len(built_db) - 1, built_auto
    # the search's one scan, copied out as it is counted
    assert any(s.startswith("COPY (SELECT") and '"main"."adult"' in s and "GROUP BY" in s for s in log_auto)
    cols = ", ".join(f'"{c}"' for c in QIS)
    rows = {
        w: sorted(map(repr, pg.sql(f"SELECT {cols} FROM main.anon_{w}_{int(suppression * 100)}")))
        for w in runs
    }
    assert rows["auto"] == rows["database"] and len(rows["auto"]) > 0


def test_the_frequency_table_is_built_in_postgres_when_named_there(pg: Any) -> None:
    """Prepared with a local walk, the plan's frequency table exists only locally; a warehouse
    statement that names it builds it there first, once, with the same rows (and before the
    coded table's deferred build, which reads it)."""
    with session(pg.url) as be:
        plan = prepare(be, _policy())
        freq = plan.base.freq.name
        assert _freq_builds(be.log) == [] and be.staged is not None and be.staged[0] == plan.coded.name
        # the DuckDB opened on a thread during the scan keeps localdb's guarantees: memory only
        raw = be.staged[1]._conn.connection.driver_connection
        temp_dir, external, path = raw.execute(
            "SELECT current_setting('temp_directory'), current_setting('enable_external_access'), "
            "(SELECT path FROM duckdb_databases() WHERE database_name = current_database())"
        ).fetchall()[0]
        assert (temp_dir, str(external).lower(), path) == ("", "false", None)
        assert (plan.n_rows, plan.base_rows) == (ROWS, _distinct())
        top = tuple(plan.heights)
        bottom = tuple(0 for _ in plan.heights)
        there = Evaluator(plan).evaluate([bottom, top])  # names the coded table: both built
        assert len(_freq_builds(be.log, freq)) == 1 and not be.deferred
        assert int(be.query("search/total", base=plan.base.freq)[0][0]) == ROWS
        assert int(be.query("search/row_count", rel=plan.base.freq)[0][0]) == _distinct()
        assert len(_freq_builds(be.log, freq)) == 1  # once
        with local.local_plan(plan) as lp:
            assert lp.be.moved == _distinct()  # the frequency table crossed, once
            assert Evaluator(lp).evaluate([bottom, top]) == there
    assert there[top].rows == ROWS


def test_the_source_row_threshold_reads_its_bound(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """From STAGE_MIN_ROWS source rows (read from at most that many) the frequency table is
    copied, below it built in PostgreSQL as before."""
    for least, direct in ((ROWS, True), (ROWS + 1, False)):
        monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", least)
        with session(pg.url) as be:
            plan = prepare(be, _policy())
            assert bool(_freq_builds(be.log)) is not direct, least
            assert (be.staged is not None) is direct
            assert plan.n_rows == ROWS


def test_too_many_frequency_rows_for_auto_are_counted_in_postgres(
    pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``auto``, a copy past LOCAL_MAX_ROWS frequency rows is dropped and the table built
    in PostgreSQL, where the walk then stays (as before: counted there, then kept there);
    ``local`` asked for copies whatever the size."""
    bound = _distinct() - 1
    for mod in (localfreq, localdb, local):
        monkeypatch.setattr(mod, "LOCAL_MAX_ROWS", bound)
    with session(pg.url) as be:
        plan = prepare(be, _policy("auto"))
        assert len(_freq_builds(be.log, plan.base.freq.name)) == 1 and be.staged is None
        assert local.location(plan) == "database" and plan.n_rows == ROWS
    assert not open_local_duckdbs()
    with session(pg.url) as be:
        plan = prepare(be, _policy("local"))
        assert _freq_builds(be.log) == [] and be.staged is not None
        assert plan.base_rows == _distinct()


def test_a_failed_copy_is_one_line_and_closes_the_duckdb(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy that fails (here the local load) says so in one line, naming no value, and leaves
    no local DuckDB open."""

    def broken(*args: Any, **kwargs: Any) -> int:
        raise ValueError("could not convert 'Female'")

    monkeypatch.setattr(localdb.LocalBackend, "load", broken)
    with session(pg.url) as be, pytest.raises(SqlanonError) as err:
        prepare(be, _policy())
    assert "copying the search's table failed" in str(err.value) and "Female" not in str(err.value)
    assert "\n" not in str(err.value)
    assert not open_local_duckdbs()


def test_a_sensitive_attribute_keeps_the_frequency_table_in_postgres(pg: Any) -> None:
    """With a sensitive attribute the re-verification reads the search's frequency table in the
    warehouse (the attribute's distribution): it is built there in prepare, once, as before,
    and copied for the staged coding (not counted twice)."""
    with session(pg.url) as be:
        out = anonymise(be, _policy("auto", target="anon_sensitive", sensitive=True), replace=True)
        scans = [
            s
            for s in be.log
            if s.startswith(("CREATE", "COPY"))
            and '"main"."adult"' in s
            and "GROUP BY" in s
            and " cid" not in s
        ]
    # one scan of the source for the search (before the fix: copied out, then built again)
    assert out["search_location"] == "local" and len(scans) == 1, scans
    assert _freq_builds(scans)


def test_an_interrupted_copy_is_the_interrupt(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A COPY that fails because Ctrl-C cancelled it (the driver's own error) is reported as the
    interrupt (exit 130), not as a failed copy: the search's scan now runs inside the copy."""
    import signal

    from sqlanon import interrupt

    def cancelled(*args: Any, **kwargs: Any) -> int:
        interrupt._state["signum"] = signal.SIGINT  # what the handler records
        raise RuntimeError("canceling statement due to user request")

    monkeypatch.setattr(localdb.LocalBackend, "load", cancelled)
    try:
        with session(pg.url) as be, pytest.raises(interrupt.Interrupted):
            prepare(be, _policy())
    finally:
        interrupt.reset()
    assert not open_local_duckdbs()


def test_the_warehouse_refusing_the_scan_says_why(pg: Any) -> None:
    """PostgreSQL failing the search's scan (here: a view's division by zero) is reported with the
    server's own reason, as when it built the table (before: "copying the search's table
    failed", which advised walking in the warehouse), and leaves no local DuckDB open."""
    pg.sql(
        "CREATE OR REPLACE VIEW main.adult_bad AS SELECT sex, age, "
        "CASE WHEN age > 0 THEN CAST(1 / (age - age) AS TEXT) END AS race, education, occupation "
        "FROM main.adult"
    )
    pol = _policy()
    pol = dataclasses.replace(pol, source=Relation("adult_bad", "main"))
    with session(pg.url) as be, pytest.raises(SqlanonError) as err:
        prepare(be, pol)
    assert "freq/base" in str(err.value) and "division by zero" in str(err.value), err.value
    assert not open_local_duckdbs()


@pytest.mark.parametrize("suppression", [0.0, 0.05])
def test_the_scan_in_page_ranges_gives_the_same_search(
    pg: Any, suppression: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split into page ranges (sqlanon/engines/pgparts.py: a Parallel Append of GROUP BYs, each
    range's groups copied, the local DuckDB summing those that several ranges share): the same
    frequency table (its rows the distinct combinations, its records the table's), the same node
    and published rows as the search in the database."""
    from sqlanon.engines import pgparts

    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 1)  # the test table has a few dozen pages
    with session(pg.url) as be:
        plan = prepare(be, _policy())
        copies = [s for s in be.log if s.startswith("COPY (SELECT")]
        assert len(copies) == 1 and copies[0].count("ctid") == 2 and " UNION ALL " in copies[0]
        assert (plan.n_rows, plan.base_rows) == (ROWS, _distinct())
    runs = {}
    for where in ("database", "auto"):
        target = f"parts_{where}_{int(suppression * 100)}"
        with session(pg.url) as be:
            runs[where] = anonymise(be, _policy(where, suppression, target), replace=True)["node"]
    assert runs["auto"] == runs["database"]
    cols = ", ".join(f'"{c}"' for c in QIS)
    rows = {
        w: sorted(map(repr, pg.sql(f"SELECT {cols} FROM main.parts_{w}_{int(suppression * 100)}")))
        for w in runs
    }
    assert rows["auto"] == rows["database"] and len(rows["auto"]) > 0


def test_page_ranges_need_the_whole_table(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A role granted the QI columns alone may not read ``ctid``: its scan stays one GROUP BY
    (before, any table of two parts failed for it: "permission denied for table adult")."""
    import uuid

    from sqlanon.engines import pgparts

    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 1)
    role = "cols_" + uuid.uuid4().hex[:8]
    pg.sql(f"CREATE ROLE {role} LOGIN")
    pg.sql(f"GRANT USAGE ON SCHEMA main TO {role}")
    pg.sql(f"GRANT SELECT ({', '.join(QIS)}) ON main.adult TO {role}")
    with session(pg.url.replace("postgres@", f"{role}@")) as be:
        plan = prepare(be, _policy())
        copies = [s for s in be.log if s.startswith("COPY (SELECT")]
        assert len(copies) == 1 and "ctid" not in copies[0]
        assert (plan.n_rows, plan.base_rows) == (ROWS, _distinct())


def test_the_cap_applies_to_the_summed_groups(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under auto, a frequency table within LOCAL_MAX_ROWS stays local even where its page ranges
    copy more rows than that (a combination counted in several ranges): before, the copy was
    dropped and PostgreSQL scanned the source again to build the table."""
    from sqlanon.engines import pgparts

    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 1)
    cap = _distinct() + 50
    monkeypatch.setattr(localfreq, "LOCAL_MAX_ROWS", cap)
    monkeypatch.setattr(localdb, "LOCAL_MAX_ROWS", cap)
    with session(pg.url) as be:
        plan = prepare(be, _policy())
        assert be.staged is not None and be.staged[1].moved > cap  # the ranges' rows, before the sums
        assert _freq_builds(be.log) == [] and plan.base_rows == _distinct()
