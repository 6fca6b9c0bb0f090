"""A statement that reads a secret pad fails where the pad is missing, on every engine.

Found by reading the documentation as a new user would: ``sqlanon secret-pads`` with only
SQLANON_HASH_KEY set binds the perturbation's pads as NULL. Printed SQL run by hand then did not
fail: every HMAC was NULL, ``LEAST(u, 1 - 2^-53)`` skipped the NULL, and each record's noise became
one constant shift (Laplace noise of scale 300 added the same number to every income), which a
reader undoes by subtracting it. The expected behaviour comes from the rule, not the code: no
release without its key's randomness.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from sqlanon.sql.secrets import COLUMNS, NAME, pad_expr, pads
from tests.conftest import TEST_HASH_KEY, TestDB
from tests.test_secrets import run_printed_in_psql


def test_printed_sql_with_the_perturbation_pads_unbound_fails_in_psql(
    pg_patients: TestDB, tmp_path: Path
) -> None:
    """The README's psql recipe, with only the hash key set when the pads are bound: the printed
    release must stop with an error naming the missing pad, and create nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQLANON_PERTURB_KEY")}
    env["SQLANON_HASH_KEY"] = TEST_HASH_KEY
    db = pg_patients
    _out, res = run_printed_in_psql(db, tmp_path, "main.by_hand_nokey", env)
    missing = re.search(r"sqlanon_secret\.perturb_[io]pad is not set", res.stderr)
    assert res.returncode != 0 and missing, res.stderr
    assert not db.sql("SELECT 1 FROM information_schema.tables WHERE table_name = 'by_hand_nokey'"), (
        "the release was created"
    )


def _run(db: TestDB, statements: list[str]) -> list[tuple]:
    """``statements`` in one session (the secret relation is session-temporary); the last one's rows."""
    if db.kind == "duckdb":
        import duckdb

        con = duckdb.connect(str(db._duck_path))
        try:
            for s in statements[:-1]:
                con.execute(s)
            return con.execute(statements[-1]).fetchall()
        finally:
            con.close()
    import psycopg

    assert db._pg is not None
    with psycopg.connect(db._pg.conninfo(db._dbname or "postgres"), autocommit=True) as con:
        for s in statements[:-1]:
            con.execute(s)
        return con.execute(statements[-1]).fetchall()


@pytest.mark.parametrize("state", ["null", "empty", "bound"])
def test_a_pad_reads_its_value_or_fails(db: TestDB, state: str) -> None:
    """The pad expression on the engine itself: the value where bound; an error naming the pad
    where it is NULL or the relation has no row (a NULL would make every HMAC NULL)."""
    i, o = pads(TEST_HASH_KEY.encode())
    row = {"null": [i, o, None, None], "empty": None, "bound": [i, o, i, o]}[state]
    cols = ", ".join(f"{c} TEXT" for c in COLUMNS.values())
    statements = [f"CREATE TEMP TABLE {NAME} ({cols})"]
    if row is not None:
        statements.append(
            f"INSERT INTO {NAME} VALUES ({', '.join('NULL' if v is None else repr(v) for v in row)})"
        )
    statements.append(f"SELECT {pad_expr('perturb', 'i', db.kind).sql(db.kind)}")
    if state == "bound":
        assert _run(db, statements) == [(i,)]
        return
    with pytest.raises(Exception, match=r"sqlanon_secret\.perturb_ipad is not set"):
        _run(db, statements)


@pytest.mark.spark
def test_a_pad_fails_on_spark_where_it_is_null(spark_session) -> None:  # noqa: ANN001
    if spark_session is None:
        pytest.skip("no Spark")
    spark = spark_session.spark if hasattr(spark_session, "spark") else spark_session
    spark.sql(
        f"CREATE OR REPLACE TEMP VIEW {NAME} AS SELECT 'ab' AS hash_ipad, 'cd' AS hash_opad, "
        "CAST(NULL AS STRING) AS perturb_ipad, CAST(NULL AS STRING) AS perturb_opad"
    )
    try:
        assert spark.sql(f"SELECT {pad_expr('hash', 'i', 'spark').sql('spark')}").collect()[0][0] == "ab"
        with pytest.raises(Exception, match=r"sqlanon_secret\.perturb_ipad is not set"):
            spark.sql(f"SELECT {pad_expr('perturb', 'i', 'spark').sql('spark')}").collect()
    finally:
        spark.catalog.dropTempView(NAME)
