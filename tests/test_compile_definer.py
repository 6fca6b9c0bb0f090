"""``sqlanon compile --dialect postgres`` prints what ``anonymise`` runs to publish a PostgreSQL
view: not a plain view (a reader's predicates would run inside it), but the definer form of
sqlanon/engines/definer.py (row type, stored query, SECURITY DEFINER function, REVOKE, the view
reading the function), the same statements from the same code. Run as printed, it publishes the
rows anonymise publishes, through a function whose body and settings are those anonymise creates."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import yaml

from sqlanon.cli.keys import PLAIN_VIEW_NOTE
from tests.conftest import ROOT, TestDB
from tests.helpers import cli, cli_json

LEVELS = "Postcode=2,Age=1"
TAG = re.compile(r"sqlanon_(fn|rel)_[0-9a-f]{12}", re.IGNORECASE)


def _policy(tmp_path: Path, target: str) -> Path:
    doc = yaml.safe_load((ROOT / "fixtures" / "patients.yaml").read_text(encoding="utf-8"))
    doc["target"] = target
    path = tmp_path / f"{target}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _function(db: TestDB, view: str) -> tuple[str, bool, list[str]]:
    """The body (tags blanked), SECURITY DEFINER flag and setting names of the function ``view`` reads."""
    (defn,) = db.sql(f"SELECT pg_get_viewdef('main.{view}'::regclass)")[0]
    name = TAG.search(defn)
    assert name is not None, defn
    src, definer, config = db.sql(
        "SELECT prosrc, prosecdef, proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        f"WHERE n.nspname = 'main' AND p.proname = '{name.group(0).lower()}'"
    )[0]
    return TAG.sub("sqlanon_TAG", src), definer, sorted(c.split("=", 1)[0].lower() for c in config)


def test_compile_prints_the_definer_form_without_a_database(tmp_path: Path) -> None:
    path = _policy(tmp_path, "main.patients_anon")
    code, out, err = cli("compile", str(path), "--dialect", "postgres", "--levels", LEVELS)
    assert code == 0, err
    assert PLAIN_VIEW_NOTE not in out
    assert "SECURITY DEFINER" in out and "REVOKE ALL ON FUNCTION" in out and "FROM CURRENT" in out
    assert re.search(r'CREATE VIEW "main"\."patients_anon" AS SELECT .* FROM "main"\.SQLANON_FN_', out)
    assert "Under 30" not in out.split("CREATE VIEW")[1]  # the view's definition holds no label
    again = cli("compile", str(path), "--dialect", "postgres", "--levels", LEVELS)[1]
    assert again == out  # names from a hash of the release: the same script each time
    # Other engines, and a table, keep their single statement.
    for args in (("--dialect", "duckdb"), ("--dialect", "postgres", "--as", "table")):
        text = cli("compile", str(path), *args, "--levels", LEVELS)[1]
        assert text.count("CREATE ") == 1 and "SECURITY DEFINER" not in text


def test_the_printed_script_publishes_what_anonymise_publishes(pg_patients: TestDB, tmp_path: Path) -> None:
    db = pg_patients
    printed = _policy(tmp_path, "main.by_hand")
    code, out, err = cli("compile", str(printed), "--dialect", "postgres", "--levels", LEVELS)
    assert code == 0, err
    db.sql(out)
    cli_json("anonymise", str(_policy(tmp_path, "main.by_sqlanon")), "--db", db.url, "--levels", LEVELS)
    cols = '"PatientName", "Postcode", "Age", "Disease"'
    by_hand = Counter(db.sql(f"SELECT {cols} FROM main.by_hand"))
    assert by_hand == Counter(db.sql(f"SELECT {cols} FROM main.by_sqlanon")) and sum(by_hand.values()) == 9
    body, definer, settings = _function(db, "by_hand")
    theirs = _function(db, "by_sqlanon")
    assert definer and theirs[1] and (body, settings) == (theirs[0], theirs[2])
    assert "timezone" in settings and "search_path" in settings
