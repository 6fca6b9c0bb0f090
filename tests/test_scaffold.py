"""From a table to a working policy (issue 16): ``sqlanon init`` and ``sqlanon hierarchy`` on Adult
and on a table with dates and codes, on DuckDB and PostgreSQL; their output works unchanged."""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import yaml

from sqlanon.policy import parse_policy
from tests.conftest import ADULT_COLUMNS, TestDB, read_adult
from tests.helpers import cli, cli_json


def _load_adult(db: TestDB) -> None:
    rows = read_adult()
    db.load("adult", ADULT_COLUMNS, [[r[c] for c in ADULT_COLUMNS] for r in rows])


def test_init_then_assess_and_anonymise_on_adult(db: TestDB, tmp_path: Path) -> None:
    _load_adult(db)
    out = tmp_path / "adult.yaml"
    code, _, err = cli("init", "--db", db.url, "--table", "main.adult", "--out", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    pol = parse_policy(data)
    roles = {c.name: c.role for c in pol.columns}
    assert roles["age"] == "quasi" and roles["sex"] == "quasi" and roles["race"] == "quasi"
    age = next(c for c in pol.columns if c.name == "age")
    assert age.hierarchy and age.hierarchy["interval"]["widths"] == [10, 20, 40]  # ages 17..90
    # The user's review: one sensitive attribute, fewer QIs; then it runs as written.
    data["columns"]["salary-class"] = {"role": "sensitive"}
    for c in ("native-country", "occupation", "education", "workclass"):
        data["columns"][c] = {"role": "insensitive"}
    out.write_text(yaml.safe_dump(data), encoding="utf-8")
    a = cli_json("assess", str(out), "--db", db.url)
    assert a["rows"] == 30162
    r = cli_json("anonymise", str(out), "--db", db.url, "--dry-run")
    assert r["node"] and r["suppressed_records"] == 0
    code, _, err = cli("init", "--db", db.url, "--table", "main.adult", "--out", str(out))
    assert code == 2 and "already exists" in err  # never overwrites


def test_hierarchy_files_cover_the_data_and_work(db: TestDB, tmp_path: Path) -> None:
    _load_adult(db)
    code, text, err = cli(
        "hierarchy", "--db", db.url, "--table", "main.adult", "--column", "age", "--intervals", "5,10,20"
    )
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(text), delimiter=";"))
    ages = {int(r[0]) for r in rows}
    assert ages == {r["age"] for r in read_adult()}  # every value present, once
    for r in rows:  # by hand: [lo-hi) bands of 5, 10, 20 from 0, then '*'
        a = int(r[0])
        assert r[1:] == [f"[{a // w * w}-{a // w * w + w})" for w in (5, 10, 20)] + ["*"]
    (tmp_path / "age.csv").write_text(text, encoding="utf-8")
    pol = {
        "source": "main.adult",
        "columns": {"age": {"role": "quasi", "hierarchy": {"file": "age.csv"}}, "sex": "quasi"},
        "privacy": {"k": 5},
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(pol), encoding="utf-8")
    r = cli_json("anonymise", str(path), "--db", db.url, "--dry-run")
    assert r["nodes_total"] == 5 * 2


def test_dates_and_codes(db: TestDB, tmp_path: Path) -> None:
    db.sql('CREATE TABLE "main"."visits" ("pid" INTEGER, "zip" VARCHAR, "day" DATE, "note" VARCHAR)')
    notes = ["NULL" if i % 10 == 0 else f"'n{i}'" for i in range(200)]
    values = ", ".join(
        f"({i}, '{47600 + (i * 7) % 150}', DATE '2024-01-01' + {i % 40}, {notes[i]})" for i in range(200)
    )
    db.sql(f'INSERT INTO "main"."visits" VALUES {values}')
    code, text, err = cli("init", "--db", db.url, "--table", "main.visits")
    assert code == 0, err
    cols = yaml.safe_load(text)["columns"]
    assert cols["pid"]["role"] == "identifier"
    assert cols["day"]["hierarchy"] == {"date": ["year"]}  # HIPAA Safe Harbor keeps the year only
    assert cols["zip"]["hierarchy"] == {"mask": "right", "levels": 4}
    code, text, err = cli(
        "hierarchy", "--db", db.url, "--table", "main.visits", "--column", "day", "--dates", "month,year"
    )
    assert code == 0, err
    first = text.splitlines()[0].split(";")  # (a hierarchy file may still be finer)
    assert first == ["2024-01-01", "2024-01", "2024", "*"]
    code, text, err = cli(
        "hierarchy",
        "--db",
        db.url,
        "--table",
        "main.visits",
        "--column",
        "note",
        "--mask",
        "right",
        "--levels",
        "2",
    )
    assert code == 0 and "20 row(s) have NULL in note" in err
    code, text, err = cli(
        "hierarchy", "--db", db.url, "--table", "main.visits", "--column", "pid", "--dates", "year"
    )
    assert code == 2 and "not a date" in err


