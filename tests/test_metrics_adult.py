"""Metrics on Adult (30,162 rows, ARX hierarchies), DuckDB and PostgreSQL.

* k = 5 at 0 % suppression, nine quasi-identifiers: the optimum by precision and by height over
  every satisfying node (Incognito finds them all) lies among the minimal nodes, and ``choose``
  picks it; the SQL metrics of the chosen node match the brute-force reference on all rows.
* A node with suppression and a sensitive attribute: every metric against the reference.
"""

from __future__ import annotations

import csv
from functools import cache

import pytest

from sqlanon.engines import session
from sqlanon.lattice import Evaluator, prepare, run_search
from sqlanon.metrics import choose, compute, monotone
from sqlanon.policy import parse_policy
from tests import reference as ref
from tests.conftest import ADULT_COLUMNS, ADULT_DIR, read_adult
from tests.test_metrics import Model, assert_metrics


@cache
def adult_rows() -> tuple[dict, ...]:
    return tuple(read_adult())


@cache
def arx(col: str) -> tuple[dict, int]:
    """value -> [label at level 1, 2, ...] and the height (the top level is '*')."""
    with (ADULT_DIR / f"adult_hierarchy_{col}.csv").open(encoding="utf-8-sig") as f:
        rows = [[c.strip() for c in r] for r in csv.reader(f, delimiter=";") if r]
    table = {(int(r[0]) if col == "age" else r[0]): r[1:] for r in rows}
    return table, len(rows[0]) - 1


def model(qis: list[str], k: int, rows: list[dict]) -> Model:
    labels = {}
    heights = {}
    for q in qis:
        table, h = arx(q)
        labels[q] = [{v: lab[lvl] for v, lab in table.items()} for lvl in range(h - 1)]
        heights[q] = h
    return Model(rows, qis, labels, heights, ["age"] if "age" in qis else [], k)


def policy(qis: list[str], k: int, suppression: float, sensitive: str | None, label: str):
    cols: dict = {
        q: {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{q}.csv")}} for q in qis
    }
    if sensitive:
        cols[sensitive] = "sensitive"
    if label not in cols:
        cols[label] = "insensitive"
    return parse_policy(
        {
            "source": "main.adult",
            "label": label,
            "columns": cols,
            "privacy": {"k": k, "suppression": suppression},
        }
    )


@pytest.fixture(scope="module")
def adult(mdb):  # noqa: ANN001
    types = ["VARCHAR", "INTEGER"] + ["VARCHAR"] * 7
    mdb.load("adult", ADULT_COLUMNS, [[r[c] for c in ADULT_COLUMNS] for r in adult_rows()], types)
    return mdb


def test_optimum_by_precision_and_height_is_a_minimal_node(adult):  # noqa: ANN001
    pol = policy(ADULT_COLUMNS, 5, 0.0, None, "salary-class")
    with session(adult.url) as be:
        plan = prepare(be, pol)
        result = run_search(plan, "incognito")
        heights = dict(zip(plan.qi_names, plan.heights, strict=True))
        sat = sorted(result.satisfying)
        assert len(sat) > len(result.minimal) > 1
        for metric, brute, higher in (
            ("precision", lambda lv: ref.precision(lv, heights), True),
            ("height", ref.absdist, False),
        ):
            assert monotone(plan, metric)
            # Brute force over EVERY satisfying node (none suppresses a record at 0 %): the best
            # value is reached at a minimal node, and choose() returns such a node.
            vals = {n: brute(dict(zip(plan.qi_names, n, strict=True))) for n in sat}
            best = (max if higher else min)(vals.values())
            optima = {n for n, v in vals.items() if v == pytest.approx(best, abs=1e-12)}
            assert optima & set(result.minimal), f"{metric}: no optimum among the minimal nodes"
            node, chosen = choose(plan, result, metric)
            assert node in result.minimal and node in optima
            assert chosen["value"] == pytest.approx(best)
        # Every metric of the precision optimum, in SQL, against the reference on all rows.
        node, _ = choose(plan, result, "precision")
        got = compute(plan, [node], None, result.results)[node]
    want = model(ADULT_COLUMNS, 5, list(adult_rows())).metrics(
        node, label="salary-class", sensitive=[], s_numeric={}, weights={}
    )
    assert_metrics(got, want, f"Adult node {node}")


def test_node_with_suppression_and_a_sensitive_attribute(adult):  # noqa: ANN001
    qis = ["sex", "age", "race", "marital-status", "education"]
    pol = policy(qis, 10, 0.2, "occupation", "salary-class")
    node = (0, 2, 0, 1, 1)
    with session(adult.url) as be:
        plan = prepare(be, pol)
        res = Evaluator(plan).evaluate([node])[node]
        assert 0 < res.bad_records <= plan.allowed
        got = compute(plan, [node], None, {node: res})[node]
    want = model(qis, 10, list(adult_rows())).metrics(
        node, label="salary-class", sensitive=["occupation"], s_numeric={"occupation": False}, weights={}
    )
    assert_metrics(got, want, f"Adult node {node}")
