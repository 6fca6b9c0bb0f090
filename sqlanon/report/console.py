"""Human-readable summaries (rich) of the JSON objects the commands return.

Printing lives here and only here; the modules that compute return dicts. Everything that comes
from the data or the policy (values, labels, column and relation names) is escaped before rich
sees it: rich reads ``[...]`` as markup, so a QI value ``[/red]`` raised a MarkupError and ``[b]``
vanished. Table cells are ``Text`` objects, which rich never parses.

Lines wrap only where a terminal is attached (:func:`make_console`): piped output keeps each line
whole, so grep and diff see what was said. Under each table one plain sentence says what it shows
and which way is better; ``--quiet`` leaves those sentences out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sqlanon.measure.wildcard import describe_wildcard
from sqlanon.presence import describe_presence
from sqlanon.profitability import describe_profitability
from sqlanon.report import sample
from sqlanon.report.terminal import visible
from sqlanon.risk_extra import describe_risks
from sqlanon.sql import secrets

#: The width of a console with no terminal: wide enough that nothing wraps (rich's default, 80
#: columns, broke sentences and table cells mid-word in piped output).
UNWRAPPED = 100_000


def make_console(stderr: bool = False) -> Console:
    """A console that wraps at the terminal's width, and not at all when output is piped."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, width=UNWRAPPED, soft_wrap=True)


def _explain(console: Console, quiet: bool, text: str) -> None:
    """One plain sentence under a table (left out with ``--quiet``); never markup."""
    if not quiet:
        console.print(Text(text, style="dim"))


def node_text(node: Mapping[str, int] | None, examples: Mapping[str, str | None] | None = None) -> str:
    """``Postcode=2 (476**), Age=1 (<30)``: each level with an example label where one is known."""
    if node is None:
        return "-"
    ex = examples or {}
    return ", ".join(f"{q}={lvl}{_example(ex.get(q))}" for q, lvl in node.items())


def class_labels(assessed: Mapping[str, Any] | None) -> dict[str, Any]:
    """The labels of one class of a measured release (QI -> label), from figures a command computed
    anyway (the most disclosive classes): examples of a node's levels at no extra query."""
    for info in ((assessed or {}).get("information") or {}).values():
        for top in info.get("top_i1") or []:
            return dict(top.get("class") or {})
    return {}


def _class_text(c: Any) -> str:
    """A class as ``Postcode=476**, Age=<30`` (never a Python dict repr)."""
    if not isinstance(c, Mapping):
        return str(c)
    return ", ".join(f"{q}={'NULL' if v is None else v}" for q, v in c.items())


def _e(v: Any) -> str:
    """Data or policy text, escaped for rich markup and the terminal (no control character)."""
    return escape(visible(str(v)))


def _cell(v: Any) -> Text:
    return Text(visible(str(v)))


def number(v: Any, digits: int = 4, none: str = "-") -> str:
    """One number format for every printed figure (issue 34: DM printed as ``2.834e+04`` and
    ``15098.0000`` beside ``1,020,234``): counts and reals of 1,000 or more with thousands
    separators and no decimals; smaller reals to ``digits`` significant digits, never in
    exponent form unless below 0.0001.

    >>> [number(v) for v in (1020234, 28340.4, 15098.0, 0.31276, 123.456, 2.0, 0.0, 1.2e-05, None)]
    ['1,020,234', '28,340', '15,098', '0.3128', '123.5', '2', '0', '1.2e-05', '-']
    """
    if v is None:
        return none
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    v = 0.0 if abs(v) < 1e-12 else v  # -0.0000 from a sum that is 0 up to rounding
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}" if v == 0 or abs(v) >= 1e-4 else f"{v:.{min(digits, 3)}g}"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return number(v)


