"""Mondrian's rounds on Spark stay the cost of a round whatever their number (issue 33).

Spark's Mondrian at 1e5 rows ran out of driver memory (AGGREGATE_OUT_OF_MEMORY) after ~15 minutes
of rounds. Each round's working table is a checkpoint, and Spark's checkpoint kept the estimated
size of the plan that computed it; an inner join without column statistics is estimated as the
product of its inputs', so the estimate's digits tripled every round (round 5: 3,493 digits) and
from about round 12 the optimizer's arithmetic on it took minutes. Here a table needing many
rounds (Adult, four QIs, k = 2) runs on Spark: its cuts are DuckDB's, the final working table's
estimate is Spark's default for an RDD (at most 2^63 - 1 bytes) however many rounds ran, and the
checkpointed blocks of the dropped relations are released.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.lattice import prepare
from sqlanon.lattice.mondrian import mondrian
from sqlanon.policy import parse_policy
from tests.conftest import ADULT_COLUMNS, ADULT_DIR, TestDB, _make_db
from tests.test_assess_adult import adult_rows

pytestmark = pytest.mark.spark

#: Rounds enough that the old estimate had thousands of digits (15 x 3^(rounds - 1)).
MIN_ROUNDS = 8

K = 20
HIER = ("sex", "race")


@pytest.fixture(scope="module")
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Spark and DuckDB, each with Adult."""
    out: dict[str, TestDB] = {}
    gens = []
    for kind in ("spark", "duckdb"):
        gen = _make_db(kind, request, tmp_path_factory.mktemp(kind))
        db = next(gen)
        gens.append(gen)
        types = ["VARCHAR", "INTEGER"] + ["VARCHAR"] * 7
        db.load("adult", ADULT_COLUMNS, [[r[c] for c in ADULT_COLUMNS] for r in adult_rows()], types)
        out[kind] = db
    yield out
    for gen in gens:
        for _ in gen:
            pass


def _policy() -> Any:
    cols: dict[str, Any] = {c: {"role": "insensitive"} for c in ADULT_COLUMNS}
    cols["age"] = {"role": "quasi"}
    for c in HIER:
        cols[c] = {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}}
    doc = {"source": "main.adult", "columns": cols, "privacy": {"k": K}, "search": {"algorithm": "mondrian"}}
    return parse_policy(doc, base_dir=ADULT_DIR)


def _estimate(be: Any, name: str) -> int:
    """Spark's estimated size in bytes of a relation (py4j reads it as a decimal string)."""
    plan = be._spark.table(name)._jdf.queryExecution().optimizedPlan()
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return int(plan.stats().sizeInBytes())
    finally:
        sys.set_int_max_str_digits(limit)


def _cuts(res: Any) -> list[tuple]:
    return sorted((p, c.dim, c.med, c.med_text, tuple(c.children), c.labels) for p, c in res.cuts.items())


def test_many_rounds_keep_a_bounded_estimate_and_duckdbs_cuts(pair: dict) -> None:
    with session(pair["duckdb"].url) as be:
        ref = mondrian(prepare(be, _policy()))
    assert ref.rounds >= MIN_ROUNDS
    with session(pair["spark"].url) as be:
        sc = be._spark.sparkContext._jsc.sc()
        before = len(sc.getRDDStorageInfo())
        estimates: list[int] = []

        def check(rounds: int, _cuts: int, _cut: int) -> None:
            """After each round: the new working table's estimate (the old one tripled its digits)."""
            work = [t for t in be._temps if t.startswith("sqlanon_mondrian_")][-1]
            estimates.append(_estimate(be, work))
            assert estimates[-1] < 2**63, f"round {rounds}: an estimate of {len(str(estimates[-1]))} digits"

        res = mondrian(prepare(be, _policy()), check)
        size = _estimate(be, res.work.name)
    assert (res.rounds, res.partitions) == (ref.rounds, ref.partitions)
    assert _cuts(res) == _cuts(ref)
    assert size < 2**63, f"estimate of {len(str(size))} digits after {res.rounds} rounds"
    # Closing the session dropped every temporary relation and released its checkpointed blocks
    # (asynchronously): none is left for the garbage collector to find some day.
    deadline = time.monotonic() + 20
    while len(sc.getRDDStorageInfo()) > before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(sc.getRDDStorageInfo()) == before
