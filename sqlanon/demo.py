"""``sqlanon demo``: the seed-001 patient table, assessed (and anonymised) on an embedded DuckDB."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from sqlanon.engines import Backend, session
from sqlanon.errors import SqlanonError
from sqlanon.policy import load_policy

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
if not FIXTURES.is_dir():  # installed wheel
    FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load_patients(be: Backend, schema: str = "main", table: str = "patients") -> None:
    """Create and fill the patient table through the compile path (fixture data, 9 rows).

    The demo only ever creates: a relation of that name already in the database is the user's,
    so it is refused rather than replaced (sqlanon never drops what it did not create).
    """
    from sqlanon.engines.catalog import identify
    from sqlanon.relation import Relation

    rows = list(csv.DictReader((FIXTURES / "patients.csv").open(encoding="utf-8")))
    rel = Relation(table, schema=schema)
    for name in (table, f"{table}_anon"):
        if identify(be, rel.with_name(name), "demo") is not None:
            raise SqlanonError(
                f"demo: {schema}.{name} already exists in {be.url}; the demo only creates new "
                "relations (run it on a new database file, or without --db)"
            )
    be.execute("fixtures/patients_create", kind="create", target=rel)
    be.execute(
        "fixtures/patients_insert",
        kind="insert",
        target=rel,
        rows=[
            [int(r["PatientID"]), r["PatientName"], r["Postcode"], int(r["Age"]), r["Disease"]] for r in rows
        ],
    )
    be.commit()


def run_demo(db: str | None, *, as_json: bool, console: Console) -> dict[str, Any]:
    from sqlanon.assess import assess
    from sqlanon.publish import anonymise
    from sqlanon.report import print_anonymise, print_assess

    policy = load_policy(FIXTURES / "patients.yaml")
    with session(db, create=True) as be:
        load_patients(be)
        before = assess(be, policy)
        result: dict[str, Any] = {"assess": before, "anonymise": anonymise(be, policy)}
    if as_json:
        console.print_json(json.dumps(result, default=str))
    else:
        console.print("[bold]sqlanon demo[/bold]: the 9-row patient table of seed 001 on DuckDB")
        print_assess(before, console, title="Before anonymisation:")
        print_anonymise(result["anonymise"], console)
    return result
