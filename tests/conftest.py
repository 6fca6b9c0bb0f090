"""Real engines for the behavioural tests: an embedded DuckDB file and a throwaway PostgreSQL cluster.

The PostgreSQL cluster is started once per test session with ``initdb`` + ``pg_ctl`` in a temporary
directory (as the ``postgres`` user when running as root: initdb refuses root), listening on a Unix
socket only (under pytest-xdist each worker is a test session: its own cluster, own socket
directory and port). Where ``CI=true`` an engine that cannot start fails the run; elsewhere the PostgreSQL
tests are skipped with a message saying why.
"""

from __future__ import annotations

import csv
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.spark_engine import SparkData, spark_session_fixture
from tests.spark_engine import reset as spark_reset

ROOT = Path(__file__).resolve().parent.parent
# The shared data sits beside the checkout (../shared); a clone elsewhere falls back to /work/shared.
SHARED = next(
    (p for p in (ROOT.parent / "shared", Path("/work/shared")) if (p / "data").is_dir()),
    ROOT.parent / "shared",
)
ADULT_DIR = Path(os.environ.get("SQLANON_ADULT_DIR", SHARED / "data" / "adult"))
IN_CI = os.environ.get("CI", "").lower() == "true"
PG_BIN_CANDIDATES = ["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"]


def _pg_bin() -> Path | None:
    env = os.environ.get("SQLANON_PG_BIN")
    for d in ([env] if env else []) + PG_BIN_CANDIDATES:
        if d and (Path(d) / "initdb").exists():
            return Path(d)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgCluster:
    bin: Path
    datadir: Path
    sockdir: Path
    port: int
    user: str
    as_user: str | None
    proc_env: dict = field(default_factory=dict)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@/{db}?host={self.sockdir}&port={self.port}"

    def conninfo(self, db: str = "postgres") -> str:
        return f"host={self.sockdir} port={self.port} user={self.user} dbname={db}"


def _run_as(cmd: list[str], as_user: str | None) -> subprocess.CompletedProcess:
    if as_user:
        pw = pwd.getpwnam(as_user)

        def demote() -> None:
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)

        return subprocess.run(
            cmd,
            preexec_fn=demote,
            capture_output=True,
            text=True,
            env={"PATH": os.environ.get("PATH", ""), "HOME": pw.pw_dir, "LC_ALL": "C.UTF-8"},
        )
    return subprocess.run(cmd, capture_output=True, text=True)


def _start_pg() -> PgCluster:
    binp = _pg_bin()
    if binp is None:
        raise RuntimeError("PostgreSQL binaries (initdb) not found; install the postgresql package")
    as_user = None
    if os.geteuid() == 0:
        as_user = "postgres"
        try:
            pwd.getpwnam(as_user)
        except KeyError as e:
            raise RuntimeError("running as root but there is no 'postgres' user to run initdb") from e
    _reap_stale_clusters(binp, as_user)
    base = Path(tempfile.mkdtemp(prefix="sqlanon-pg-"))
    (base / "owner.pid").write_text(str(os.getpid()))
    datadir, sockdir = base / "data", base / "sock"
    sockdir.mkdir()
    if as_user:
        pw = pwd.getpwnam(as_user)
        os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chown(sockdir, pw.pw_uid, pw.pw_gid)
    user = as_user or pwd.getpwuid(os.geteuid()).pw_name
    r = _run_as(
        [str(binp / "initdb"), "-D", str(datadir), "-U", user, "-A", "trust", "-E", "UTF8", "--no-sync"],
        as_user,
    )
    if r.returncode != 0:
        raise RuntimeError(f"initdb failed: {r.stderr.strip()[-500:]}")
    port = _free_port()
    opts = (
        f"-c listen_addresses='' -c unix_socket_directories={sockdir} -p {port} -c fsync=off "
        f"-c synchronous_commit=off -c full_page_writes=off -c shared_buffers=256MB -c work_mem=64MB"
    )
    r = _run_as(
        [str(binp / "pg_ctl"), "-D", str(datadir), "-o", opts, "-l", str(base / "log"), "-w", "start"],
        as_user,
    )
    if r.returncode != 0:
        log = (base / "log").read_text() if (base / "log").exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {r.stderr.strip()[-300:]} {log[-500:]}")
    return PgCluster(binp, datadir, sockdir, port, user, as_user)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap_stale_clusters(binp: Path, as_user: str | None) -> None:
    """Stop and remove the clusters of test sessions that died without stopping theirs (a pytest
    killed by a timeout): those whose owner process is gone. Clusters of live sessions are kept."""
    for base in Path(tempfile.gettempdir()).glob("sqlanon-pg-*"):
        try:
            owner = int((base / "owner.pid").read_text())
        except (OSError, ValueError):
            continue  # not ours to judge (no owner recorded)
        if _alive(owner):
            continue
        if (base / "data" / "postmaster.pid").exists():
            _run_as([str(binp / "pg_ctl"), "-D", str(base / "data"), "-m", "immediate", "stop"], as_user)
        shutil.rmtree(base, ignore_errors=True)


