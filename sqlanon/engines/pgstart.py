"""How sqlanon opens a PostgreSQL session, and the search path the user would have had (issue 32).

Every sqlanon session on PostgreSQL runs on ``pg_catalog, pg_temp`` from its very first
statement, given to the server in the connection's startup packet; the user's own path is then
worked out from the same sources PostgreSQL reads at login, and used only to resolve the policy's
unqualified names (:class:`sqlanon.engines.postgres.SearchPath`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlanon.errors import SqlanonError

if TYPE_CHECKING:
    from sqlanon.engines.base import Backend

#: What every sqlanon session on PostgreSQL starts with (issue 32), in the connection's startup
#: packet (libpq ``options``), so that no statement runs under the user's search path, not even
#: the driver's connect-time probes: SQLAlchemy's hstore lookup compares ``t.oid = to_regtype(..)``,
#: and a reader's exact-type ``=`` for (oid, regtype) in ``public`` ran there as the DBA. sqlanon's
#: SQL is generated for standard strings (a backslash in a label is a character), so that is fixed
#: too, and so are the text forms of dates and intervals (a database's ``DateStyle = German``
#: made the local walk's copy fail and print a raw date in the error) and of floating-point numbers
#: (``extra_float_digits = 0`` wrote 0.3 and 0.1 + 0.2 both as 0.3 in the local walk's copy, so
#: DuckDB counted one class where PostgreSQL has two: k 4 locally against 2; 3 writes every double
#: exactly). The user's own options come first and stay in force; a later ``-c`` of the same name
#: wins.
PG_START = (
    "-c search_path=pg_catalog,pg_temp -c standard_conforming_strings=on "
    "-c DateStyle=ISO,MDY -c IntervalStyle=postgres -c extra_float_digits=3"
)
#: The PostgreSQL drivers that pass libpq's ``options`` to the server.
_LIBPQ_DRIVERS = ("psycopg", "psycopg2")


def _split_options(options: str) -> list[str]:
    """libpq ``options`` as the server splits them: whitespace separates, a backslash escapes."""
    out: list[str] = []
    cur: list[str] = []
    escaped = started = False
    for ch in options:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = started = True
        elif ch.isspace():
            if started:
                out.append("".join(cur))
            cur, started = [], False
            continue
        else:
            cur.append(ch)
        started = True
    if started:
        out.append("".join(cur))
    return out


def option_setting(options: str, name: str) -> str | None:
    r"""The value ``options`` gives the setting ``name`` (``-c name=v``, ``-cname=v``,
    ``--name=v``; the last one wins, as on the server), or None.

    >>> option_setting("-c search_path=a,b --search-path=c\\ d", "search_path")
    'c d'
    """
    words, value, i = _split_options(options), None, 0
    while i < len(words):
        w = words[i]
        if w == "-c" and i + 1 < len(words):
            setting, i = words[i + 1], i + 2
        else:
            setting, i = (w[2:] if w.startswith(("-c", "--")) else ""), i + 1
        key, eq, val = setting.partition("=")
        if eq and key.strip().lower().replace("-", "_") == name:
            value = val
    return value


@dataclass(frozen=True)
class PgStart:
    """How a PostgreSQL connection is opened: the engine's arguments, and the search path the
    user's own options set (None: the server's defaults for the role and database apply)."""

    engine_args: dict[str, Any]
    path: str | None


def pg_start(url: str) -> PgStart | None:
    """:data:`PG_START` merged after the user's own ``options`` (the URL's, else ``PGOPTIONS``,
    which an explicit ``options`` would otherwise silence); None for other engines. Without the
    hstore probe (sqlanon reads no hstore) the driver sends one statement fewer."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() != "postgresql":
        return None
    if u.get_driver_name() not in _LIBPQ_DRIVERS:
        raise SqlanonError(
            f"--db: the driver {u.get_driver_name()!r} cannot fix the session's search path at "
            "connection start; use postgresql+psycopg://"
        )
    given = u.query.get("options")
    text = " ".join(given) if isinstance(given, tuple) else given
    if text is None:
        text = os.environ.get("PGOPTIONS", "")
    args = {"connect_args": {"options": f"{text} {PG_START}".strip()}, "use_native_hstore": False}
    return PgStart(args, option_setting(text, "search_path"))


def configured_path(be: Backend) -> str:
    """The search path PostgreSQL would have given this session without sqlanon's ``options``:
    the first of ALTER ROLE ... IN DATABASE, ALTER ROLE, ALTER DATABASE and ALTER ROLE ALL
    settings (``pg_db_role_setting``, for the session user and this database, in the server's own
    order), else the configuration files' value where this role may read ``pg_file_settings``,
    else the built-in default (``pg_settings.boot_val``, ``"$user", public``). A value given on
    the server's command line is not visible to a session and is not used."""
    readable = be.query("catalog/file_settings_readable")[0][0]
    rows = be.query("catalog/path_defaults", file_settings=bool(int(readable)))
    found = sorted((int(lvl), -int(order), str(cfg)) for lvl, order, cfg in rows)
    for _lvl, _order, cfg in found:
        key, _, value = cfg.partition("=")
        if key.strip().lower() == "search_path":
            return value
    return '"$user", public'
