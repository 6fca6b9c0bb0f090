"""An attacker's and an unlucky user's review of the paths changed on 2026-11-26 (task A, session 7):
the PostgreSQL copy into the local DuckDB, Mondrian's checkpoint_threshold, the planner settings of
the re-verification. Each test failed on the code before its fix; a fix proposed for a file another
engineer owned at the time landed with its test (sqlanon/engines/duckdb_checkpoint.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sqlanon import api
from sqlanon.engines import duckdb_checkpoint, postgres, session
from sqlanon.policy import parse_policy
from tests.helpers import ages_duckdb, cli, write_policy

#: Values of a text column holding a line break, as free text often does ('street\ncity'): the
#: copy's CSV quotes them, the line break inside the quotes.
ROWS = 600


def _multiline_rows() -> list[list[Any]]:
    return [[20 + i % 30, f"street {i % 40}\ntown {i % 40}"] for i in range(ROWS)]


def test_pg_copy_reads_a_line_break_inside_a_value_across_blocks(
    pg_patients: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local walk's copy from PostgreSQL (``COPY ... TO STDOUT (FORMAT csv)`` parsed by
    pyarrow in blocks of CSV_BLOCK bytes) split a row where a quoted line break fell across a
    block boundary: pyarrow's chunker, told no value holds a line break, cut there and failed
    ("CSV parser got out of sync with chunker"), so a legitimate text value failed the search
    (``search.where: auto`` picks the copy from 100,000 rows). The block is made small here so
    that a boundary falls inside a value at 600 rows instead of a 4 MiB copy."""
    db = pg_patients
    db.load("notes", ["age", "addr"], _multiline_rows(), ["INTEGER", "TEXT"])
    monkeypatch.setattr(postgres, "CSV_BLOCK", 1024)
    sql = f"SELECT addr, CAST(age AS BIGINT) AS age FROM {db.rel('notes')}"
    with session(db.url) as be, be.read_arrow(sql, [("addr", "text"), ("age", "int64")]) as reader:
        got = reader.read_all().to_pylist()
    assert sorted((r["age"], r["addr"]) for r in got) == sorted((a, t) for a, t in _multiline_rows())


def test_pg_local_mondrian_publishes_multiline_text(
    pg_patients: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same copy end to end: Mondrian's rounds in the local DuckDB (``search.where: local``)
    over a text quasi-identifier whose values hold a line break publish as they do in the
    database, instead of failing the copy."""
    db = pg_patients
    db.load("notes", ["age", "addr"], _multiline_rows(), ["INTEGER", "TEXT"])
    monkeypatch.setattr(postgres, "CSV_BLOCK", 1024)
    doc = {
        "source": "main.notes",
        "target": "main.notes_out",
        "columns": {"age": "quasi", "addr": "quasi"},
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian", "where": "local"},
    }
    out = api.anonymise(parse_policy(doc), db.url).to_dict()
    assert out["search_location"] == "local"
    assert db.sql("SELECT COUNT(*) FROM main.notes_out")[0][0] == ROWS


def test_mondrian_on_a_duckdb_whose_configuration_is_locked(tmp_path: Path) -> None:
    """A DuckDB opened with ``lock_configuration=true`` (an administrator's lock) refuses every
    SET: Mondrian's rounds set ``checkpoint_threshold`` (a speed-up only) and the refusal came out
    as SQLAlchemy's ProgrammingError, a traceback and exit 1, nothing in one line. A locked
    setting should leave the rounds without the speed-up, not fail them."""
    path = tmp_path / "locked.duckdb"
    ages_duckdb(path, 16)
    doc = {
        "source": "main.t",
        "target": "main.out",
        "columns": {"id": "insensitive", "age": "quasi", "s": "sensitive"},
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian"},
    }
    code, _out, err = cli(
        "anonymise", str(write_policy(tmp_path, doc)), "--db", f"duckdb:///{path}?lock_configuration=true"
    )
    assert code == 0, err


def test_checkpoint_threshold_restored_when_two_runs_overlap(tmp_path: Path) -> None:
    """``checkpoint_threshold`` is global to a DuckDB database, and every connection of one process
    to the same file shares that database (a notebook's own connection, two runs on threads). Two
    rounds overlapping: the second saved the first's 1 TB as the user's value and put it back last,
    so the database never checkpointed automatically again while the process lived."""
    path = tmp_path / "two.duckdb"
    ages_duckdb(path, 4)
    url = f"duckdb:///{path}"
    with session(url) as a, session(url) as b:
        before = duckdb_checkpoint.threshold(a)
        first, second = duckdb_checkpoint.no_checkpoint(a), duckdb_checkpoint.no_checkpoint(b)
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)  # the first run ends first
        second.__exit__(None, None, None)
        after = duckdb_checkpoint.threshold(a)
    assert after == before


class _Builder:
    """SparkSession.builder's chain, recording each setting (no JVM: the setting is what is tested;
    a real local session started by connect_spark served its UI at http://<host address>:4040, its
    REST API listing every statement's plan with 'number of output rows' per operator)."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}

    def appName(self, _name: str) -> _Builder:  # noqa: N802 - pyspark's name
        return self

    def master(self, _master: str) -> _Builder:
        return self

    def config(self, key: str, value: str) -> _Builder:
        self.conf[key] = value
        return self

    def getOrCreate(self) -> Any:  # noqa: N802 - pyspark's name
        class _Context:
            def setLogLevel(self, _level: str) -> None:  # noqa: N802 - pyspark's name
                pass

        class _Session:
            sparkContext = _Context()

        return _Session()


@pytest.mark.parametrize(("url", "ui"), [("spark", "false"), ("spark?spark.ui.enabled=true", "true")])
def test_spark_session_started_here_serves_no_web_ui(
    url: str, ui: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark session sqlanon starts (``--db spark``, ``spark://``) served Spark's web UI on the
    host's network address, port 4040, with no login: every statement's plan (its literals) and
    each operator's row counts (the source's rows, its classes, the records a check removed)
    readable by anyone on the network while the run lasts. Off unless the URL turns it on."""
    from pyspark.sql import SparkSession

    from sqlanon.engines import spark as spark_engine

    builder = _Builder()
    monkeypatch.setattr(SparkSession, "builder", builder)
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(spark_engine, "_chain_interrupt", lambda *_: None)
    spark_engine.connect_spark(url)
    assert builder.conf.get("spark.ui.enabled") == ui
