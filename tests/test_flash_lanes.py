"""Issue 33: on DuckDB over a large coded table Flash walks one binary search at a time for its
first checks (sqlanon/lattice/algorithms.py ``ONE_LANE_ROWS``): there a node's check costs more
than a statement, and searches in step waste checks (the 1e6-row benchmark table without
suppression: 299 checks -> 214, a fifth less CPU). The optimum, the minimal nodes and every
checked node's figures are those of the walk in step; PostgreSQL keeps its searches in step.
The test table is small: the bound is lowered to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.lattice import algorithms, prepare
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.metrics.optimum import walk
from sqlanon.policy import parse_policy
from tests.conftest import ADULT_DIR
from tests.helpers import adult_db

ROWS = 3000
QIS = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
    "salary-class",
]


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def adb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from adult_db(request, tmp_path_factory, ROWS)


def _policy(suppression: float) -> Any:
    cols = {
        c: {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}} for c in QIS
    }
    return parse_policy(
        {
            "source": "main.adult",
            "columns": cols,
            "privacy": {"k": 5, "suppression": suppression},
            "search": {"algorithm": "flash", "metric": "precision", "where": "database"},
        }
    )


def _walk(url: str, suppression: float, monkeypatch: pytest.MonkeyPatch, rows: int) -> tuple[Any, list[int]]:
    """The search, its optimum, and the number of nodes each of its batches evaluated."""
    monkeypatch.setattr(algorithms, "ONE_LANE_ROWS", rows)
    sizes: list[int] = []
    orig = Evaluator.evaluate

    def evaluate(self: Evaluator, nodes: Any) -> Any:
        nodes = list(nodes)
        sizes.append(len(nodes))
        return orig(self, nodes)

    monkeypatch.setattr(Evaluator, "evaluate", evaluate)
    with session(url) as be:
        result, node, best, _ = walk(prepare(be, _policy(suppression)), "flash", "precision")
    monkeypatch.setattr(Evaluator, "evaluate", orig)
    figures = {n: result.results[n] for n in result.results}
    return (node, best, sorted(result.minimal), figures, result.nodes_checked), sizes


@pytest.mark.parametrize("suppression", [0.0, 0.05])
def test_one_search_at_a_time_on_a_large_duckdb_table(
    adb: Any, suppression: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    (node, best, minimal, figures, checked), sizes = _walk(adb.url, suppression, monkeypatch, 0)
    (node2, best2, minimal2, figures2, checked2), sizes2 = _walk(adb.url, suppression, monkeypatch, 10**12)
    # The same optimum, value and minimal nodes; how many satisfying nodes the pruned walk met on
    # its way ("candidates"), like the checks, follows the walk's order.
    drop = ("candidates",)
    assert (node, minimal) == (node2, minimal2)
    assert {k: v for k, v in best.items() if k not in drop} == {
        k: v for k, v in best2.items() if k not in drop
    }
    assert all(figures[n] == figures2[n] for n in figures.keys() & figures2.keys())
    assert max(sizes2) > 1  # in step below the bound, on either engine
    if adb.kind == "duckdb":
        walked = 0
        for size in sizes:  # one node a batch for the first ONE_LANE_UNTIL checks, then in step
            assert size == 1 or walked >= algorithms.ONE_LANE_UNTIL
            walked += size
        assert sizes[0] == 1 and len(sizes) > len(sizes2)
    else:
        assert sizes == sizes2 and checked == checked2  # PostgreSQL: statements cost more than checks
