"""The local walk's DuckDB holds copies of personal data, so a statement that fails there says which
statement failed and DuckDB's exception class, never DuckDB's message: DuckDB casts text implicitly
where PostgreSQL refuses, and its conversion errors quote the value (``Could not convert string
'cold' to INT32``). A reviewer's finding (issue 33's local path): a numeric ``order`` on a text
sensitive attribute failed with that message on ``search.where: local`` (that policy is now refused
before any statement, tests/test_order_types.py), and the chained exception carried it to an API
user's traceback. Here DuckDB's error is raised where the local measurement runs its statements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

import sqlanon
from sqlanon.lattice import localdb
from sqlanon.policy import parse_policy
from tests.conftest import TestDB
from tests.helpers import cli, write_policy

VALUES = ["flu", "cold", "cancer"]


def _policy() -> dict:
    return {
        "source": "main.people",
        "columns": {"age": "quasi", "diag": "sensitive"},
        "privacy": {"k": 2, "l": {"diag": 2}},
        "search": {"where": "local"},
    }


def test_a_local_statement_error_quotes_no_value(
    pg_patients: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = pg_patients
    db.load(
        "people", ["age", "diag"], [[20 + i % 5, VALUES[i % 3]] for i in range(60)], ["INTEGER", "VARCHAR"]
    )
    real = localdb.LocalBackend._run

    def failing(self: Any, sql: str) -> Any:
        if "sqlanon_cls" in sql or "CREATE" in sql.upper():
            raise duckdb.ConversionException("Conversion Error: Could not convert string 'cold' to INT32")
        return real(self, sql)

    monkeypatch.setattr(localdb.LocalBackend, "_run", failing)
    code, out, err = cli("assess", str(write_policy(tmp_path, _policy())), "--db", db.url)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "local walk's DuckDB" in lines[0], err
    assert "ConversionException" in lines[0] and not any(v in out + err for v in VALUES), err
    with pytest.raises(sqlanon.SqlanonError) as caught:
        sqlanon.assess(parse_policy(_policy()), db.url)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