def print_assess(
    a: dict[str, Any],
    console: Console | None = None,
    title: str | None = None,
    *,
    quiet: bool = False,
    classes: bool = True,
) -> None:
    """``classes``: list the most disclosive classes; False where ``a`` measures a release before
    its suppression (``evaluate``), whose classes may be ones the release removes (issue 32)."""
    console = console or make_console()
    # A published relation is measured after suppression (its figures are final); any other
    # object before it, where records may still be removed.
    released = "suppressed_records" in a
    before = ", before suppression" if not released and a["suppression"]["allowed_records"] else ""
    console.print(f"[bold]{_e(title or 'Assessment of')} {_e(a['source'])}[/bold] ({_e(a['dialect'])})")
    console.print(
        f"rows {a['rows']}, equivalence classes {a['classes']}, k = {a['k']} (smallest class{before}); "
        f"records in classes smaller than k={a['policy_k']}: {a['records_below_k']} "
        f"({a['share_below_k']:.2%})"
    )
    _print_k_scope(a, console)
    sizes = ", ".join(f"{s}:{n}" for s, n in list(a["class_sizes"].items())[:12])
    more = " ..." if len(a["class_sizes"]) > 12 else ""
    console.print(f"class sizes (size:classes) {sizes}{more}")
    r = a["risk"]
    console.print(
        f"risk: prosecutor max {_fmt(r['prosecutor_max'])}, avg {_fmt(r['prosecutor_avg'])}; "
        f"marketer {_fmt(r['marketer'])}; journalist {_fmt(r['journalist'])}"
        + (f"; sample uniqueness {_fmt(r['sample_uniqueness'])}" if "sample_uniqueness" in r else "")
        + (
            f"; population uniqueness ({r['population_model']}) {_fmt(r['population_uniqueness'])}"
            if "population_model" in r
            else ""
        )
    )
    if describe_risks(r):  # ARX's sample risks, records at risk, QI subsets (sqlanon.risk_extra)
        console.print(Text(describe_risks(r)))
    if describe_wildcard(r):  # ARX's RiskModelSampleWildcard (sqlanon.measure.wildcard)
        console.print(Text(describe_wildcard(r)))
    if a.get("profitability"):  # Wan et al. 2015 (issue 35): the game's threshold and payout
        console.print(Text(describe_profitability(a["profitability"])))
    if a.get("presence"):  # delta-presence and k-map against the population (issue 35)
        console.print(Text(describe_presence(a["presence"])))
    for w in a.get("warnings", []):  # one line per column (HIPAA Safe Harbor identifiers, issue 35)
        console.print(Text(f"warning: {w}", style="yellow"))
    if a["sensitive"]:
        t = Table(title="sensitive attributes")
        t.add_column("measure")
        for s in a["sensitive"]:
            t.add_column(_cell(s))
        rows = [
            ("l distinct", lambda s: a["l_diversity"][s]["distinct"]),
            ("l entropy (2^min H)", lambda s: a["l_diversity"][s]["entropy"]),
            ("l entropy, Grassberger", lambda s: a["l_diversity"][s].get("entropy_grassberger")),
            (
                "recursive c_min (l)",
                lambda s: (
                    f"{_fmt(a['l_diversity'][s]['recursive']['c_min'])} "
                    f"({a['l_diversity'][s]['recursive']['l']})"
                ),
            ),
            ("t: EMD equal", lambda s: a["t_closeness"][s]["emd_equal"]),
            ("t: EMD ordered", lambda s: a["t_closeness"][s]["emd_ordered"]),
            ("t: EMD hierarchical", lambda s: a["t_closeness"][s].get("emd_hierarchical")),
            ("t: KL (max I1)", lambda s: a["t_closeness"][s]["kl"]),
            ("delta: max |log2(q/p)|", lambda s: a.get("likeness", {}).get(s, {}).get("delta_disclosure")),
            ("beta: basic / enhanced", lambda s: _beta(a.get("likeness", {}).get(s))),
            ("H(W) bits", lambda s: a["information"][s]["entropy"]),
            ("l_max = 2^H(W)", lambda s: a["information"][s]["l_max"]),
            ("l_t = 2^(H(W)-t)", lambda s: a["information"][s]["l_t"]),
            ("I(W; QI groups)", lambda s: a["information"][s]["mutual_information"]),
        ]
        if not any("emd_hierarchical" in a["t_closeness"][s] for s in a["sensitive"]):
            rows = [r for r in rows if r[0] != "t: EMD hierarchical"]  # only where the policy asks it
        for label, get in rows:
            t.add_row(_cell(label), *[_cell(_fmt(get(s))) for s in a["sensitive"]])
        console.print(t)
        _explain(
            console,
            quiet,
            "l: the fewest different values (distinct) or their entropy in any class, higher is "
            "better (1: a class shares one value, which its members then reveal); t: how far the "
            "most different class's values are from the whole table's, lower is better (0: the "
            "same); H(W): the attribute's entropy; I(W; QI groups): how much the classes tell about "
            "it, lower is better.",
        )
        for s in a["sensitive"] if classes else ():
            top = a["information"][s]["top_i1"][:3]
            if top:
                desc = "; ".join(f"({_class_text(c['class'])}) n={c['size']} I1={c['i1']:.3g}" for c in top)
                console.print(f"most disclosive classes for {_e(s)} (I1): {_e(desc)}")
    if a["satisfied"]:
        _print_requirements(a, console, released, quiet)
    if a.get("perturbation"):
        print_perturbation(a["perturbation"], console, quiet=quiet)


