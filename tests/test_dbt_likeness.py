"""dbt tests for issue 35's per-class models: entropy l with Grassberger's estimator (ARX's
EntropyLDiversity(l, GRASSBERGER)), delta-disclosure privacy and basic and enhanced beta-likeness.

``sqlanon dbt`` attaches each requirement of the policy to the model as a test of the package; one
real ``dbt build`` per engine (DuckDB, PostgreSQL) then shows that each test passes on the release
(which meets the policy) and fails on the raw table (which does not), on exactly the classes (count
and records) ``assess`` reports for that requirement. The thresholds are chosen on the table below
so that every raw test fails on some classes, and so that Grassberger's verdict differs from
Shannon's (a Shannon test in its place fails on other classes). Bad arguments stop their test
with one line naming the test and the argument.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

import sqlanon
from sqlanon.dbt import macros
from tests.conftest import TestDB
from tests.helpers import dbt_build, dbt_runner
from tests.test_dbt import _failing

QIS = ["a", "b"]
SOURCE = "main.lk"
#: The policy's privacy block: one requirement per new test (s2 carries the basic beta-likeness).
PRIVACY: dict[str, Any] = {
    "l": {"s": {"kind": "entropy", "l": 3.5, "estimator": "grassberger"}},
    "delta_disclosure": {"s": 1.2},
    "beta_likeness": {"s": {"beta": 1.0, "kind": "enhanced"}, "s2": {"beta": 0.8}},
}
#: The tests on the raw table (no reference: p(w) is the table's own), with their requirement.
RAW: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "sqlanon_l_diversity",
        {"sensitive": "s", "l": 3.5, "kind": "entropy", "estimator": "grassberger"},
        {"l": PRIVACY["l"]},
    ),
    ("sqlanon_delta_disclosure", {"sensitive": "s", "delta": 1.2}, {"delta_disclosure": {"s": 1.2}}),
    (
        "sqlanon_beta_likeness",
        {"sensitive": "s", "beta": 1.0, "kind": "enhanced"},
        {"beta_likeness": {"s": PRIVACY["beta_likeness"]["s"]}},
    ),
    ("sqlanon_beta_likeness", {"sensitive": "s2", "beta": 0.8}, {"beta_likeness": {"s2": {"beta": 0.8}}}),
]


#: Bad arguments and the message dbt stops each test with.
BAD: list[tuple[str, dict[str, Any], str]] = [
    (
        "sqlanon_beta_likeness",
        {"sensitive": "s", "beta": 1.0, "kind": "extreme"},
        "sqlanon_beta_likeness: kind: expected one of basic, enhanced, got extreme",
    ),
    (
        "sqlanon_delta_disclosure",
        {"sensitive": "s", "delta": 0},
        "sqlanon_delta_disclosure: delta: expected a number above 0, got 0",
    ),
    (
        "sqlanon_l_diversity",
        {"sensitive": "s", "l": 2, "estimator": "grassberger"},
        "sqlanon_l_diversity: estimator: grassberger needs kind entropy, got distinct",
    ),
]


def _rows() -> list[list[Any]]:
    rng = random.Random(35)
    rows = []
    for i in range(300):
        a = rng.choice([1, 2, 3, 4, 5, 6, None])
        b = rng.choice(["x", "y", "z"])
        s = rng.choice(["p", "q", "r", "s", "t", "p", "p", None])
        s2 = rng.choice(["u", "v", "w", "u"])
        rows.append([i, a, b, s, s2])
    return rows


def _policy() -> dict[str, Any]:
    return {
        "source": SOURCE,
        "target": "main.lk_anon",
        "columns": {
            "id": {"role": "identifier", "action": "drop"},
            "a": {"role": "quasi", "hierarchy": {"interval": {"cuts": [3, 5]}}},
            "b": {"role": "quasi", "hierarchy": {"map": {"x": ["xy"], "y": ["xy"], "z": ["z"]}}},
            "s": {"role": "sensitive"},
            "s2": {"role": "sensitive"},
        },
        "privacy": {**PRIVACY, "suppression": 0.9},
    }


def _assess(db: TestDB, privacy: dict[str, Any]) -> dict[str, Any]:
    policy = dict(_policy(), privacy=privacy)
    del policy["target"]
    policy["columns"] = {q: {"role": "quasi"} for q in QIS} | {s: {"role": "sensitive"} for s in ("s", "s2")}
    return sqlanon.assess(policy, db.url).to_dict()["suppression"]


@pytest.fixture(scope="module")
def built(mdb: TestDB, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A project with the raw table's tests (the package's, at severity warn), ``sqlanon dbt`` of
    the policy, and one ``dbt deps`` + ``dbt build``."""
    runner = dbt_runner()
    mdb.load(
        "lk",
        ["id", "a", "b", "s", "s2"],
        _rows(),
        types=["INTEGER", "INTEGER", "VARCHAR", "VARCHAR", "VARCHAR"],
    )
    root = tmp_path_factory.mktemp("dbt_lk")
    project = root / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        yaml.safe_dump(
            {
                "name": "sqlanon_lk",
                "version": "1.0.0",
                "config-version": 2,
                "profile": "sqlanon_example",
                "model-paths": ["models"],
                "macro-paths": ["macros"],
            }
        ),
        encoding="utf-8",
    )
    (project / "packages.yml").write_text(
        yaml.safe_dump({"packages": [{"local": str(macros.package_dir())}]}), encoding="utf-8"
    )
    raw = [
        {f"sqlanon.{name}": {"arguments": {"quasi_identifiers": QIS, **args}, "config": {"severity": "warn"}}}
        for name, args, _ in RAW
    ]
    bad = [  # bad arguments: a compile error naming the test and the argument
        {f"sqlanon.{name}": {"arguments": {"quasi_identifiers": QIS, **args}, "config": {"severity": "warn"}}}
        for name, args, _ in BAD
    ]
    # The same table as a second source for the bad tests: an error in a source's test skips the
    # models that read the source, and lk_anon reads main.lk.
    doc = {
        "version": 2,
        "sources": [
            {"name": "main", "schema": "main", "tables": [{"name": "lk", "data_tests": raw}]},
            {"name": "bad", "schema": "main", "tables": [{"name": "lk", "data_tests": bad}]},
        ],
    }
    (project / "models" / "raw.yml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    # A node at which some classes break the policy (the search's own node keeps every row): the
    # model removes them, and its tests check what is left.
    written = sqlanon.dbt_project(_policy(), mdb.url, project=project, levels={"a": 1, "b": 0})
    results, _ = dbt_build(runner, mdb, project, root)
    yml = yaml.safe_load((project / "models" / "lk_anon.yml").read_text(encoding="utf-8"))
    return {"written": written, "results": results, "db": mdb, "yml": yml}


def _tests_of(built: dict[str, Any], target: str) -> list[Any]:
    return [
        r
        for uid, r in built["results"].items()
        # the model's tests depend on the source too (their reference): the raw table's on it alone
        if uid.startswith("test.")
        and (
            target in r.node.depends_on.nodes
            if target.startswith("model.")
            else r.node.depends_on.nodes == [target]
        )
    ]


def test_sqlanon_dbt_attaches_each_requirement_as_its_test(built: dict[str, Any]) -> None:
    tests = built["yml"]["models"][0]["data_tests"]
    by_name = [(next(iter(t)), next(iter(t.values()))["arguments"]) for t in tests]
    assert [n for n, _ in by_name] == [
        "sqlanon_l_diversity",
        "sqlanon_delta_disclosure",
        "sqlanon_beta_likeness",
        "sqlanon_beta_likeness",
    ]
    l_args, dd_args, bs_args, bs2_args = (a for _, a in by_name)
    assert l_args["kind"] == "entropy" and l_args["estimator"] == "grassberger" and l_args["l"] == 3.5
    assert dd_args["delta"] == 1.2 and dd_args["sensitive"] == "s"
    assert (bs_args["beta"], bs_args["kind"], bs2_args["beta"], bs2_args["kind"]) == (
        1.0,
        "enhanced",
        0.8,
        "basic",
    )
    # p(w) is the source's, as sqlanon's re-verification measures it (suppression changes the model's)
    assert {dd_args["reference"], bs_args["reference"], bs2_args["reference"]} == {"source('main', 'lk')"}


def test_the_release_passes_every_test(built: dict[str, Any]) -> None:
    model = built["results"]["model.sqlanon_lk.lk_anon"]
    assert str(model.status) == "success"
    n = built["db"].sql("SELECT COUNT(*) FROM analytics.lk_anon")[0][0]
    assert 0 < n < 300, n  # some classes kept, some suppressed: the tests check something
    tests = _tests_of(built, "model.sqlanon_lk.lk_anon")
    assert len(tests) == 4
    assert all(str(r.status) == "pass" and r.failures == 0 for r in tests), [
        (r.node.name, r.status, r.message) for r in tests
    ]


def test_the_raw_table_fails_each_test_on_the_classes_assess_reports(built: dict[str, Any]) -> None:
    db = built["db"]
    tests = _tests_of(built, "source.sqlanon_lk.main.lk")
    assert len(tests) == len(RAW)
    expected = {(name, args.get("sensitive"), args.get("kind")): privacy for name, args, privacy in RAW}
    for r in tests:
        kwargs = r.node.test_metadata.kwargs
        privacy = expected[(r.node.test_metadata.name, kwargs["sensitive"], kwargs.get("kind"))]
        assessed = _assess(db, privacy)
        classes, records = _failing(db, r)
        assert (r.failures, classes, records) == (
            assessed["classes_violating_any"],
            assessed["classes_violating_any"],
            assessed["records_violating_any"],
        ), r.node.name
        assert classes > 0 and str(r.status) == "warn", r.node.name
    # Grassberger's verdict is not Shannon's here: a Shannon test in its place would fail elsewhere.
    shannon = _assess(db, {"l": {"s": {"kind": "entropy", "l": 3.5}}})
    grassberger = _assess(db, {"l": PRIVACY["l"]})
    assert shannon["classes_violating_any"] != grassberger["classes_violating_any"]


def test_bad_arguments_stop_their_test_with_one_line(built: dict[str, Any]) -> None:
    errors = [
        r for uid, r in built["results"].items() if uid.startswith("test.") and str(r.status) == "error"
    ]
    messages = sorted(str(r.message) for r in errors)
    assert len(errors) == len(BAD), messages
    for _, _, expected in BAD:
        assert any(expected in m for m in messages), (expected, messages)
