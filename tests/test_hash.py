"""``action: hash`` is a keyed HMAC-SHA-256 (RFC 2104), checked against Python's ``hmac`` on every
engine that runs; the unkeyed MD5 it replaces was reversed with one join."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
import sqlglot

from sqlanon.engines import connect
from sqlanon.errors import SqlanonError
from sqlanon.sql.builders import hash_text
from sqlanon.sql.compile import generate, parse_one_statement
from sqlanon.transform.release import hash_key
from tests.conftest import TEST_HASH_KEY, TestDB
from tests.helpers import cli, cli_json, write_policy

VALUES = ["alice", "Zoë", "", "x" * 300, "1234567"]


def _expected(key: bytes, v: str) -> str:
    return hmac.new(key, v.encode("utf-8"), hashlib.sha256).hexdigest()


@pytest.mark.parametrize("key", [b"0123456789abcdef", b"k" * 64, b"long key " * 20])
def test_hmac_matches_python_on_every_engine(db: TestDB, key: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """The HMAC computed in SQL from the pads in the session's secret relation (loaded by the
    engine from the environment, never written into the statement) equals Python's."""
    monkeypatch.setenv("SQLANON_HASH_KEY", key.decode())
    db.load("ids", ["v"], [[v] for v in VALUES] + [[None]], ["VARCHAR"])
    stmt = parse_one_statement(
        f'SELECT "v", {hash_text(chr(34) + "v" + chr(34))} AS h FROM "main"."ids"', "select"
    )
    sql = generate(stmt, "postgres" if db.kind == "postgres" else "duckdb")
    assert key.decode() not in sql and hmac_pads_hex(key)[0] not in sql
    with connect(db.url) as be:
        be.load_secrets()
        got = dict(tuple(r) for r in be._run(sql).fetchall())
    assert got.pop(None) is None  # NULL stays NULL
    assert got == {v: _expected(key, v) for v in VALUES}


def hmac_pads_hex(key: bytes) -> tuple[str, str]:
    from sqlanon.sql.secrets import pads

    return pads(key)


def test_published_pseudonyms_are_keyed(db: TestDB, tmp_path: Path) -> None:
    cols = ["pid", "zip", "age"]
    rows = [[str(1000 + i), "4767" + str(i % 2), 30 + i % 3] for i in range(12)]
    db.load("people", cols, rows, ["VARCHAR", "VARCHAR", "INTEGER"])
    pol = {
        "source": "main.people",
        "target": "main.people_out",
        "columns": {"pid": {"role": "identifier", "action": "hash"}, "zip": "quasi", "age": "quasi"},
        "privacy": {"k": 2},
    }
    path = write_policy(tmp_path, pol)
    code, _, err = cli("anonymise", str(path), "--db", db.url, "--as", "view")  # a view would need the key
    assert code == 2 and "hash needs publishing as a table" in err
    cli_json("anonymise", str(path), "--db", db.url)  # a table by default
    published = {r[0] for r in db.sql('SELECT "pid" FROM "main"."people_out"')}
    key = TEST_HASH_KEY.encode()
    assert published == {_expected(key, r[0]) for r in rows}
    md5 = {hashlib.md5(r[0].encode()).hexdigest() for r in rows}  # noqa: S324 - the old, broken way
    assert not published & md5


@pytest.mark.parametrize("dialect", ["spark", "tsql", "databricks"])
def test_hmac_compiles_for_other_dialects(dialect: str) -> None:
    stmt = parse_one_statement(f"SELECT {hash_text('x')} AS h FROM t", "select")
    sql = generate(stmt, dialect)
    assert "SQLANON_HMAC" not in sql and "sqlanon_secret" in sql
    sqlglot.parse_one(sql, read=dialect)


def test_missing_or_short_key_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQLANON_HASH_KEY")
    with pytest.raises(SqlanonError, match="SQLANON_HASH_KEY"):
        hash_key()
    with pytest.raises(SqlanonError, match="at least 16") as e:
        hash_key({"SQLANON_HASH_KEY": "short-secret"})
    assert "short-secret" not in str(e.value)
    pol = {
        "source": "main.p",
        "target": "main.q",
        "columns": {"pid": {"role": "identifier", "action": "hash"}, "zip": "quasi"},
    }
    code, out, err = cli(
        "compile",
        str(write_policy(tmp_path, pol)),
        "--dialect",
        "duckdb",
        "--levels",
        "zip=1",
        "--as",
        "table",
    )
    assert code == 2 and err.startswith("error: action hash: set the environment variable SQLANON_HASH_KEY")


def test_a_reused_session_draws_with_the_key_set_now(
    db: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API's session outlives a command: when the key changes between two releases on it, the
    second is keyed by the new key (it was keyed by the first command's pads, loaded once)."""
    from sqlanon import api

    cols = ["pid", "zip"]
    rows = [[str(2000 + i), "4767" + str(i % 2)] for i in range(6)]
    db.load("people2", cols, rows, ["VARCHAR", "VARCHAR"])
    pol = {
        "source": "main.people2",
        "target": "main.people2_out",
        "columns": {"pid": {"role": "identifier", "action": "hash"}, "zip": "quasi"},
        "privacy": {"k": 2},
    }
    keys = [b"first-key-0123456789", b"second-key-0123456789"]
    with api.connect(db.url) as be:
        for i, key in enumerate(keys):
            monkeypatch.setenv("SQLANON_HASH_KEY", key.decode())
            api.anonymise(pol | {"target": f"main.people2_out{i}"}, be)
            be.commit()
    for i, key in enumerate(keys):
        published = {r[0] for r in db.sql(f'SELECT "pid" FROM "main"."people2_out{i}"')}
        assert published == {_expected(key, r[0]) for r in rows}, key
