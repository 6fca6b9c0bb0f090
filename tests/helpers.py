"""Small helpers shared by the behavioural tests."""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest
import yaml
from click.testing import CliRunner

from sqlanon.cli import main
from tests.conftest import ADULT_COLUMNS, ADULT_DIR, IN_CI, SHARED, _make_db, read_adult

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
ENGINE_SPECIFIC = ("dialect", "notes", "search_location", "rows_transferred", "verified_in")


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


# --- the first Adult rows as main.adult, and the Mondrian policy over them -------------------------

#: Mondrian's QIs on Adult: age numeric, marital-status ranked (no hierarchy), the others along ARX's
#: hierarchies (../shared/data/adult/adult_hierarchy_*.csv).
ADULT_HIER = ["sex", "race", "education"]
ADULT_QIS = ["age", "marital-status", *ADULT_HIER]


def adult_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, rows: int
) -> Iterator[TestDB]:
    """A database of the engine ``request.param`` holding the first ``rows`` Adult records as
    main.adult (age INTEGER, the rest VARCHAR): a module fixture yields from it once per engine."""
    for db in _make_db(request.param, request, tmp_path_factory.mktemp(str(request.param))):
        data = [[r[c] for c in ADULT_COLUMNS] for r in read_adult()[:rows]]
        types = ["INTEGER" if c == "age" else "VARCHAR" for c in ADULT_COLUMNS]
        db.load("adult", ADULT_COLUMNS, data, types)
        yield db


def adult_mondrian_policy(privacy: dict, where: str, target: str, publish_as: str = "table") -> dict:
    """Mondrian over ADULT_QIS of main.adult, occupation sensitive, searched ``where`` and published
    as ``publish_as`` to main.``target``."""
    cols: dict = {c: {"role": "quasi"} for c in ADULT_QIS}
    for c in ADULT_HIER:
        cols[c]["hierarchy"] = {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}
    cols["occupation"] = {"role": "sensitive"}
    return {
        "source": "main.adult",
        "target": f"main.{target}",
        "columns": cols,
        "privacy": privacy,
        "search": {"algorithm": "mondrian", "where": where},
        "publish": {"as": publish_as},
    }


# --- ARX 3.9.2 as an oracle: small Java drivers compiled against its jars --------------------------


def ages_duckdb(path: Path, rows: int, offset: int = 20) -> Any:
    """A DuckDB file at ``path`` holding ``main.t``: ``rows`` records with distinct ages (id, age
    ``offset + i``, one sensitive value), and the Mondrian policy k = 2 over age: the small table
    of the tests of Mondrian's rounds on a database file."""
    import duckdb

    from sqlanon.policy import parse_policy

    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t AS SELECT i AS id, {offset} + i AS age, 'x' AS s FROM range({rows}) AS r(i)")
    con.close()
    doc = {"source": "main.t", "columns": {"id": "insensitive", "age": "quasi", "s": "sensitive"}}
    return parse_policy({**doc, "privacy": {"k": 2}, "search": {"algorithm": "mondrian"}})


def in_ci() -> bool:
    """``CI=true``, read when asked (tests/conftest.py's IN_CI is read once, at import)."""
    return os.environ.get("CI", "").lower() == "true"


def oracle_missing(msg: str) -> NoReturn:
    """Skip a test whose oracle cannot run here; under ``CI=true`` fail it instead. CI installs Java
    and clones beside ../shared (.ci/run), so an oracle missing there is a broken run, not a
    checked one: the rule tests/conftest.py applies to an engine that cannot start."""
    if in_ci():
        pytest.fail(f"CI=true and {msg}", pytrace=False)
    pytest.skip(msg)


def arx_dir() -> Path:
    """ARX's folder: ``$SQLANON_ARX_DIR`` (as benchmarks/arx.py reads it), else ../shared/peers/arx."""
    return Path(os.environ.get("SQLANON_ARX_DIR") or SHARED / "peers" / "arx")


def arx_jars() -> list[Path]:
    """ARX's jars, where javac, java and ARX 3.9.2's jar are present; otherwise ``oracle_missing``."""
    folder = arx_dir()
    jars = sorted(folder.glob("*.jar"))
    lacking = [t for t in ("javac", "java") if shutil.which(t) is None]
    if not any(j.name.startswith("arx-") for j in jars):
        lacking.append(f"ARX's jar (in {folder}; SQLANON_ARX_DIR sets it)")
    if lacking:
        oracle_missing(f"the ARX oracle cannot run: no {', '.join(lacking)}")
    return jars


@dataclass(frozen=True)
class ArxDriver:
    """A Java driver compiled against ARX's jars in ``folder`` (with the hierarchy files there)."""

    folder: Path
    name: str
    classpath: str

    def __call__(self, *args: str, timeout: int = 300) -> str:
        """Run the driver; its standard output."""
        return subprocess.run(
            ["java", "-cp", f"{self.classpath}:{self.folder}", self.name, *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
        ).stdout


def arx_driver(folder: Path, name: str, source: str, hierarchies: dict[str, dict]) -> ArxDriver:
    """Compile class ``name`` from ``source`` into ``folder`` and write each hierarchy there as
    ``folder/<column>.csv`` (``value;level 1;*``, ARX's format): the driver, ready to run. Skips
    (fails under CI=true) where Java or ARX is absent."""
    cp = ":".join(str(j) for j in arx_jars())
    (folder / f"{name}.java").write_text(source, encoding="utf-8")
    subprocess.run(
        ["javac", "-cp", cp, "-d", str(folder), str(folder / f"{name}.java")], check=True, timeout=120
    )
    for col, level1 in hierarchies.items():
        text = "".join(f"{v};{g};*\n" for v, g in level1.items())
        (folder / f"{col}.csv").write_text(text, encoding="utf-8")
    return ArxDriver(folder, name, cp)
