"""Issue 33 (task WC): the wildcard risk (ARX's RiskModelSampleWildcard, sqlanon/measure/wildcard.py)
computed by star pattern with hash joins, not by comparing each class with each wildcard class.

The old statement compared classes cell by cell (``a = b OR a = '*' OR ...``), which no engine can
hash: on PostgreSQL a nested loop over classes x wildcard classes, 5.8-7.3 s of a 1e5-row Mondrian
publish. Now a class meets each star pattern's classes through one equality on a key masked to
'*' where either pattern has it. The figures must stay those of the definition: they are checked
here against a brute-force reference written from it (every pair of classes compared cell by
cell, '*' matching anything, NULL matching NULL), on tables with several star patterns, NULLs
and values a plain concatenation of the cells would confuse; and the plan is checked with EXPLAIN
on PostgreSQL (a hash join, no nested loop), as tests/test_mondrian_publish.py does.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlanon import api
from sqlanon.engines import base
from tests.conftest import ENGINES_SPARK, TestDB

S = "*"
SIZE = 5  # ARX's size threshold for a records_at_risk risk of 0.2 (tests/test_wildcard.py)


def ref_figures(rows: list[tuple[Any, ...]]) -> dict[str, float]:
    """ARX's figures from the definition: a record matches every record that agrees with it on each
    cell where neither holds '*' (NULL agrees with NULL: one class, as GROUP BY makes it); records
    '*' in every QI are left out (ARX's outliers)."""
    classes = Counter(r for r in rows if any(c != S for c in r))
    if not classes:
        return dict.fromkeys(("average", "highest", "lowest", "records_at_risk"), 0.0)
    matched = {
        a: sum(m for b, m in classes.items() if all(x == y or S in (x, y) for x, y in zip(a, b, strict=True)))
        for a in classes
    }
    n = sum(classes.values())
    return {
        "average": sum(m / matched[a] for a, m in classes.items()) / n,
        "highest": 1 / min(matched.values()),
        "lowest": 1 / max(matched.values()),
        "records_at_risk": sum(m for a, m in classes.items() if matched[a] < SIZE) / n,
    }


def _assess(db: TestDB, cols: list[str], types: list[str], rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    db.load("w", cols, [list(r) for r in rows], types)
    pol = {
        "source": "main.w",
        "columns": {c: "quasi" for c in cols},
        "privacy": {"risk": {"records_at_risk": {"risk": 0.2, "share": 1.0}}},
    }
    return api.assess(pol, db.url).to_dict()["risk"]["wildcard"]


def check(got: dict[str, Any], rows: list[tuple[Any, ...]]) -> None:
    for key, v in ref_figures(rows).items():
        assert math.isclose(got[key], v, rel_tol=1e-12, abs_tol=1e-15), (key, got[key], v)
    assert got["wildcard_classes"] == len({r for r in rows if S in r})


# Four QIs, one of them an integer (never '*'); eight star patterns; NULL, 'NULL', '', '~' (the
# key's NULL mark, as a value), and ('ab', 'c') beside ('a', 'bc'): one key if cells were simply
# concatenated, so those two wildcard classes would wrongly match each other.
COLS = ["a", "b", "age", "d"]
TYPES = ["VARCHAR", "VARCHAR", "INTEGER", "VARCHAR"]
HAND: list[tuple[Any, ...]] = (
    [("x", "y", 30, "u")] * 3
    + [("x", "y", 30, None)] * 2
    + [("x", None, 30, "u"), ("x", None, 30, "u")]
    + [(S, "y", 30, "u"), (S, "y", 31, "u"), (S, None, 30, "u")]
    + [("x", S, 30, "u"), ("NULL", S, 30, "u"), (None, S, 30, "u")]
    + [(S, S, 30, "u"), (S, S, None, "u"), (S, S, 30, S)]
    + [("x", "y", 30, S), ("", "y", 30, S), ("~", "y", 30, S), (None, "y", 30, S)]
    + [(S, "y", 30, S), (S, "", None, S)]
    + [("ab", "c", 40, S), ("a", "bc", 40, S), ("ab", "c", 40, "v"), ("a", "bc", 40, "v")] * 2
    + [("NULL", "y", 30, "u"), ("", "y", 30, "u"), ("~", "y", 30, "u"), (None, None, None, None)]
    + [("x", "y", None, S), (S, S, 41, S), ("x", S, 30, S), (None, S, None, S)]
)


def test_reference_on_a_worked_pair() -> None:
    """The reference itself, on a table small enough to count by hand: ('M', '*') matches both
    ('M', '1') records and itself (3), each ('M', '1') matches itself twice and ('M', '*') (3),
    ('F', '2') only itself (1); ('*', '*') is left out."""
    rows = [("M", "1"), ("M", "1"), ("M", S), ("F", "2"), (S, S)]
    assert ref_figures(rows) == {
        "average": (1 / 3 + 1 / 3 + 1 / 3 + 1) / 4,
        "highest": 1.0,
        "lowest": 1 / 3,
        "records_at_risk": 1.0,
    }


@pytest.mark.parametrize("db", ENGINES_SPARK, indirect=True)
def test_hand_made_table_matches_reference(db: TestDB) -> None:
    """On every engine, Spark included (its ``||``, LENGTH and CAST to STRING build the key)."""
    assert len({tuple(int(c == S) for c in r) for r in HAND}) >= 8  # several star patterns
    check(_assess(db, COLS, TYPES, HAND), HAND)


CELLS = st.sampled_from(["a", "b", "ab", "", None, S, S])


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=st.lists(st.tuples(CELLS, CELLS, CELLS), min_size=1, max_size=30))
def test_random_tables_match_reference(db: TestDB, rows: list[tuple[Any, ...]]) -> None:
    check(_assess(db, ["p", "q", "r"], ["VARCHAR"] * 3, rows), rows)


def _big_table(n: int = 1000) -> list[tuple[Any, ...]]:
    """About a thousand classes over four QIs, each string cell '*' with probability 0.08 and NULL with
    0.03: a table on which PostgreSQL plans by cost, not by the size of a toy."""
    rng = random.Random(33)

    def cell(dom: int) -> str | None:
        u = rng.random()
        return S if u < 0.08 else None if u < 0.11 else f"v{rng.randrange(dom)}"

    return [(cell(6), cell(9), rng.randrange(20, 40), cell(5)) for _ in range(n)]


def test_plan_is_hash_joins(db: TestDB, monkeypatch: pytest.MonkeyPatch) -> None:
    """The statement's plan on PostgreSQL (EXPLAIN): hash joins, no nested loop (the cell-by-cell
    join was a Nested Loop with a join filter, whatever the table); the figures are the
    reference's on both engines."""
    rows = _big_table()
    statements: list[str] = []
    plans: list[str] = []
    make, run = base.Backend._sql, base.Backend._run

    def compiled(self: base.Backend, name: str, kind: str, context: dict[str, object]) -> str:
        sql = make(self, name, kind, context)
        if name == "assess/wildcard_risk":
            statements.append(sql)
        return sql

    def explained(self: base.Backend, sql: str) -> Any:
        if sql in statements and self.dialect == "postgres":
            from sqlalchemy import text

            res = self._conn.execute(text("EXPLAIN " + sql.replace(":", r"\:"))).fetchall()
            plans.append("\n".join(r[0] for r in res))
        return run(self, sql)

    monkeypatch.setattr(base.Backend, "_sql", compiled)
    monkeypatch.setattr(base.Backend, "_run", explained)
    got = _assess(db, COLS, TYPES, rows)
    check(got, rows)
    assert len(statements) == 1 and got["wildcard_classes"] > 150
    if db.kind == "postgres":
        (plan,) = plans
        assert "Hash Join" in plan and "Nested Loop" not in plan, plan
        assert not re.search(r"Join Filter", plan), plan


def test_golden_with_star_patterns() -> None:
    """The statement with its joins, per dialect (tests/test_golden.py records the first assess's
    context, a table without '*', where the joins are left out), in goldens that
    tests/test_golden_tsql.py and tests/test_golden_spark.py also parse with sqlfluff."""
    import sqlglot

    from sqlanon.relation import Relation
    from sqlanon.sql.base import ident
    from sqlanon.sql.compile import to_sql
    from tests.test_golden import DIALECTS, check_golden

    ctx = {
        "classes": Relation("sqlanon_cls_00000000_1"),
        "q_aliases": [ident(f"q_{i}") for i in range(3)],
        "wildcard": S,
        "patterns": ["000", "001", "110"],
        "star_patterns": ["001", "110"],
        "size_threshold": SIZE,
    }
    for dialect in DIALECTS:
        sql = to_sql("assess/wildcard_risk", dialect, **ctx)
        assert " JOIN " in sql and " OR " not in sql, sql  # equality joins only
        check_golden(f"assess__wildcard_risk--patterns.{dialect}.sql", sql)
        sqlglot.parse(sql, read=dialect)