def test_the_demo_teaches_and_keeps_its_release(tmp_path: Path) -> None:
    path = tmp_path / "demo.duckdb"
    code, out, err = cli("demo", "--db", str(path))
    assert code == 0, err
    text = " ".join(out.split())
    for phrase in ("Here k = 1", "Now k = 3", "l = 1", "Under 30", "homogeneity", "main.patients_anon"):
        assert phrase in text, phrase
    # Nothing a user cannot follow: no internal source names, no path that exists only in a checkout.
    assert "seed" not in text and "fixtures/" not in text, text
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute('SELECT "Postcode", "Age", "Disease" FROM main.patients_anon').fetchall()
    finally:
        con.close()
    assert len(rows) == 9 and {r[0] for r in rows} == {"476**", "479**"}
    code, out, err = cli("demo", "--json")
    assert code == 0 and '"anonymise"' in out


# -- roles as a careful analyst would guess them (issue 34 item 9) --------------------------------
# Synthetic tables shaped like ISLR's Wage and AER's CPS1985 (their column names and types; the
# rows are made up here). The expected roles are an analyst's: demographics are QIs, a person's
# money and health sensitive, a constant column insensitive, a column of unknown meaning insensitive.

WAGE_COLUMNS = ["year", "age", "maritl", "race", "education", "region", "jobclass", "health",
                "health_ins", "logwage", "wage"]  # fmt: skip
WAGE_TYPES = ["INTEGER", "INTEGER"] + ["VARCHAR"] * 7 + ["DOUBLE PRECISION"] * 2
CPS_COLUMNS = ["wage", "education", "experience", "age", "ethnicity", "region", "gender", "occupation",
               "sector", "union", "married"]  # fmt: skip
CPS_TYPES = ["DOUBLE PRECISION", "INTEGER", "INTEGER", "INTEGER"] + ["VARCHAR"] * 7


