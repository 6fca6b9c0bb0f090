"""The secret keys on the command line: the notes printed beside SQL that reads them, and
``sqlanon secret-pads``, which binds them for a DBA who runs printed SQL by hand (docs/security.md)."""

from __future__ import annotations

import contextlib
import os
import stat
import sys

import click

from sqlanon.errors import SqlanonError
from sqlanon.perturbation import NUMERIC_METHODS
from sqlanon.policy import Policy
from sqlanon.sql import secrets

SECRET_NOTE = secrets.NOTE  # also printed by the report layer before printed SQL

PLAIN_VIEW_NOTE = (
    "-- A plain view: a reader's predicates run inside it, so leaky functions, failing casts and\n"
    "-- EXPLAIN can show the rows it suppresses. `sqlanon anonymise` publishes a PostgreSQL view\n"
    "-- through a SECURITY DEFINER function instead (docs/security.md); or publish a table."
)


def compile_notes(sql: str, dialect: str, policy: Policy, db: str | None) -> list[str]:
    """The SQL comments ``sqlanon compile`` prints before its statement: the secret relation it
    reads, a PostgreSQL plain view's exposure, and, printed without a database, the perturbed
    columns whose rounding follows a type sqlanon could not see (``anonymise`` publishes an
    integer column's noise as whole numbers: sqlanon/transform/perturb.py ``rounding``)."""
    notes = [SECRET_NOTE] if secrets.uses_secret(sql) else []
    if dialect in ("postgres", "redshift") and sql.lstrip().upper().startswith("CREATE VIEW"):
        notes.append(PLAIN_VIEW_NOTE)
    perturbs = [(c.name, c.perturb) for c in policy.perturbed if c.perturb is not None and db is None]
    unrounded = [name for name, p in perturbs if p.method in NUMERIC_METHODS and p.round is None]
    if unrounded:
        notes.append(
            "-- Printed without a database, whose column types sqlanon could not read: "
            f"{', '.join(unrounded)}\n"
            "-- published unrounded; `sqlanon anonymise` publishes an integer column's perturbed values\n"
            "-- as whole numbers: give --db, or add `round: 1` to an integer column's perturb:."
        )
    return notes


def secret_pads_line() -> str:
    """The secret relation's one row (the HMAC pads of SQLANON_HASH_KEY and SQLANON_PERTURB_KEY,
    tab-separated, NULL as \\N: COPY's text format), for ``sqlanon secret-pads``. Refused when
    stdout is a terminal (it shows the keys) or a regular file (it keeps them, world-readable
    under a usual umask): only a pipe into COPY."""
    mode = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        mode = os.fstat(sys.stdout.fileno()).st_mode
    if sys.stdout.isatty() or (mode is not None and stat.S_ISREG(mode)):
        raise SqlanonError(
            "secret-pads: write to a pipe into COPY, not a terminal or a file (docs/security.md)"
        )
    row = secrets.secret_row().values
    missing = []
    for (purpose, (var, _)), pair in zip(secrets.PURPOSES.items(), (row[:2], row[2:]), strict=True):
        if None in pair and (os.environ.get(var) or os.environ.get(f"{var}_FILE")):
            secrets.read_key(purpose)  # set but unusable: its own message says why
        missing += [var] if None in pair else []
    if len(missing) == 2:
        # Not read_key's "action hash: ..." line: this command has no policy, and either key will do.
        raise SqlanonError(
            "secret-pads: no secret key is set: set SQLANON_HASH_KEY or SQLANON_PERTURB_KEY (or its _FILE "
            "form), the key(s) the printed SQL was made with"
        )
    if missing:
        # Printed SQL that reads a NULL pad stops with an error (sql/secrets.pad_expr); say why first.
        click.echo(
            f"note: secret-pads: {missing[0]} is not set, so its pads are NULL: printed SQL made with "
            f"{missing[0]} will stop with an error naming the pad",
            err=True,
        )
    return "\t".join("\\N" if v is None else v for v in row) + "\n"
