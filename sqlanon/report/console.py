"""Human-readable summaries (rich) of the JSON objects the commands return.

Printing lives here and only here; the modules that compute return dicts. Everything that comes
from the data or the policy (values, labels, column and relation names) is escaped before rich
sees it: rich reads ``[...]`` as markup, so a QI value ``[/red]`` raised a MarkupError and ``[b]``
vanished. Table cells are ``Text`` objects, which rich never parses.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text


def _e(v: Any) -> str:
    """Data or policy text, escaped for rich markup."""
    return escape(str(v))


def _cell(v: Any) -> Text:
    return Text(str(v))


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
    console.print(f"[bold]{_e(title or 'Assessment of')} {_e(a['source'])}[/bold] ({_e(a['dialect'])})")
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
            t.add_column(_cell(s))
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
            t.add_row(_cell(label), *[_cell(_fmt(get(s))) for s in a["sensitive"]])
        console.print(t)
        for s in a["sensitive"]:
            top = a["information"][s]["top_i1"][:3]
            if top:
                desc = "; ".join(f"{c['class']} n={c['size']} I1={c['i1']:.3g}" for c in top)
                console.print(f"most disclosive classes for {_e(s)} (I1): {_e(desc)}")
    if a["satisfied"]:
        t = Table(title="policy requirements")
        t.add_column("requirement")
        t.add_column("violating records")
        t.add_column("holds")
        for req, ok in a["satisfied"].items():
            t.add_row(_cell(req), _cell(_fmt(a["violations"].get(req))), _cell(_fmt(ok)))
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
            f"[bold]{_e(r['algorithm'])}[/bold]: {r['nodes_checked']} node checks over a lattice of "
            f"{r['nodes_total']} nodes; {len(r['minimal_nodes'])} minimal node(s)"
        )
    opt = r["optimum"]
    console.print(
        f"chosen node {_e(_node_text(r['node']))} ({_e(opt['metric'])} = {_fmt(opt['value'])}); "
        f"suppressed records: {r['suppressed_records']} of {r['rows']}"
    )
    if r.get("excluded_columns"):
        console.print(f"not published (undeclared): {_e(', '.join(r['excluded_columns']))}")
    if r.get("sql"):
        console.print(r["sql"] + ";", markup=False, highlight=False)
    if r.get("published"):
        console.print(f"published {_e(r['publish_as'])} {_e(r['target'])}; measured again:")
        print_assess(r["published"], console, title="Published")


def _fmt6(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _node_text(node: dict[str, int] | None) -> str:
    if node is None:
        return "-"
    return ",".join(f"{q}={lvl}" for q, lvl in node.items())


def print_evaluate(r: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    ok = "satisfies" if r["satisfies"] else "does NOT satisfy"
    console.print(
        f"[bold]node {_e(_node_text(r['node']))}[/bold] on {_e(r['source'])} ({_e(r['dialect'])}): {ok} the "
        "policy; "
        f"suppressed {r['suppressed_records']} of {r['rows']} records "
        f"(allowed {r['allowed_suppression']})"
    )
    t = Table(title="utility and information loss of the release")
    for col in ("metric", "value", "better", "range", "monotone"):
        t.add_column(col)
    for name, v in r["metrics"].items():
        i = r["metric_info"][name]
        # Text cells: a range such as "[mean_j H(Y|X_j), H(Y)]" is not markup (rich dropped it).
        t.add_row(*map(_cell, (name, _fmt6(v), i["better"], i["range"], "yes" if i["monotone"] else "no")))
    console.print(t)
    print_assess(r["assess"], console, title=f"Assessment ({r['assess_scope']}) of")


def print_profile(r: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(
        f"[bold]utility profile[/bold] of {_e(r['source'])} ({_e(r['dialect'])}): optimum by "
        f"{_e(r['metric'])} ({_e(r['algorithm'])}), suppression limit {r['suppression']:.2%}"
    )
    rows = r["profile"]
    qis = next((list(e["node"]) for e in rows if e.get("node")), [])
    t = Table(caption=_cell(f"node = levels of {', '.join(qis)}") if qis else None)
    t.add_column("metric", overflow="fold")
    t.add_column("better")
    for e in rows:
        t.add_column(f"k={e['k']}", overflow="fold")
    nodes = [",".join(map(str, e["node"].values())) if e.get("node") else "-" for e in rows]
    t.add_row(*map(_cell, ("node", "", *nodes)))
    t.add_row(*map(_cell, ("suppressed", "", *[_fmt6(e.get("suppressed_records")) for e in rows])))
    t.add_row(*map(_cell, ("classes", "", *[_fmt6(e.get("classes")) for e in rows])))
    for name, i in r["metric_info"].items():
        t.add_row(
            *map(_cell, (name, i["better"], *[_fmt6((e.get("metrics") or {}).get(name)) for e in rows]))
        )
    console.print(t)
    for e in rows:
        if e.get("error"):
            console.print(f"k={e['k']}: {_e(e['error'])}")
