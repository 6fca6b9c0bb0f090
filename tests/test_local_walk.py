"""Issue 33: count once in the warehouse, walk locally (sqlanon/lattice/local.py, search.where).

On every engine the local walk (the coded table copied into an in-memory DuckDB, the lattice
walked there) and the in-database walk choose the same node and publish the same rows, with and
without suppression, with a sensitive attribute (t-closeness reads the frequency table's
sensitive counts, copied on first use) and with a per-record metric (ncp: the metrics' tables
are built from the copied frequency table). The expected node is the in-database walk's, which
tests/test_search_adult.py checks against an exhaustive search and a pure-Python reference; the
published rows are compared row for row.

The frequency table is personal data: the local DuckDB is in memory, cannot spill
(``temp_directory`` is empty) nor touch a file, is closed when the search ends, and nothing is
printed. Data: the first 3,000 Adult rows, six quasi-identifiers with ARX's hierarchies (a small
lattice, so that Spark's in-database walk stays within seconds).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from sqlanon import api
from sqlanon.cli import main
from sqlanon.engines import session
from sqlanon.errors import PolicyError, SqlanonError
from sqlanon.lattice import local, localdb, prepare
from sqlanon.policy import parse_policy
from tests.conftest import ADULT_DIR, ENGINES_SPARK
from tests.helpers import adult_db
from tests.test_local_walk_session import open_local_duckdbs

QIS = ["sex", "age", "race", "marital-status", "education", "native-country"]
#: Spark's in-database walk costs ~0.3 s a statement here: four quasi-identifiers keep its
#: lattice (and the test) small.
SPARK_QIS = QIS[:4]
ROWS = 3000

CASES = {
    "k5": ({"k": 5}, "precision"),
    "k5_supp5": ({"k": 5, "suppression": 0.05}, "precision"),
    "k3_t": ({"k": 3, "suppression": 0.02, "t": {"occupation": {"measure": "emd-equal", "t": 0.4}}}, "ncp"),
}


@pytest.fixture(scope="module", params=ENGINES_SPARK)
def adb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The first 3,000 Adult rows as main.adult, once per engine."""
    yield from adult_db(request, tmp_path_factory, ROWS)


def _policy(case: str, where: str, target: str = "adult_anon", qis: list[str] = QIS) -> dict:
    privacy, metric = CASES[case]
    cols: dict = {
        c: {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}} for c in qis
    }
    cols["occupation"] = {"role": "sensitive"}
    return {
        "source": "main.adult",
        "target": f"main.{target}",
        "columns": cols,
        "privacy": privacy,
        "search": {"algorithm": "flash", "metric": metric, "where": where},
        "publish": {"as": "table"},
    }


def _published(db: Any, target: str, qis: list[str]) -> list[str]:
    cols = ", ".join(f'"{c}"' for c in [*qis, "occupation"])
    return sorted(repr(tuple(str(v) for v in r)) for r in db.sql(f"SELECT {cols} FROM main.{target}"))


@pytest.mark.parametrize("case", list(CASES))
def test_local_and_database_walks_agree(adb: Any, case: str, capfd: pytest.CaptureFixture) -> None:
    qis = SPARK_QIS if adb.kind == "spark" else QIS
    inside = api.anonymise(_policy(case, "database", f"anon_db_{case}", qis), adb.url, replace=True).to_dict()
    here = api.anonymise(_policy(case, "local", f"anon_local_{case}", qis), adb.url, replace=True).to_dict()
    assert inside["search_location"] == "database" and inside["rows_transferred"] == 0
    assert here["search_location"] == "local"
    assert here["node"] == inside["node"]
    assert here["optimum"]["value"] == pytest.approx(inside["optimum"]["value"], rel=1e-9)
    assert here["suppressed_records"] == inside["suppressed_records"]
    assert _published(adb, f"anon_local_{case}", qis) == _published(adb, f"anon_db_{case}", qis)
    # The coded table: one row per distinct (six QIs, occupation) of the source, counted here
    # independently; t-closeness and ncp also read the frequency table (as many rows again).
    listed = ", ".join(f'"{c}"' for c in [*qis, "occupation"])
    distinct = adb.sql(f"SELECT COUNT(*) FROM (SELECT DISTINCT {listed} FROM main.adult) AS d")[0][0]
    assert here["rows_transferred"] == distinct * (2 if case == "k3_t" else 1)
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # nothing printed, least of all the copied tables


