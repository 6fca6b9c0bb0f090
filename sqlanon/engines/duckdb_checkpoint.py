"""DuckDB: no automatic checkpoint of a database file while Mondrian's rounds run.

The rounds create and drop a few temporary tables a round, committed each round, and these commits
set off DuckDB's automatic checkpoint (``checkpoint_threshold``, 16 MiB): at 1e6 rows the 16th
round's commit took 0.3-0.7 s against 1 ms for the others (each of five runs on a loaded 2-core
machine). The threshold is raised for the rounds and the user's value restored afterwards.

The setting is global to a DuckDB database, and every connection of one process to the same file
shares that database (a notebook's own connection; two runs on threads). So the holders are counted
per database: the first run saves the user's value, the last one to end restores it (two runs that
each saved and restored left the database at 1 TB, never checkpointing again while the process
lived). A database whose configuration is locked (``lock_configuration``, an administrator's lock)
refuses every SET: the rounds then run without the speed-up rather than fail.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from sqlanon.engines.base import Backend
from sqlanon.sql.compile import lit

#: The threshold while rounds run: no commit of theirs reaches it.
RAISED = "1TB"

_LOCK = threading.Lock()
#: Per database (its file path, or the connection's own identity for an in-memory one): the runs
#: under way and the user's value the first of them saved.
_HOLDERS: dict[object, tuple[int, str]] = {}


def threshold(be: Backend) -> str:
    """DuckDB's checkpoint_threshold as it prints it. Every row is fetched: a result left unfinished
    (``scalar``) keeps the connection busy, and the local walk's next Arrow read of it then failed
    (ResourceInUseException)."""
    return str(be._run("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0])


def _database(be: Backend) -> object:
    """The database the session's connection writes: a file is shared by every connection of the
    process that opens it; an in-memory database belongs to its connection alone."""
    row = be._run("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    path = row[0][0] if row else None
    return ("file", str(path)) if path else ("session", id(be))


def _locked(be: Backend) -> bool:
    return bool(be._run("SELECT current_setting('lock_configuration')").fetchall()[0][0])


@contextlib.contextmanager
def no_checkpoint(be: Backend) -> Iterator[None]:
    """No automatic checkpoint during the block (DuckDB, not read-only mode); the user's setting is
    restored when the last overlapping block of the same database ends: DuckDB's default exactly
    (RESET), another value as DuckDB prints it (three digits of MiB)."""
    if be.dialect != "duckdb" or be.inline or _locked(be):
        yield
        return
    key = _database(be)
    with _LOCK:
        count, saved = _HOLDERS.get(key, (0, ""))
        if count == 0:
            saved = threshold(be)
            be._run(f"SET checkpoint_threshold = {lit(RAISED)}")
        _HOLDERS[key] = (count + 1, saved)
    try:
        yield
    finally:
        with _LOCK:
            count, saved = _HOLDERS.pop(key)
            if count > 1:
                _HOLDERS[key] = (count - 1, saved)
            else:
                with contextlib.suppress(Exception):
                    be._run("RESET checkpoint_threshold")
                    if threshold(be) != saved:
                        be._run(f"SET checkpoint_threshold = {lit(saved)}")
