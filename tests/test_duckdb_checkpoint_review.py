"""A second reading of engines/duckdb_checkpoint.py: Mondrian's raised ``checkpoint_threshold``
must come back to the user's value whichever way connections share a DuckDB instance, and after
a run that failed. The setting is the instance's (DuckDB's documentation lists it as a global
setting): a key per current database's path missed an in-memory database shared by name and an
attached database made current, and a failure left its transaction aborted, which refused the
restore (each left 931.3 GiB, no automatic checkpoint again while the process lived)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import duckdb
import pytest

from sqlanon.engines import duckdb_checkpoint, session

DEFAULT = "16.0 MiB"  # DuckDB's default, as it prints it


def _overlap(a, b) -> None:  # noqa: ANN001 - two Backends
    first, second = duckdb_checkpoint.no_checkpoint(a), duckdb_checkpoint.no_checkpoint(b)
    first.__enter__()
    second.__enter__()
    assert duckdb_checkpoint.threshold(a) != DEFAULT
    first.__exit__(None, None, None)
    second.__exit__(None, None, None)


def test_an_in_memory_database_shared_by_name() -> None:
    url = f"duckdb:///:memory:sqlanon_{uuid.uuid4().hex}"
    with session(url) as a, session(url) as b:
        _overlap(a, b)
        assert duckdb_checkpoint.threshold(a) == DEFAULT


def test_an_attached_database_made_current(tmp_path: Path) -> None:
    """One connection's current database is an attached file, the other's the one opened: one
    instance, one setting."""
    main, other = tmp_path / "main.duckdb", tmp_path / "other.duckdb"
    for p in (main, other):
        duckdb.connect(str(p)).close()
    with session(f"duckdb:///{main}") as a, session(f"duckdb:///{main}") as b:
        a._run(f"ATTACH '{other}' AS other")
        a._run("USE other")
        _overlap(a, b)
        assert duckdb_checkpoint.threshold(b) == DEFAULT


def test_a_failure_inside_the_block(tmp_path: Path) -> None:
    path = tmp_path / "f.duckdb"
    duckdb.connect(str(path)).close()
    with session(f"duckdb:///{path}") as a, session(f"duckdb:///{path}") as b:
        with pytest.raises(Exception, match="Could not convert"), duckdb_checkpoint.no_checkpoint(a):
            a._run("SELECT CAST('x' AS INTEGER)").fetchall()
        assert duckdb_checkpoint.threshold(b) == DEFAULT


def test_a_thread_race_over_current_databases(tmp_path: Path) -> None:
    """Eight runs on threads, one instance, half of them with an attached database current, their
    blocks overlapping in every order the scheduler picks."""
    main, other = tmp_path / "main.duckdb", tmp_path / "other.duckdb"
    for p in (main, other):
        duckdb.connect(str(p)).close()
    url = f"duckdb:///{main}"
    barrier, errors = threading.Barrier(8), []

    def run(i: int) -> None:
        try:
            with session(url) as be:
                if i % 2:
                    be._run(f"ATTACH IF NOT EXISTS '{other}' AS other")
                    be._run("USE other")
                barrier.wait()
                for _ in range(5):
                    with duckdb_checkpoint.no_checkpoint(be):
                        be._run("SELECT 1").fetchall()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with session(url) as be:
        assert duckdb_checkpoint.threshold(be) == DEFAULT
    assert not duckdb_checkpoint._HOLDERS