@pytest.mark.parametrize("case", list(CASES))
def test_staged_local_walk_agrees(adb: Any, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL from STAGE_MIN_ROWS source rows, the local walk codes the frequency table's
    values in its DuckDB (sqlanon/lattice/local.py ``stage_coded``): the same node and the same
    published rows as the in-database walk, and the frequency table crosses once (t-closeness
    and ncp read the same copy)."""
    if adb.kind != "postgres":
        pytest.skip("staging is PostgreSQL's")
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)  # 3,000 rows here
    inside = api.anonymise(_policy(case, "database", f"anon_sdb_{case}"), adb.url, replace=True).to_dict()
    here = api.anonymise(_policy(case, "local", f"anon_slocal_{case}"), adb.url, replace=True).to_dict()
    assert here["search_location"] == "local" and not open_local_duckdbs()  # taken and closed
    assert here["node"] == inside["node"]
    assert here["optimum"]["value"] == pytest.approx(inside["optimum"]["value"], rel=1e-9)
    assert here["suppressed_records"] == inside["suppressed_records"]
    assert _published(adb, f"anon_slocal_{case}", QIS) == _published(adb, f"anon_sdb_{case}", QIS)
    listed = ", ".join(f'"{c}"' for c in [*QIS, "occupation"])
    distinct = adb.sql(f"SELECT COUNT(*) FROM (SELECT DISTINCT {listed} FROM main.adult) AS d")[0][0]
    assert here["rows_transferred"] == distinct


def test_direct_copy_builds_no_frequency_table_in_the_warehouse(
    adb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a sensitive attribute, PostgreSQL and Spark copy the search's frequency SELECT into
    the local DuckDB as it is counted (sqlanon/lattice/localfreq.py DirectCopy): the warehouse
    builds no frequency table (on Spark: one job, not a checkpoint and a second read of it; 1e6
    rows, the prepare 2.7-3.1 -> 2.3-2.7 s), and the walk chooses the in-database walk's node and
    publishes its rows."""
    if adb.kind == "duckdb":
        pytest.skip("DuckDB is in-process: nothing is copied")
    qis = SPARK_QIS if adb.kind == "spark" else QIS
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)  # 3,000 rows here

    def doc(where: str, target: str) -> dict:
        d = _policy("k5", where, target, qis)
        d["columns"]["occupation"] = "insensitive"  # no sensitive column
        return d

    with session(adb.url) as be:
        plan = prepare(be, parse_policy(doc("local", "unused")))
        freq = plan.base.freq.name
        assert freq in be.deferred and freq not in be._temps  # copied, not built
    inside = api.anonymise(doc("database", "anon_ddb"), adb.url, replace=True).to_dict()
    here = api.anonymise(doc("local", "anon_dlocal"), adb.url, replace=True).to_dict()
    assert here["search_location"] == "local" and not open_local_duckdbs()
    assert here["node"] == inside["node"]
    assert here["suppressed_records"] == inside["suppressed_records"]
    assert _published(adb, "anon_dlocal", qis) == _published(adb, "anon_ddb", qis)
    listed = ", ".join(f'"{c}"' for c in qis)
    distinct = adb.sql(f"SELECT COUNT(*) FROM (SELECT DISTINCT {listed} FROM main.adult) AS d")[0][0]
    assert here["rows_transferred"] == distinct


def test_auto_walks_locally_on_warehouses_only(adb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pol = parse_policy(_policy("k5", "auto"))
    with session(adb.url) as be:
        plan = prepare(be, pol)
        assert local.location(plan) == ("database" if adb.kind == "duckdb" else "local")
        monkeypatch.setattr(local, "LOCAL_MAX_ROWS", plan.base_rows - 1)  # above the size bound
        assert local.location(plan) == "database"
        assert local.location(plan, "local") == "local"  # asked for: the bound does not apply


def test_local_duckdb_is_memory_only_and_closed(adb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if adb.kind == "spark":
        pytest.skip("the local DuckDB is the same on every engine")
    seen: list[Any] = []
    real = local.local_plan

    def spy(plan: Any) -> Any:
        cm = real(plan)

        class Wrap:
            def __enter__(self) -> Any:
                lp = cm.__enter__()
                seen.append(lp.be)
                raw = lp.be._conn.connection.driver_connection
                settings = raw.execute(
                    "SELECT current_setting('temp_directory'), current_setting('enable_external_access'), "
                    "current_database(), (SELECT path FROM duckdb_databases() WHERE database_name = "
                    "current_database())"
                ).fetchall()[0]
                seen.append(settings)
                return lp

            def __exit__(self, *exc: Any) -> Any:
                return cm.__exit__(*exc)

        return Wrap()

    from sqlanon.metrics import optimum

    monkeypatch.setattr(optimum, "local_plan", spy)
    api.anonymise(_policy("k3_t", "local"), adb.url, dry_run=True)
    be, (temp_dir, external, _db, path) = seen
    assert temp_dir == ""  # DuckDB cannot offload a block to disk: it fails instead of spilling
    assert str(external).lower() == "false"  # no statement can write (or read) a file
    assert path is None  # :memory:
    assert be._conn.closed  # closed when the search ended
    with pytest.raises(Exception):  # noqa: B017 - any driver error: the database is gone
        be._conn.connection.driver_connection.execute("SELECT 1")


def test_search_where_key_and_cli_switch(adb: Any) -> None:
    if adb.kind != "postgres":
        pytest.skip("the policy key and the switch are engine-independent")
    with pytest.raises(PolicyError, match="search.where"):
        parse_policy(_policy("k5", "elsewhere"))
    assert parse_policy({k: v for k, v in _policy("k5", "x").items() if k != "search"}).search.where == "auto"
    runner = CliRunner()
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "p.json"
        path.write_text(json.dumps(_policy("k5", "local")))
        for flag, want in (("database", "database"), ("local", "local")):
            res = runner.invoke(
                main, ["anonymise", str(path), "--db", adb.url, "--dry-run", "--json", "--search-in", flag]
            )
            assert res.exit_code == 0, res.output
            assert json.loads(res.stdout)["search_location"] == want
        shown = runner.invoke(
            main, ["anonymise", str(path), "--db", adb.url, "--dry-run", "--search-in", "local"]
        )
        assert shown.exit_code == 0 and "walked locally (" in shown.output  # the console says where
        bad = runner.invoke(
            main, ["anonymise", str(path), "--db", adb.url, "--dry-run", "--search-in", "cloud"]
        )
        assert bad.exit_code == 2


def test_without_pyarrow(adb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pyarrow: auto searches in the database, local is refused in one line."""
    if adb.kind != "postgres":
        pytest.skip("engine-independent")
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.csv", None)
    out = api.anonymise(_policy("k5", "auto"), adb.url, dry_run=True).to_dict()
    assert out["search_location"] == "database"
    with pytest.raises(SqlanonError, match="needs pyarrow"):
        api.anonymise(_policy("k5", "local"), adb.url, dry_run=True)
