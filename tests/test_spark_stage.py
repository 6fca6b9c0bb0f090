"""Issue 33: on Spark, as on PostgreSQL, the local walk codes the frequency table in the local
DuckDB (sqlanon/lattice/localdb.py ``stage_coded``): Spark builds the frequency table (one scan),
its values cross over Arrow, and DuckDB computes every hierarchy level's labels and codes. Spark
never builds the coded table unless one of its own statements reads it.

The expected results come from the warehouse itself: every node of the lattice evaluated on the
plan coded in Spark (``search.where: database``) must equal the same node on the staged plan,
evaluated in the local DuckDB, for ARX's hierarchy files and for intervals and masking (labels
computed by DuckDB's arithmetic and string functions instead of Spark's).
"""

from __future__ import annotations

from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.lattice import local, localdb, prepare
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.policy import parse_policy
from tests.test_pg_walk import FORMS, ROWS, _load, _node_results, _policy

pytestmark = pytest.mark.spark


def _pol(where: str, form: str) -> Any:
    out = _policy(where)
    for c, h in FORMS[form].items():
        out["columns"][c]["hierarchy"] = h
    return parse_policy(out)


@pytest.mark.parametrize("db", ["spark"], indirect=True)
@pytest.mark.parametrize("form", list(FORMS))
def test_spark_codes_the_frequency_table_locally(db: Any, monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)  # the test table is small
    with session(db.url) as be:
        plan = prepare(be, _pol("auto", form))
        made = [s for s in be.log if plan.coded.name in s]
        with local.local_plan(plan) as lp:
            assert lp.be.moved == plan.base_rows  # the frequency table's rows crossed, once
            here = _node_results(lp)
    assert made == []  # before: the coded table built in Spark, then its codes copied
    with session(db.url) as be:
        inside = prepare(be, _pol("database", form))
        assert any(inside.coded.name in s for s in be.log)
        there = _node_results(inside)
        assert (inside.card, inside.base_rows) == (plan.card, plan.base_rows)
    assert here == there


@pytest.mark.parametrize("db", ["spark"], indirect=True)
def test_spark_builds_the_staged_coded_table_when_read_there(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evaluation in the warehouse after a staged prepare (``--levels``) builds Spark's own
    coded table on first use, once, with the same results as the local copy."""
    _load(db)
    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)
    with session(db.url) as be:
        plan = prepare(be, _pol("auto", "files"))
        bottom, top = tuple(0 for _ in plan.heights), tuple(plan.heights)
        first = Evaluator(plan).evaluate([bottom, top])
        Evaluator(plan).evaluate([top])
        built = [s for s in be.log if plan.coded.name in s and "CREATE" in s.upper()]
        assert len(built) == 1 and not be.deferred
        with local.local_plan(plan) as lp:
            assert Evaluator(lp).evaluate([bottom, top]) == first
    assert first[top].rows == ROWS
