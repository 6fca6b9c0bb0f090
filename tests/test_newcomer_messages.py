"""What a newcomer meets on the command line before reading any page: ``--help`` and the first
mistakes (a forgotten ``--db``, ``secret-pads`` without a key).

Why: each was met by following the README as a DBA who had never seen sqlanon. ``--help`` said a
required ``--db`` defaulted to an in-memory DuckDB, named internal documents ("seed-001", "Seed
002's experiment") and left two options unexplained; a command without ``--db`` said only that the
source was not found on ``duckdb:///:memory:``; ``secret-pads`` without a key blamed "action hash",
an option of a policy the command does not read.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

import sqlanon
from sqlanon.cli import main
from tests.conftest import ROOT, TestDB
from tests.helpers import cli, write_policy

KEY_VARIABLES = [f"SQLANON_{k}_KEY{f}" for k in ("HASH", "PERTURB") for f in ("", "_FILE")]


def _help_texts() -> list[tuple[str, str, click.Parameter | None]]:
    """(command, text, option) for every command's description and every option's help."""
    out: list[tuple[str, str, click.Parameter | None]] = []
    for name, command in main.commands.items():
        out.append((name, command.help or "", None))
        out += [(name, p.help or "", p) for p in command.params if isinstance(p, click.Option)]
    return out


def test_a_required_db_names_no_default() -> None:
    """``[required]`` beside "(default: an in-memory DuckDB)" contradicts itself (init, hierarchy,
    dbt, cleanup); where ``--db`` may be left out (assess) the default is still named."""
    seen = set()
    for name, text, option in _help_texts():
        if option is not None and "--db" in option.opts:
            seen.add(name)
            assert "default" not in text if option.required else name != "assess" or "default" in text, text
    assert {"init", "hierarchy", "dbt", "cleanup", "assess"} <= seen


def test_help_explains_every_option_in_the_users_words() -> None:
    """Every option has a help line, and no description names the project's internal papers by
    their file numbers ("seed-001", "Seed 002") or says "the main job"."""
    for name, text, option in _help_texts():
        if option is not None and "--help" not in option.opts:
            assert text.strip(), (name, option.opts)
        for internal in ("seed-0", "seed 0", "main job"):
            assert internal not in text.lower(), (name, text)


def test_a_forgotten_db_is_named() -> None:
    """Without ``--db`` a command opens an empty in-memory DuckDB: the one line says so and names
    ``--db``, exit 2."""
    code, out, err = cli("assess", str(ROOT / "fixtures" / "patients.yaml"))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "'main.patients' not found" in err and "in-memory DuckDB starts empty" in err and "--db" in err


def test_secret_pads_without_a_key_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """``secret-pads`` reads no policy, and either key will do: the line names both variables,
    not a policy's ``action hash``; a key that is set but too short keeps its own message."""
    for var in KEY_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    code, out, err = cli("secret-pads")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: secret-pads: no secret key is set")
    assert "SQLANON_HASH_KEY" in err and "SQLANON_PERTURB_KEY" in err and "action hash" not in err
    monkeypatch.setenv("SQLANON_PERTURB_KEY", "short")
    code, _, err = cli("secret-pads")
    assert code == 2 and "SQLANON_PERTURB_KEY holds 5 bytes" in err, err


