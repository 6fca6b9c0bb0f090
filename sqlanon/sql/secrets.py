"""The release's secrets: where they come from, and how SQL reads them without ever holding them.

Two secrets exist. ``SQLANON_HASH_KEY`` keys the pseudonyms of ``action: hash`` (HMAC-SHA-256,
RFC 2104) and ``SQLANON_PERTURB_KEY`` keys every random number of perturbation (the uniforms of
:func:`sqlanon.sql.builders.keyed_uniform`, also HMAC-SHA-256: Bellare, Canetti and Krawczyk 1996
show HMAC is a pseudo-random function when its key is secret, so a reader who lacks the key cannot
recompute a record's noise, nor test a guessed original value against the published one). Each is
read from the environment variable, or from the file named by ``<NAME>_FILE`` (a secrets file, as
Docker and systemd credentials mount them), never from the policy, which travels with the release.

No statement text holds a secret. The SQL reads the HMAC pads (K' xor ipad, K' xor opad, from which
the key is recovered at once) from a session-temporary relation, ``sqlanon_secret``, with one row and
the columns of :data:`COLUMNS` (hex text). sqlanon loads it without writing the values into any
statement (:meth:`sqlanon.engines.Backend.load_secrets`: a bound parameter on DuckDB, ``COPY FROM
STDIN`` on PostgreSQL, whose statement logs and ``pg_stat_statements`` then hold only the COPY, a
DataFrame on Spark); printed SQL (``compile``, ``--dry-run``, the report) names the relation, and
the documentation says how a DBA binds it (``sqlanon secret-pads``). Because the relation lives
only in the session, a release that needs a secret is published as a table, never a view.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from sqlanon.errors import SqlanonError

HASH_KEY_ENV = "SQLANON_HASH_KEY"
PERTURB_KEY_ENV = "SQLANON_PERTURB_KEY"
MIN_KEY_BYTES = 16
_BLOCK = 64  # SHA-256's block size in bytes (RFC 2104's B)

#: The secret relation's name and columns: (purpose, pad) -> column.
NAME = "sqlanon_secret"
COLUMNS = {
    ("hash", "i"): "hash_ipad",
    ("hash", "o"): "hash_opad",
    ("perturb", "i"): "perturb_ipad",
    ("perturb", "o"): "perturb_opad",
}
PURPOSES = {"hash": (HASH_KEY_ENV, "action hash"), "perturb": (PERTURB_KEY_ENV, "perturb")}


def read_key(purpose: str, env: Mapping[str, str] | None = None) -> bytes:
    """The key for ``purpose`` (``hash`` or ``perturb``): ``$NAME`` or the file ``$NAME_FILE``.

    The message never shows the key, nor a byte of the file.

    >>> len(read_key("perturb", {"SQLANON_PERTURB_KEY": "0123456789abcdef0123"}))
    20
    """
    env = os.environ if env is None else env
    var, what = PURPOSES[purpose]
    value, path = env.get(var), env.get(f"{var}_FILE")
    if value and path:
        raise SqlanonError(f"{what}: set {var} or {var}_FILE, not both")
    if path:
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                raise SqlanonError(f"{what}: {var}_FILE {path!r} is not a regular file")
            with open(path, "rb") as f:
                key = f.read().strip()
        except OSError as e:
            raise SqlanonError(f"{what}: cannot read {var}_FILE {path!r}: {e.strerror}") from None
        where = f"the file {var}_FILE names"
    elif value:
        key, where = value.encode("utf-8"), var
    else:
        raise SqlanonError(
            f"{what}: set the environment variable {var} (or {var}_FILE, a file holding it) to a "
            f"secret key of at least {MIN_KEY_BYTES} bytes, e.g. `openssl rand -hex 32`"
        )
    if len(key) < MIN_KEY_BYTES:
        raise SqlanonError(f"{what}: {where} holds {len(key)} bytes; a key needs at least {MIN_KEY_BYTES}")
    return key


def pads(key: bytes) -> tuple[str, str]:
    """(K' xor ipad, K' xor opad) in hex, K' the key padded to the block (hashed first if longer).

    >>> pads(b"k" * 3)[0][:8], len(pads(b"k" * 100)[1])
    ('5d5d5d36', 128)
    """
    k = hashlib.sha256(key).digest() if len(key) > _BLOCK else key
    k = k.ljust(_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in k).hex(), bytes(b ^ 0x5C for b in k).hex()


@dataclass(frozen=True)
class SecretRow:
    """The values of the secret relation's one row (hex text; None where a key is not set)."""

    values: tuple[str | None, ...]

    def __repr__(self) -> str:  # never shown, even in a traceback's locals
        return "SecretRow(<hidden>)"


