"""Defaults that keep utility (issue 34, items 8 and 9): the built-in search metric is ``ncp``, and
the starting policy ``sqlanon init`` writes states each default with the figures of the defaults
study (docs/defaults.md, "Which defaults keep utility"), read here from that page's table, not
from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sqlanon.policy import parse_policy
from tests.conftest import ROOT, TestDB
from tests.helpers import cli, cli_json
from tests.test_scaffold import WAGE_COLUMNS, WAGE_TYPES, _wage_rows

STUDY = ROOT / "docs" / "defaults.md"
TABLES = 6


def _study() -> dict[str, dict[str, dict[str, float]]]:
    """data set -> release -> {ncp, wiped, suppressed, rows}, from the study's markdown table."""
    text = STUDY.read_text(encoding="utf-8")
    out: dict[str, dict[str, dict[str, float]]] = {}
    for line in text.splitlines():
        m = re.match(
            r"\| (.+?) \(([\d,]+), \d+\) \| (.+?) \| ([\d.]+) \| (\d+)/\d+.*? \| \d+ \| (\d+) \|", line
        )
        if m:
            name, rows, release, ncp, wiped, suppressed = m.groups()
            out.setdefault(name, {})[release] = {
                "ncp": float(ncp),
                "wiped": int(wiped),
                "suppressed": int(suppressed),
                "rows": int(rows.replace(",", "")),
            }
    return out


def _init(db: TestDB, tmp_path: Path, table: str) -> str:
    out = tmp_path / f"{table}.yaml"
    code, _, err = cli("init", "--db", db.url, "--table", f"main.{table}", "--out", str(out))
    assert code == 0, err
    return out.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """The policy's comments as one paragraph."""
    return " ".join(ln.split("# ", 1)[1] for ln in text.splitlines() if ln.lstrip().startswith("# "))


def test_the_study_backs_ncp_over_precision() -> None:
    """The reason for the new default, checked on the study's own table: on every data set Flash
    with ncp loses no more than with precision, and ARX's default model (Loss) lands closer to it."""
    study = _study()
    assert len(study) == TABLES
    for name, rel in study.items():
        ncp, prec = rel["flash+ncp"]["ncp"], rel["flash+precision (default)"]["ncp"]
        assert ncp <= prec, name
        arx = rel["ARX default (Loss)"]["ncp"]
        assert abs(arx - ncp) <= abs(arx - prec), name


def test_the_default_metric_is_ncp() -> None:
    pol = parse_policy(
        {"source": "main.t", "columns": {"a": {"role": "quasi"}}, "privacy": {"k": 2}}  # no search key
    )
    assert pol.search.metric == "ncp" and pol.search.algorithm == "flash"


def test_init_states_each_default_with_the_study(db: TestDB, tmp_path: Path) -> None:
    db.load("wage", WAGE_COLUMNS, _wage_rows(), WAGE_TYPES)  # 300 rows
    text = _init(db, tmp_path, "wage")
    pol = parse_policy(yaml.safe_load(text))
    assert (pol.search.algorithm, pol.search.metric, pol.privacy.suppression) == ("flash", "ncp", 0.0)
    prose = _prose(text)
    study = _study()
    flash = [r["flash+ncp"] for r in study.values()]
    sup = [r["flash+ncp, 5% suppression"] for r in study.values()]
    mon = [r["mondrian"] for r in study.values()]
    fewer = sum(s["wiped"] < f["wiped"] for s, f in zip(sup, flash, strict=True))
    none = sum(s["wiped"] == 0 for s in sup)
    removed = [100 * s["suppressed"] / s["rows"] for s in sup]
    expected = [
        "0.05 (here at most 15 of 300 rows)",  # floor(0.05 * 300)
        f"blanked fewer QIs on {fewer} of {TABLES} (none left blank on {none})",
        f"NCP fell from {min(f['ncp'] for f in flash):.2f}-{max(f['ncp'] for f in flash):.2f} "
        f"to {min(s['ncp'] for s in sup):.3f}-{max(s['ncp'] for s in sup):.2f}",
        f"removing {min(removed):.1f}-{max(removed):.1f} % of the rows",
        "never worse than precision",
        "ARX's default quality model (Loss)",
        # The text QIs of this table have no hierarchy but '*': Mondrian is named for them.
        "maritl, race, education, jobclass: no hierarchy but '*'",
        "change flash to mondrian",
        f"it blanked no QI on the six tables, NCP {min(m['ncp'] for m in mon):.2f}-"
        f"{max(m['ncp'] for m in mon):.2f}",
    ]
    assert all(m["wiped"] == 0 for m in mon)
    for phrase in expected:
        assert phrase in prose, phrase
    # The two suggestions work as the comments say to write them.
    edited = text.replace("suppression: 0.0 ", "suppression: 0.05").replace(
        "algorithm: flash", "algorithm: mondrian"
    )
    (tmp_path / "edited.yaml").write_text(edited, encoding="utf-8")
    pol = parse_policy(yaml.safe_load(edited))
    assert (pol.search.algorithm, pol.privacy.suppression) == ("mondrian", 0.05)
    r = cli_json("anonymise", str(tmp_path / "wage.yaml"), "--db", db.url, "--dry-run")
    assert r["optimum"]["metric"] == "ncp"
    r = cli_json("anonymise", str(tmp_path / "edited.yaml"), "--db", db.url, "--dry-run")
    assert r["algorithm"] == "mondrian"


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
def test_init_names_mondrian_only_for_qis_without_a_hierarchy(db: TestDB, tmp_path: Path) -> None:
    """Every QI here has bands (an age): Flash can keep detail, so Mondrian is not pressed on it."""
    db.load("ages", ["age", "score"], [[18 + i % 60, i * 1.5] for i in range(200)], ["INTEGER", "DOUBLE"])
    text = _init(db, tmp_path, "ages")
    assert "mondrian" not in text and "metric: ncp" in text