def k_scope_text(r: Mapping[str, Any]) -> str | None:
    """Which QIs k is over, and what protects the perturbed ones left out of it (issue 34: a
    perturbed QI was out of k silently); None when every declared QI is in k."""
    left = r.get("perturbed_qis") or {}
    if not left:
        return None
    over = ", ".join(r.get("k_over") or []) or "no quasi-identifier"
    what = "; ".join(f"{name} by {how}" for name, how in left.items())
    return (
        f"k is over {over} only: the perturbed quasi-identifiers are published perturbed, not "
        f"generalised, and are not in k; what protects them is the perturbation ({what})"
    )


def _print_k_scope(r: Mapping[str, Any], console: Console) -> None:
    text = k_scope_text(r)
    if text:
        console.print(f"note: {_e(text)}")


def _beta(f: Mapping[str, Any] | None) -> str | None:
    """The least beta each kind of beta-likeness holds for (enhanced: none where -ln p caps it)."""
    return None if f is None else f"{_fmt(f['beta'])} / {_fmt(f['beta_enhanced'])}"


def _requirement(req: str, a: Mapping[str, Any]) -> str:
    """A requirement's label as people read it: ``k >= 3`` rather than the JSON key ``k``."""
    if req == "k":
        return f"k >= {a['policy_k']}"
    return "all requirements" if req == "all" else req


def _print_requirements(a: Mapping[str, Any], console: Console, released: bool, quiet: bool) -> None:
    """The requirements table, and what suppression does to them, in words that never contradict
    the figures above (``k = 1`` beside ``k >= 3 holds: yes`` needs the records suppressed)."""
    s = a["suppression"]
    t = Table(title="policy requirements" + (" (after suppression)" if released else ""))
    t.add_column("requirement")
    t.add_column("violating records")
    t.add_column("holds")
    for req, ok in a["satisfied"].items():
        n = s["records_violating_any"] if req == "all" else a["violations"].get(req)
        holds = "yes, after suppression" if ok and n and not released else _fmt(ok)
        t.add_row(*map(_cell, (_requirement(req, a), _fmt(n), holds)))
    console.print(t)
    if released:
        why = (
            "Each requirement of the policy in the published relation, from which the records "
            "that broke one were removed (within the suppression limit): the records in classes "
            "that still break it (0 is required) and whether it holds in every class."
        )
    else:
        why = (
            "Each requirement of the policy, the records in the classes that break it, and whether "
            "it holds once those records are suppressed (removed), which the policy allows up to its "
            "suppression limit."
        )
    _explain(console, quiet, why)
    limit = f"suppression limit {s['limit']:.2%}{sample.records(s['allowed_records'])}"
    if released:
        console.print(
            f"{limit}; records suppressed: {sample.count(a['suppressed_records'])}; "
            f"records violating any requirement: {s['records_violating_any']}"
        )
        return
    console.print(f"{limit}; records violating any requirement: {s['records_violating_any']}")
    below = a["violations"].get("k") or 0
    if below and a["satisfied"].get("k"):
        console.print(
            f"k = {a['k']} before suppression; k >= {a['policy_k']} holds after suppressing the "
            f"{below} record(s) in smaller classes (within the limit of {s['allowed_records']})"
        )


