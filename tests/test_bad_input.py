"""Bad input: one line naming the culprit, exit status 2, and nothing written. Odd but legal input
(NULLs, hostile identifiers) works and gives the same numbers as the brute-force reference."""

from __future__ import annotations

import pytest

from tests import reference as ref
from tests.conftest import PATIENT_TYPES, patients_rows
from tests.helpers import cli, cli_json, write_policy


def _pol(source: str = "main.patients", **privacy: object) -> dict:
    return {
        "source": source,
        "target": "main.patients_out",
        "columns": {
            "Postcode": {"role": "quasi"},
            "Age": {"role": "quasi"},
            "Disease": {"role": "sensitive"},
        },
        "privacy": privacy or {"k": 2},
    }


@pytest.fixture
def patients(db):  # noqa: ANN001, ANN201
    cols, rows = patients_rows()
    db.load("patients", cols, rows, PATIENT_TYPES)
    return db


def _fails(db, tmp_path, policy: dict | str, *needles: str, command: str = "assess") -> None:  # noqa: ANN001
    before = db.relations()
    if isinstance(policy, str):
        path = tmp_path / "policy.yaml"
        path.write_text(policy, encoding="utf-8")
    else:
        path = write_policy(tmp_path, policy)
    code, out, err = cli(command, str(path), "--db", db.url)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert db.relations() == before


@pytest.mark.parametrize("command", ["assess", "anonymise"])
def test_missing_relation(patients, tmp_path, command):  # noqa: ANN001
    _fails(patients, tmp_path, _pol("main.nope"), "main.nope", "not found", command=command)


def test_missing_column(patients, tmp_path):  # noqa: ANN001
    pol = _pol()
    pol["columns"]["postcode"] = {"role": "quasi"}
    _fails(patients, tmp_path, pol, "columns.postcode", "did you mean 'Postcode'")


def test_column_with_two_roles(patients, tmp_path):  # noqa: ANN001
    text = "source: main.patients\ncolumns:\n  Age: {role: quasi}\n  Age: {role: sensitive}\n"
    _fails(patients, tmp_path, text, "'Age'", "declared twice")
    pol = _pol()
    pol["columns"]["Age"] = {"role": ["quasi", "sensitive"]}
    _fails(patients, tmp_path, pol, "columns.Age.role", "exactly one role")


def test_label_must_be_a_released_column(patients, tmp_path):  # noqa: ANN001
    pol = _pol()
    pol["columns"]["PatientID"] = {"role": "identifier", "action": "drop"}
    pol["label"] = "PatientID"
    _fails(patients, tmp_path, pol, "label", "'PatientID'", "identifier", command="anonymise")
    pol["label"] = "Nope"
    _fails(patients, tmp_path, pol, "label", "'Nope'", "not a declared column", command="anonymise")


def test_no_quasi_identifier(patients, tmp_path):  # noqa: ANN001
    pol = {"source": "main.patients", "columns": {"Disease": {"role": "sensitive"}}}
    _fails(patients, tmp_path, pol, "'columns'", "no quasi-identifier")


@pytest.mark.parametrize(
    ("privacy", "needle"),
    [
        ({"k": 0}, "privacy.k"),
        ({"k": 2.5}, "privacy.k"),
        ({"suppression": 1.5}, "privacy.suppression"),
        ({"l": {"Disease": {"kind": "fancy", "l": 2}}}, "privacy.l.Disease.kind"),
        ({"l": {"Disease": {"kind": "recursive", "l": 2}}}, "privacy.l.Disease.c"),
        ({"l": {"Age": 2}}, "privacy.l.Age"),
        ({"t": {"Disease": {"measure": "emd-equal", "t": 2}}}, "privacy.t.Disease.t"),
        ({"kk": 2}, "privacy.kk"),
    ],
)
def test_invalid_privacy_keys(patients, tmp_path, privacy, needle):  # noqa: ANN001
    _fails(patients, tmp_path, _pol(**privacy), needle)


def test_l_larger_than_the_distinct_values(patients, tmp_path):  # noqa: ANN001
    _fails(
        patients,
        tmp_path,
        _pol(l={"Disease": {"kind": "distinct", "l": 4}}),
        "privacy.l.Disease",
        "exceeds the 3 distinct",
    )
    _fails(patients, tmp_path, _pol(k=2, l={"Disease": 4}), "privacy.l.Disease", command="anonymise")


def test_empty_table(db, tmp_path):  # noqa: ANN001
    db.load("patients", ["Postcode", "Age", "Disease"], [], ["VARCHAR", "INTEGER", "VARCHAR"])
    _fails(db, tmp_path, _pol(), "main.patients", "empty")


def test_unknown_policy_key_and_bad_yaml(patients, tmp_path):  # noqa: ANN001
    pol = _pol()
    pol["sauce"] = 1
    _fails(patients, tmp_path, pol, "'sauce'", "unknown key")
    _fails(patients, tmp_path, "source: [unclosed\n", "not valid YAML")


def test_hierarchy_that_does_not_cover_a_value(patients, tmp_path):  # noqa: ANN001
    pol = _pol()
    pol["columns"]["Age"]["hierarchy"] = {"map": {22: ["young"], 27: ["young"], 29: ["young"]}}
    _fails(patients, tmp_path, pol, "columns.Age.hierarchy", "not covered", "6 distinct", command="anonymise")


