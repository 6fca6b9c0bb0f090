"""A sensitive attribute's declared ``order`` must list values of the column's kind: numbers
ordering a text column (or words a numeric one) are named in one line, exit 2, before any statement
(before: PostgreSQL's "operator does not exist: text = integer" through the failed statement, and
on DuckDB a cast error of the first value; a reviewer's finding on the local path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TestDB
from tests.helpers import cli, write_policy

WORDS = ["flu", "cold", "cancer"]


def _policy(column: str, order: list) -> dict:
    return {
        "source": "main.people",
        "columns": {"age": "quasi", column: {"role": "sensitive", "order": order}},
        "privacy": {"k": 2, "t": {column: {"measure": "emd-ordered", "t": 0.9}}},
    }


@pytest.mark.parametrize(
    ("column", "order", "needle"),
    [
        ("diag", [1, 2, 3], "columns.diag.order: lists numbers (1, 2, 3) but diag is"),
        ("score", ["low", "high"], "columns.score.order: 'low' is not a number, but score is"),
    ],
)
def test_an_order_of_the_wrong_kind_is_one_line(
    db: TestDB, tmp_path: Path, column: str, order: list, needle: str
) -> None:
    rows = [[20 + i % 5, WORDS[i % 3], i % 3] for i in range(30)]
    db.load("people", ["age", "diag", "score"], rows, ["INTEGER", "VARCHAR", "INTEGER"])
    before = db.snapshot()
    code, out, err = cli("assess", str(write_policy(tmp_path, _policy(column, order))), "--db", db.url)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert db.snapshot() == before


def test_an_order_of_the_column_s_kind_measures(db: TestDB, tmp_path: Path) -> None:
    rows = [[20 + i % 5, WORDS[i % 3], i % 3] for i in range(30)]
    db.load("people", ["age", "diag", "score"], rows, ["INTEGER", "VARCHAR", "INTEGER"])
    for column, order in (("diag", ["cold", "flu", "cancer"]), ("score", [0, 1, "2"])):
        code, out, err = cli("assess", str(write_policy(tmp_path, _policy(column, order))), "--db", db.url)
        assert code in (0, 1), (column, err)
