"""The T-SQL goldens of the perturbation templates, parsed by a second, independent T-SQL parser
(sqlfluff's tsql dialect; tests/test_golden.py already re-parses every T-SQL golden with sqlglot,
which wrote it). sqlfluff is not a dependency: the test is skipped where it is not installed
(``pip install sqlfluff``; the parse takes about 5 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
FILES = sorted(GOLDEN.glob("*perturb*.tsql.sql"))


def test_there_are_perturbation_goldens() -> None:
    assert len(FILES) >= 7


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_perturbation_tsql_parses_with_sqlfluff(path: Path) -> None:
    sqlfluff = pytest.importorskip("sqlfluff")
    from sqlfluff.api.simple import APIParsingError

    try:
        sqlfluff.parse(path.read_text(encoding="utf-8"), dialect="tsql")
    except APIParsingError as e:  # pragma: no cover - the failure message
        pytest.fail(f"{path.name}: sqlfluff's tsql dialect cannot parse it: {str(e)[:500]}")