def test_secret_pads_with_one_key_warns_of_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one key set the other's pads go out as NULL, and printed SQL that reads them does not
    fail (its HMACs are NULL; a perturbation's clamped uniform becomes one constant shift, which
    anyone can subtract): the row still comes out, with one ``note:`` line naming the unset key."""
    for var in KEY_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SQLANON_HASH_KEY", "0123456789abcdef0123")
    code, out, err = cli("secret-pads")
    assert code == 0 and out.endswith("\t\\N\t\\N\n") and out.count("\t") == 3, out
    assert err.count("\n") == 1 and err.startswith("note: secret-pads: SQLANON_PERTURB_KEY is not set"), err


def test_the_base_install_brings_the_local_walks_parser() -> None:
    """``auto`` walks locally on PostgreSQL only where pyarrow imports (COPY's CSV parsed into
    Arrow), and without it silently stays in the database, ~5x slower at 1e6 rows: the base
    install must bring it, not an extra a PostgreSQL user would not know to ask for."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    deps = [d.split(">")[0].split("=")[0].split("[")[0].strip() for d in pyproject["project"]["dependencies"]]
    assert "pyarrow" in deps


def test_load_demo_data_takes_a_database_as_every_function_does(tmp_path: Path) -> None:
    """docs/api.md: a database is a URL, a DuckDB file path, None or an open session, for every
    function; ``load_demo_data("demo.duckdb")`` raised AttributeError ('str' has no 'dialect')."""
    path = str(tmp_path / "demo.duckdb")
    sqlanon.load_demo_data(path)
    assert sqlanon.assess(str(ROOT / "fixtures" / "patients.yaml"), path).k == 1
    with pytest.raises(sqlanon.SqlanonError, match="already exists"):
        sqlanon.load_demo_data(path)


def test_invalid_yaml_says_what_the_parser_found(tmp_path: Path) -> None:
    """A policy indented with a tab (an editor's default) was "not valid YAML (line 3)": the line
    is named, not what is wrong on it; the parser's words and the tab are, in the same one line."""
    policy = tmp_path / "p.yaml"
    policy.write_text("source: main.patients\ncolumns:\n\tAge: quasi\nprivacy: {k: 3}\n", encoding="utf-8")
    code, out, err = cli("assess", str(policy), "--db", str(tmp_path / "none.duckdb"))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "not valid YAML (line 3, column 1: found character" in err, err
    assert "; a tab: YAML indents with spaces)" in err, err


def test_duckdbs_schema_on_postgresql_is_named(pg_patients: TestDB) -> None:
    """The README's policies say ``main.patients``; on PostgreSQL the table is in ``public``. The
    line says so (docs/your-own-table.md lists it under "When something goes wrong")."""
    pg_patients.sql('ALTER TABLE "main"."patients" SET SCHEMA public')  # where psql's CREATE TABLE puts it
    code, out, err = cli("assess", str(ROOT / "fixtures" / "patients.yaml"), "--db", pg_patients.url)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "'main.patients' not found on postgres" in err
    assert err.rstrip().endswith("; PostgreSQL's default schema is public, not DuckDB's main"), err


def test_levels_with_a_perturbed_qi(
    duck_patients: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--levels`` names the generalised QIs only: with a perturbed one (docs/policy.md's
    ``perturb:``) ``anonymise --levels Postcode=2`` crashed with a traceback (``zip() argument 2 is
    longer than argument 1``: the node counted the perturbed QI, the lattice does not); naming the
    perturbed QI is one line."""
    monkeypatch.setenv("SQLANON_PERTURB_KEY", "0123456789abcdef0123456789abcdef")
    policy = write_policy(
        tmp_path,
        {
            "source": "main.patients",
            "target": "main.patients_pert",
            "key": "PatientID",
            "columns": {
                "PatientID": {"role": "identifier", "action": "drop"},
                "Postcode": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
                "Age": {"role": "quasi", "perturb": {"method": "k-noise", "k": 3}},
                "Disease": {"role": "sensitive"},
            },
            "privacy": {"k": 3},
        },
    )
    code, out, err = cli(
        "anonymise", str(policy), "--db", duck_patients.url, "--levels", "Postcode=2", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["node"] == {"Postcode": 2}
    code, out, err = cli(
        "anonymise", str(policy), "--db", duck_patients.url, "--levels", "Age=1", "--dry-run"
    )
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "--levels: 'Age' is perturbed, not generalised" in err


def test_compile_without_a_database_names_the_columns_it_leaves_unrounded(tmp_path: Path) -> None:
    """Without --db sqlanon cannot see that a perturbed column is an integer, which `anonymise`
    publishes as whole numbers (34.5 printed where 35 is published): the printed SQL says which
    columns, and how to match; nothing is said where the policy rounds, or for PRAM."""
    from tests.test_secrets import _policy

    pol = _policy("main.by_hand")
    path = write_policy(tmp_path, pol)
    code, out, err = cli("compile", str(path), "--dialect", "tsql", "--levels", "age=1,zip=0")
    assert code == 0, err
    note = [line for line in out.splitlines() if line.startswith("-- Printed without a database")]
    assert note and note[0].endswith(": income"), out
    pol["columns"]["income"]["perturb"]["round"] = 1
    code, out, err = cli(
        "compile", str(write_policy(tmp_path, pol)), "--dialect", "tsql", "--levels", "age=1,zip=0"
    )
    assert code == 0 and "Printed without a database" not in out, out
    from sqlanon.api import load_policy
    from sqlanon.cli.keys import compile_notes

    pol["columns"]["income"]["perturb"].pop("round")
    assert not compile_notes("SELECT 1", "tsql", load_policy(pol), "some.duckdb")  # with --db: no note
