"""Every T-SQL golden parsed by a second, independent T-SQL grammar: sqlfluff's tsql dialect
(tests/test_golden.py already re-parses them with sqlglot, which wrote them, so a construct sqlglot
generates but SQL Server rejects would pass there). It found ``AS top`` (TOP is reserved in T-SQL)
in the classification metric's SQL. No SQL Server runs here: this and the goldens are what the
README claims for T-SQL. sqlfluff is in the test extra; where CI=true it must be importable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
FILES = sorted(GOLDEN.glob("*.tsql.sql"))


def _sqlfluff():  # noqa: ANN202
    try:
        import sqlfluff
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("sqlfluff is missing (pip install -e '.[test]')")
        pytest.skip("sqlfluff is not installed on this machine: T-SQL goldens not grammar-checked")
    return sqlfluff


def test_there_are_tsql_goldens() -> None:
    assert len(FILES) >= 50


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_tsql_golden_parses_with_sqlfluff(path: Path) -> None:
    sqlfluff = _sqlfluff()
    from sqlfluff.api.simple import APIParsingError

    try:
        sqlfluff.parse(path.read_text(encoding="utf-8"), dialect="tsql")
    except APIParsingError as e:  # pragma: no cover - the failure message
        pytest.fail(f"{path.name}: sqlfluff's tsql dialect cannot parse it: {str(e)[:500]}")


def test_sqlfluff_rejects_a_reserved_word_alias() -> None:
    """The check can fail: the construct it caught is refused."""
    sqlfluff = _sqlfluff()
    from sqlfluff.api.simple import APIParsingError

    with pytest.raises(APIParsingError):
        sqlfluff.parse("SELECT cid, MAX(c) AS top FROM t GROUP BY cid", dialect="tsql")