def secret_row(env: Mapping[str, str] | None = None) -> SecretRow:
    """The row to load: the pads of each key that is set (a purpose without a key gets NULLs, and
    the policy that needs it was refused before any statement by :func:`read_key`)."""
    out: list[str | None] = []
    for purpose in ("hash", "perturb"):
        try:
            i, o = pads(read_key(purpose, env))
        except SqlanonError:
            i = o = None
        out += [i, o]
    return SecretRow(tuple(out))


def fingerprint(row: SecretRow | None = None) -> str:
    """A digest of the pads a session loaded (of the keys set now, by default): a session reloads
    its secret relation when the keys changed between two commands on it (the API's reused
    session), instead of drawing with the first command's key. A digest of HMAC outputs, held in
    memory only, tells nothing of a key."""
    row = secret_row() if row is None else row
    return hashlib.sha256("\x1f".join(v or "" for v in row.values).encode()).hexdigest()


def relation(dialect: str) -> exp.Table:
    """The secret relation as each engine names its session-temporary relations."""
    if dialect == "duckdb":
        return exp.table_(NAME, db="main", catalog="temp", quoted=True)
    if dialect in ("postgres", "redshift"):
        return exp.table_(NAME, db="pg_temp", quoted=True)
    if dialect in ("tsql", "fabric"):
        return exp.table_(f"#{NAME}", quoted=False)
    return exp.table_(NAME, quoted=True)


def pad_expr(purpose: str, pad: str, dialect: str) -> exp.Expression:
    """``COALESCE((SELECT <pad column> FROM sqlanon_secret), <error>)``: one scalar subquery,
    evaluated once per statement by every engine (an uncorrelated subquery; PostgreSQL's InitPlan),
    and a statement that fails where the pad is NULL or the relation empty.

    Why fail: with a NULL pad every HMAC is NULL, and ``LEAST(u, 1 - 2^-53)`` skips a NULL on every
    engine, so each record's uniform would become the same constant and its noise one shift that
    anyone can subtract (printed SQL run by hand after ``sqlanon secret-pads`` with only the other
    key set). The error is evaluated only when the COALESCE needs it: Spark's ``raise_error()`` is
    never folded; PostgreSQL has no such function, and DuckDB's ``error()`` is volatile, which a
    window's ORDER BY refuses (swapping ranks by keyed uniforms), so there a cast of the message to
    an integer fails instead, kept from plan-time folding by a subquery over the relation."""
    col = exp.column(exp.to_identifier(COLUMNS[(purpose, pad)], quoted=True))
    read = exp.Subquery(this=exp.select(col).from_(relation(dialect)))
    var = PURPOSES[purpose][0]
    msg = f"{NAME}.{COLUMNS[(purpose, pad)]} is not set: bind the pads of {var} (sqlanon secret-pads) first"
    return exp.Coalesce(this=read, expressions=[_failure(msg, dialect)])


def _failure(msg: str, dialect: str) -> exp.Expression:
    """An expression that raises ``msg`` when it is evaluated (text-typed where it returns)."""
    text = exp.Literal.string(msg)
    if dialect in ("spark", "spark2", "databricks"):
        return exp.Anonymous(this="raise_error", expressions=[text])
    if dialect in ("duckdb", "postgres", "redshift"):
        rows = exp.Subquery(this=exp.select(exp.Count(this=exp.Star())).from_(relation(dialect)))
        message = exp.DPipe(this=exp.Literal.string(msg + "; rows: "), expression=exp.cast(rows, "text"))
        return exp.cast(exp.cast(message, "int"), "text")
    return exp.cast(exp.cast(text, "int"), "text")


#: The comment printed before SQL that reads the secret relation (compile, --dry-run, the report
#: layer): how to bind it, never its values.
NOTE = (
    f"-- This statement reads the session-temporary relation {NAME} (the HMAC pads of\n"
    "-- SQLANON_HASH_KEY and SQLANON_PERTURB_KEY; no key is written here). Create and fill it in the\n"
    "-- same session first, e.g. in psql: CREATE TEMP TABLE sqlanon_secret (hash_ipad text, hash_opad\n"
    "-- text, perturb_ipad text, perturb_opad text); \\copy sqlanon_secret from program 'sqlanon secret-pads'"
)


def uses_secret(sql: str) -> bool:
    """Whether generated SQL reads the secret relation (the engine then loads it first)."""
    return NAME in sql
