"""A node given from Python as a mapping reaches the release intact, whatever its QI names hold.

``sqlanon.api`` used to join ``{QI: level}`` into the command line's ``QI=L,QI=L`` text, so a QI whose
name holds a comma was split in two and refused (or, worse, matched another QI's name).
"""

from __future__ import annotations

import duckdb
import pytest

from sqlanon import api
from sqlanon.errors import SqlanonError


def _policy(path: str) -> dict:
    return {
        "source": "main.people",
        "columns": {
            "age, years": {"role": "quasi", "hierarchy": {"interval": {"widths": [10, 20], "start": 0}}},
            "city": {"role": "quasi"},
            "pay": {"role": "insensitive"},
        },
        "privacy": {"k": 2},
    }


@pytest.fixture
def people(tmp_path):
    path = tmp_path / "p.duckdb"
    con = duckdb.connect(str(path))
    con.execute('CREATE TABLE people ("age, years" INTEGER, city TEXT, pay INTEGER)')
    con.execute("INSERT INTO people VALUES (31, 'A', 1), (35, 'A', 2), (44, 'B', 3), (47, 'B', 4)")
    con.close()
    return f"duckdb:///{path}"


def test_mapping_with_a_comma_in_a_qi_name(people: str) -> None:
    sql = api.compile(_policy(people), "duckdb", levels={"age, years": 1}, db=people)
    # Level 1 of widths [10, 20] from 0 is the decade (docs/policy.md: `[20-30)` labels).
    assert '"age, years"' in sql
    con = duckdb.connect(people.removeprefix("duckdb:///"))
    rows = sorted(con.execute(sql.split(" AS ", 1)[1]).fetchall())
    assert [r[0] for r in rows] == ["[30-40)", "[30-40)", "[40-50)", "[40-50)"]


def test_mapping_refuses_an_unknown_name_and_a_fraction(people: str) -> None:
    with pytest.raises(SqlanonError, match="does not name a quasi-identifier"):
        api.compile(_policy(people), "duckdb", levels={"age": 1}, db=people)
    with pytest.raises(SqlanonError, match="not a whole number"):
        api.compile(_policy(people), "duckdb", levels={"age, years": 1.5}, db=people)
