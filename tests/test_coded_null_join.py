"""Issue 33: on DuckDB (the DuckDB engine and the local walk's DuckDB) the coded table joins each
value to its dictionary row with IS NOT DISTINCT FROM, which DuckDB hash-joins, so NULL takes its
code from the join itself; before, every code column was a CASE with a scalar subquery for NULL
(templates/search/coded.sql.j2 ``null_safe``; the 1e6-row coding 183-188 -> 159-167 ms of CPU).
The codes are the dense ranks of the labels present, NULL last (DuckDB's ORDER BY), counted here by
hand from the rows below; PostgreSQL keeps the equality join (it cannot hash IS NOT DISTINCT FROM)."""

from __future__ import annotations

from sqlanon.engines import session
from sqlanon.lattice import prepare
from sqlanon.policy import parse_policy
from tests.conftest import TestDB

# zip, age
ROWS = [["47678", 29], ["47678", None], [None, 25], [None, None], ["47677", 31], ["47602", None]]
ZIP = {"47678": ["4767*"], "47677": ["4767*"], "47602": ["4760*"]}
AGE = {"25": ["[20-40)"], "29": ["[20-40)"], "31": ["[20-40)"]}


def test_null_is_coded_through_the_join(db: TestDB) -> None:
    db.load("t", ["zip", "age"], ROWS, types=["VARCHAR", "INTEGER"])
    pol = parse_policy(
        {
            "source": f"{db.schema}.t",
            "columns": {
                "zip": {"role": "quasi", "hierarchy": {"map": ZIP, "null": ["unknown"]}},
                "age": {"role": "quasi", "hierarchy": {"map": AGE, "null": ["unknown"]}},
            },
            "privacy": {"k": 2},
        }
    )
    with session(db.url) as be:
        plan = prepare(be, pol)
        made = [s for s in be.log if plan.coded.name in s and s.upper().startswith("CREATE")]
        cols = ", ".join(str(plan.code_alias[(j, lvl)]) for j in range(2) for lvl in range(2))
        rel = plan.coded.table().sql(be.dialect)
        got = sorted(tuple(r) for r in be._conn.exec_driver_sql(f"SELECT {cols}, cnt FROM {rel}").fetchall())
    assert len(made) == 1
    if db.kind == "duckdb":
        assert "IS NOT DISTINCT FROM" in made[0] and "IS NULL THEN (SELECT" not in made[0]
    else:
        assert "IS NOT DISTINCT FROM" not in made[0]
    # zip level 0: 47602 0, 47677 1, 47678 2, NULL 3; level 1: 4760* 0, 4767* 1, unknown 2.
    # age level 0: 25 0, 29 1, 31 2, NULL 3; level 1: [20-40) 0, unknown 1.
    want = [
        (2, 1, 1, 0, 1),
        (2, 1, 3, 1, 1),
        (3, 2, 0, 0, 1),
        (3, 2, 3, 1, 1),
        (1, 1, 2, 0, 1),
        (0, 0, 3, 1, 1),
    ]
    assert got == sorted(want)
