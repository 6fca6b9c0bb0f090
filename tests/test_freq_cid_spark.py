"""Issue 33's leftover: Spark's assessment with ranks on (``search.where: database``) numbered the
classes with ``DENSE_RANK() OVER (ORDER BY q_0, ..., q_n)``, a window without PARTITION BY over the
whole grouped table, which Spark runs in one task. templates/freq/base.spark.sql.j2 now gives the
same cid as the classes before the first QI's value (a window over its distinct values) plus the
rank within that value (a window partitioned by it), as it ranks the sensitive attributes over
their distinct values (tests/test_sensitive_ranks.py).

The expected cids are the dense rank of the QI tuples in their order, NULL last (the canonical
dialect's order), computed here in Python; the figures are DuckDB's, whose statement keeps the
window."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

import sqlanon
from sqlanon.relation import Relation
from sqlanon.sql import compile as compile_mod
from sqlanon.sql.compile import ident
from tests.conftest import TestDB, _make_db
from tests.helpers import same
from tests.test_golden import check_golden
from tests.test_local_measure import POLICIES
from tests.test_publish_verify import COLUMNS, TYPES, _rows

#: (a, b, d): two QIs with NULLs (in the first too, and ties), one sensitive attribute.
ROWS = [
    (1, "x", "flu"),
    (1, None, "flu"),
    (1, "y", "cancer"),
    (None, "x", "flu"),
    (None, "x", "heart"),
    (2, "y", None),
    (2, "y", "flu"),
    (None, None, "cancer"),
    (3, "a", "flu"),
]


def _key(v: Any) -> tuple[int, Any]:
    return (1, 0) if v is None else (0, v)


#: By hand from the definition: the distinct (a, b) in order, NULL last, numbered from 1.
CID = {
    t: i + 1 for i, t in enumerate(sorted({(a, b) for a, b, _ in ROWS}, key=lambda t: tuple(map(_key, t))))
}


def _ctx(schema: str) -> dict[str, Any]:
    return {
        "source": Relation("ranked", schema),
        "q_exprs": [ident("a"), ident("b")],
        "q_aliases": [ident("q_0"), ident("q_1")],
        "s_exprs": [ident("d")],
        "s_aliases": [ident("s_0")],
        "sid_aliases": [ident("sid_0")],
        "sort_keys": [ident("s_0")],
        "group_exprs": [ident("a"), ident("b"), ident("d")],
        "with_cid": True,
    }


def _assess_statement(db: TestDB) -> str:
    """Spark's statement of the base frequency table of an assessment in the warehouse: the
    context the assessment builds it from, recorded on DuckDB, compiled as Spark compiles it."""
    from sqlanon.engines.base import Backend

    db.load("people", COLUMNS, _rows(120, 5), TYPES)
    seen: list[dict[str, Any]] = []
    real = Backend.create_temp

    def spy(self: Backend, stem: str, template: str, **ctx: Any) -> Relation:
        if template == "freq/base":
            seen.append(ctx)
        return real(self, stem, template, **ctx)

    pol = {"source": "main.people", **POLICIES["l_t_risks"], "search": {"where": "database"}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Backend, "create_temp", spy)
        sqlanon.assess(pol, db.url)
    ctx = next(c for c in seen if c.get("with_cid", True) and c.get("ranks", True))
    return compile_mod.to_sql("freq/base", "spark", **ctx)


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
def test_spark_assess_numbers_classes_without_a_window_over_the_grouped_rows(db: TestDB) -> None:
    sql = _assess_statement(db)
    tree = sqlglot.parse_one(sql, read="spark")
    whole = [w for w in tree.find_all(exp.Window) if not w.args.get("partition_by")]
    assert any(w.this.key == "denserank" for w in tree.find_all(exp.Window) if w.args.get("partition_by"))
    for w in whole:  # each over one attribute's distinct values (DISTINCT, or grouped by it)
        source = w.find_ancestor(exp.Select).args["from_"].this
        assert isinstance(source, exp.Subquery), w.sql("spark")
        inner = source.this
        assert inner.args.get("distinct") or len(inner.args["group"].expressions) == 1, w.sql("spark")
    check_golden("freq__base--assess.spark.sql", sql)


#: dbt tests whose Spark macros build freq/base's Spark form (sqlanon/dbt/macros.py): (macro, args).
DBT_TESTS = [
    ("test_sqlanon_l_diversity", ("disease", 3, "distinct", None, None)),
    ("test_sqlanon_t_closeness", ("disease", 0.2, "emd-equal", None, None, None)),
    ("test_sqlanon_beta_likeness", ("disease", 1.0, "basic", None)),
]


def _dbt_failures(db: TestDB, adapter: str) -> list[int]:
    """The rows each dbt test of DBT_TESTS returns on ``db`` (the failing classes), its macro for
    ``adapter`` rendered by Jinja with dbt's dispatch (tests/test_dbt_grassberger.py's harness) and
    the package's own macros (quoting, the order key)."""
    import jinja2

    from sqlanon.dbt import macros

    env = jinja2.Environment()
    own = (macros.package_dir() / "macros" / "sqlanon.sql").read_text(encoding="utf-8")
    own = re.sub(r"\{% test .*?\{% endtest %\}", "", own, flags=re.S)  # dbt's own tag: the macros only
    text = own + macros.generate()
    module: Any = None

    def dispatch(name: str, _namespace: str) -> Any:
        return getattr(module, f"{adapter}__{name}", None) or getattr(module, f"default__{name}")

    env.globals["adapter"] = type("Adapter", (), {"dispatch": staticmethod(dispatch)})()
    module = env.from_string(text).module
    model = "main.people"
    sqls = [str(dispatch(m, "sqlanon")(model, ["age", "zip"], *args)) for m, args in DBT_TESTS]
    if db._spark is not None:  # the macro's Spark SQL as it is (TestDB.sql reads the canonical dialect)
        return [len(db._spark.spark.sql(sql).collect()) for sql in sqls]
    return [len(db.sql(sql)) for sql in sqls]


