"""Human-readable summaries (rich) of the JSON objects the commands return."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def print_assess(a: dict[str, Any], console: Console | None = None, title: str | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]{title or 'Assessment of'} {a['source']}[/bold] ({a['dialect']})")
    console.print(
        f"rows {a['rows']}, equivalence classes {a['classes']}, k = {a['k']} (smallest class); "
        f"records in classes smaller than k={a['policy_k']}: {a['records_below_k']} "
        f"({a['share_below_k']:.2%})"
    )
    sizes = ", ".join(f"{s}:{n}" for s, n in list(a["class_sizes"].items())[:12])
    more = " ..." if len(a["class_sizes"]) > 12 else ""
    console.print(f"class sizes (size:classes) {sizes}{more}")
    r = a["risk"]
    console.print(
        f"risk: prosecutor max {_fmt(r['prosecutor_max'])}, avg {_fmt(r['prosecutor_avg'])}; "
        f"marketer {_fmt(r['marketer'])}; journalist {_fmt(r['journalist'])}"
    )
    if a["sensitive"]:
        t = Table(title="sensitive attributes")
        t.add_column("measure")
        for s in a["sensitive"]:
            t.add_column(s)
        rows = [
            ("l distinct", lambda s: a["l_diversity"][s]["distinct"]),
            ("l entropy (2^min H)", lambda s: a["l_diversity"][s]["entropy"]),
            (
                "recursive c_min (l)",
                lambda s: (
                    f"{_fmt(a['l_diversity'][s]['recursive']['c_min'])} "
                    f"({a['l_diversity'][s]['recursive']['l']})"
                ),
            ),
            ("t: EMD equal", lambda s: a["t_closeness"][s]["emd_equal"]),
            ("t: EMD ordered", lambda s: a["t_closeness"][s]["emd_ordered"]),
            ("t: KL (max I1)", lambda s: a["t_closeness"][s]["kl"]),
            ("H(W) bits", lambda s: a["information"][s]["entropy"]),
            ("l_max = 2^H(W)", lambda s: a["information"][s]["l_max"]),
            ("l_t = 2^(H(W)-t)", lambda s: a["information"][s]["l_t"]),
            ("I(W; QI groups)", lambda s: a["information"][s]["mutual_information"]),
        ]
        for label, get in rows:
            t.add_row(label, *[_fmt(get(s)) for s in a["sensitive"]])
        console.print(t)
        for s in a["sensitive"]:
            top = a["information"][s]["top_i1"][:3]
            if top:
                desc = "; ".join(f"{c['class']} n={c['size']} I1={c['i1']:.3g}" for c in top)
                console.print(f"most disclosive classes for {s} (I1): {desc}")
    if a["satisfied"]:
        t = Table(title="policy requirements")
        t.add_column("requirement")
        t.add_column("violating records")
        t.add_column("holds")
        for req, ok in a["satisfied"].items():
            t.add_row(req, _fmt(a["violations"].get(req)), _fmt(ok))
        console.print(t)
        s = a["suppression"]
        console.print(
            f"suppression limit {s['limit']:.2%} ({s['allowed_records']} records); "
            f"records violating any requirement: {s['records_violating_any']}"
        )


def print_anonymise(r: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    if r.get("algorithm") != "given":
        console.print(
            f"[bold]{r['algorithm']}[/bold]: {r['nodes_checked']} of {r['nodes_total']} nodes checked; "
            f"{len(r['minimal_nodes'])} minimal node(s)"
        )
    opt = r["optimum"]
    console.print(
        f"chosen node {r['node']} ({opt['metric']} = {_fmt(opt['value'])}); "
        f"suppressed records: {r['suppressed_records']} of {r['rows']}"
    )
    if r.get("excluded_columns"):
        console.print(f"not published (undeclared): {', '.join(r['excluded_columns'])}")
    if r.get("sql"):
        console.print(r["sql"] + ";", markup=False, highlight=False)
    if r.get("published"):
        console.print(f"published {r['publish_as']} {r['target']}; measured again:")
        print_assess(r["published"], console, title="Published")
