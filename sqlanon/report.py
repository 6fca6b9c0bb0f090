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
        for col in ("attribute", "l distinct", "l entropy", "recursive c_min (l)", "EMD equal",
                    "EMD ordered", "KL (I1)", "H(W)", "l_max", "I(W;QI)"):
            t.add_column(col)
        for s in a["sensitive"]:
            ld, tc, inf = a["l_diversity"][s], a["t_closeness"][s], a["information"][s]
            rec = ld["recursive"]
            t.add_row(
                s, _fmt(ld["distinct"]), _fmt(ld["entropy"]),
                f"{_fmt(rec['c_min']) if rec['c_min'] is not None else 'inf'} ({rec['l']})",
                _fmt(tc["emd_equal"]), _fmt(tc["emd_ordered"]), _fmt(tc["kl"]),
                _fmt(inf["entropy"]), _fmt(inf["l_max"]), _fmt(inf["mutual_information"]),
            )
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