def _wage_rows(n: int = 300) -> list[list]:
    mar = ["1. Never Married", "2. Married", "3. Widowed", "4. Divorced", "5. Separated"]
    race = ["1. White", "2. Black", "3. Asian", "4. Other"]
    edu = ["1. < HS Grad", "2. HS Grad", "3. Some College", "4. College Grad", "5. Advanced Degree"]
    rows = []
    for i in range(n):
        wage = 20 + (i * 7919 % 3000) / 10  # 20.0 .. 319.9, many distinct values
        rows.append([2003 + i % 7, 18 + i * 13 % 63, mar[i % 5], race[i * 3 % 4], edu[i * 7 % 5],
                     "2. Middle Atlantic", ["1. Industrial", "2. Information"][i % 2],
                     ["1. <=Good", "2. >=Very Good"][i * 5 % 2], ["1. Yes", "2. No"][i // 3 % 2],
                     round(math.log(wage), 6), wage])  # fmt: skip
    return rows


def _cps_rows(n: int = 534) -> list[list]:
    occ = ["worker", "technical", "services", "office", "sales", "management"]
    SECTORS = ["manufacturing", "construction", "other"]  # noqa: N806
    rows = []
    for i in range(n):
        ed, ex = 2 + i * 5 % 17, i * 11 % 56
        rows.append([round(1 + (i * 7919 % 4400) / 100, 2), ed, ex, min(64, max(18, ed + ex + 6)),
                     ["cauc", "hispanic", "other"][i % 3], ["south", "other"][i * 3 % 2],
                     ["male", "female"][i // 2 % 2], occ[i % 6], SECTORS[i % 3],
                     ["yes", "no"][i * 7 % 2], ["yes", "no"][i // 5 % 2]])  # fmt: skip
    return rows


def _init_roles(db: TestDB, table: str, tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / f"{table}.yaml"
    code, _, err = cli("init", "--db", db.url, "--table", f"main.{table}", "--out", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    parse_policy(yaml.safe_load(text))  # it loads as written
    return text, yaml.safe_load(text)["columns"]


def _nodes(text: str) -> int:
    m = re.search(r"# The search spans ([\d,]+) nodes?", text)
    assert m, text
    return int(m.group(1).replace(",", ""))


def test_init_guesses_wage_as_an_analyst(db: TestDB, tmp_path: Path) -> None:
    db.load("wage", WAGE_COLUMNS, _wage_rows(), WAGE_TYPES)
    text, cols = _init_roles(db, "wage", tmp_path)
    roles = {c: spec["role"] for c, spec in cols.items()}
    assert roles == {
        "year": "insensitive", "age": "quasi", "maritl": "quasi", "race": "quasi", "education": "quasi",
        "region": "insensitive", "jobclass": "quasi", "health": "sensitive", "health_ins": "sensitive",
        "logwage": "sensitive", "wage": "sensitive",
    }  # fmt: skip
    lines = {ln.split(":")[0].strip().strip('"'): ln for ln in text.splitlines() if ln.startswith("  ")}
    assert "carries nothing" in lines["region"]  # constant: says so
    assert all("  # " in lines[c] for c in WAGE_COLUMNS)  # every guess says why
    assert "categories" in lines["race"] and "money" in lines["wage"]
    # Lattice by hand: age 18..80 in bands of 10, 20, 40 then '*' (5 levels), 4 text QIs (2 each).
    assert cols["age"]["hierarchy"] == {"interval": {"widths": [10, 20, 40], "start": 10}}
    assert _nodes(text) == 5 * 2**4


def test_init_guesses_cps1985_as_an_analyst(db: TestDB, tmp_path: Path) -> None:
    db.load("cps", CPS_COLUMNS, _cps_rows(), CPS_TYPES)
    text, cols = _init_roles(db, "cps", tmp_path)
    roles = {c: spec["role"] for c, spec in cols.items()}
    assert roles == {
        "wage": "sensitive", "education": "quasi", "experience": "insensitive", "age": "quasi",
        "ethnicity": "quasi", "region": "quasi", "gender": "quasi", "occupation": "quasi",
        "sector": "insensitive", "union": "sensitive", "married": "quasi",
    }  # fmt: skip
    # Not the 80,000 nodes of issue 34: education 2..18 and age 18..64 in 3 bands + '*' (5 levels
    # each), five text QIs (2 each).
    assert _nodes(text) == 5 * 5 * 2**5 < 1000
    r = cli_json("anonymise", str(tmp_path / "cps.yaml"), "--db", db.url, "--dry-run")
    assert r["nodes_total"] == 800


def test_init_grammar_and_a_lone_value(db: TestDB, tmp_path: Path) -> None:
    """One value and NULLs is a flag (it carries presence), written '1 category'; one value in
    every row is constant; a table with no demographic still gets a QI so the policy runs."""
    rows = [[i, "yes" if i % 2 else None, "same", f"t{i % 3}"] for i in range(20)]
    db.load("flags", ["n", "flag", "const", "kind"], rows, ["INTEGER", "VARCHAR", "VARCHAR", "VARCHAR"])
    text, cols = _init_roles(db, "flags", tmp_path)
    assert "1 category" in text and "1 categories" not in text
    assert cols["const"]["role"] == "insensitive" and "1 row" not in text
    assert cols["flag"]["role"] == "quasi" and cols["kind"]["role"] == "quasi"  # the fallback
    assert "no demographic column" in text
