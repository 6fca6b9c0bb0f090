"""Where the lattice search walks (and Mondrian's rounds run, :mod:`sqlanon.lattice.mondrian_local`):
the policy key ``search.where`` and the CLI's ``--search-in``.

A module of its own, below :mod:`sqlanon.policy` in the layers (it imports nothing of sqlanon but
the errors), so that the policy can validate the key while the walk itself lives in
:mod:`sqlanon.lattice.local`.

- ``database``: every statement of the search runs in the warehouse (for those who forbid any
  aggregate leaving it); on PostgreSQL and Spark that is about a hundred statements;
- ``local``: the warehouse scans the source once; its frequency table (or, below
  ``STAGE_MIN_ROWS``, its coded table) crosses into an in-memory DuckDB over the driver's bulk path
  (on PostgreSQL the scan's SELECT itself, copied as it is counted and split into page ranges where
  it can: :mod:`sqlanon.lattice.localfreq`), the lattice is walked there, and publishing runs in the
  warehouse; re-verification groups the release there and checks it locally
  (:mod:`sqlanon.lattice.local_measure`);
- ``auto`` (the default): ``local`` on PostgreSQL and Spark when the frequency table has at most
  :data:`LOCAL_MAX_ROWS` rows and pyarrow is installed, else ``database``. DuckDB is already
  in-process: ``auto`` never copies from it.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from typing import Any

from sqlanon.errors import PolicyError

WHERES = ("auto", "database", "local")
#: ``auto`` walks locally up to this many rows of the frequency table (one row per distinct
#: combination of quasi-identifier and sensitive values), which crosses as values and is coded
#: locally: ~410 bytes a row of the local process's peak with nine quasi-identifiers (Spark at 1e8
#: rows: 1,328 MB for 2,873,622 rows, docs/performance.md), so at most ~2 GB of driver memory,
#: never spilled to disk.
LOCAL_MAX_ROWS = 5_000_000
#: Engines where ``auto`` walks locally: those where a statement costs far more than on DuckDB.
LOCAL_ENGINES = frozenset({"postgres", "spark"})


def parse_where(search: dict[str, Any]) -> str:
    """``search.where`` of a policy's ``search:`` mapping (default ``auto``).

    >>> parse_where({}), parse_where({"where": "local"})
    ('auto', 'local')
    """
    where = search.get("where", "auto")
    if where not in WHERES:
        raise PolicyError(f"policy key 'search.where': expected one of {', '.join(WHERES)}, got {where!r}")
    return str(where)


SEARCH_IN_HELP = (
    "Where the lattice search (or Mondrian's rounds) runs: 'database' (every statement in the warehouse; "
    "no aggregate leaves it) or 'local' (the coded frequency table is copied into an in-memory DuckDB "
    "and walked there). "
    "Default: policy search.where (auto: local on PostgreSQL and Spark up to 5e6 frequency-table rows)."
)


def searched_in(policy: Any, where: str) -> Any:
    """The policy (a :class:`sqlanon.policy.Policy`) with ``search.where`` set to ``where`` (the
    CLI's ``--search-in``)."""
    if where not in WHERES:
        raise PolicyError(f"--search-in: expected one of {', '.join(WHERES)}, got {where!r}")
    return dataclasses.replace(policy, search=dataclasses.replace(policy.search, where=where))


#: What the local walk imports before its first row crosses: pyarrow and its CSV parser
#: (:mod:`sqlanon.lattice.local`), DuckDB and its SQLAlchemy dialect (the in-memory walk).
LOCAL_MODULES = ("pyarrow", "pyarrow.csv", "duckdb", "duckdb_engine")


def prefetch(dialect: str, where: str) -> threading.Thread | None:
    """Import :data:`LOCAL_MODULES` on a thread while the warehouse builds the search's
    tables, where the search may walk locally (``where`` is not ``database``, ``dialect`` in
    :data:`LOCAL_ENGINES`); the thread, else None.

    Why: the imports cost ~0.9 s of CPU (1e6 rows on PostgreSQL, a loaded 2-core machine: 0.6 s
    pyarrow, 0.3 s DuckDB) that the main thread would otherwise spend after the builds; during
    them it only waits on the server's socket, without the GIL. A module missing here is left for
    :func:`sqlanon.lattice.local.location` to find (``auto`` then searches in the database, ``local``
    says what to install); Python's import lock makes the main thread wait for a half-done import.
    """
    if where == "database" or dialect not in LOCAL_ENGINES:
        return None
    thread = threading.Thread(target=_import_quietly, name="sqlanon-local-imports", daemon=False)
    thread.start()
    return thread


def _import_quietly() -> None:
    for name in LOCAL_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - reported, if it matters, where the walk imports it
            return
