"""NULL in a quasi-identifier covered by a map's ``null: [...]`` and by a hierarchy file's ``NULL``
row (ARX's spelling), on DuckDB and PostgreSQL (issue 16). Expected classes are counted by hand
from the eight rows below."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from tests.conftest import TestDB
from tests.helpers import cli, cli_json, write_policy

# id, zip, age, disease
ROWS = [
    [1, "47678", 29, "flu"],
    [2, "47678", None, "flu"],
    [3, None, 25, "cancer"],
    [4, None, None, "flu"],
    [5, "47677", 31, "cancer"],
    [6, "47602", None, "flu"],
    [7, None, 33, "flu"],
    [8, "47601", 41, "cancer"],
]
ZIP_MAP = {
    "47678": ["4767*", "476**"],
    "47677": ["4767*", "476**"],
    "47602": ["4760*", "476**"],
    "47601": ["4760*", "476**"],
}


def _setup(db: TestDB, tmp_path: Path, *, k: int = 2, null: bool = True) -> Path:
    db.load("t", ["id", "zip", "age", "disease"], ROWS, types=["INTEGER", "VARCHAR", "INTEGER", "VARCHAR"])
    code, text, err = cli(
        "hierarchy", "--db", db.url, "--table", f"{db.schema}.t", "--column", "age", "--intervals", "20"
    )
    assert code == 0, err
    assert "3 row(s) have NULL in age" in err
    # By hand: bands of 20 from 0, and the NULL row in ARX's spelling, '*' at every level.
    rows = list(csv.reader(io.StringIO(text), delimiter=";"))
    assert rows == [
        ["25", "[20-40)", "*"],
        ["29", "[20-40)", "*"],
        ["31", "[20-40)", "*"],
        ["33", "[20-40)", "*"],
        ["41", "[40-60)", "*"],
        ["NULL", "*", "*"],
    ]
    (tmp_path / "age.csv").write_text(text, encoding="utf-8")
    zip_h: dict[str, Any] = {"map": ZIP_MAP}
    if null:
        zip_h["null"] = ["unknown", "unknown"]
    return write_policy(
        tmp_path,
        {
            "source": f"{db.schema}.t",
            "target": f"{db.schema}.t_anon",
            "columns": {
                "id": {"role": "identifier"},
                "zip": {"role": "quasi", "hierarchy": zip_h},
                "age": {"role": "quasi", "hierarchy": {"file": "age.csv"}},
                "disease": {"role": "sensitive"},
            },
            "privacy": {"k": k},
        },
        name=f"k{k}.yaml",
    )


def test_null_labels_in_map_and_file_generalise_null(db: TestDB, tmp_path: Path) -> None:
    policy = _setup(db, tmp_path)
    # zip=1: 4767* {1,2,5}, 4760* {6,8}, unknown {3,4,7}; age=2 is '*': three classes, k = 2.
    r = cli_json("anonymise", str(policy), "--db", db.url, "--levels", "zip=1,age=2", "--as", "table")
    assert r["published"]["k"] == 2 and r["published"]["classes"] == 3
    got = sorted(db.sql(f'SELECT "zip", "age", "disease" FROM {db.rel("t_anon")}'))
    assert sorted(g[0] for g in got) == ["4760*", "4760*", "4767*", "4767*", "4767*"] + ["unknown"] * 3
    assert {g[1] for g in got} == {"*"}
    # zip=1, age=1: (4767*, [20-40)) {1,5}, (4767*, *) {2}, (4760*, *) {6}, (4760*, [40-60)) {8},
    # (unknown, [20-40)) {3,7}, (unknown, *) {4}: k = 1, six classes.
    e = cli_json("evaluate", str(policy), "--db", db.url, "--levels", "zip=1,age=1")
    assert e["assess"]["k"] == 1 and e["assess"]["classes"] == 6
    # The search for k = 3: zip=2, age=2 gives 476** {1,2,5,6,8} and unknown {3,4,7}; every node
    # below it has a class of one or two (zip=1, age=2: 4760* has 2; zip=3, age=1: [40-60) has 1).
    k3 = policy.with_name("k3.yaml")
    k3.write_text(policy.read_text(encoding="utf-8").replace("k: 2", "k: 3"), encoding="utf-8")
    s = cli_json("anonymise", str(k3), "--db", db.url, "--dry-run")
    assert s["node"] == {"zip": 2, "age": 2} and s["nodes_total"] == 4 * 3
    assert s["suppressed_records"] == 0


def test_null_not_covered_without_null_labels(db: TestDB, tmp_path: Path) -> None:
    policy = _setup(db, tmp_path, null=False)
    code, _, err = cli("assess", str(policy), "--db", db.url)
    assert code == 2 and "NULL" in err and "null: [label1" in err
    assert len(err.strip().splitlines()) == 1


def test_bad_null_labels_are_refused(tmp_path: Path) -> None:
    base = {"source": "main.t", "privacy": {"k": 2}}
    cases = [
        ({"map": ZIP_MAP, "null": ["a", "b", "c"]}, "NULL has 5 levels, expected 4"),
        ({"map": ZIP_MAP, "null": ["x", "y"]}, None),  # valid: '*' appended
        ({"map": ZIP_MAP, "null": ["4767*", "other"]}, "generalises to both"),
        ({"map": ZIP_MAP, "null": []}, "expected the labels of NULL"),
        ({"map": ZIP_MAP, "null": [None, "x"]}, "label of NULL is null"),
    ]
    for spec, message in cases:
        policy = write_policy(tmp_path, {**base, "columns": {"zip": {"role": "quasi", "hierarchy": spec}}})
        code, _, err = cli("compile", str(policy), "--dialect", "duckdb", "--levels", "zip=1")
        if message is None:
            assert code == 0, err
        else:
            assert code == 2 and message in err, err
    (tmp_path / "h.csv").write_text("a;x;*\nNULL;y;*\n", encoding="utf-8")
    spec = {"file": "h.csv", "null": ["z"]}
    policy = write_policy(tmp_path, {**base, "columns": {"zip": {"role": "quasi", "hierarchy": spec}}})
    code, _, err = cli("compile", str(policy), "--dialect", "duckdb", "--levels", "zip=1")
    assert code == 2 and "NULL is covered twice" in err
