"""Publishing: seed 001 reproduced through a policy, atomic swap, --replace, read-time enforcement,
the source never touched, and `compile` for every dialect (executed where an engine runs)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from sqlanon import publish
from sqlanon.errors import SqlanonError
from tests.conftest import PATIENT_TYPES, ROOT, patients_rows
from tests.helpers import cli, cli_json

# Seed 001, figure 2: the article's 3-anonymous output (PatientName masked to '*').
SEED_OUTPUT = Counter(
    [
        ("*", "476**", "Under 30", "Heart Disease"),
        ("*", "476**", "Under 30", "Heart Disease"),
        ("*", "476**", "Under 30", "Heart Disease"),
        ("*", "479**", "Over 40", "Flu"),
        ("*", "479**", "Over 40", "Heart Disease"),
        ("*", "479**", "Over 40", "Cancer"),
        ("*", "476**", "30 to 40", "Heart Disease"),
        ("*", "476**", "30 to 40", "Cancer"),
        ("*", "476**", "30 to 40", "Cancer"),
    ]
)


@pytest.fixture
def patients(db, tmp_path):  # noqa: ANN001, ANN201
    cols, rows = patients_rows()
    db.load("patients", cols, rows, PATIENT_TYPES)
    policy = tmp_path / "patients.yaml"
    shutil.copy(ROOT / "fixtures" / "patients.yaml", policy)
    return db, policy


def _source_fingerprint(db) -> list:  # noqa: ANN001
    return sorted(db.sql('SELECT * FROM "main"."patients"'))


def test_seed_001_reproduced_and_published_view_is_3_anonymous(patients):  # noqa: ANN001
    db, policy = patients
    before = _source_fingerprint(db)
    r = cli_json("anonymise", str(policy), "--db", db.url)
    assert r["node"] == {"Postcode": 2, "Age": 1}
    assert {"Postcode": 2, "Age": 1} in r["minimal_nodes"]
    assert r["suppressed_records"] == 0 and r["target"] == "main.patients_anon"
    assert r["published"]["k"] == 3 and r["published"]["rows"] == 9
    rows = db.sql('SELECT "PatientName", "Postcode", "Age", "Disease" FROM "main"."patients_anon"')
    assert Counter(tuple(str(v) for v in row) for row in rows) == SEED_OUTPUT
    # PatientID dropped
    cols = {
        r[0]
        for r in db.sql(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'patients_anon'"
        )
    }
    assert cols == {"PatientName", "Postcode", "Age", "Disease"}
    assert _source_fingerprint(db) == before
    # An independent look at the published view: the article's check query
    check = db.sql(
        'SELECT "PatientName", "Postcode", "Age", COUNT(*) FROM "main"."patients_anon" '
        'GROUP BY "PatientName", "Postcode", "Age"'
    )
    assert sorted(c[-1] for c in check) == [3, 3, 3]


def test_refuses_to_overwrite_without_replace_and_replaces_with_it(patients):  # noqa: ANN001
    db, policy = patients
    db.sql('CREATE TABLE "main"."patients_anon" AS SELECT 1 AS keep_me')
    code, out, err = cli("anonymise", str(policy), "--db", db.url)
    assert code == 2 and "already exists" in err and "--replace" in err
    assert len(err.strip().splitlines()) == 1
    assert db.sql('SELECT keep_me FROM "main"."patients_anon"') == [(1,)]
    r = cli_json("anonymise", str(policy), "--db", db.url, "--replace")
    assert r["published"]["k"] == 3
    assert len(db.sql('SELECT * FROM "main"."patients_anon"')) == 9
    leftovers = [r for r in db.relations() if "__sqlanon" in r[1]]
    assert leftovers == []


def test_failed_verification_leaves_old_target_intact(patients, monkeypatch):  # noqa: ANN001
    db, policy = patients
    db.sql('CREATE TABLE "main"."patients_anon" AS SELECT 42 AS old')

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise SqlanonError("publish: the new relation does not satisfy the policy (simulated)")

    monkeypatch.setattr(publish, "verify", broken)
    code, _, err = cli("anonymise", str(policy), "--db", db.url, "--replace")
    assert code == 2 and "simulated" in err
    assert db.sql('SELECT old FROM "main"."patients_anon"') == [(42,)]
    assert [r for r in db.relations() if "__sqlanon" in r[1]] == []


def test_view_enforces_k_at_read_time(patients):  # noqa: ANN001
    db, policy = patients
    cli_json("anonymise", str(policy), "--db", db.url)
    # A new patient forms a class of one in the view (479**, Under 30): it must not show.
    db.sql("""INSERT INTO "main"."patients" VALUES (10, 'Zed', '47910', 25, 'Flu')""")
    rows = db.sql('SELECT "Postcode", "Age" FROM "main"."patients_anon"')
    assert len(rows) == 9 and ("479**", "Under 30") not in rows
    # Two more make the class 3-anonymous: now it shows.
    db.sql(
        """INSERT INTO "main"."patients" VALUES """
        """(11, 'Yan', '47911', 21, 'Flu'), (12, 'Xi', '47912', 24, 'Cancer')"""
    )
    assert len(db.sql('SELECT * FROM "main"."patients_anon"')) == 12


def test_publish_as_table_and_dry_run(patients):  # noqa: ANN001
    db, policy = patients
    r = cli_json("anonymise", str(policy), "--db", db.url, "--dry-run")
    # PostgreSQL: the view after its definer's statements, as publishing runs them (engines/definer.py).
    last = r["sql"].split(";\n")[-1]
    assert r["published"] is None and last.startswith('CREATE VIEW "main"."patients_anon"')
    assert ("main", "patients_anon") not in db.relations()
    r = cli_json("anonymise", str(policy), "--db", db.url, "--as", "table")
    assert r["publish_as"] == "table"
    kind = db.sql("SELECT table_type FROM information_schema.tables WHERE table_name = 'patients_anon'")
    assert kind[0][0] == "BASE TABLE"


def test_compiled_sql_runs_on_the_engine(patients):  # noqa: ANN001
    db, policy = patients
    dialect = "duckdb" if db.kind == "duckdb" else "postgres"
    code, out, err = cli("compile", str(policy), "--dialect", dialect, "--levels", "Postcode=2,Age=1")
    assert code == 0, err
    db.sql(out.strip().rstrip(";"))
    rows = db.sql('SELECT "PatientName", "Postcode", "Age", "Disease" FROM "main"."patients_anon"')
    assert Counter(tuple(str(v) for v in row) for row in rows) == SEED_OUTPUT


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "tsql", "spark"])
def test_compile_matches_golden(dialect, tmp_path):  # noqa: ANN001
    from tests.test_golden import check_golden

    policy = tmp_path / "patients.yaml"
    shutil.copy(ROOT / "fixtures" / "patients.yaml", policy)
    code, out, err = cli("compile", str(policy), "--dialect", dialect, "--levels", "Postcode=2,Age=1")
    assert code == 0, err
    check_golden(f"compile_patients.{dialect}.sql", out)


def test_anonymise_json_contract(patients):  # noqa: ANN001
    db, policy = patients
    r = cli_json("anonymise", str(policy), "--db", db.url)
    for key in (
        "node",
        "minimal_nodes",
        "nodes_total",
        "nodes_checked",
        "suppressed_records",
        "target",
        "published",
    ):
        assert key in r
    assert r["nodes_total"] == 18
    json.dumps(r)


def test_l_diverse_policy_chooses_a_coarser_node(patients):  # noqa: ANN001
    db, policy = patients
    data = yaml.safe_load(Path(policy).read_text())
    data["privacy"]["l"] = {"Disease": {"kind": "distinct", "l": 2}}
    data["privacy"]["t"] = {"Disease": {"measure": "emd-equal", "t": 0.5}}
    Path(policy).write_text(yaml.safe_dump(data))
    r = cli_json("anonymise", str(policy), "--db", db.url)
    # The under-30 class is homogeneous at (2, 1); (2, 2) merges age bands per postcode prefix.
    assert r["node"] == {"Postcode": 2, "Age": 2}
    assert r["published"]["l_diversity"]["Disease"]["distinct"] >= 2
    assert r["published"]["t_closeness"]["Disease"]["emd_equal"] <= 0.5