def _stop_pg(c: PgCluster) -> None:
    _run_as([str(c.bin / "pg_ctl"), "-D", str(c.datadir), "-m", "immediate", "stop"], c.as_user)
    shutil.rmtree(c.datadir.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster | None]:
    try:
        cluster = _start_pg()
    except Exception as e:  # noqa: BLE001
        if IN_CI:
            pytest.fail(f"CI=true and PostgreSQL cannot start: {e}", pytrace=False)
        yield None
        msg = f"PostgreSQL unavailable on this machine ({e}); PostgreSQL tests skipped"
        print(f"\nNOTE: {msg}")
        return
    yield cluster
    _stop_pg(cluster)


# --------------------------------------------------------------------------------------------------
# A database handle for tests: a URL for sqlanon plus a loader that bypasses sqlanon (test data only)
# --------------------------------------------------------------------------------------------------

SQLTYPES = {int: "BIGINT", float: "DOUBLE PRECISION", str: "VARCHAR"}


def _infer_type(values: Sequence[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int}:
        return "BIGINT" if kinds else "VARCHAR"
    if kinds <= {int, float}:
        return "DOUBLE PRECISION"
    return "VARCHAR"


def qident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class TestDB:
    __test__ = False  # a helper, not a test class

    kind: str  # "duckdb" | "postgres"
    url: str
    schema: str
    _pg: PgCluster | None = None
    _dbname: str | None = None
    _duck_path: Path | None = None
    _spark: SparkData | None = None

    def rel(self, table: str) -> str:
        return f"{qident(self.schema)}.{qident(table)}"

    def load(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        types: Sequence[str] | None = None,
        schema: str | None = None,
    ) -> str:
        """Create ``schema.table`` and fill it (driver bulk paths: DuckDB executemany, PG COPY)."""
        schema = schema or self.schema
        if types is None:
            types = [_infer_type([r[i] for r in rows]) for i in range(len(columns))]
        full = f"{qident(schema)}.{qident(table)}"
        if self._spark is not None:
            self._spark.load(full, schema, columns, rows, types)
            return full
        coldefs = ", ".join(f"{qident(c)} {t}" for c, t in zip(columns, types, strict=True))
        if self.kind == "duckdb":
            import duckdb

            con = duckdb.connect(str(self._duck_path))
            try:
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {qident(schema)}")
                con.execute(f"DROP TABLE IF EXISTS {full}")
                con.execute(f"CREATE TABLE {full} ({coldefs})")
                if rows:
                    import pandas as pd

                    frame = pd.DataFrame(
                        [list(r) for r in rows], columns=[f"c{i}" for i in range(len(columns))], dtype=object
                    )
                    con.register("_load_frame", frame)
                    con.execute(f"INSERT INTO {full} SELECT * FROM _load_frame")
                    con.unregister("_load_frame")
            finally:
                con.close()
        else:
            import psycopg

            assert self._pg is not None
            with psycopg.connect(self._pg.conninfo(self._dbname or "postgres"), autocommit=True) as con:
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {qident(schema)}")
                con.execute(f"DROP TABLE IF EXISTS {full}")
                con.execute(f"CREATE TABLE {full} ({coldefs})")
                with con.cursor().copy(f"COPY {full} FROM STDIN") as cp:
                    for r in rows:
                        cp.write_row(list(r))
        return f"{qident(schema)}.{qident(table)}"

    def sql(self, text: str) -> list[tuple]:
        """Run raw SQL directly on the engine (test verification only)."""
        if self._spark is not None:
            return self._spark.sql(text)
        if self.kind == "duckdb":
            import duckdb

            con = duckdb.connect(str(self._duck_path))
            try:
                cur = con.execute(text)
                return cur.fetchall() if cur.description else []
            finally:
                con.close()
        import psycopg

        assert self._pg is not None
        with psycopg.connect(self._pg.conninfo(self._dbname or "postgres"), autocommit=True) as con:
            cur = con.execute(text)
            return cur.fetchall() if cur.description else []

    def snapshot(self) -> dict[tuple[str, str], list[str]]:
        """Every persistent relation and the sorted rows of each: what a failed run must not change."""
        return {
            (schema, name): sorted(
                repr(r) for r in self.sql(f"SELECT * FROM {qident(schema)}.{qident(name)}")
            )
            for schema, name in sorted(self.relations())
        }

    def relations(self) -> set[tuple[str, str]]:
        """Every persistent table and view (schema, name), to prove a command wrote nothing."""
        if self._spark is not None:
            return self._spark.relations()
        rows = self.sql(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('information_schema', 'pg_catalog') "
            "AND table_schema NOT LIKE 'pg_temp%' AND table_schema NOT LIKE 'pg_toast%'"
            + (" AND table_catalog NOT IN ('temp', 'system')" if self.kind == "duckdb" else "")
        )
        return {(str(a), str(b)) for a, b in rows}


ENGINES = ["duckdb", "postgres"]
#: The engines plus Spark, for the tests that run on Spark too (``@pytest.mark.parametrize("db",
#: ENGINES_SPARK, indirect=True)``; Spark's are marked ``spark``: ``-m "not spark"`` leaves them out).
ENGINES_SPARK = [*ENGINES, pytest.param("spark", marks=pytest.mark.spark)]


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One SparkSession for the whole run (tests/spark_engine.py); None where it cannot start
    (a failure where CI=true)."""
    yield from spark_session_fixture(IN_CI)


@pytest.fixture(params=ENGINES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDB]:
    """A fresh database on each engine (DuckDB file; PostgreSQL database in the session cluster)."""
    yield from _make_db(request.param, request, tmp_path)


def _make_db(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDB]:
    if kind == "duckdb":
        path = tmp_path / "test.duckdb"
        import duckdb

        duckdb.connect(str(path)).close()
        yield TestDB("duckdb", f"duckdb:///{path}", "main", _duck_path=path)
        return
    if kind == "spark":
        spark = request.getfixturevalue("spark_session")
        if spark is None:
            pytest.skip("Spark unavailable on this machine (see the NOTE above)")
        spark_reset(spark)
        spark.sql("CREATE DATABASE `main`")
        yield TestDB("spark", "spark", "main", _spark=SparkData(spark))
        spark_reset(spark)
        return
    cluster = request.getfixturevalue("pg_cluster")
    if cluster is None:
        pytest.skip("PostgreSQL unavailable on this machine (see the NOTE above)")
    import psycopg

    dbname = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(cluster.conninfo(), autocommit=True) as con:
        con.execute(f"CREATE DATABASE {dbname}")
    tdb = TestDB("postgres", cluster.url(dbname), "main", _pg=cluster, _dbname=dbname)
    tdb.sql('CREATE SCHEMA IF NOT EXISTS "main"')
    yield tdb
    with psycopg.connect(cluster.conninfo(), autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")


@pytest.fixture(scope="module", params=ENGINES)
def mdb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestDB]:
    """A database shared by one test module (for the Adult data, loaded once per engine)."""
    yield from _make_db(request.param, request, tmp_path_factory.mktemp(request.param))


# --------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------

ADULT_COLUMNS = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
    "salary-class",
]


def read_adult() -> list[dict[str, Any]]:
    path = ADULT_DIR / "adult.csv"
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter=";")
        rows = []
        for r in reader:
            r = {k.strip(): v.strip() for k, v in r.items()}
            r["age"] = int(r["age"])
            rows.append(r)
    return rows


def patients_rows() -> tuple[list[str], list[list[Any]]]:
    with (ROOT / "fixtures" / "patients.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    cols = ["PatientID", "PatientName", "Postcode", "Age", "Disease"]
    return cols, [
        [int(r["PatientID"]), r["PatientName"], r["Postcode"], int(r["Age"]), r["Disease"]] for r in rows
    ]


PATIENT_TYPES = ["INTEGER", "VARCHAR", "VARCHAR", "INTEGER", "VARCHAR"]


TEST_HASH_KEY = "sqlanon-tests-0123456789abcdef"
TEST_PERTURB_KEY = "sqlanon-tests-perturb-fedcba9876543210"


@pytest.fixture(autouse=True)
def _hash_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known keys for ``action: hash`` and perturbation (tests of a missing key delete them)."""
    monkeypatch.setenv("SQLANON_HASH_KEY", TEST_HASH_KEY)
    monkeypatch.setenv("SQLANON_PERTURB_KEY", TEST_PERTURB_KEY)


def with_patients(db: TestDB) -> TestDB:
    """Load the seed-001 patients as ``main.patients``."""
    cols, rows = patients_rows()
    db.load("patients", cols, rows, PATIENT_TYPES)
    return db


@pytest.fixture
def pg_patients(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDB]:
    """The patients on PostgreSQL only (privileges, passwords, types DuckDB lacks)."""
    for db in _make_db("postgres", request, tmp_path):
        yield with_patients(db)


@pytest.fixture
def duck_patients(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDB]:
    """The patients on DuckDB only (the demo; policy checks that do not depend on the engine)."""
    for db in _make_db("duckdb", request, tmp_path):
        yield with_patients(db)