def _risk_text(m: Mapping[str, Any]) -> str:
    r = m.get("risk") or {}
    if m.get("posterior"):
        return f"P(true | rarest value published) {_fmt(m['posterior']['rarest'])}"
    if "min_within_2delta" in r:
        return (
            f"delta {_fmt(r['delta'])}; at least {r['min_within_2delta']} records within 2 delta of "
            f"any value; {r['share_below_k']:.1%} below k, {r['share_below_half_k']:.1%} below k/2"
        )
    if "groups" in r:
        return f"{r['groups']} groups of {r['smallest_group']} to {r['largest_group']} records"
    if "block" in r:
        return f"blocks of {r['block']} ranks (a value moves fewer than {r['block']} ranks)"
    return "-"


def print_perturbation(p: Mapping[str, Any], console: Console | None = None, *, quiet: bool = False) -> None:
    """What perturbation did to each column: seed 003's estimators, the fit, the risk figure."""
    console = console or make_console()
    t = Table(title="perturbed columns")
    for col in ("column", "method", "changed", "bias", "RMSE", "mean before/after", "fit", "risk"):
        t.add_column(col)
    for name, m in p.items():
        mean = m.get("mean")
        means = f"{_fmt(mean['original'])} / {_fmt(mean['perturbed'])}" if mean else "-"
        if "ks" in m:
            ks = m["ks"]
            fit = f"KS {_fmt(ks['statistic'])} (5% critical {_fmt(ks['critical_5pct'])})"
        else:
            chi = m.get("chi_square") or {}
            fit = f"chi2 {_fmt(chi.get('statistic'))}, df {chi.get('df')}"
        risk = _risk_text(m)
        cells = (name, m["describe"], _fmt(m.get("changed_share")), _fmt(m.get("bias")), _fmt(m.get("rmse")))
        t.add_row(*map(_cell, (*cells, means, fit, risk or "-")))
    console.print(t)
    _explain(
        console,
        quiet,
        "Each perturbed column against its original: the share of values changed, the bias (mean "
        "change, 0 is best) and RMSE (typical size of a change, lower keeps more utility), the fit "
        "of the distributions (below the critical value: not distinguishable), and the protection "
        "(k-noise: records within 2 delta of each value, at least k/2 expected; PRAM: the chance a "
        "published rare value is the true one, lower is better).",
    )


