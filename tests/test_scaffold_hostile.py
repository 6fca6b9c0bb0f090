"""``sqlanon init`` cannot be steered by names (issue 32, finding 13).

Table and column names, and DuckDB ENUM labels (which DuckDB reports inside the column's type),
come from the database: whoever may create a table may choose them. A line break in one (every
break YAML or ``str.splitlines`` knows) must not end a comment or a key and add policy keys such as
``seed``, ``key`` or ``label``. The expected keys are written out here, from the table's own DDL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sqlanon.policy import load_policy
from sqlanon.relation import Relation
from tests.conftest import TestDB, qident
from tests.helpers import cli

#: Every line break of YAML 1.1 and of str.splitlines, each followed by a key it would inject.
BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
HOSTILE = [f"c{i}{br}seed: {i}" for i, br in enumerate(BREAKS)] + [
    "k\nkey: x",
    "l\u2028label: y",
    "hash # not a comment",
    "colon: space",
    'dq"uote',
    "sq'uote",
    "- dash",
    "{flow: [x]}",
    "*alias",
    "&anchor",
    "!!python/object:os.system",
    "null",
    "true",
    "tab\there",
    "rtl\u202eevil",
    "emoji \U0001f600",
    "back\\slash",
]
TOP_KEYS = {"source", "target", "columns", "privacy", "search"}
#: A name with breaks, and one the dotted form cannot carry (written as a mapping).
TABLES = ["t\nseed: 99\u2028key: z", 'dot.ted "q"\nkey: 1']


def _init(db: TestDB, table: str, tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / "policy.yaml"
    code, _, err = cli("init", "--db", db.url, "--table", f"main.{qident(table)}", "--out", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    return text, yaml.safe_load(text)


def _check(text: str, data: dict, columns: list[str], path: Path) -> None:
    assert set(data) == TOP_KEYS, sorted(data)
    assert list(data["columns"]) == columns
    assert set(data["privacy"]) == {"k", "suppression"}
    for spec in data["columns"].values():
        assert set(spec) <= {"role", "action", "hierarchy"}, spec
    assert data["search"] == {"algorithm": "flash", "metric": "ncp"}
    # One line per column (a break in a name is an escape, not a new line), also where the search's
    # comment names the QIs without a hierarchy.
    lines = text.split("\n")
    body = lines[lines.index("columns:") + 1 : lines.index("privacy:")]
    assert len(body) == len(columns) and all(ln.startswith("  ") for ln in body)
    assert text.splitlines() == text.removesuffix("\n").split("\n")  # no other break
    pol = load_policy(path)
    assert [c.name for c in pol.columns] == columns


@pytest.mark.parametrize("table", TABLES)
def test_hostile_column_names(db: TestDB, tmp_path: Path, table: str) -> None:
    cols = ["id", *HOSTILE]
    rows = [[i, *(f"v{i % 3}" for _ in HOSTILE)] for i in range(12)]
    db.load(table, cols, rows, ["INTEGER"] + ["VARCHAR"] * len(HOSTILE))
    text, data = _init(db, table, tmp_path)
    _check(text, data, cols, tmp_path / "policy.yaml")
    pol = load_policy(tmp_path / "policy.yaml")
    assert pol.source == Relation(name=table, schema="main")
    assert pol.target == Relation(name=table + "_anon", schema="main")


def test_duckdb_enum_labels(db: TestDB, tmp_path: Path) -> None:
    if db.kind != "duckdb":
        pytest.skip("ENUM labels are part of the type name on DuckDB only")
    labels = ["ok", "x\nseed: 3", "y\u2028key: z", "w\rlabel: q", "v\x85seed: 4"]
    sql_labels = ", ".join("'" + lb.replace("'", "''") + "'" for lb in labels)
    db.sql(f"CREATE TYPE mood AS ENUM ({sql_labels})")
    db.sql('CREATE TABLE main.moods (id INTEGER, "m\nseed: 5" mood)')
    db.sql(
        "INSERT INTO main.moods SELECT id, CASE id % 2 WHEN 0 THEN 'ok' ELSE 'x\nseed: 3' END "
        "FROM range(10) AS r(id)"
    )
    text, data = _init(db, "moods", tmp_path)
    _check(text, data, ["id", "m\nseed: 5"], tmp_path / "policy.yaml")
    assert data["source"] == "main.moods"


def test_postgres_type_names(db: TestDB, tmp_path: Path) -> None:
    if db.kind != "postgres":
        pytest.skip("PostgreSQL enum and domain types")
    db.sql("CREATE TYPE main.\"e\nseed: 6\" AS ENUM ('ok', 'x\nkey: 7')")
    db.sql('CREATE TABLE main.pe (id INTEGER, "e\nlabel: 8" main."e\nseed: 6")')
    db.sql(
        "INSERT INTO main.pe SELECT g, (CASE WHEN g % 2 = 0 THEN 'ok' ELSE 'x\nkey: 7' END)"
        '::main."e\nseed: 6" FROM generate_series(1, 10) AS g'
    )
    text, data = _init(db, "pe", tmp_path)
    _check(text, data, ["id", "e\nlabel: 8"], tmp_path / "policy.yaml")