def test_the_wiped_qi_note_names_ncp_only_when_it_is_not_the_metric(duck_patients: TestDB) -> None:
    """The note on a QI blanked to '*' suggests ``--metric ncp`` only where another metric chose."""
    policy = str(ROOT / "fixtures" / "patients.yaml")  # search.metric: precision (seed 001's optimum)
    args = ("anonymise", policy, "--db", duck_patients.url, "--dry-run", "--levels", "Postcode=5,Age=1")
    code, _, err = cli(*args)
    assert code == 0 and "note: Postcode generalised to '*'" in err and "--metric ncp" in err, err
    code, _, err = cli(*args, "--metric", "ncp")
    assert code == 0 and "note: Postcode generalised to '*'" in err and "--metric ncp" not in err, err


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
def test_init_gives_no_band_that_groups_nothing(db: TestDB, tmp_path: Path) -> None:
    """A 0/1 column got bands of 1, 2 and 4 (five levels for two values: a band of one whole
    number is the value, one band over the range is '*'); years of schooling 0..20 keep theirs."""
    rows = [[i % 2, i % 21, 20 + i % 50] for i in range(300)]
    db.load("fam", ["married", "educ", "age"], rows, ["INTEGER"] * 3)
    text = _init(db, tmp_path, "fam")
    cols = yaml.safe_load(text)["columns"]
    assert cols["married"] == {"role": "quasi"} and "the value or '*'" in text
    # By hand: educ 0..20, width 2 from 0 (11 bands), 4 (6), 8 (3); age 20..69, 5 from 20 (10), 10, 20.
    assert cols["educ"]["hierarchy"] == {"interval": {"widths": [2, 4, 8], "start": 0}}
    assert cols["age"]["hierarchy"] == {"interval": {"widths": [5, 10, 20], "start": 20}}
    assert "# The search spans 50 nodes (married 2 x educ 5 x age 5 levels)." in text
    assert "married: no hierarchy but '*'" in _prose(text)


def test_the_page_named_to_users_holds_the_study(duck_patients: TestDB) -> None:
    """The note on a blanked QI and the comments ``init`` writes send the user to the study by its
    path in the repository: that page must hold the study's table (it moved from
    docs/performance.md to a page of its own)."""
    from sqlanon.scaffold import STUDY as named_by_init

    args = ("anonymise", str(ROOT / "fixtures" / "patients.yaml"), "--db", duck_patients.url)
    code, _, err = cli(*args, "--dry-run", "--levels", "Postcode=5,Age=1")
    assert code == 0 and "note: Postcode generalised to '*'" in err, err
    pages = re.findall(r"docs/[\w-]+\.md", err) + re.findall(r"docs/[\w-]+\.md", named_by_init)
    assert len(pages) == 2, (err, named_by_init)
    for page in pages:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert "| data set (rows, QIs) | release | NCP |" in text, page
