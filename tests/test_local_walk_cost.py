"""Issue 33: a cheaper lattice walk at 1e6 rows, the same nodes' figures.

Two changes, each held here against the code before it: each branch of a keyed class-size batch
groups its classes by its key alone (templates/search/_key_branch.sql.j2), not every branch's rows
by (branch, key) at once; and Flash keeps a failing node's rollup only where it is at least
:data:`~sqlanon.lattice.plan.KEEP_RATIO` (8) times smaller than its source. The figures of every
node stay those of the GROUPING SETS evaluation (templates/search/evaluate_sets.sql.j2, another
statement over the same coded table), from the coded table and from a kept rollup.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.lattice import algorithms, evaluator, prepare
from sqlanon.lattice.evaluator import Evaluator, Source
from sqlanon.policy import parse_policy
from sqlanon.relation import Relation
from sqlanon.sql.compile import Hole, Sql, to_sql
from tests.test_pg_walk import _load, _policy


def test_each_keyed_branch_groups_its_classes_by_its_key_alone() -> None:
    """One aggregation per branch (its key alone), then the checks per branch: before, one
    aggregation grouped every branch's rows by (branch, key)."""
    src = Relation("sqlanon_coded_x_1")
    branches = [
        {"gid": Hole(g), "terms": [{"code": Hole(c), "weight": Hole(1)}], "wide": False, "source": Hole(src)}
        for g, c in enumerate(["c_0_0", "c_1_0", "c_2_1"])
    ]
    sql = to_sql("search/evaluate_keys", "duckdb", branches=branches, any_check=Sql("c.n < 5"))
    assert sql.count("GROUP BY u.k") == 3 and "GROUP BY u.g, u.k" not in sql


def test_keyed_figures_are_the_grouping_sets_figures(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node of the lattice, from the coded table and from a kept rollup, evaluated by the
    keyed batches (DuckDB's) and by GROUPING SETS (PostgreSQL's): the same records, classes,
    violations, discernibility and smallest class."""
    _load(db)
    with session(db.url) as be:
        plan = prepare(be, parse_policy(_policy("database")))
        nodes = list(itertools.product(*(range(h + 1) for h in plan.heights)))
        got = {}
        for keyed in (True, False):
            monkeypatch.setattr(evaluator, "KEYED", frozenset({be.dialect} if keyed else ()))
            ev = Evaluator(plan, relaxed=True)
            ev.keep(tuple(1 if j == 0 else 0 for j in range(len(plan.heights))))
            assert len(ev.sources) == 2
            before = len(be.log)
            got[keyed] = ev.evaluate(nodes)
            assert any(("GROUP BY u.k" in s) == keyed for s in be.log[before:])
    assert got[True] == got[False] and len(nodes) == 80


def test_flash_keeps_only_rollups_several_times_smaller() -> None:
    """A failing node 3x smaller than its 300,000-row source is no longer kept (before: kept at
    2x); one 10x smaller still is."""
    kept: list[tuple] = []
    src = Source((0, 0), Relation("coded"), 300_000)
    ev = SimpleNamespace(
        plan=SimpleNamespace(be=SimpleNamespace(inline=False)),
        sources=[src],
        source_for=lambda node: src,
        keep=lambda node, classes: kept.append((node, classes)),
    )
    failed = [(1, 100_000, (1, 0)), (1, 30_000, (0, 1))]
    algorithms._keep_rollups(ev, failed, {}, (3, 3))  # type: ignore[arg-type]
    assert kept == [((0, 1), 30_000)]
