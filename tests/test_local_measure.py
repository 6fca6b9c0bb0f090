"""Issue 33: a release measured in the local DuckDB (sqlanon/lattice/local_measure.py) gives the
verdict and every figure the warehouse gives (``search.where: database``), node for node.

The reference is the warehouse's own measurement of the same release (the templates run there,
as they always did); the local one copies the release's frequency and class tables (and the
source's, for t-closeness) and runs the same templates in DuckDB. Policies cover each kind of
check the re-verification makes: class sizes with suppression, l-diversity (distinct, entropy,
recursive), t-closeness (equal, ordered and hierarchical distance), beta-likeness, the
prosecutor's profitability, the prosecutor and table-wide risks, sample uniqueness and the
wildcard figures. A publish on PostgreSQL says where it was verified
and how many rows crossed; with ``search.where: database`` nothing crosses.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.lattice import local_measure, prepare
from sqlanon.metrics.optimum import check_node_release
from sqlanon.metrics.optimum import local_measure as chosen
from sqlanon.policy import parse_policy
from sqlanon.transform.release import release_context
from tests.conftest import TestDB
from tests.helpers import cli_json, same, write_policy
from tests.test_publish_verify import COLUMNS, TYPES, _columns, _rows

POLICIES = {
    "k_suppression": {"columns": _columns(False), "privacy": {"k": 4, "suppression": 0.3}},
    "l_t_risks": {
        "columns": _columns(True),
        "privacy": {
            "k": 2,
            "suppression": 0.25,
            "l": {"disease": {"kind": "entropy", "l": 1.2}},
            "t": {"disease": {"measure": "emd-equal", "t": 0.6}},
            "risk": {"prosecutor": 0.6, "average": 0.4, "sample_uniqueness": 0.5},
        },
    },
    "hierarchical_t": {
        "columns": {
            **_columns(True),
            "disease": {
                "role": "sensitive",
                "hierarchy": {"map": {"flu": ["airways"], "asthma": ["airways"], "cancer": ["tumour"]}},
            },
        },
        "privacy": {"k": 2, "suppression": 0.2, "t": {"disease": {"measure": "emd-hierarchical", "t": 0.4}}},
    },
    "likeness_profitability": {
        "columns": _columns(True),
        "privacy": {
            "k": 2,
            "suppression": 0.25,
            "beta_likeness": {"disease": {"beta": 2.0, "kind": "enhanced"}},
            "profitability": {"model": "prosecutor", "adversary_gain": 10, "adversary_cost": 4},
        },
    },
    "ordered_t_recursive_l": {
        "columns": {**_columns(True), "visits": "sensitive"},
        "privacy": {
            "k": 2,
            "suppression": 0.2,
            "l": {"disease": {"kind": "recursive", "c": 3, "l": 2}},
            "t": {"visits": {"measure": "emd-ordered", "t": 0.5}},
        },
    },
}


@pytest.fixture
def people(db: TestDB, monkeypatch: pytest.MonkeyPatch) -> TestDB:
    db.load("people", COLUMNS, _rows(300, 17), TYPES)
    monkeypatch.setitem(local_measure.MIN_ROWS, "postgres", 0)  # the test table is small
    return db


def _policy(name: str, where: str) -> Any:
    return parse_policy({"source": "main.people", **POLICIES[name], "search": {"where": where}})


#: (engine, policy): every policy on PostgreSQL; on Spark, whose statements cost seconds each, the
#: policy with every kind of check (DuckDB is in-process: ``auto`` measures where the table is).
CASES = [("postgres", n) for n in sorted(POLICIES)] + [
    pytest.param("spark", "l_t_risks", marks=pytest.mark.spark)
]


@pytest.mark.parametrize(("db", "name"), CASES, indirect=["db"])
def test_local_measurement_equals_the_warehouses(people: TestDB, name: str) -> None:
    with session(people.url) as be:
        here, there = prepare(be, _policy(name, "auto")), prepare(be, _policy(name, "database"))
        src_cols = [c.name for c in be.require_columns(here.policy.source, "source")]
        nodes = list(itertools.product(*(range(h + 1) for h in here.heights)))
        if people.kind == "spark":  # a few nodes
            nodes = nodes[:: max(1, len(nodes) // 3)]
        measured = 0
        for node in nodes:
            ctx = release_context(here.policy, here.hierarchies, node, src_cols)
            rel = be.create_temp("release", "publish/_release", **ctx)
            if not be.query("search/row_count", rel=rel)[0][0]:
                continue
            local = chosen(here, rel)
            assert local is not None and chosen(there, rel) is None
            near = check_node_release(here, rel, node, None, local)
            far = check_node_release(there, rel, node)
            assert local.moved > 0  # the release's tables crossed
            near[0].pop("source"), far[0].pop("source")
            same(near[0], far[0], f"{name}{node}")
            assert near[1:] == far[1:], node
            measured += 1
        assert measured >= 3


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.parametrize("name", ["l_t_risks", "k_suppression"])
def test_the_warehouse_only_groups_a_locally_measured_release(people: TestDB, name: str) -> None:
    """Measured locally, the warehouse groups the release and numbers nothing: the class ids and
    the sensitive values' ranks (windows with no partition, which Spark runs in one task over the
    whole grouped table) are computed in the local DuckDB; the figures stay the warehouse's (the
    test above). A count-only release (k_suppression) is grouped from its source in one pass."""
    with session(people.url) as be:
        plan = prepare(be, _policy(name, "auto"))
        src_cols = [c.name for c in be.require_columns(plan.policy.source, "source")]
        node = tuple(h // 2 for h in plan.heights)
        ctx = release_context(plan.policy, plan.hierarchies, node, src_cols)
        rel = be.create_temp("release", "publish/_release", **ctx)
        start = len(be.log)
        result, _, _ = check_node_release(plan, rel, node, ctx, chosen(plan, rel))
        statements = " ".join(be.log[start:]).upper()
        assert result["rows"] > 0 and "GROUP BY" in statements
        assert "DENSE_RANK" not in statements


@pytest.mark.parametrize("where", ["auto", "database", "local"])
def test_publish_says_where_it_verified(people: TestDB, tmp_path: Any, where: str) -> None:
    pol = {
        "source": "main.people",
        "target": "main.people_anon",
        **POLICIES["l_t_risks"],
        "search": {"where": where},
    }
    r = cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", people.url)
    verified = r["verified_in"]  # the operator's, not the release's (H1)
    if people.kind == "postgres" and where != "database":  # DuckDB: measured where it is
        assert verified["location"] == "local" and verified["rows_transferred"] > 0
    else:
        assert verified == {"location": "database", "rows_transferred": 0}


def _ci(people: TestDB, column: str) -> None:
    """``column`` under a case-insensitive collation: PostgreSQL groups 'flu' with 'FLU', DuckDB
    would not; half its values upper-cased."""
    people.sql(
        "CREATE COLLATION IF NOT EXISTS ci "
        "(provider = icu, locale = 'und-u-ks-level2', deterministic = false)"
    )
    people.sql(f'ALTER TABLE "main"."people" ALTER COLUMN "{column}" TYPE TEXT COLLATE ci')
    people.sql(f'UPDATE "main"."people" SET "{column}" = UPPER("{column}") WHERE "id" % 2 = 0')


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
def test_a_case_insensitive_column_stays_in_the_warehouse(
    people: TestDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A nondeterministic collation is invisible in information_schema's data_type: without the
    catalogue check a local measurement counted 'flu' and 'FLU' as two values (l distinct 4
    against PostgreSQL's 2, a release published that the warehouse refuses), and the staged
    coding split a QI's classes. Both now stay in PostgreSQL for such a column."""
    from sqlanon.lattice import localdb

    monkeypatch.setattr(localdb, "STAGE_MIN_ROWS", 0)
    pol = {"source": "main.people", "columns": _columns(True), "privacy": {"k": 2}}
    with session(people.url) as be:
        plan = prepare(be, parse_policy(pol))
        assert chosen(plan, plan.policy.source) is not None and be.staged is not None  # before
    _ci(people, "disease")  # sensitive: compared by value in the measurement
    with session(people.url) as be:
        plan = prepare(be, parse_policy(pol))
        assert chosen(plan, plan.policy.source) is None and be.staged is not None
    _ci(people, "zip")  # a quasi-identifier: coded by value when staged
    with session(people.url) as be:
        plan = prepare(be, parse_policy(pol))
        assert be.staged is None and any(plan.coded.name in s for s in be.log)  # coded there


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
def test_an_empty_relation_crosses_from_postgres(people: TestDB) -> None:
    """COPY of no rows is an empty file, which pyarrow's CSV reader refuses: the reader yields an
    empty batch stream instead (an empty release then fails as in the warehouse, as empty)."""
    from sqlanon.lattice.localdb import copy_table, open_local
    from sqlanon.relation import Relation
    from sqlanon.sql.compile import ident

    people.sql('CREATE TABLE "main"."nobody" AS SELECT * FROM "main"."people" WHERE FALSE')
    rel = Relation("nobody", "main")
    with session(people.url) as be:
        local = open_local(be, rel)
        try:
            cols = [(ident("id"), "int64"), (ident("zip"), "text")]
            assert copy_table(be, local, rel, cols) == 0
        finally:
            local.close()


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
def test_a_locally_checked_release_names_the_warehouse(people: TestDB, tmp_path: Any) -> None:
    pol = {"source": "main.people", "target": "main.people_anon", **POLICIES["l_t_risks"]}
    r = cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", people.url)
    assert r["verified_in"]["location"] == "local"
    assert r["published"]["dialect"] == "postgres"


