"""A view whose classes need only their size is verified from its source in one GROUP BY
(``sqlanon.metrics.optimum.one_pass``; issue 17: publishing near one scan). These tests hold that
shortcut to the measurement it replaces, on DuckDB and PostgreSQL:

* for every node of the lattice of three policies (k with suppression; a prosecutor bound with an
  unchecked sensitive column and the table-wide average risk; a population with the journalist
  and marketer risks), the one-pass measurement equals the measurement of the release itself,
  materialised and read back: every field of the assess object, the failing requirements and the
  missing records;
* an end-to-end ``anonymise`` to a view: the published measures equal those counted by hand, in
  Python, from the view's rows (class sizes, k, rows, suppressed records, average risk).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.lattice import prepare
from sqlanon.metrics.optimum import check_node_release, one_pass
from sqlanon.policy import parse_policy
from sqlanon.transform.release import release_context
from tests.conftest import TestDB
from tests.helpers import cli_json, same, write_policy

COLUMNS = ["id", "name", "age", "zip", "disease", "visits"]
TYPES = ["INTEGER", "TEXT", "INTEGER", "TEXT", "TEXT", "INTEGER"]


def _rows(n: int, seed: int) -> list[list[Any]]:
    """Skewed ages and postcodes, so that each node has classes of every size (some suppressed),
    and a few NULLs."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        age = min(99, int(rnd.expovariate(1 / 30)))
        zip_ = f"47{rnd.choice('6677789')}{rnd.randint(0, 3)}{rnd.randint(0, 9)}"
        if i % 23 == 0:  # NULL is a value of its own: a class (or part of one) in both measurements
            age, zip_ = (None, zip_) if i % 2 else (age, None)
        out.append([i, f"p{i}", age, zip_, rnd.choice(["flu", "cancer", "asthma"]), rnd.randint(0, 9)])
    return out


def _columns(sensitive: bool) -> dict[str, Any]:
    return {
        "id": {"role": "identifier", "action": "drop"},
        "name": {"role": "identifier", "action": "mask"},
        "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [10, 20, 40]}}},
        "zip": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
        "disease": "sensitive" if sensitive else "insensitive",
        "visits": "insensitive",
    }


POLICIES = {
    "k_suppression": {"columns": _columns(False), "privacy": {"k": 4, "suppression": 0.3}},
    "prosecutor_average": {
        "columns": _columns(True),
        "privacy": {"k": 2, "suppression": 0.25, "risk": {"prosecutor": 0.26, "average": 0.3}},
    },
    "population": {
        "columns": _columns(False),
        "population": "main.census",
        "privacy": {"k": 2, "suppression": 0.2, "risk": {"journalist": 0.5, "marketer": 0.6}},
    },
}


@pytest.fixture
def people(db: TestDB) -> TestDB:
    rows = _rows(300, 17)
    db.load("people", COLUMNS, rows, TYPES)
    # The population holds every source record and more.
    db.load("census", COLUMNS, rows + [[1000 + r[0], *r[1:]] for r in _rows(500, 18)], TYPES)
    return db


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_one_pass_equals_reading_the_release(people: TestDB, name: str) -> None:
    policy = parse_policy({"source": "main.people", **POLICIES[name]})
    with session(people.url) as be:
        plan = prepare(be, policy)
        src_cols = [c.name for c in be.require_columns(policy.source, "source")]
        measured = 0
        for node in itertools.product(*(range(h + 1) for h in plan.heights)):
            ctx = release_context(policy, plan.hierarchies, node, src_cols)
            assert one_pass(ctx)
            rel = be.create_temp("release", "publish/_release", **ctx)
            if not be.query("search/row_count", rel=rel)[0][0]:
                continue  # every record suppressed: nothing to measure either way
            read, bad_read, missing_read = check_node_release(plan, rel, node)
            fast, bad_fast, missing_fast = check_node_release(plan, None, node, ctx)
            read.pop("source"), fast.pop("source")
            same(fast, read, f"{name}{node}")
            assert (bad_fast, missing_fast) == (bad_read, missing_read), node
            measured += 1
        # The table has classes of every size: some nodes suppress records, some fail.
        assert measured >= 8


def test_published_view_measured_as_its_rows_say(people: TestDB, tmp_path: Any) -> None:
    pol = {"source": "main.people", "target": "main.people_anon", **POLICIES["k_suppression"]}
    r = cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", people.url)
    rows = people.sql('SELECT "age", "zip" FROM "main"."people_anon"')
    sizes = Counter(tuple(str(v) for v in row) for row in rows)
    published = r["published"]
    assert published["rows"] == len(rows) and r["suppressed_records"] == 300 - len(rows)
    assert published["suppressed_records"] == 300 - len(rows)
    assert published["classes"] == len(sizes)
    assert published["k"] == min(sizes.values()) >= 4
    assert math.isclose(published["risk"]["prosecutor_avg"], len(sizes) / len(rows))
