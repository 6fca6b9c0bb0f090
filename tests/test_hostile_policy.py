"""Hostile policies and hierarchies (issue 15): each gives one line naming the culprit, exit status
2, nothing written, and no traceback or hang; data that looks like markup is printed as it is."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sqlanon import policy as policy_mod
from tests.conftest import PATIENT_TYPES, TestDB, _make_db, patients_rows, with_patients
from tests.helpers import cli, write_policy


def _pol(**columns: object) -> dict:
    cols: dict = {
        "PatientID": {"role": "identifier"},
        "Postcode": {"role": "quasi"},
        "Age": {"role": "quasi"},
        "Disease": {"role": "sensitive"},
    }
    cols.update(columns)
    return {"source": "main.patients", "target": "main.patients_out", "columns": cols, "privacy": {"k": 2}}


@pytest.fixture
def patients(db: TestDB) -> TestDB:
    return with_patients(db)


def _fails(db: TestDB, path: Path, *needles: str, command: str = "anonymise", limit_s: float = 20) -> None:
    before = db.snapshot()
    t0 = time.monotonic()
    code, out, err = cli(command, str(path), "--db", db.url)
    assert time.monotonic() - t0 < limit_s, "took too long (a hang)"
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert db.snapshot() == before


def test_binary_hierarchy_file(duck_patients: TestDB, tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01binary")
    path = write_policy(tmp_path, _pol(Postcode={"role": "quasi", "hierarchy": {"file": "h.csv"}}))
    _fails(duck_patients, path, "columns.Postcode.hierarchy.file", "h.csv")


def test_policy_that_is_not_utf8(duck_patients: TestDB, tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("source: main.patients\ncolumns:\n  Age: {role: quasi}\n# café\n".encode("latin-1"))
    _fails(duck_patients, path, "not UTF-8", "latin1.yaml")


@pytest.mark.parametrize(
    "cuts", [[30, "abc"], [[30, 41], ["x"]], [30, None], [41, 30], [30, 30], [float("nan")], [True, 3]]
)
def test_interval_cuts_that_are_not_ascending_numbers(
    duck_patients: TestDB, tmp_path: Path, cuts: list
) -> None:
    path = write_policy(tmp_path, _pol(Age={"role": "quasi", "hierarchy": {"interval": {"cuts": cuts}}}))
    _fails(duck_patients, path, "columns.Age.hierarchy.interval.cuts")


def test_yaml_nested_deeply(duck_patients: TestDB, tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("source: main.patients\nx: " + "[" * 20000 + "]" * 20000 + "\n", encoding="utf-8")
    _fails(duck_patients, path, "deep.yaml")


def test_mask_with_absurd_levels_is_refused_at_once(duck_patients: TestDB, tmp_path: Path) -> None:
    pol = _pol(Postcode={"role": "quasi", "hierarchy": {"mask": "right", "levels": 1_000_000_000}})
    _fails(duck_patients, write_policy(tmp_path, pol), "columns.Postcode.hierarchy.levels", "64", limit_s=5)


def test_yaml_alias_bomb(duck_patients: TestDB, tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    text = (
        "source: main.patients\n"
        + "\n".join(f"# {x}" for x in ())
        + "bomb:\n"
        + "\n".join("  " + x for x in lines)
        + "\ncolumns:\n  Postcode:\n    role: quasi\n    hierarchy: {map: {'47678': *a9}}\n"
    )
    path = tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    _fails(duck_patients, path, "bomb.yaml", "aliases", limit_s=10)


def test_oversized_policy_is_refused_before_parsing(
    duck_patients: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(policy_mod, "MAX_POLICY_BYTES", 10_000)
    path = tmp_path / "big.yaml"
    path.write_text("source: main.patients\n" + "# padding\n" * 2000, encoding="utf-8")
    _fails(duck_patients, path, "big.yaml", "bytes")


def test_date_hierarchy_on_an_integer_column(patients: TestDB, tmp_path: Path) -> None:
    pol = _pol(Age={"role": "quasi", "hierarchy": {"date": ["month", "year"]}})
    _fails(patients, write_policy(tmp_path, pol), "columns.Age.hierarchy.date", "not a date")


def test_null_interval_label(duck_patients: TestDB, tmp_path: Path) -> None:
    spec = {"interval": {"cuts": [30, 41]}, "labels": [["young", None, "old"]]}
    _fails(duck_patients, write_policy(tmp_path, _pol(Age={"role": "quasi", "hierarchy": spec})), "null")


def test_null_key_in_a_map(duck_patients: TestDB, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "source: main.patients\ntarget: main.out\ncolumns:\n"
        "  Postcode: {role: quasi, hierarchy: {map: {~: [x], '47678': [y]}}}\n  Age: {role: quasi}\n",
        encoding="utf-8",
    )
    _fails(duck_patients, path, "columns.Postcode.hierarchy.map", "null")


def test_null_label_in_a_map(duck_patients: TestDB, tmp_path: Path) -> None:
    spec = {"map": {"47678": [None]}}
    _fails(duck_patients, write_policy(tmp_path, _pol(Postcode={"role": "quasi", "hierarchy": spec})), "null")


@pytest.mark.parametrize("where", ["map label", "interval label", "source"])
def test_nul_bytes(duck_patients: TestDB, tmp_path: Path, where: str) -> None:
    pol = _pol()
    if where == "map label":
        pol["columns"]["Postcode"]["hierarchy"] = {"map": {"47678": ["a\x00b"]}}
    elif where == "interval label":
        pol["columns"]["Age"]["hierarchy"] = {"interval": {"cuts": [30]}, "labels": [["a\x00", "b"]]}
    else:
        pol["source"] = "main.pat\x00ients"
    _fails(duck_patients, write_policy(tmp_path, pol), "NUL")


def test_json_quasi_identifier_on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    for db in _make_db("postgres", request, tmp_path):
        db.sql('CREATE TABLE "main"."docs" ("id" INT, "meta" JSON, "d" TEXT)')
        db.sql("""INSERT INTO "main"."docs" VALUES (1, '{"a": 1}', 'x'), (2, '{"a": 2}', 'y')""")
        pol = {"source": "main.docs", "columns": {"meta": "quasi", "d": "sensitive"}, "privacy": {"k": 2}}
        _fails(db, write_policy(tmp_path, pol), "columns.meta", "json", command="assess")


def test_values_that_look_like_markup_are_printed_as_they_are(patients: TestDB, tmp_path: Path) -> None:
    cols, rows = patients_rows()
    rows = [[r[0], r[1], "[/red]" if i % 2 else "[b]x", *r[3:]] for i, r in enumerate(rows)]
    patients.load("marked", cols, rows, PATIENT_TYPES)
    pol = _pol()
    pol["source"] = "main.marked"
    pol["privacy"] = {"k": 2, "l": {"Disease": 1}}
    path = write_policy(tmp_path, pol)
    for args in (("assess",), ("evaluate", "--levels", "Age=1"), ("profile", "--k", "2")):
        code, out, err = cli(args[0], str(path), "--db", patients.url, *args[1:])
        assert code in (0, 1), (args, err)
        assert "Traceback" not in out + err
    code, out, err = cli("assess", str(path), "--db", patients.url)
    assert "[/red]" in out or "[b]x" in out  # the most disclosive classes name the values


def test_assess_checks_every_hierarchy_first(patients: TestDB, tmp_path: Path) -> None:
    """A mistyped hierarchy file, or one that misses a value, surfaced only at ``anonymise``."""
    pol = _pol(Postcode={"role": "quasi", "hierarchy": {"file": "nope.csv"}})
    _fails(patients, write_policy(tmp_path, pol), "nope.csv", command="assess")
    (tmp_path / "pc.csv").write_text("47678;4767*;*\n47905;4790*;*\n", encoding="utf-8")
    pol = _pol(Postcode={"role": "quasi", "hierarchy": {"file": "pc.csv"}})
    _fails(
        patients, write_policy(tmp_path, pol), "columns.Postcode.hierarchy", "not covered", command="assess"
    )