def print_anonymise(
    r: dict[str, Any],
    console: Console | None = None,
    *,
    examples: Mapping[str, str | None] | None = None,
    quiet: bool = False,
) -> None:
    console = console or make_console()
    if d := r.get("differential_privacy"):  # SafePub (sqlanon.safepub): what the guarantee rests on
        console.print(
            f"[bold]SafePub[/bold]: ({_fmt(d['epsilon'])}, {_fmt(d['delta'])})-differential privacy; "
            f"each record sampled with probability beta = {_fmt(d['beta'])}; "
            f"classes below k = {d['k']} suppressed; {d['steps_taken']} search steps "
            f"(epsilon_search = {_fmt(d['search_epsilon'])}, {d['nodes_scored']} nodes scored)"
        )
    if r.get("algorithm") not in ("given", "mondrian", "safepub"):
        console.print(
            f"[bold]{_e(r['algorithm'])}[/bold]: {r['nodes_checked']} node checks over a lattice of "
            f"{r['nodes_total']} nodes; "
            + (
                f"{r.get('nodes_pruned', 0)} ruled out by the {_e(r['optimum']['metric'])} bound; "
                f"{len(r['minimal_nodes'])} minimal node(s) that could be optimal"
                if r.get("search_scope") == "optimum"
                else f"{len(r['minimal_nodes'])} minimal node(s)"
            )
            + {
                "local": f"; walked locally ({r.get('rows_transferred')} rows copied)",
                "database": "; walked in the database",
            }.get(r.get("search_location"), "")
        )
    opt = r["optimum"]
    if r.get("algorithm") == "mondrian":
        m = r["mondrian"]
        console.print(
            f"[bold]mondrian[/bold]: {r['partitions']} partitions in {r['rounds']} rounds (smallest "
            f"{m['smallest_partition']} records); NCP {_fmt(m['ncp'])}, discernibility {m['discernibility']}"
            + {
                "local": f"; rounds run locally ({r.get('rows_transferred')} rows copied)",
                "database": "; rounds run in the database",
            }.get(r.get("search_location"), "")
        )
        _explain(
            console,
            quiet,
            "Each partition's records share their quasi-identifiers' summary ([lo-hi] ranges, a common "
            "hierarchy label or the set of values); NCP is the information lost, 0 (none) to 1 (all).",
        )
    else:
        console.print(
            f"chosen node {_e(node_text(r['node'], examples))} ({_e(opt['metric'])} = {_fmt(opt['value'])}); "
            f"suppressed records: {sample.of(r['suppressed_records'], r['rows'])}"
        )
    if r.get("wiped_qis"):
        ncp = "" if (r.get("optimum") or {}).get("metric") == "ncp" else "--metric ncp "  # ncp: no news
        console.print(
            f"note: {_e(', '.join(r['wiped_qis']))} generalised to '*' (nothing of it kept); to keep more, "
            f"try Mondrian (--algorithm mondrian), a suppression limit (privacy.suppression), {ncp}"
            "or a finer hierarchy (what each kept on six tables: docs/defaults.md)"
        )
    if not r.get("published"):  # the published relation's measurement says it otherwise
        _print_k_scope(r, console)
    if r.get("excluded_columns"):
        console.print(f"not published (undeclared): {_e(', '.join(r['excluded_columns']))}")
    if r.get("perturbation"):
        print_perturbation(r["perturbation"], console, quiet=quiet)
    if r.get("sql"):
        if secrets.uses_secret(r["sql"]):  # the keys' pads are read from it, never written here
            console.print(secrets.NOTE, markup=False, highlight=False)
        console.print(r["sql"] + ";", markup=False, highlight=False)
    if r.get("published"):
        console.print(f"published {_e(r['publish_as'])} {_e(r['target'])}; measured again:")
        print_assess(r["published"], console, title="Published", quiet=quiet)
    for note in r.get("notes") or []:  # what the published form cannot hide (never quieted)
        console.print(f"note: {_e(note)}")


def _fmt6(v: Any) -> str:
    return number(v, 6)


def print_evaluate(
    r: dict[str, Any],
    console: Console | None = None,
    *,
    examples: Mapping[str, str | None] | None = None,
    quiet: bool = False,
) -> None:
    console = console or make_console()
    ok = "satisfies" if r["satisfies"] else "does NOT satisfy"
    what = (
        f"node {_e(node_text(r['node'], examples))}"
        if r["node"] is not None
        else f"Mondrian's release ({r['partitions']:,} partitions)"
    )
    console.print(
        f"[bold]{what}[/bold] on {_e(r['source'])} "
        f"({_e(r['dialect'])}): {ok} the policy; "
        f"suppressed {r['suppressed_records']} of {r['rows']} records "
        f"(allowed {r['allowed_suppression']})"
    )
    t = Table(title="utility and information loss of the release")
    t.add_column("metric", no_wrap=True, min_width=_widest(r["metrics"]))
    for col in ("value", "better", "range", "monotone"):
        t.add_column(col)
    for name, v in r["metrics"].items():
        i = r["metric_info"][name]
        # Text cells: a range such as "[mean_j H(Y|X_j), H(Y)]" is not markup (rich dropped it).
        t.add_row(*map(_cell, (name, _fmt6(v), i["better"], i["range"], "yes" if i["monotone"] else "no")))
    console.print(t)
    _explain(
        console,
        quiet,
        "What this release costs in information: 'better' says whether a higher or a "
        "lower value is better, 'range' what values are possible.",
    )
    title = f"Assessment ({r['assess_scope']}) of"
    print_assess(r["assess"], console, title=title, quiet=quiet, classes=False)
    if r.get("perturbation"):
        print_perturbation(r["perturbation"], console, quiet=quiet)


