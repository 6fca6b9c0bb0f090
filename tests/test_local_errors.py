"""The local walk's DuckDB holds copies of personal data, so a statement that fails there says which
statement failed, never DuckDB's message: DuckDB casts text implicitly where PostgreSQL refuses,
and its conversion errors quote the value (``Could not convert string 'cold' to INT32``). A
reviewer's finding (issue 33's local path): a sensitive attribute ordered by numbers while its
values are text failed with that message on ``search.where: local``, and the chained exception
carried it to an API user's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

import sqlanon
from sqlanon.engines import session
from sqlanon.measure.assessment import assess
from sqlanon.policy import parse_policy
from tests.conftest import TestDB
from tests.helpers import cli, write_policy

VALUES = ["flu", "cold", "cancer"]


def _policy(where: str) -> dict:
    return {
        "source": "main.people",
        "columns": {"age": "quasi", "diag": {"role": "sensitive", "order": [1, 2, 3]}},
        "privacy": {"k": 2, "t": {"diag": {"measure": "emd-ordered", "t": 0.9}}},
        "search": {"where": where},
    }


def test_a_local_statement_error_quotes_no_value(pg_patients: TestDB, tmp_path: Path) -> None:
    db = pg_patients
    db.load(
        "people", ["age", "diag"], [[20 + i % 5, VALUES[i % 3]] for i in range(60)], ["INTEGER", "VARCHAR"]
    )
    code, out, err = cli("assess", str(write_policy(tmp_path, _policy("local"))), "--db", db.url)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "local walk's DuckDB" in lines[0], err
    assert not any(v in out + err for v in VALUES), err
    pol = parse_policy(_policy("local"))
    with session(db.url) as be, pytest.raises(sqlanon.SqlanonError) as caught:
        assess(be, pol)
    chained = [
        caught.value.__cause__,
        caught.value.__context__ if not caught.value.__suppress_context__ else None,
    ]
    assert not any(v in repr(c) for c in chained if c is not None for v in VALUES)
