"""``sqlanon demo``: the seed-001 patient table, assessed (and anonymised) on an embedded DuckDB."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from sqlanon import api
from sqlanon.engines import session
from sqlanon.policy import load_policy
from sqlanon.report import print_anonymise, print_assess


def run_demo(db: str | None, *, as_json: bool, console: Console) -> dict[str, Any]:
    """Load the patients into ``db`` (a new in-memory DuckDB by default), assess, anonymise, print."""
    policy = load_policy(api.FIXTURES / "patients.yaml")
    with session(db, create=True) as be:
        api.load_demo_data(be)
        before = api.assess(policy, be).to_dict()
        result: dict[str, Any] = {"assess": before, "anonymise": api.anonymise(policy, be).to_dict()}
    if as_json:
        console.print_json(json.dumps(result, default=str))
    else:
        console.print("[bold]sqlanon demo[/bold]: the 9-row patient table of seed 001 on DuckDB")
        print_assess(before, console, title="Before anonymisation:")
        print_anonymise(result["anonymise"], console)
    return result
