"""``sqlanon demo``: the seed-001 patient table, assessed (and anonymised) on an embedded DuckDB."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sqlanon import api
from sqlanon.engines import Backend, session
from sqlanon.lattice import build_hierarchies
from sqlanon.policy import load_policy
from sqlanon.relation import Relation
from sqlanon.report import class_labels, node_text
from sqlanon.transform.examples import node_examples


def _rows(be: Backend, rel: Relation, cols: list[str]) -> list[tuple]:
    return be.query("demo/rows", source=rel, cols=cols, order=cols[1:3])


def _table(title: str, cols: list[str], rows: list[tuple]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in cols:
        t.add_column(Text(c))
    for r in rows:
        t.add_row(*[Text("NULL" if v is None else str(v)) for v in r])
    return t


def run_demo(db: str | None, *, as_json: bool, console: Console, quiet: bool = False) -> dict[str, Any]:
    """Load the patients into ``db`` (a new in-memory DuckDB by default), assess, anonymise, and
    explain each step in plain words: what the figures mean and whether they are good. ``quiet``
    keeps the tables and the figures, without the sentences that explain them."""
    policy = load_policy(api.FIXTURES / "patients.yaml")
    assert policy.target is not None
    cols = ["PatientID", "PatientName", "Postcode", "Age", "Disease"]
    with session(db, create=True) as be:
        api.load_demo_data(be)
        before_rows = _rows(be, policy.source, cols)
        before = api.assess(policy, be).to_dict()
        release = api.anonymise(policy, be).to_dict()
        after_rows = _rows(be, policy.target, ["PatientName", "Postcode", "Age", "Disease"])
        result: dict[str, Any] = {"assess": before, "anonymise": release}
    if as_json:
        console.print_json(json.dumps(result, default=str))
        return result
    console.print(
        "[bold]sqlanon demo[/bold]: a 9-patient example table (postcode, age, disease), "
        "anonymised inside DuckDB\n"
    )
    console.print(_table("Before: main.patients", cols, before_rows))
    pub = release["published"]
    examples = node_examples(build_hierarchies(policy), release["node"], class_labels(pub))
    node = node_text(release["node"], examples)
    if quiet:
        console.print(Text(f"before: k = {before['k']} (the policy asks for k = {policy.privacy.k})"))
        console.print(_table(f"After: {policy.target}", cols[1:], after_rows))
        l_min = pub["l_diversity"]["Disease"]["distinct"]
        console.print(Text(f"chosen node {node}; after: k = {pub['k']}, l = {l_min}"))
        console.print(Text(f"release: {policy.target} in {be.url if db else 'an in-memory database'}"))
        return result
    console.print(
        f"Postcode and Age are quasi-identifiers: not names, but together they can single a person "
        f"out. Here k = {before['k']}: the smallest group of patients sharing Postcode and Age has "
        f"{before['k']} record(s), so someone who knows a patient's postcode and age finds their "
        f"disease. The policy asks for k = {policy.privacy.k}.\n"
    )
    console.print(_table(f"After: {policy.target} (PatientID dropped, names masked)", cols[1:], after_rows))
    console.print(
        f"sqlanon searched {release['nodes_total']} ways to generalise (checked "
        f"{release['nodes_checked']}) and chose {escape(node)} (each level, an example label in "
        f"brackets): postcodes keep 3 digits, ages become bands. Now k = {pub['k']}: every patient "
        "shares Postcode and Age band with at least "
        f"{pub['k'] - 1} others, so no one can be singled out (good). Nothing was suppressed."
    )
    l_min = pub["l_diversity"]["Disease"]["distinct"]
    if l_min == 1:
        console.print(
            "[bold]But[/bold] l = 1: in at least one group every patient has the same disease. "
            "In the 'Under 30' group of 476** all three have Heart Disease, so knowing that someone is "
            "in it reveals their diagnosis (the homogeneity attack: Machanavajjhala et al., "
            "l-Diversity, 2007). Add "
            "`l: {Disease: 2}` to the policy's privacy to require two diseases per group."
        )
    where = (
        f"The release is the view {policy.target} in {be.url}"
        if db
        else f"The release was the view {policy.target} in an in-memory database, now gone; run "
        "`sqlanon demo --db demo.duckdb` to keep it"
    )
    console.print(f"\n{where}; read it with SELECT * FROM {policy.target}.")
    console.print(
        "Every figure of this table: `sqlanon demo --json`; for your own table, `sqlanon init` writes a "
        "starting policy (docs/your-own-table.md)."
    )
    return result
