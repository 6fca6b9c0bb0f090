"""``anonymise --dry-run`` prints what publishing runs: the text ``sqlanon compile`` prints (task TS).

On PostgreSQL a published view reads a SECURITY DEFINER function (sqlanon/engines/definer.py), and
``compile`` prints those statements (names from a hash of the release, the function's settings
``SET ... FROM CURRENT``); the dry run printed the plain view instead, the one form that is never
published there (a reader's predicates run inside it). The reference is compile's output on the
same database: byte for byte the dry run's stdout, for a lattice node, a Mondrian release and a
policy with no target (both then name ``<source>_anon``; the dry run said ``release``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, TestDB, with_patients
from tests.helpers import cli, write_policy

VARIANTS: dict[str, dict[str, Any]] = {
    "lattice": {},
    "mondrian": {"search": {"algorithm": "mondrian"}},
    "no_target": {"target": None},
}


def _policy(tmp_path: Path, variant: str) -> Path:
    pol = yaml.safe_load((ROOT / "fixtures" / "patients.yaml").read_text(encoding="utf-8"))
    pol.update(VARIANTS[variant])
    return write_policy(tmp_path, {k: v for k, v in pol.items() if v is not None})


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dry_run_prints_what_compile_prints(db: TestDB, tmp_path: Path, variant: str) -> None:
    url = with_patients(db).url
    path = str(_policy(tmp_path, variant))
    code, compiled, err = cli("compile", path, "--dialect", db.kind, "--db", url)
    assert code == 0, err
    code, out, err = cli("anonymise", path, "--db", url, "--dry-run")
    assert code == 0, err
    assert out == compiled
    if db.kind == "postgres":
        assert "SECURITY DEFINER" in out and "FROM CURRENT" in out and "sqlanon_fn_" in out
        assert "A plain view" not in out
    else:
        assert out.startswith("CREATE VIEW")
    if variant == "no_target":
        assert "patients_anon" in out and '"release"' not in out


def test_the_printed_definer_publishes_the_release(pg_patients: TestDB, tmp_path: Path) -> None:
    """Run as it is (``--dry-run > release.sql``), the PostgreSQL text publishes a view that reads
    the definer function and returns seed 001's nine generalised rows (k = 3, nothing suppressed)."""
    code, out, err = cli("anonymise", str(_policy(tmp_path, "lattice")), "--db", pg_patients.url, "--dry-run")
    assert code == 0, err
    pg_patients.sql(out)
    assert pg_patients.sql('SELECT COUNT(*) FROM "main"."patients_anon"') == [(9,)]
    (definition,) = pg_patients.sql("SELECT pg_get_viewdef('main.patients_anon'::regclass)")[0]
    assert "sqlanon_fn_" in definition and "patients" not in definition.replace("patients_anon", "")


def test_dry_run_names_the_schema_of_the_view_it_replaces(pg_patients: TestDB, tmp_path: Path) -> None:
    """An unqualified target that exists in another schema of the path than the user's home is
    replaced where it is (publish's swap); the dry run printed the home schema instead, so its
    definer function, table and view would have been created beside the wrong relation."""
    (name,) = pg_patients.sql("SELECT current_database()")[0]
    pg_patients.sql(f'ALTER DATABASE "{name}" SET search_path = main, public')
    pg_patients.sql('CREATE VIEW "public"."patients_anon" AS SELECT 1 AS x')
    pol = yaml.safe_load((ROOT / "fixtures" / "patients.yaml").read_text(encoding="utf-8"))
    path = str(write_policy(tmp_path, {**pol, "target": "patients_anon"}))
    code, out, err = cli("anonymise", path, "--db", pg_patients.url, "--dry-run", "--replace")
    assert code == 0, err
    assert 'CREATE VIEW "public"."patients_anon"' in out and '"main"."patients_anon"' not in out
    code, _, err = cli("anonymise", path, "--db", pg_patients.url, "--replace")
    assert code == 0, err
    assert pg_patients.sql('SELECT COUNT(*) FROM "public"."patients_anon"') == [(9,)]