def print_profile(
    r: dict[str, Any],
    console: Console | None = None,
    *,
    examples: Sequence[Mapping[str, str | None] | None] | None = None,
    quiet: bool = False,
) -> None:
    """``examples``: per entry of the profile, an example label per QI of its node.

    One table per algorithm, and each k's node on a line of its own above it: the nodes as cells
    and both algorithms side by side made a 300-character table (issue 34); the tables hold
    numbers only and fit 100 columns for five values of k."""
    console = console or make_console()
    console.print(
        f"[bold]utility profile[/bold] of {_e(r['source'])} ({_e(r['dialect'])}): optimum by "
        f"{_e(r['metric'])} ({_e(r['algorithm'])}), suppression limit {r['suppression']:.2%}"
    )
    rows = r["profile"]
    ex = list(examples or [])
    ex += [None] * (len(rows) - len(ex))
    algorithms = list(dict.fromkeys(e.get("algorithm") for e in rows))
    for alg in algorithms:
        mine = [(e, x) for e, x in zip(rows, ex, strict=True) if e.get("algorithm") == alg]
        if len(algorithms) > 1:
            console.print(f"[bold]{_e(alg)}[/bold]")
        for e, x in mine:
            what = f"{e['partitions']:,} partitions" if "partitions" in e else node_text(e.get("node"), x)
            console.print(Text(f"k={e['k']}: {what if e.get('node') or 'partitions' in e else '-'}"))
        _profile_table(r, [e for e, _ in mine], console)
    _explain(
        console,
        quiet,
        "One column per k: the best release for that k (its node above the table: each QI's level, "
        "an example label in brackets) and its metrics; a larger k protects more and usually loses "
        "more information.",
    )
    for e in rows:
        if e.get("error"):
            console.print(f"k={e['k']}: {_e(e['error'])}")


def _profile_table(r: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], console: Console) -> None:
    t = Table()
    # Metric names never break (a narrow terminal folded them to `suppresse/d`); values may.
    t.add_column("metric", no_wrap=True, min_width=_widest(["suppressed", *r["metric_info"]]))
    t.add_column("better", no_wrap=True)
    for e in rows:  # a value too wide is cut visibly (…), never split
        t.add_column(f"k={e['k']}", justify="right")
    t.add_row(*map(_cell, ("suppressed", "", *[_fmt(e.get("suppressed_records")) for e in rows])))
    t.add_row(*map(_cell, ("classes", "", *[_fmt(e.get("classes")) for e in rows])))
    for name, i in r["metric_info"].items():
        t.add_row(*map(_cell, (name, i["better"], *[_fmt((e.get("metrics") or {}).get(name)) for e in rows])))
    console.print(t)


def _levels_text(node: Mapping[str, int] | None, examples: Mapping[str, str | None] | None) -> str:
    """A profile cell: the node's levels in the caption's QI order, ``2 (476**),1``."""
    if not node:
        return "-"
    ex = examples or {}
    return ", ".join(f"{lvl}{_example(ex.get(q))}" for q, lvl in node.items())


def _widest(names: Sequence[str] | Mapping[str, Any]) -> int:
    return max((len(n) for n in names), default=0)


def _example(label: str | None) -> str:
    return "" if label is None else f" ({label})"
