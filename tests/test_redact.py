"""Secrets in a ``--db`` URL never reach stdout, stderr or ``--json`` (issue 32, finding 5).

The URLs are the attacker's reproductions: a userinfo password with a raw space or ``@``, libpq's
``sslpassword``, DuckDB's ``motherduck_token``, Spark Connect's ``;token=``, names percent-encoded.
Each secret is a distinctive word, so a leak of any part of it is found by a substring search.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sqlanon.engines import redact
from sqlanon.engines import spark as spark_engine
from tests.conftest import TestDB
from tests.helpers import cli, write_policy

#: (URL, the secret words it holds) for a database that cannot be reached or opened.
UNREACHABLE = [
    ("postgresql://u:pa SECRETA@127.0.0.1:1/db?sslmode=disable", ["SECRETA"]),
    ("postgresql://u:p@SECRETB@127.0.0.1:1/db", ["SECRETB"]),
    ("postgresql://u@127.0.0.1:1/db?sslmode=disable&sslpassword=SECRETC", ["SECRETC"]),
    ("postgresql://u@127.0.0.1:1/db?sslmode=disable&ssl%70assword=SECRETD", ["SECRETD"]),
    ("postgresql://u@127.0.0.1:1/db?sslmode=disable&API_KEY=SECRETE", ["SECRETE"]),
    ("postgresql://u:SECRETF@127.0.0.1:abc/db", ["SECRETF"]),
    ("duckdb:///:memory:?motherduck_token=SECRETG", ["SECRETG"]),
    # Spark Connect: sqlanon probes the port first (sqlanon/engines/spark.py, CONNECT_PROBE_S);
    # pyspark's client, where installed, would retry an unreachable server for over ten minutes.
    ("sc://127.0.0.1:1/;token=SECRETH", ["SECRETH"]),
    ("sc://127.0.0.1:1/;user_id=ann;Token=SECRETI;use_ssl=true", ["SECRETI"]),
]


def _policy(tmp_path: Path, source: str = "main.t") -> Path:
    return write_policy(tmp_path, {"source": source, "columns": {"a": "quasi"}, "privacy": {"k": 2}})


def _no_secret(secrets: list[str], *texts: str) -> None:
    for text in texts:
        for s in secrets:
            assert s not in text and s.lower() not in text.lower(), text


@pytest.mark.parametrize(("url", "secrets"), UNREACHABLE)
def test_connect_failures_hide_url_secrets(tmp_path: Path, url: str, secrets: list[str]) -> None:
    pol = _policy(tmp_path)
    for args in (
        ("assess", str(pol), "--db", url, "--json"),
        ("anonymise", str(pol), "--db", url, "--dry-run"),
        ("init", "--db", url, "--table", "main.t"),
    ):
        start = time.monotonic()
        code, out, err = cli(*args)
        assert code == 2 and out == "", (args, out, err)
        assert err.startswith("error: ") and err.count("\n") == 1, err
        _no_secret(secrets, out, err)
        assert time.monotonic() - start < 30, (args, err)  # a refused port is not retried


def test_spark_connect_error_hides_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Spark (Connect) failure whose message quotes the URL, as py4j and gRPC errors do."""
    sql = pytest.importorskip("pyspark.sql")
    url = "sc://127.0.0.1:1/;user_id=ann;token=SECRETM"

    def fail(*_: object, **__: object) -> None:
        raise RuntimeError(
            f"An error occurred while calling o1.x.\n: SparkConnectException: {url} unreachable"
        )

    monkeypatch.setattr(sql.SparkSession.Builder, "getOrCreate", fail)
    # The port answers (sqlanon's probe passes): the failure is pyspark's, quoting the URL.
    monkeypatch.setattr(spark_engine, "_probe_connect", lambda *_: None)
    code, out, err = cli("assess", str(_policy(tmp_path)), "--db", url, "--json")
    assert code == 2 and out == "", err
    _no_secret(["SECRETM"], err)
    assert "unreachable" in err and "token=***" in err


def test_duckdb_file_with_token(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    code, out, err = cli("init", "--db", f"duckdb:///{path}?motherduck_token=SECRETJ", "--table", "main.t")
    assert code == 2 and out == ""
    _no_secret(["SECRETJ"], err)
    assert "motherduck_token=***" in err  # the parameter is named, its value hidden


def test_host_is_still_shown() -> None:
    """Hiding the secret keeps what helps the user: the host, port and other parameters."""
    code, _, err = cli("init", "--db", "postgresql://u:pa ss@127.0.0.1:1/db?sslmode=disable", "--table", "t")
    assert code == 2
    assert "'postgresql://u:***@127.0.0.1:1/db?sslmode=disable'" in err


def test_reachable_postgres_hides_secrets_in_json_and_errors(pg_patients: TestDB, tmp_path: Path) -> None:
    """A server that ignores the password (trust authentication) still must not have it printed:
    not in the JSON of a run that succeeds, nor in the error naming a missing relation."""
    base, _, query = pg_patients.url.partition("?")
    user_at = base.split("//", 1)[1].split("@", 1)[0]
    url = base.replace(f"//{user_at}@", f"//{user_at}:pa SECRETK@") + f"?{query}&sslpassword=SECRETL"
    ok = write_policy(
        tmp_path, {"source": "main.patients", "columns": {"Age": "quasi"}, "privacy": {"k": 1}}, "ok.yaml"
    )
    code, out, err = cli("assess", str(ok), "--db", url, "--json")
    assert code in (0, 1), err
    _no_secret(["SECRETK", "SECRETL"], out, err)
    code, out, err = cli("assess", str(_policy(tmp_path, "main.missing")), "--db", url)
    assert code == 2 and "not found" in err, err
    _no_secret(["SECRETK", "SECRETL"], out, err)
    assert "sslpassword=***" in err


@pytest.mark.parametrize(
    "text",
    [
        "could not connect: 'postgresql://u:p@Q7ZXW @h/db' refused",
        "psycopg: invalid dsn \"host=h password=Q7ZXW sslpassword='a Q7ZXW'\"",
        "Could not parse SQLAlchemy URL from string 'sc://h/;token=Q7ZXW'",
        "spark?spark.hadoop.fs.s3a.secret.key=Q7ZXW&spark.master=local",
        "x%3Fmotherduck_token%3DQ7ZXW",
    ],
)
def test_redact_in_messages(text: str) -> None:
    _no_secret(["Q7ZXW"], redact(text))


def test_redact_is_idempotent() -> None:
    once = redact("postgresql://u:pa ss@h:5/db?sslpassword=x&a=1")
    assert redact(once) == once == "postgresql://u:***@h:5/db?a=1&sslpassword=***"  # SQLAlchemy sorts


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pa\u2028Q7ZXW@h/db",
        "postgresql://u:pa\nQ7ZXW@h/db",
        "postgresql://u@x:Q7ZXW@h/db",
        "postgresql://u:p/Q7ZXW?@h/db",
        "postgresql://u@h/db?ssl%6Bey=Q7ZXW&options=-c%20a%3Db",
    ],
)
def test_redact_whole_urls(url: str) -> None:
    _no_secret(["Q7ZXW"], redact(url))


def test_redact_is_linear_on_hostile_text() -> None:
    """A message may quote a long hostile name: no backtracking blow-up."""
    start = time.perf_counter()
    for text in ("a://b:" * 20000, "%26" * 40000, "a." * 60000, "sc://h/;" * 20000 + "@"):
        redact(text)
    assert time.perf_counter() - start < 5