@pytest.mark.parametrize(("db", "name"), CASES, indirect=["db"])
def test_assess_measured_locally_equals_the_warehouses(
    people: TestDB, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``assess`` of the source: the warehouse groups it, the checks run locally (``auto``), with
    the same figures as ``search.where: database``; the two counting statements decide."""
    from sqlanon import api

    opened: list[Any] = []
    real = local_measure.open_local
    monkeypatch.setattr(local_measure, "open_local", lambda be, rel: opened.append(rel) or real(be, rel))
    here = api.assess({"source": "main.people", **POLICIES[name]}, people.url).to_dict()
    assert len(opened) == 1  # measured locally
    pol = {"source": "main.people", **POLICIES[name], "search": {"where": "database"}}
    there = api.assess(pol, people.url).to_dict()
    assert len(opened) == 1  # ... and in the warehouse
    here.pop("source"), there.pop("source")
    same(here, there, name)
    assert here["dialect"] == people.kind


@pytest.mark.parametrize(("db", "groupings"), [("duckdb", 1), ("postgres", 2)], indirect=["db"])
def test_assess_numbers_where_it_groups_unless_the_checks_may_move(
    people: TestDB, groupings: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the checks never leave the warehouse (DuckDB), ``assess`` numbers the classes in the
    statement that groups the source; where they may (PostgreSQL, Spark) the warehouse only
    groups and the numbering follows where the checks run (a second ``freq/base``)."""
    from sqlanon import api
    from sqlanon.engines import base

    seen: list[str] = []
    real = base.Backend.create_temp
    monkeypatch.setattr(
        base.Backend, "create_temp", lambda be, *a, **k: seen.append(a[1]) or real(be, *a, **k)
    )
    api.assess({"source": "main.people", **POLICIES["l_t_risks"]}, people.url)
    assert seen.count("freq/base") == groupings
