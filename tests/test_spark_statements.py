"""Issue 33: what the search costs on Spark, counted in Spark jobs (each costs Spark's fixed
overhead, ~0.3-1 s on the 2-core machine whatever its size), so that a regression shows.

The coded table (templates/search/coded.spark.sql.j2) joins each dictionary back with null-safe
equality: the generic template's scalar subquery per code column and per coverage bit (a NULL
value's code) was a Spark job each, 73 jobs for the benchmark's nine QIs. Expected codes are
counted by hand from the eight rows of tests/test_nulls.py (NULL in both quasi-identifiers).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.engines.spark import broadcasts_only
from sqlanon.lattice import prepare
from sqlanon.policy import parse_policy
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql, ident, to_sql
from tests.conftest import _make_db
from tests.test_golden import check_golden
from tests.test_nulls import ROWS, ZIP_MAP

#: The age hierarchy of tests/test_nulls.py, NULL in ARX's spelling.
AGE_CSV = "25;[20-40);*\n29;[20-40);*\n31;[20-40);*\n33;[20-40);*\n41;[40-60);*\nNULL;*;*\n"


def _context(flagged: bool) -> dict[str, Any]:
    """Two quasi-identifiers of two levels each, the first with a coverage predicate."""
    qis = [
        {
            "alias": ident(f"q_{j}"),
            "dict": ident(f"d_{j}"),
            "levels": [
                {"alias": ident(f"c_{j}_0"), "expr": Sql(f'"q_{j}"')},
                {"alias": ident(f"c_{j}_1"), "expr": Sql(f'SUBSTRING(CAST("q_{j}" AS VARCHAR), 1, 2)')},
            ],
            "pred": Sql(f'"q_{j}" IS NULL') if flagged and j == 0 else None,
            "bit": 1 if flagged and j == 0 else 0,
        }
        for j in range(2)
    ]
    return {
        "base": Relation("sqlanon_freq_0"),
        "qis": qis,
        "sid_aliases": [ident("sid_0")],
        "code_type": Sql("INTEGER"),
        "one_scan": False,
    }


@pytest.mark.parametrize("flagged", [False, True], ids=["plain", "flagged"])
def test_spark_coded_table_has_no_scalar_subquery(flagged: bool) -> None:
    """Spark's coded table reads a NULL's code in the join (<=>), never by a scalar subquery; its
    snapshot is parsed by sqlfluff's sparksql grammar in tests/test_golden_spark.py."""
    sql = to_sql("search/coded", "spark", kind="select", **_context(flagged))
    assert sql.count("(SELECT") == 4  # each dictionary and its DISTINCT values, nothing else
    assert sql.count("IS NOT DISTINCT FROM") == 2
    check_golden(f"search__coded--null_safe{'--flagged' if flagged else ''}.spark.sql", sql)
    # Every other engine keeps the generic template (a hash join on PostgreSQL needs plain =).
    assert "IS NOT DISTINCT FROM" not in to_sql("search/coded", "duckdb", kind="select", **_context(flagged))


@pytest.fixture(scope="module")
def sdb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    for db in _make_db("spark", request, tmp_path_factory.mktemp("spark")):
        db.load(
            "t", ["id", "zip", "age", "disease"], ROWS, types=["INTEGER", "VARCHAR", "INTEGER", "VARCHAR"]
        )
        yield db


def _jobs(spark: Any) -> int:
    """Spark jobs run so far in this application (the status tracker keeps the last 1,000)."""
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup())


@pytest.mark.spark
def test_spark_prepare_job_count_and_null_codes(sdb: Any, tmp_path: Path) -> None:
    (tmp_path / "age.csv").write_text(AGE_CSV, encoding="utf-8")
    pol = parse_policy(
        {
            "source": "main.t",
            "columns": {
                "id": {"role": "identifier"},
                "zip": {"role": "quasi", "hierarchy": {"map": ZIP_MAP, "null": ["unknown", "unknown"]}},
                "age": {"role": "quasi", "hierarchy": {"file": "age.csv"}},
                "disease": {"role": "sensitive"},
            },
            "privacy": {"k": 2},
        },
        base_dir=tmp_path,
    )
    spark = sdb._spark.spark
    # Adaptive execution on, as in Spark's defaults (the test session has it off): the coded table
    # turns it off (and takes one shuffle partition) for its own statement only, and puts the
    # session's values back.
    session_settings = {"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "3"}
    saved = {k: spark.conf.get(k) for k in session_settings}
    for k, v in session_settings.items():
        spark.conf.set(k, v)
    try:
        jobs, total, statements, codes = _prepare_counted(sdb, spark, pol)
        assert {k: spark.conf.get(k) for k in session_settings} == session_settings
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)
    # By hand (NULLS LAST): zip 47601 47602 47677 47678 NULL -> 0..4; age 25 29 31 33 41 NULL -> 0..5.
    zips: dict[int, int] = {}
    ages: dict[int, int] = {}
    for z, a, n in codes:
        zips[z] = zips.get(z, 0) + n
        ages[a] = ages.get(a, 0) + n
    assert zips == {0: 1, 1: 1, 2: 1, 3: 2, 4: 3}
    assert ages == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 3}
    # The coded table is one job plus a broadcast of each dictionary (2); the generic template's
    # four scalar subqueries (the two code columns of each QI, the NULL's coverage bit of each)
    # were a job each on top, and adaptive execution a job per shuffle stage.
    assert jobs["search/coded"] <= 3, jobs
    # The frequency table: 3 jobs under adaptive execution, and 2 more for the sensitive
    # attribute's ranks over its distinct values (their stage and its broadcast, joined back:
    # templates/freq/base.spark.sql.j2), which replace a window over the whole grouped table.
    assert jobs["freq/base"] <= 5, jobs
    # The whole preparation: the frequency table, its total, the coded table, its summary.
    assert total <= 12, (total, jobs)
    assert statements <= 8, statements


def _prepare_counted(sdb: Any, spark: Any, pol: Any) -> tuple[dict[str, int], int, int, list[tuple]]:
    """prepare's jobs by temporary table, its jobs and statements in all, the coded table's codes."""
    with session(sdb.url) as be:
        jobs: dict[str, int] = {}
        real = be.create_temp

        def counted(stem: str, template: str, **context: object) -> Relation:
            before = _jobs(spark)
            try:
                return real(stem, template, **context)
            finally:
                jobs[template] = _jobs(spark) - before

        be.create_temp = counted  # type: ignore[method-assign]
        before = _jobs(spark)
        plan = prepare(be, pol)
        total = _jobs(spark) - before
        statements = len(be.log)
        codes = be.query("search/rows", rel=plan.coded, cols=[ident("c_0_0"), ident("c_1_0"), ident("cnt")])
        # A dictionary that the static plan would not broadcast (a large source): the session's
        # own settings stay, for adaptive execution to choose the join at run time.
        sql = [s for s in be.log if "DENSE_RANK" in s][-1]
        assert broadcasts_only(spark.sql(sql))
        saved = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
        try:
            assert not broadcasts_only(spark.sql(sql))
        finally:
            spark.conf.set("spark.sql.autoBroadcastJoinThreshold", saved)
    return jobs, total, statements, codes
