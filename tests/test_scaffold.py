"""From a table to a working policy (issue 16): ``sqlanon init`` and ``sqlanon hierarchy`` on Adult
and on a table with dates and codes, on DuckDB and PostgreSQL; their output works unchanged."""

from __future__ import annotations

import csv
import io
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
    assert cols["day"]["hierarchy"] == {"date": ["month", "year"]}
    assert cols["zip"]["hierarchy"] == {"mask": "right", "levels": 4}
    code, text, err = cli(
        "hierarchy", "--db", db.url, "--table", "main.visits", "--column", "day", "--dates", "month,year"
    )
    assert code == 0, err
    first = text.splitlines()[0].split(";")
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
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute('SELECT "Postcode", "Age", "Disease" FROM main.patients_anon').fetchall()
    finally:
        con.close()
    assert len(rows) == 9 and {r[0] for r in rows} == {"476**", "479**"}
    code, out, err = cli("demo", "--json")
    assert code == 0 and '"anonymise"' in out
