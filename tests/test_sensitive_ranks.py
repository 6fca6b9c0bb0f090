"""Issue 33: on Spark the base frequency table ranks each sensitive attribute over its distinct
values (templates/freq/base.spark.sql.j2, ``distinct_ranks``) instead of a DENSE_RANK window
without PARTITION BY over the whole grouped table, which Spark runs in one task. The ranks must
be the numbers today's window gives on every engine: NULL is a value of its own, ranked last
(ascending NULLS LAST, the canonical dialect's order, written out for Spark), ties share a rank,
an ordered attribute ranks by its ``order``. The expected ranks are written by hand below."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from sqlanon.engines import session
from sqlanon.lattice import prepare
from sqlanon.policy import parse_policy
from sqlanon.relation import Relation
from sqlanon.sql import compile as compile_mod
from sqlanon.sql.compile import Sql, ident
from tests.conftest import ENGINES_SPARK, TestDB
from tests.test_golden import check_golden
from tests.test_local_measure import POLICIES
from tests.test_publish_verify import COLUMNS, TYPES, _rows

#: (a, d, v): one QI, an ordered sensitive attribute d (flu < heart < cancer), an unordered one v;
#: NULLs in both, and values repeated across classes (ties).
ROWS = [
    (1, "cancer", 7),
    (1, "flu", None),
    (1, None, 5),
    (2, "flu", 7),
    (2, "heart", 7),
    (2, "heart", 7),
    (3, None, None),
    (3, "cancer", 5),
    (4, "flu", 9),
]
#: By hand: d by its order, NULL (no place in the order) last; v ascending, NULL last.
D_RANK = {"flu": 1, "heart": 2, "cancer": 3, None: 4}
V_RANK = {5: 1, 7: 2, 9: 3, None: 4}
ORDER = "CASE \"s_0\" WHEN 'flu' THEN 0 WHEN 'heart' THEN 1 WHEN 'cancer' THEN 2 END"


def _ctx(schema: str, **extra: object) -> dict[str, Any]:
    return {
        "source": Relation("ranked", schema),
        "q_exprs": [ident("a")],
        "q_aliases": [ident("q_0")],
        "s_exprs": [ident("d"), ident("v")],
        "s_aliases": [ident("s_0"), ident("s_1")],
        "sid_aliases": [ident("sid_0"), ident("sid_1")],
        "sort_keys": [Sql(ORDER), ident("s_1")],
        "group_exprs": [ident("a"), ident("d"), ident("v")],
        **extra,
    }


def _rows_of(db: TestDB, ctx: dict[str, Any], by_values: bool) -> list[tuple]:
    """The table's rows, ranked over the distinct values or (``by_values`` false) by the window.
    Spark always reads its sibling template (which ranks by values): its window statement is
    the canonical one as TestDB.sql transpiles it, sqlglot writing the NULLS LAST it implies."""
    if db.kind == "spark" and by_values:
        assert db._spark is not None
        rows = db._spark.spark.sql(compile_mod.to_sql("freq/base", "spark", **ctx)).collect()
    else:
        dialect = "duckdb" if db.kind == "spark" else db.kind
        rows = db.sql(compile_mod.to_sql("freq/base", dialect, **ctx, distinct_ranks=by_values))
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.mark.parametrize("db", ENGINES_SPARK, indirect=True)
def test_ranks_over_distinct_values_equal_the_window(db: TestDB) -> None:
    db.load("ranked", ["a", "d", "v"], ROWS, ["INTEGER", "TEXT", "INTEGER"])
    counts = Counter(ROWS)
    expected = sorted(((a, d, D_RANK[d], v, V_RANK[v], n) for (a, d, v), n in counts.items()), key=repr)
    for with_cid in (False, True):
        ctx = _ctx(db.schema, with_cid=with_cid)
        today, new = _rows_of(db, ctx, False), _rows_of(db, ctx, True)
        assert new == today
        got = sorted(((r[-6], *r[-5:]) for r in new), key=repr)
        assert got == expected


@pytest.mark.parametrize("db", ["duckdb", "postgres"], indirect=True)
def test_ranks_of_a_one_pass_table_count_the_classes_kept(db: TestDB) -> None:
    """With class_check the ranks are over the rows kept (classes 3 and 4, of fewer than 3
    records, go): v's 9 goes with class 4 and NULL ranks 3, as the window after the WHERE ranks it."""
    db.load("ranked", ["a", "d", "v"], ROWS, ["INTEGER", "TEXT", "INTEGER"])
    ctx = _ctx(db.schema, with_cid=False, class_check=Sql('g."n" < 3'), n_alias=ident("n"))
    today, new = _rows_of(db, ctx, False), _rows_of(db, ctx, True)
    assert new == today
    assert {(r[3], r[4]) for r in new} == {(5, 1), (7, 2), (None, 3)}


def _spark_base_statement(db: TestDB) -> str:
    """The Spark statement of a search's base frequency table: the context the search builds it
    from, recorded while it prepares on DuckDB, compiled as Spark's create_temp compiles it."""
    db.load("people", COLUMNS, _rows(120, 5), TYPES)
    seen: list[dict[str, Any]] = []
    policy = parse_policy({"source": "main.people", **POLICIES["l_t_risks"]})
    with session(db.url) as be:
        real = be.create_temp

        def spy(stem: str, template: str, **ctx: Any) -> Relation:
            if template == "freq/base":
                seen.append(ctx)
            return real(stem, template, **ctx)

        be.create_temp = spy  # type: ignore[method-assign]
        prepare(be, policy)
    assert seen and seen[0]["s_aliases"] and seen[0].get("with_cid") is False
    return compile_mod.to_sql("freq/base", "spark", **seen[0])


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
def test_a_spark_search_ranks_without_a_window_over_the_grouped_rows(db: TestDB) -> None:
    sql = _spark_base_statement(db)
    tree = sqlglot.parse_one(sql, read="spark")
    windows = [w for w in tree.find_all(exp.Window) if not w.args.get("partition_by")]
    assert windows  # the sensitive attribute is ranked
    for w in windows:  # each over a SELECT DISTINCT of one attribute's values
        source = w.find_ancestor(exp.Select).args["from_"].this
        assert isinstance(source, exp.Subquery) and source.this.args.get("distinct"), w.sql("spark")
    check_golden("freq__base--search.spark.sql", sql)