@pytest.mark.spark
def test_spark_cids_and_figures(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """On Spark: the cids are the dense rank of the QI tuples (NULL last, ties one class), an
    assessment in the warehouse gives DuckDB's figures, and the dbt package's Spark macros (the
    sensitive ranks over distinct values, the reference's grouped rows a CTE of their own) fail
    the classes DuckDB's fail."""
    spark_gen = _make_db("spark", request, tmp_path / "s")
    spark = next(spark_gen)
    duck_gen = _make_db("duckdb", request, tmp_path)
    duck = next(duck_gen)
    try:
        spark.load("ranked", ["a", "b", "d"], ROWS, ["INTEGER", "TEXT", "TEXT"])
        assert spark._spark is not None
        sql = compile_mod.to_sql("freq/base", "spark", **_ctx(spark.schema))
        assert "PARTITION BY" in sql.upper()
        got = Counter((r["q_0"], r["q_1"], r["cid"]) for r in spark._spark.spark.sql(sql).collect())
        want = {(a, b, CID[(a, b)]) for a, b, _ in ROWS}
        assert set(got) == want
        results = []
        for db in (duck, spark):
            db.load("people", COLUMNS, _rows(120, 5), TYPES)
            pol = {"source": "main.people", **POLICIES["l_t_risks"], "search": {"where": "database"}}
            results.append(sqlanon.assess(pol, db.url).to_dict())
        same(results[0], results[1])
        fails = [_dbt_failures(duck, "duckdb"), _dbt_failures(spark, "spark")]
        assert fails[0] == fails[1] and all(fails[0]), fails
    finally:
        for gen in (duck_gen, spark_gen):
            for _ in gen:
                pass


def test_dbt_spark_macros_rank_over_distinct_values() -> None:
    """The dbt package's Spark macros take freq/base's Spark form: the sensitive values ranked over
    their distinct values, the model's and the reference's grouped rows two CTEs of their own."""
    from sqlanon.dbt import macros

    text = macros.generate()
    for name in ("l_diversity", "t_closeness", "beta_likeness"):
        body = text.split(f"macro spark__test_sqlanon_{name}(")[1].split("{% endmacro %}")[0]
        assert "FROM sqlanon_grouped" in body and "SELECT DISTINCT" in body, name
    t = text.split("macro spark__test_sqlanon_t_closeness(")[1].split("{% endmacro %}")[0]
    assert "sqlanon_ref_grouped AS (" in t
    default = text.split("macro default__test_sqlanon_t_closeness(")[1].split("{% endmacro %}")[0]
    assert "sqlanon_grouped" not in default  # the other adapters' window, unchanged
