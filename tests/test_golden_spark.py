"""Every Spark golden parsed by a second, independent Spark SQL grammar: sqlfluff's ``sparksql``
dialect (tests/test_golden.py re-parses the goldens with sqlglot, which wrote them). Spark itself
runs these statements in tests/test_spark.py; this check also covers machines without Java, and
the statements the Spark tests do not reach with the golden's contexts. sqlfluff is in the test
extra; where CI=true it must be importable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_golden_tsql import _sqlfluff

GOLDEN = Path(__file__).resolve().parent / "golden"
FILES = sorted(GOLDEN.glob("*.spark.sql"))


def test_there_are_spark_goldens() -> None:
    assert len(FILES) >= 50


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_spark_golden_parses_with_sqlfluff(path: Path) -> None:
    sqlfluff = _sqlfluff()
    from sqlfluff.api.simple import APIParsingError

    try:
        sqlfluff.parse(path.read_text(encoding="utf-8"), dialect="sparksql")
    except APIParsingError as e:  # pragma: no cover - the failure message
        pytest.fail(f"{path.name}: sqlfluff's sparksql dialect cannot parse it: {str(e)[:500]}")


def test_sqlfluff_rejects_what_spark_rejects() -> None:
    """The check can fail: T-SQL's TOP is not Spark SQL."""
    sqlfluff = _sqlfluff()
    from sqlfluff.api.simple import APIParsingError

    with pytest.raises(APIParsingError):
        sqlfluff.parse("SELECT TOP 5 cid FROM t", dialect="sparksql")
