"""DuckDB: no automatic checkpoint of a database file while Mondrian's rounds run.

The rounds create and drop a few temporary tables a round, committed each round, and these commits
set off DuckDB's automatic checkpoint (``checkpoint_threshold``, 16 MiB): at 1e6 rows the 16th
round's commit took 0.3-0.7 s against 1 ms for the others (each of five runs on a loaded 2-core
machine). The threshold is raised for the rounds and the user's value restored afterwards.

The setting is global to a DuckDB database instance, which every connection of the process to it
shares (a notebook's own connection; two runs on threads; a named in-memory database
``:memory:name``; an attached database made current by ``USE``, whose instance is still the one
opened). So the runs are counted per instance: the first saves the user's value, the last one to
end restores it (two runs that each saved and restored left it at 1 TB, never checkpointing again
while the process lived). Python cannot name an instance, nor could a key from the current
database's path (an in-memory one has none; two connections of one instance may have different
current databases): the raised value itself names it, one per instance held (900, 901, ... GiB,
distinct as DuckDB prints them). The restore runs even where the block failed, after rolling back
the transaction the failure aborted (every statement, the restore's too, was refused until then).
A database whose configuration is locked (``lock_configuration``, an administrator's lock)
refuses every SET: the rounds then run without the speed-up rather than fail.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from sqlanon.engines.base import Backend
from sqlanon.sql.compile import lit

#: The raised thresholds, GiB (no commit of the rounds reaches one), one per instance held: at most
#: this many instances at once get the speed-up (DuckDB prints 1024 GiB and more in TiB, rounded).
RAISED_GIB = range(900, 1024)

_LOCK = threading.Lock()
#: Per instance held, by its raised value as DuckDB prints it: the runs under way, the user's value
#: the first of them saved, and the raised value in GiB (the one no other instance may take).
_HOLDERS: dict[str, tuple[int, str, int]] = {}


def threshold(be: Backend) -> str:
    """DuckDB's checkpoint_threshold as it prints it. Every row is fetched: a result left unfinished
    (``scalar``) keeps the connection busy, and the local walk's next Arrow read of it then failed
    (ResourceInUseException)."""
    return str(be._run("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0])


def _locked(be: Backend) -> bool:
    return bool(be._run("SELECT current_setting('lock_configuration')").fetchall()[0][0])


def _hold(be: Backend) -> str | None:
    """Count a run on the connection's instance (under _LOCK): its raised value, None where every
    value is held (the run goes without the speed-up)."""
    current = threshold(be)
    if current in _HOLDERS:  # another run raised this instance's
        count, saved, gib = _HOLDERS[current]
        _HOLDERS[current] = (count + 1, saved, gib)
        return current
    taken = {gib for _, _, gib in _HOLDERS.values()}
    free = next((g for g in RAISED_GIB if g not in taken), None)
    if free is None:
        return None
    be._run(f"SET checkpoint_threshold = {lit(f'{free}GiB')}")
    raised = threshold(be)
    _HOLDERS[raised] = (1, current, free)
    return raised


def _restore(be: Backend, raised: str, saved: str) -> None:
    """The user's value back, unless it was changed during the runs (not our value any more):
    DuckDB's default exactly (RESET), another value as DuckDB prints it (three digits of MiB)."""
    if threshold(be) != raised:
        return
    be._run("RESET checkpoint_threshold")
    if threshold(be) != saved:
        be._run(f"SET checkpoint_threshold = {lit(saved)}")


@contextlib.contextmanager
def no_checkpoint(be: Backend) -> Iterator[None]:
    """No automatic checkpoint during the block (DuckDB, not read-only mode); the user's setting is
    restored when the last overlapping block on the same instance ends (see the module docstring)."""
    if be.dialect != "duckdb" or be.inline or _locked(be):
        yield
        return
    with _LOCK:
        raised = _hold(be)
    try:
        yield
    finally:
        if raised is not None:
            with _LOCK:
                count, saved, gib = _HOLDERS.pop(raised)
                if count > 1:
                    _HOLDERS[raised] = (count - 1, saved, gib)
                else:
                    try:
                        _restore(be, raised, saved)
                    except Exception:  # noqa: BLE001 - a failed block's aborted transaction
                        with contextlib.suppress(Exception):
                            if be._conn.in_transaction():
                                be._conn.rollback()
                            _restore(be, raised, saved)
