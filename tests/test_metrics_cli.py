"""The ``evaluate`` and ``profile`` commands and ``anonymise --metric``, on DuckDB and PostgreSQL,
with the 9-row patient table of seed 001 (label Disease)."""

from __future__ import annotations

import math

import pytest
import yaml

from sqlanon.engines import session
from sqlanon.lattice import prepare, run_search
from sqlanon.metrics import METRIC_INFO, compute
from sqlanon.policy import load_policy
from tests.conftest import PATIENT_TYPES, ROOT, patients_rows
from tests.helpers import cli, cli_json, write_policy


def approx(x: float):
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def patients_policy(tmp_path, **privacy):  # noqa: ANN001, ANN003, ANN201
    pol = yaml.safe_load((ROOT / "fixtures" / "patients.yaml").read_text(encoding="utf-8"))
    pol["label"] = "Disease"
    pol["privacy"].update(privacy)
    return write_policy(tmp_path, pol)


@pytest.fixture
def patients(db):  # noqa: ANN001, ANN201
    cols, rows = patients_rows()
    db.load("patients", cols, rows, PATIENT_TYPES)
    return db


def test_evaluate_json(patients, tmp_path):  # noqa: ANN001
    policy = patients_policy(tmp_path)
    r = cli_json("evaluate", str(policy), "--levels", "Postcode=2,Age=1", "--db", patients.url)
    assert r["node"] == {"Postcode": 2, "Age": 1}
    assert r["satisfies"] is True and r["suppressed_records"] == 0 and r["rows"] == 9
    m = r["metrics"]
    assert list(m) == list(METRIC_INFO) and set(r["metric_info"]) == set(METRIC_INFO)
    # Seed 001's 3-anonymous table: Prec = 1 - (2/5 + 1/2) / 2; DM = 3 * 3^2; CM (label Disease) =
    # (0 + 2 + 1) / 9; multiple use: (0 + 1 + 1/2) / 3 (tests/test_reference_selfcheck.py).
    assert m["precision"] == approx(0.55)
    assert m["discernibility"] == 27
    assert m["cm"] == approx(1 / 3)
    assert m["multiple_use"] == approx(0.5)
    assert m["height"] == 3 and m["reldist"] == approx(0.9)
    # The assess object measures the source generalised to the node, before suppression.
    a = r["assess"]
    assert r["assess_scope"].startswith("the source generalised")
    assert (a["rows"], a["classes"], a["k"]) == (9, 3, 3)
    assert a["class_sizes"] == {"3": 3}


def test_evaluate_node_that_suppresses(patients, tmp_path):  # noqa: ANN001
    """At the bottom node with k = 3 every class is a singleton: the release suppresses all nine
    records; the metrics charge them (DM 9 * |T|, CM 1, Prec 0) and the exit status is 1."""
    policy = patients_policy(tmp_path)
    code, out, _ = cli("evaluate", str(policy), "--levels", "Postcode=0", "--db", patients.url, "--json")
    assert code == 1
    import json

    r = json.loads(out)
    assert r["satisfies"] is False and r["suppressed_records"] == 9
    assert (r["classes"], r["suppressed_classes"]) == (0, 9)  # the release's classes, and the removed
    m = r["metrics"]
    assert m["discernibility"] == 81 and m["cm"] == 1.0 and m["precision"] == 0.0
    assert m["ncp"] == 1.0 and m["mutual_information"] == 0.0 and m["multiple_use"] == 1.0
    assert r["assess"]["k"] == 1  # before suppression


def test_profile_json(patients, tmp_path):  # noqa: ANN001
    policy = patients_policy(tmp_path)
    r = cli_json("profile", str(policy), "--k", "1,3,10", "--db", patients.url)
    assert r["metric"] == "precision" and [e["k"] for e in r["profile"]] == [1, 3, 10]
    k1, k3, k10 = r["profile"]
    assert k1["node"] == {"Postcode": 0, "Age": 0} and k1["metrics"]["precision"] == 1.0
    assert k3["node"] == {"Postcode": 2, "Age": 1}  # the article's own generalisation
    assert k3["optimum"] == approx(0.55)
    assert k10["node"] is None and "k = 10 but the table has 9 rows" in k10["error"]
    # The profile's metrics of a node are those `evaluate` prints for it.
    e = cli_json("evaluate", str(policy), "--levels", "Postcode=2,Age=1", "--db", patients.url)
    for name, v in e["metrics"].items():
        assert k3["metrics"][name] == approx(v), name
    # Privacy costs utility: precision and MI utility never rise with k, the losses never fall.
    assert k1["metrics"]["mutual_information"] > k3["metrics"]["mutual_information"]
    assert k1["metrics"]["ncp"] < k3["metrics"]["ncp"]
    # By another metric.
    r = cli_json("profile", str(policy), "--k", "3", "--metric", "discernibility", "--db", patients.url)
    assert r["metric"] == "discernibility" and r["profile"][0]["optimum"] == 27


def test_profile_table_and_bad_k(patients, tmp_path):  # noqa: ANN001
    policy = patients_policy(tmp_path)
    code, out, _ = cli("profile", str(policy), "--k", "2,3", "--db", patients.url)
    assert code == 0 and "utility profile" in out and "private_mi" in out
    code, _, err = cli("profile", str(policy), "--k", "2,x", "--db", patients.url)
    assert code == 2 and "--k" in err
    code, _, err = cli("evaluate", str(policy), "--levels", "Nope=1", "--db", patients.url)
    assert code == 2 and "--levels" in err


@pytest.mark.parametrize("metric", ["discernibility", "entropy_loss", "cm", "private_mi"])
def test_anonymise_chooses_the_optimum_over_every_satisfying_node(patients, tmp_path, metric):  # noqa: ANN001
    """With suppression the metrics are not monotone: the optimum is taken over every satisfying
    node, and equals the brute-force best over the exhaustive search's satisfying set."""
    policy = patients_policy(tmp_path, k=2, suppression=0.34)
    r = cli_json(
        "anonymise",
        str(policy),
        "--db",
        patients.url,
        "--dry-run",
        "--metric",
        metric,
        "--algorithm",
        "exhaustive",
    )
    assert r["optimum"]["metric"] == metric
    pol = load_policy(policy)
    with session(patients.url) as be:
        plan = prepare(be, pol)
        result = run_search(plan, "exhaustive")
        vals = compute(plan, sorted(result.satisfying), [metric], result.results)
    best = (max if METRIC_INFO[metric].higher_is_better else min)(v[metric] for v in vals.values())
    assert r["optimum"]["value"] == approx(best)
    node = tuple(r["node"][q] for q in plan.qi_names)
    assert vals[node][metric] == approx(best)
    assert not math.isnan(best)


def test_anonymise_unknown_or_undefined_metric(patients, tmp_path):  # noqa: ANN001
    policy = patients_policy(tmp_path)
    code, _, err = cli("anonymise", str(policy), "--db", patients.url, "--dry-run", "--metric", "nope")
    assert code == 2 and "unknown metric" in err
    pol = yaml.safe_load(policy.read_text(encoding="utf-8"))
    del pol["label"]
    p2 = write_policy(tmp_path, pol, "nolabel.yaml")
    code, _, err = cli("anonymise", str(p2), "--db", patients.url, "--dry-run", "--metric", "cm")
    assert code == 2 and "label" in err
