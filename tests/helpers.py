"""Small helpers shared by the behavioural tests."""

from __future__ import annotations

import gc
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import yaml
from click.testing import CliRunner

from sqlanon.cli import main
from tests.conftest import IN_CI

if TYPE_CHECKING:
    from tests.conftest import TestDB


T = TypeVar("T")
_ONCE: dict[str, Any] = {}


def once(key: str, compute: Callable[[], T]) -> T:
    """``compute()`` the first time ``key`` is asked for in this test process, the same value after:
    ARX's side of a comparison (a JVM run of seconds) serves the module's DuckDB and PostgreSQL
    tests and tests/test_spark.py alike. A skip raised by ``compute`` is not remembered."""
    if key not in _ONCE:
        _ONCE[key] = compute()
    return _ONCE[key]


def write_policy(tmp_path: Path, policy: dict[str, Any], name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(policy, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def cli(*args: str) -> tuple[int, str, str]:
    """Run the sqlanon CLI in-process; returns (exit code, stdout, stderr)."""
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def cli_json(*args: str) -> dict[str, Any]:
    code, out, err = cli(*args, "--json")
    assert code in (0, 1), f"exit {code}: {err}"
    return json.loads(out)


#: Keys that differ by engine by design: the SQL dialect, what each engine cannot hide, and where
#: the lattice was walked (locally on PostgreSQL and Spark, in-process on DuckDB).
ENGINE_SPECIFIC = ("dialect", "notes", "search_location", "rows_transferred")


def same(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON, floats to 1e-9 relative (parallel sums differ in the last bits; two plans may
    sum doubles in different orders); the keys of ENGINE_SPECIFIC are not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a.keys() ^ b.keys())}"
        for k in a:
            if k not in ENGINE_SPECIFIC:
                same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (
            f"{path}: {a} != {b}"
        )
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


# --- dbt: one real ``dbt deps`` + ``dbt build`` in this process (tests/test_dbt*.py) ---------------


def dbt_runner() -> Any:
    """dbt's programmatic runner; without dbt the test skips, except where ``CI=true``: it fails."""
    try:
        import dbt.adapters.duckdb  # noqa: F401
        import dbt.adapters.postgres  # noqa: F401
        from dbt.cli.main import dbtRunner
    except ImportError as e:
        if IN_CI:
            pytest.fail(f"CI=true and dbt cannot run ({e}); the test extra installs it", pytrace=False)
        pytest.skip(f"dbt is not installed ({e}); pip install -e '.[test]' runs these tests")
    return dbtRunner()


def release_duckdb() -> None:
    """dbt-duckdb keeps its DuckDB instance open in this process after the run; close it, so that
    sqlanon and the checks can open the file (with their own configuration) again."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    env = DuckDBConnectionManager._ENV
    if env is not None:
        env.close()
    DuckDBConnectionManager.close_all_connections()
    gc.collect()


def dbt_profile(db: TestDB, folder: Path) -> None:
    """``folder/profiles.yml``: profile ``sqlanon_example`` on ``db``, models in schema analytics."""
    if db.kind == "duckdb":
        out = {"type": "duckdb", "path": str(db._duck_path), "schema": "analytics", "threads": 1}
    else:
        pg = db._pg
        assert pg is not None
        out = {
            "type": "postgres",
            "host": str(pg.sockdir),
            "port": pg.port,
            "user": pg.user,
            "password": "",
            "dbname": db._dbname,
            "schema": "analytics",
            "threads": 1,
        }
    prof = {"sqlanon_example": {"target": "t", "outputs": {"t": out}}}
    (folder / "profiles.yml").write_text(yaml.safe_dump(prof), encoding="utf-8")


def dbt_build(runner: Any, db: TestDB, project: Path, root: Path) -> tuple[dict[str, Any], bool]:
    """``dbt deps`` then ``dbt build --store-failures`` of ``project`` on ``db`` (profiles and target
    under ``root``): each node's result by unique id, and whether the build succeeded."""
    profiles = root / "profiles"
    profiles.mkdir()
    dbt_profile(db, profiles)
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    os.environ.setdefault("DBT_VERSION_CHECK", "false")
    common = ["--project-dir", str(project), "--profiles-dir", str(profiles), "--quiet"]
    deps = runner.invoke(["deps", *common])
    assert deps.success, deps.exception
    res = runner.invoke(["build", *common, "--store-failures", "--target-path", str(root / "target")])
    assert res.result is not None, res.exception
    results = {r.node.unique_id: r for r in res.result.results}
    if db.kind == "duckdb":
        release_duckdb()
    return results, res.success