@pytest.mark.parametrize("command", ["assess", "anonymise"])
def test_only_the_uncovering_hierarchy_is_named(patients, tmp_path, command):  # noqa: ANN001
    """Two listed hierarchies, the first covering every value and the second not: the refusal
    names the second, with the same sample and count whether it is read from the base table
    (assess) or from the coded table's dictionaries (the search's preparation)."""
    pol = _pol()
    codes = ["47605", "47607", "47673", "47678", "47905", "47906", "47909"]
    pol["columns"]["Postcode"]["hierarchy"] = {"map": {c: [c[:3]] for c in codes}}
    pol["columns"]["Age"]["hierarchy"] = {"map": {a: ["old"] for a in (30, 32, 36, 43, 47, 52)}}
    _fails(
        patients,
        tmp_path,
        pol,
        "error: columns.Age.hierarchy: 3 value(s) present in 'Age' are not covered",
        "(3 distinct in all), e.g. 22, 27, 29",
        command=command,
    )
    # Both covered: nothing refused (the search runs to a release).
    pol["columns"]["Age"]["hierarchy"]["map"].update({22: ["young"], 27: ["young"], 29: ["young"]})
    code, out, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", patients.url, "--dry-run")
    assert code == 0, err


def test_target_equal_to_source_is_refused(patients, tmp_path):  # noqa: ANN001
    pol = _pol()
    pol["target"] = "main.patients"
    _fails(patients, tmp_path, pol, "target", "is the source", command="anonymise")


@pytest.mark.parametrize("key", ["source", "target"])
def test_a_catalog_without_a_schema_is_refused(patients, tmp_path, key):  # noqa: ANN001
    """sqlglot would print it as "catalog"."name", read as schema.name: another relation."""
    pol = _pol()
    pol[key] = {"name": "patients", "catalog": "main"}
    _fails(patients, tmp_path, pol, key, "a catalog needs a schema", command="anonymise")


def test_unknown_dialect_and_bad_levels(tmp_path):  # noqa: ANN001
    path = write_policy(tmp_path, _pol())
    code, _, err = cli("compile", str(path), "--dialect", "nosuchsql", "--levels", "Age=0")
    assert code == 2 and "nosuchsql" in err
    code, _, err = cli("compile", str(path), "--dialect", "postgres", "--levels", "Age=7")
    assert code == 2 and "'Age' has levels 0..1" in err


def test_nulls_are_a_value_of_their_own(db, tmp_path):  # noqa: ANN001
    rows = [
        ("a", None, "x"),
        ("a", None, "x"),
        ("a", None, None),
        ("b", 1, None),
        ("b", 1, "y"),
        (None, 1, "y"),
        (None, 1, "x"),
        (None, None, "x"),
        ("a", 2, "z"),
        ("a", 2, "z"),
    ]
    db.load("nulls", ["q1", "q2", "s"], rows, ["VARCHAR", "INTEGER", "VARCHAR"])
    pol = {
        "source": "main.nulls",
        "columns": {"q1": {"role": "quasi"}, "q2": {"role": "quasi"}, "s": {"role": "sensitive"}},
        "privacy": {"k": 2},
    }
    a = cli_json("assess", str(write_policy(tmp_path, pol)), "--db", db.url)
    dict_rows = [dict(zip(["q1", "q2", "s"], r, strict=True)) for r in rows]
    qis = ["q1", "q2"]
    assert a["k"] == ref.k_anonymity(dict_rows, qis)
    assert a["classes"] == len(ref.classes(dict_rows, qis))
    assert a["l_diversity"]["s"]["distinct"] == ref.distinct_l(dict_rows, qis, "s")
    assert a["t_closeness"]["s"]["emd_equal"] == pytest.approx(ref.emd_equal(dict_rows, qis, "s"))
    assert a["t_closeness"]["s"]["emd_ordered"] == pytest.approx(ref.emd_ordered(dict_rows, qis, "s"))
    assert a["information"]["s"]["distinct_values"] == 4  # x, y, z and NULL


HOSTILE = ['we"ird', "semi;colon", "sp ace", "ünïcødé", "drop table x; --"]


def test_hostile_identifiers_work(db, tmp_path):  # noqa: ANN001
    schema = 'sch"ema; x'
    table = "tab'le; DROP TABLE main.patients; --"
    cols = HOSTILE
    rows = [
        ("a", 1, "p", "u", "s1"),
        ("a", 1, "p", "u", "s2"),
        ("b", 2, "q", "v", "s1"),
        ("b", 2, "q", "v", "s2"),
    ]
    db.load(table, cols, rows, ["VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "VARCHAR"], schema=schema)
    quoted_schema = '"' + schema.replace('"', '""') + '"'
    quoted_table = '"' + table.replace('"', '""') + '"'
    pol = {
        "source": f"{quoted_schema}.{quoted_table}",
        "target": {"schema": schema, "name": table + " anon"},
        "columns": {
            cols[0]: {"role": "quasi"},
            cols[1]: {"role": "quasi"},
            cols[2]: {"role": "insensitive"},
            cols[3]: {"role": "identifier", "action": "hash"},
            cols[4]: {"role": "sensitive"},
        },
        "privacy": {"k": 2, "l": {cols[4]: 2}},
    }
    path = write_policy(tmp_path, pol)
    a = cli_json("assess", str(path), "--db", db.url)
    assert a["k"] == 2 and a["l_diversity"][cols[4]]["distinct"] == 2
    r = cli_json("anonymise", str(path), "--db", db.url, "--as", "table")  # hash: tables only
    assert r["published"]["k"] == 2
    assert (schema, table + " anon") in db.relations()
