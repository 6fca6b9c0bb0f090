"""Issue 33 (task MP): publishing a Mondrian release as a table, and Mondrian on a read-only
connection.

A published table finds each record's partition by joining the partition map. That join was 18
equalities (a text and a NULL flag per QI), which PostgreSQL estimated at one row (it multiplies
the conditions' selectivities); every later step was then planned as nested loops over the
partitions (1e5 Adult rows: 146 s to publish). Now one injective key (partition.py map_key) on an
analysed map: the plan has no nested loop, checked on the statement itself with EXPLAIN, not by a
wall time. The key must stay injective: values that a plain concatenation would confuse (a NULL,
the text 'NULL', an empty string, one value's end read as the next one's start) publish their own
rows. On a connection that may not create temporary tables in-database Mondrian's cost doubles per
round: it is refused in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from sqlanon import api
from sqlanon.cli import main
from sqlanon.engines import base
from tests.conftest import ENGINES
from tests.helpers import adult_db, adult_mondrian_policy

ROWS = 400


@pytest.fixture(scope="module", params=ENGINES)
def adb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The first 400 Adult rows as main.adult, and a small table of awkward values, per engine."""
    for db in adult_db(request, tmp_path_factory, ROWS):
        # (a, b) pairs that "a || b" (or "a:b" without lengths) would merge, NULL beside 'NULL' and ''.
        odd = [["x", "yz"], ["xy", "z"], [None, "z"], ["NULL", "z"], ["", "z"], ["1:x", ""], ["1", ":x"]]
        db.load("odd", ["a", "b", "s"], [[a, b, "s"] for a, b in odd for _ in range(2)])
        yield db


def _policy(where: str, target: str) -> dict:
    return adult_mondrian_policy({"k": 5}, where, target)


@pytest.mark.parametrize("where", ["database", "local"])
def test_publish_plan_has_no_nested_loop(adb: Any, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """EXPLAIN of the statement that builds the published table: hash joins, no nested loop over
    the partitions (on the old 18-condition join: Nested Loop, a CTE rescanned once a partition)."""
    if adb.kind != "postgres":
        pytest.skip("PostgreSQL's planner")
    plans: list[str] = []
    run = base.Backend._run

    def explained(self: base.Backend, sql: str) -> Any:
        m = re.match(r'CREATE TABLE "main"\."sqlanon_stage_\w+" AS (.*)$', sql, re.S)
        if m:
            from sqlalchemy import text

            rows = self._conn.execute(text("EXPLAIN " + m.group(1).replace(":", r"\:"))).fetchall()
            plans.append("\n".join(r[0] for r in rows))
        return run(self, sql)

    monkeypatch.setattr(base.Backend, "_run", explained)
    out = api.anonymise(_policy(where, f"mp_{where}"), adb.url, replace=True).to_dict()
    assert out["search_location"] == where and out["partitions"] >= 10
    (plan,) = plans
    assert "Hash Join" in plan and "Nested Loop" not in plan, plan
    assert adb.sql(f"SELECT COUNT(*) FROM main.mp_{where}")[0][0] == ROWS


def test_map_key_keeps_awkward_values_apart(adb: Any) -> None:
    """k = 2: each (a, b) pair is its own partition, so every record publishes its own values
    (counted here from the list above, not by the code): a key that merged two pairs would pair
    records with the wrong partition (rows doubled or lost)."""
    pol = {
        "source": "main.odd",
        "target": "main.odd_anon",
        "columns": {"a": {"role": "quasi"}, "b": {"role": "quasi"}, "s": {"role": "insensitive"}},
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian", "where": "database"},
        "publish": {"as": "table"},
    }
    out = api.anonymise(pol, adb.url, replace=True).to_dict()
    assert out["partitions"] == 7
    got = sorted((str(a), str(b)) for a, b in adb.sql("SELECT a, b FROM main.odd_anon"))
    pairs = [("x", "yz"), ("xy", "z"), ("None", "z"), ("NULL", "z"), ("", "z"), ("1:x", ""), ("1", ":x")]
    assert got == sorted(pairs * 2)


def test_read_only_database_mondrian_is_refused(adb: Any, tmp_path: Any) -> None:
    """In-database Mondrian on a read-only connection: one line, exit 2, nothing written (before:
    each round's inputs nested twice into the next statement, 96 rows over 150 s)."""
    if adb.kind != "postgres":
        pytest.skip("read-only mode is PostgreSQL's")
    path = tmp_path / "p.json"
    pol = _policy("database", "mp_ro")
    pol["privacy"] = {"k": 100}  # two or three rounds: the old code finishes (and writes nothing) too
    path.write_text(json.dumps(pol))
    url = adb.url + "&options=-c%20default_transaction_read_only%3Don"
    before = adb.sql("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'main'")
    res = CliRunner().invoke(main, ["evaluate", str(path), "--db", url])
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and "temporary tables" in res.output, res.output
    assert "search.where: local" in res.output
    assert adb.sql("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'main'") == before
