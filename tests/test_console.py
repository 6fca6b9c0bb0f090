"""Human output (issue 16): nodes with an example label of each level, one plain sentence under each
table (``--quiet`` drops them), piped output never wrapped, JSON untouched. The labels expected
are the seed-001 article's own (postcode 476**, the fixture policy's 'Under 30' band)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlanon.lattice import build_hierarchies
from sqlanon.policy import parse_policy
from sqlanon.transform.examples import node_examples
from tests.conftest import ROOT, TestDB, with_patients
from tests.helpers import cli

POLICY = str(ROOT / "fixtures" / "patients.yaml")
NODE = "Postcode=2 (476**), Age=1 (Under 30)"


def test_nodes_show_example_labels_and_sentences(db: TestDB) -> None:
    url = with_patients(db).url
    code, out, err = cli("evaluate", POLICY, "--db", url, "--levels", "Postcode=2,Age=1")
    assert code == 0, err
    assert f"node {NODE} on" in out
    assert "{'" not in out and "'}" not in out  # never a Python dict repr
    # The sentences under the tables, each on one line although far longer than 80 columns.
    lines = out.splitlines()
    explain = [ln for ln in lines if ln.startswith("What generalising to this node costs")]
    assert len(explain) == 1 and len(explain[0]) > 100
    assert any(ln.startswith("Each requirement of the policy") for ln in lines)
    assert any(ln.startswith("l: the fewest different values") for ln in lines)
    assert max(len(ln) for ln in lines) > 80  # nothing was wrapped at rich's default 80 columns
    base = [POLICY, "--db", url, "--levels", "Postcode=2,Age=1"]
    for argv in (["evaluate", *base, "--quiet"], ["evaluate", *base, "-q"], ["--quiet", "evaluate", *base]):
        code, quiet, err = cli(*argv)
        assert code == 0, err
        assert f"node {NODE} on" in quiet
        assert "What generalising" not in quiet and "Each requirement" not in quiet
        assert "l: the fewest" not in quiet
    # JSON is the documented object, the same with or without --quiet and with no example labels.
    _, j1, _ = cli("evaluate", POLICY, "--db", url, "--levels", "Postcode=2,Age=1", "--json")
    _, j2, _ = cli("--quiet", "evaluate", POLICY, "--db", url, "--levels", "Postcode=2,Age=1", "--json")
    assert json.loads(j1) == json.loads(j2) and json.loads(j1)["node"] == {"Postcode": 2, "Age": 1}
    assert "476**)" not in j1


def test_anonymise_profile_assess_and_demo(db: TestDB, tmp_path: Path) -> None:
    url = with_patients(db).url
    code, out, err = cli("anonymise", POLICY, "--db", url, "--as", "table")
    assert code == 0, err
    assert f"chosen node {NODE} (precision" in out
    code, out, err = cli("profile", POLICY, "--db", url, "--k", "2,3")
    assert code == 0, err
    # No class measured: Age's label comes from the policy (the first cut's label), the mask's
    # example is left out rather than queried.
    assert "│ 2, 1 (Under 30)" in out and "One column per k" in out
    code, out, _ = cli("profile", POLICY, "--db", url, "--k", "2,3", "-q")
    assert "One column per k" not in out
    code, out, _ = cli("assess", POLICY, "--db", url)
    assert code == 1 and "(Postcode=47905, Age=43) n=1" in out and "{'" not in out
    if db.kind == "duckdb":
        code, out, err = cli("demo", "--quiet")
        assert code == 0, err
        assert f"chosen node {NODE}; after: k = 3, l = 1" in out
        assert "homogeneity" not in out  # the explaining paragraphs are left out
        code, out, err = cli("demo")
        assert code == 0 and f"chose {NODE}" in out and "homogeneity" in out


def test_examples_from_maps_cuts_and_the_top() -> None:
    pol = parse_policy(
        {
            "source": "main.t",
            "columns": {
                "a": {"role": "quasi", "hierarchy": {"map": {"x": ["g1", "h"], "y": ["g2", "h"]}}},
                "b": {"role": "quasi", "hierarchy": {"interval": {"cuts": [[10, 20], [20]]}}},
                "c": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 3}},
                "d": {"role": "quasi", "hierarchy": {"map": {"x": ["u"]}, "null": ["unknown"]}},
            },
            "privacy": {"k": 2},
        }
    )
    hs = build_hierarchies(pol)
    got = node_examples(hs, {"a": 1, "b": 2, "c": 1, "d": 2})
    assert got == {"a": "g1", "b": "<20", "c": None, "d": "*"}
    assert node_examples(hs, {"a": 2, "b": 1, "c": 3, "d": 0}) == {"a": "h", "b": "<10", "c": "*", "d": None}
    # A measured class's label wins over the policy's.
    assert node_examples(hs, {"a": 1}, {"a": "g2"}) == {"a": "g2"}
