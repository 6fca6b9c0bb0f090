"""HIPAA Safe Harbor identifiers (issue 35 item 7): ``sqlanon init`` marks what 45 CFR
164.514(b)(2)(i) names (identifiers dropped, a ZIP code a QI masked to 3 digits, dates to the
year) and ``assess`` warns, one line per column, about an undeclared or non-identifier column
that holds one. Expected kinds are the rule's letters, read from the rule by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sqlanon import hipaa
from tests.conftest import TestDB
from tests.helpers import cli, cli_json, write_policy


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("first_name", "A"), ("PatientName", "A"), ("street_address", "B"), ("city", "B"),
        ("zip", "B"), ("postal_code", "B"), ("date_of_birth", "C"), ("admission_date", "C"),
        ("HomePhone", "D"), ("fax", "E"), ("E-Mail", "F"), ("patient_email", "F"), ("SSN", "G"),
        ("mrn", "H"), ("medical_record_number", "H"), ("member_id", "I"), ("account_number", "J"),
        ("iban", "J"), ("drivers_license", "K"), ("license_plate", "L"), ("VIN", "L"),
        ("serial_number", "M"), ("imei", "M"), ("website", "N"), ("url", "N"), ("ip_address", "O"),
        ("fingerprint", "P"), ("photo", "Q"), ("passport_number", "R"), ("id", "R"),
    ],
)  # fmt: skip
def test_names(name: str, kind: str) -> None:
    found = hipaa.match_name(name)
    assert found is not None and found[0] == kind, (name, found)


@pytest.mark.parametrize(
    "name",
    # The rule allows ages up to 89 and states; ARX's fuzzy match calls `wage` an age.
    ["age", "wage", "state", "region", "region_id", "drug_name", "sex", "race", "hotel", "zipper"],
)
def test_names_that_are_not_identifiers(name: str) -> None:
    assert hipaa.match_name(name) is None


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        (["ann@example.org", "bo.b+x@mail.co.uk"], "F"),
        (["123-45-6789", "078-05-1120"], "G"),
        (["(555) 123-4567", "555-987-6543", "+1 555 222 3333"], "D"),
        (["192.168.0.1", "10.0.0.255", "2001:db8::1"], "O"),
        (["https://example.org/p/1", "http://x.io", "www.example.com"], "N"),
        (["47677", "02139", "90210-1234"], "B"),
        (["1970-01-31", "12/31/1999", "31.12.1999"], "C"),
        (["1HGCM82633A004352", "JH4KA4650JC000403"], "L"),
        (["00:1A:2B:3C:4D:5E", "aa-bb-cc-dd-ee-ff"], "M"),
        (["DE89370400440532013000", "GB82 WEST 1234 5698 7654 32"], "J"),  # IBANs (mod 97)
        (["4111 1111 1111 1111", "5500-0000-0000-0004"], "J"),  # card numbers (Luhn)
    ],
)
def test_values(values: list[str], kind: str) -> None:
    found = hipaa.match_values(values)
    assert found is not None and found[0] == kind, (values, found)


@pytest.mark.parametrize(
    "values",
    [["hello", "world"], ["12", "7"], ["4111 1111 1111 1112"], ["DE89370400440532013001"], ["999.1.1.1"]],
)
def test_values_that_are_not_identifiers(values: list[str]) -> None:
    assert hipaa.match_values(values) is None


COLUMNS = ["patient_id", "name", "contact", "zip", "dob", "visit", "age", "sex", "diagnosis", "host"]
TYPES = [
    "INTEGER",
    "VARCHAR",
    "VARCHAR",
    "VARCHAR",
    "DATE",
    "VARCHAR",
    "INTEGER",
    "VARCHAR",
    "VARCHAR",
    "VARCHAR",
]
SECRET = "zz-secret-marker"


def _load(db: TestDB) -> None:
    rows = [
        [i, f"Name{i}", f"{SECRET}{i}@example.org", f"{47600 + i % 40:05d}",
         f"19{40 + i % 50}-0{1 + i % 9}-1{i % 9}", f"2024-0{1 + i % 9}-1{i % 9}", 30 + i % 65, "MF"[i % 2],
         ["flu", "cold", "ok"][i % 3], f"10.1.{i % 200}.{i % 9}"]
        for i in range(120)
    ]  # fmt: skip
    db.load("pat", COLUMNS, rows, TYPES)


def test_init_marks_what_the_rule_names(db: TestDB, tmp_path: Path) -> None:
    _load(db)
    out = tmp_path / "p.yaml"
    code, stdout, err = cli("init", "--db", db.url, "--table", "main.pat", "--out", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    cols = yaml.safe_load(text)["columns"]
    lines = {ln.split(":")[0].strip().strip('"'): ln for ln in text.splitlines() if ln.startswith("  ")}
    dropped = {"patient_id": "(H)", "name": "(A)", "contact": "(F)", "visit": "(C)", "host": "(O)"}
    for col, letter in dropped.items():
        assert cols[col] == {"role": "identifier", "action": "drop"}, col
        assert f"HIPAA Safe Harbor {letter}" in lines[col], lines[col]
    assert cols["zip"] == {"role": "quasi", "hierarchy": {"mask": "right", "levels": 4}}
    assert "(B)" in lines["zip"] and "level 2 keeps 3 digits" in lines["zip"]
    assert cols["dob"] == {"role": "quasi", "hierarchy": {"date": ["year"]}} and "(C)" in lines["dob"]
    assert cols["age"]["role"] == "quasi" and "90 or older" in lines["age"]  # ages up to 94
    assert cols["diagnosis"]["role"] == "sensitive" and cols["sex"]["role"] == "quasi"
    assert SECRET not in text + stdout + err  # sampled values are tested, never written


def test_assess_warns_one_line_per_column(db: TestDB, tmp_path: Path) -> None:
    _load(db)
    pol = {
        "source": "main.pat",
        "columns": {
            "patient_id": {"role": "identifier", "action": "drop"},  # declared: no warning
            "zip": "quasi",
            "sex": "quasi",
            "contact": "insensitive",
            "diagnosis": "sensitive",
        },
        "privacy": {"k": 2},
    }
    path = write_policy(tmp_path, pol)
    a = cli_json("assess", str(path), "--db", db.url)
    by_col = {w.split("'")[1]: w for w in a["warnings"]}
    assert set(by_col) == {"name", "contact", "zip", "dob", "visit", "age", "host"}
    assert "(F)" in by_col["contact"] and "declared insensitive" in by_col["contact"]
    assert "undeclared" in by_col["name"] and "first 3 digits" in by_col["zip"]
    code, out, err = cli("assess", str(path), "--db", db.url)
    assert code in (0, 1), err
    warned = [ln for ln in out.splitlines() if ln.startswith("warning: column ")]
    assert len(warned) == 7
    assert SECRET not in out + err + str(a)


def test_assess_warning_names_are_escaped(db: TestDB, tmp_path: Path) -> None:
    db.load("odd", ["n", "e\u202email\nx"], [[i, f"u{i}@ex.org"] for i in range(10)], ["INTEGER", "VARCHAR"])
    path = write_policy(tmp_path, {"source": "main.odd", "columns": {"n": "quasi"}, "privacy": {"k": 1}})
    code, out, _ = cli("assess", str(path), "--db", db.url)
    warned = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and "\\u202e" in warned[0] and "\u202e" not in out
