"""A second reading of tonight's Spark changes, on Spark (one test: a session costs ~20 s).

freq/base.spark.sql.j2 numbers the classes as the classes before the first QI's value plus the
rank within it; the expected cid is Spark's own DENSE_RANK over all QIs (the whole-table window it
replaced), NULLS LAST as the canonical dialect orders, over edge cases of the first QI: NULLs, one
value, a double's NaN and -0.0 beside 0.0, the only QI. And Mondrian's exact median of a
DECIMAL(38,20) cut on ranks (tests/test_exact_cuts_review.py), published as a view on Spark, gives
the reference's classes (the printed ``CAST(... AS DOUBLE)`` put every value on one side).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sqlanon.relation import Relation
from sqlanon.sql import compile as compile_mod
from sqlanon.sql.compile import ident
from tests.conftest import TestDB
from tests.helpers import cli, write_policy
from tests.test_mondrian import reference

NAN = float("nan")
#: (types of a, b; rows; QIs): each a table the cids are checked on.
CASES: list[tuple[list[str], list[tuple[Any, Any]], list[str]]] = [
    (
        ["INTEGER", "TEXT"],
        [(None, "x"), (None, None), (1, "y"), (1, "x"), (None, "x"), (2, None)],
        ["a", "b"],
    ),
    (["INTEGER", "TEXT"], [(7, "x"), (7, None), (7, "a"), (7, "x")], ["a", "b"]),
    (
        ["DOUBLE", "TEXT"],
        [(NAN, "x"), (-0.0, "y"), (0.0, "y"), (0.0, "x"), (NAN, None), (None, "z"), (-1.5, "x"), (NAN, "x")],
        ["a", "b"],
    ),
    (["DOUBLE", "TEXT"], [(NAN, "x"), (-0.0, "y"), (0.0, "z"), (None, "x"), (3.0, "x"), (3.0, "y")], ["a"]),
]


def _cids(db: TestDB, qis: list[str]) -> tuple[dict[tuple, int], dict[tuple, int]]:
    assert db._spark is not None
    ctx = {
        "source": Relation("t", db.schema),
        "q_exprs": [ident(q) for q in qis],
        "q_aliases": [ident(f"q_{i}") for i in range(len(qis))],
        "s_exprs": [],
        "s_aliases": [],
        "sid_aliases": [],
        "sort_keys": [],
        "group_exprs": [ident(q) for q in qis],
        "with_cid": True,
    }
    sql = compile_mod.to_sql("freq/base", "spark", **ctx)
    assert "PARTITION BY" in sql.upper()
    keys = [f"q_{i}" for i in range(len(qis))]
    got = {tuple(r[k] for k in keys): int(r["cid"]) for r in db._spark.spark.sql(sql).collect()}
    order = ", ".join(f"{q} ASC NULLS LAST" for q in qis)
    want_sql = f"SELECT {', '.join(qis)}, DENSE_RANK() OVER (ORDER BY {order}) AS cid FROM main.t"
    want = {tuple(r[q] for q in qis): int(r["cid"]) for r in db._spark.spark.sql(want_sql).collect()}
    return got, want


def _norm(d: dict[tuple, int]) -> dict[tuple, int]:
    """NaN keys made comparable (NaN != NaN in Python), -0.0 as 0.0 (one value to Spark's GROUP BY)."""
    return {tuple("nan" if v != v else (0.0 if v == 0 else v) for v in k): c for k, c in d.items()}


@pytest.mark.parametrize("db", [pytest.param("spark", marks=pytest.mark.spark)], indirect=True)
def test_spark_cids_and_an_exact_decimal_median(db: TestDB, tmp_path: Path) -> None:
    for types, rows, qis in CASES:
        db.load("t", ["a", "b"], rows, types)
        got, want = _cids(db, qis)
        assert _norm(got) == _norm(want), (types, qis)
    offsets = [1, 1, 2, 2, 3, 3, 4, 4, None, None]
    vals = [None if o is None else Decimal(1) + o * Decimal("1e-20") for o in offsets]
    db.load("ex", ["id", "a"], [[i, v] for i, v in enumerate(vals)], ["BIGINT", "decimal(38,20)"])
    pol = {
        "source": "main.ex",
        "target": "main.ex_m",
        "columns": {"id": "insensitive", "a": "quasi"},
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian"},
    }
    code, _out, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--as", "view")
    assert code == 0, err
    groups: dict[str, list[int]] = {}
    for i, label in db.sql("SELECT id, a FROM main.ex_m"):
        groups.setdefault(str(label), []).append(int(i))
    expected = reference([{"id": i, "a": o} for i, o in enumerate(offsets)], ["a"], [True], 2)
    assert sorted(sorted(g) for g in groups.values()) == sorted(sorted(p) for p in expected)
