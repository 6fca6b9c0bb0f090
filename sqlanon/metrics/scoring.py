"""Computing the metrics of lattice nodes in SQL (see the package docstring's *SQL*)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.lattice import Evaluator, NodeResult, Plan
from sqlanon.likeness import checked_attributes
from sqlanon.measure.assessment import FrequencyTables, _l_rank, _sort_key, requirement_checks
from sqlanon.measure.tcloseness_hier import freq_hier_context
from sqlanon.metrics.info import (
    BATCH,
    CLASS_METRICS,
    METRIC_INFO,
    NODE_METRICS,
    PHI_KINDS,
    SENSITIVE_METRICS,
    ZERO,
    _spec,
    precision,
)
from sqlanon.relation import Relation
from sqlanon.sql.compile import CANONICAL, Sql, ident, lit


@dataclass
class MetricTables:
    """The metrics' coded table of one plan and its whole-table figures (see the module docstring)."""

    coded: Relation
    n: int
    qi_numeric: list[bool]
    s_names: list[str]
    s_numeric: list[bool]
    sid: list[Sql]  # sid column of each sensitive attribute in ``coded``
    label: bool
    #: (kind, j, level) -> per-record column in ``coded`` (levels below the top only)
    cols: dict[tuple[str, int, int], Sql]
    #: (kind, j, level) -> sum over all records of the column (levels up to the top)
    totals: dict[tuple[str, int, int], float]
    #: (kind, j) -> value of a fully generalised cell ('*')
    top: dict[tuple[str, int], float]
    lam_total: float  # sum_i sum_j log2 n(R_i(j))
    h_y: list[float]
    m_y: list[int]
    span_y: list[float | None]


def _pmi(a: int) -> str:
    return f"pmi{a}"


def tables(plan: Plan) -> MetricTables:
    """Build (once per plan) the metrics' coded table and read its whole-table sums."""
    cached = getattr(plan, "_sqlanon_metric_tables", None)
    if cached is not None:
        return cached
    be, policy = plan.be, plan.policy
    qi_names = plan.qi_names
    s_names = [c.name for c in policy.sensitive]
    cols_by_name = {c.name: c for c in be.require_columns(policy.source, "source")}
    base = plan.base
    label_expr: Sql | None = None
    label = policy.label_column
    if label is not None:
        if label in qi_names:
            label_expr = base.q_aliases[qi_names.index(label)]
        elif label in s_names:
            label_expr = base.s_aliases[s_names.index(label)]
        else:
            # The label is neither a quasi-identifier nor sensitive: one more scan of the source,
            # a base frequency table that also groups by the label (as a last "sensitive" column).
            names = [*s_names, label]
            q_aliases = [ident(f"q_{i}") for i in range(len(qi_names))]
            s_aliases = [ident(f"s_{i}") for i in range(len(names))]
            sid_aliases = [ident(f"sid_{i}") for i in range(len(names))]
            freq = be.create_temp(
                "mfreq",
                "freq/base",
                source=policy.source,
                q_exprs=[ident(n) for n in qi_names],
                q_aliases=q_aliases,
                s_exprs=[ident(n) for n in names],
                s_aliases=s_aliases,
                sid_aliases=sid_aliases,
                sort_keys=[_sort_key(policy, n, s_aliases[i]) for i, n in enumerate(names)],
                group_exprs=[ident(n) for n in [*qi_names, *names]],
            )
            base = FrequencyTables(freq, freq, q_aliases, s_aliases, sid_aliases, qi_names, names)
            label_expr = base.s_aliases[len(s_names)]
    qi_numeric = [bool(h.numeric) for h in plan.hierarchies]
    s_numeric = [cols_by_name[s].numeric for s in s_names]
    qis = []
    for j, num in enumerate(qi_numeric):
        qis.append(
            {
                "col": base.q_aliases[j],
                "numeric": num,
                "v": ident(f"v_{j}"),
                "x": ident(f"x_{j}"),
                "lam": ident(f"lam_{j}"),
                "m": ident(f"m_{j}"),
                "dspan": ident(f"dspan_{j}"),
                "tv": ident(f"tv_{j}"),
            }
        )
    sens = []
    for a, num in enumerate(s_numeric):
        sens.append(
            {
                "col": base.s_aliases[a],
                "sid": base.sid_aliases[a],
                "numeric": num,
                "ns": ident(f"ns_{a}"),
                "y": ident(f"y_{a}"),
                "lys": ident(f"lys_{a}"),
                "ty": ident(f"ty_{a}"),
            }
        )
    codes = []
    cols: dict[tuple[str, int, int], Sql] = {}
    for j, h in enumerate(plan.hierarchies):
        for lvl in range(h.height):
            c = {
                "j": j,
                "lvl": lvl,
                "expr": h.sql(lvl, base.q_aliases[j]),
                "code": plan.code_alias[(j, lvl)],
                "t": ident(f"g_{j}_{lvl}"),
                "nbs": [ident(f"nbs{a}_{j}_{lvl}") for a in range(len(sens))],
            }
            for kind in ("ncp", "h", "ph", "lb"):
                c[f"f_{kind}"] = cols[(kind, j, lvl)] = ident(f"f_{kind}_{j}_{lvl}")
            c["f_pmi"] = []
            for a in range(len(sens)):
                cols[(_pmi(a), j, lvl)] = ident(f"f_{_pmi(a)}_{j}_{lvl}")
                c["f_pmi"].append(cols[(_pmi(a), j, lvl)])
            codes.append(c)
    coded = be.create_temp(
        "mcoded", "metrics/coded", freq=base.freq, codes=codes, qis=qis, sens=sens, lab=label_expr
    )
    keys = list(cols)
    code_keys = [(c["j"], c["lvl"]) for c in codes]
    row = be.query(
        "metrics/totals",
        coded=coded,
        sums=[cols[k] for k in keys],
        qis=qis,
        sens=sens,
        codes=[plan.code_alias[k] for k in code_keys],
    )[0]
    n = int(row[0])
    pos = 1
    totals = {k: float(v or 0.0) for k, v in zip(keys, row[pos : pos + len(keys)], strict=True)}
    pos += len(keys)
    top: dict[tuple[str, int], float] = {}
    lam_total = 0.0
    log_n = math.log2(n)
    for j in range(len(qis)):
        hx, lam, top_ncp = row[pos : pos + 3]
        pos += 3
        top[("ncp", j)] = float(top_ncp)
        top[("h", j)] = top[("ph", j)] = max(float(hx), 0.0)
        top[("lb", j)] = log_n
        for a in range(len(sens)):
            top[(_pmi(a), j)] = 0.0
        lam_total += float(lam)
    h_y, m_y, span_y = [], [], []
    for _ in sens:
        hy, my, span = row[pos : pos + 3]
        pos += 3
        h_y.append(max(float(hy), 0.0))
        m_y.append(int(my))
        span_y.append(None if span is None else float(span))
    cards = {k: int(v) for k, v in zip(code_keys, row[pos : pos + len(code_keys)], strict=True)}
    if any(cards[k] != plan.card[k] for k in code_keys):
        raise SqlanonError("internal: the metrics' level codes differ from the search's")
    for (kind, j), v in top.items():
        totals[(kind, j, plan.heights[j])] = n * v
    mt = MetricTables(
        coded=coded,
        n=n,
        qi_numeric=qi_numeric,
        s_names=s_names,
        s_numeric=s_numeric,
        sid=[s["sid"] for s in sens],
        label=label_expr is not None,
        cols=cols,
        totals=totals,
        top=top,
        lam_total=lam_total,
        h_y=h_y,
        m_y=m_y,
        span_y=span_y,
    )
    try:
        plan._sqlanon_metric_tables = mt
    except AttributeError:  # pragma: no cover - a Plan without __dict__: recompute next time
        pass
    return mt


# --------------------------------------------------------------------------------------------------
# Computing metrics of nodes
# --------------------------------------------------------------------------------------------------


def undefined_reason(plan: Plan, metric: str) -> str | None:
    """Why ``metric`` has no value for this policy (None when it has one)."""
    pol = plan.policy
    if metric == "cm" and pol.label_column is None:
        return "the policy names no label column (top-level key 'label')"
    if metric in SENSITIVE_METRICS and not pol.sensitive:
        return "the policy declares no sensitive attribute"
    return None


def compute(
    plan: Plan,
    nodes: Sequence[tuple],
    metrics: Iterable[str] | None = None,
    known: dict | None = None,
) -> dict[tuple, dict[str, float | None]]:
    """The value of each metric (default: all) for each node; None where a metric is undefined.

    ``known`` maps nodes to the search's NodeResult (class and suppression counts); the others
    are evaluated first. Node queries are batched, BATCH nodes and every requested metric per query.
    """
    names = list(METRIC_INFO) if metrics is None else list(dict.fromkeys(metrics))
    for m in names:
        _spec(m)
    wanted = [m for m in names if undefined_reason(plan, m) is None]
    nodes = list(dict.fromkeys(nodes))
    results = dict(known or {})
    if any(m not in NODE_METRICS for m in wanted):
        missing = [nd for nd in nodes if nd not in results]
        if missing:
            results.update(Evaluator(plan).evaluate(missing))
    kinds: list[str] = []
    for m in wanted:
        for kind in PHI_KINDS.get(m, ()):
            if kind == "pmi":
                kinds += [_pmi(a) for a in range(len(plan.policy.sensitive))]
            else:
                kinds.append(kind)
    kinds = list(dict.fromkeys(kinds))
    class_metrics = [m for m in wanted if m in CLASS_METRICS]
    mt = tables(plan) if (kinds or class_metrics) else None
    per_node: dict[tuple, dict[str, Any]] = {}
    if mt is not None:
        todo = [nd for nd in nodes if class_metrics or (kinds and results[nd].bad_records > 0)]
        todo.sort()
        for i in range(0, len(todo), BATCH):
            per_node.update(_node_query(plan, mt, todo[i : i + BATCH], kinds, class_metrics, results))
    out: dict[tuple, dict[str, float | None]] = {}
    for nd in nodes:
        vals: dict[str, float | None] = {}
        for m in names:
            if m not in wanted:
                vals[m] = None
                continue
            v = _value(plan, mt, m, nd, results.get(nd), per_node.get(nd, {}))
            vals[m] = 0.0 if abs(v) < ZERO else v  # rounding noise of sums that cancel exactly
        out[nd] = vals
    return out


def _value(
    plan: Plan, mt: MetricTables | None, m: str, node: tuple, res: NodeResult | None, q: dict[str, Any]
) -> float:
    heights = plan.heights
    r = len(heights)
    if m in ("height", "absdist"):
        return float(sum(node))
    if m == "reldist":
        return float(sum(lvl / h for lvl, h in zip(node, heights, strict=True) if h))
    n = plan.n_rows
    s = res.bad_records
    if m == "precision":
        return precision(plan, node, s)
    if m == "discernibility":
        return float(res.dm_kept + s * n)
    if m == "avg_class_size":
        k = plan.policy.k_or_1()
        return n / (res.classes - res.bad_classes + (1 if s else 0)) / k
    assert mt is not None
    if m == "cm":
        return (q["cm_kept"] + s) / n
    if m == "multiple_use":
        vals = []
        for a in range(len(mt.s_names)):
            kept = q[f"mu{a}"]
            denom = mt.span_y[a] if mt.s_numeric[a] else mt.m_y[a] - 1
            vals.append(((kept / denom) if denom else 0.0) / n + s / n)
        return sum(vals) / len(vals)

    def total(kind: str, weights: Sequence[float] | None = None) -> float:
        """sum_i sum_j w_j f(cell): the per-level totals, with the suppressed records' cells
        replaced by fully generalised ones (their sum at the node's level comes from SQL)."""
        w = weights or [1.0] * r
        t = sum(w[j] * mt.totals[(kind, j, lvl)] for j, lvl in enumerate(node))
        if s:
            t -= q[f"p_{kind}"]
            t += s * sum(w[j] * mt.top[(kind, j)] for j, lvl in enumerate(node) if lvl < heights[j])
        return t

    if m == "ncp":
        weights = [c.weight for c in plan.policy.quasi]
        return total("ncp", weights) / (n * r)
    if m == "entropy_loss":
        return total("h") / n
    if m == "monotone_entropy":
        return total("ph") / n
    if m in ("non_uniform_entropy", "mi_loss", "mutual_information"):
        lb = total("lb")
        if m == "non_uniform_entropy":
            return (lb - mt.lam_total) / n
        if m == "mi_loss":
            return (lb - mt.lam_total) / (n * r)
        return math.log2(n) - lb / (n * r)
    if m in ("private_mi", "private_mi_loss"):
        vals = []
        for a in range(len(mt.s_names)):
            u = total(_pmi(a)) / (n * r)
            vals.append(u if m == "private_mi" else mt.h_y[a] - u)
        return sum(vals) / len(vals)
    raise SqlanonError(f"internal: no formula for metric {m!r}")  # pragma: no cover


def _attrs(plan: Plan, mt: MetricTables) -> list[dict[str, Any]]:
    """The sensitive attributes the policy's l and t requirements read (class statistics)."""
    pol = plan.policy
    ordered = {r.attribute for r in pol.privacy.t if r.measure == "emd-ordered"}
    used = checked_attributes(pol.privacy)
    return [
        {"p": Sql(f"a{i}"), "sid": mt.sid[i], "l_rank": _l_rank(pol, s), "ordered": s in ordered}
        | freq_hier_context(plan.be, pol, s, plan.base)  # emd-hierarchical: same value numbers
        for i, s in enumerate(mt.s_names)
        if s in used
    ]


def _node_query(
    plan: Plan,
    mt: MetricTables,
    nodes: list[tuple],
    kinds: list[str],
    class_metrics: list[str],
    results: dict,
) -> dict[tuple, dict[str, Any]]:
    pol = plan.policy
    heights = plan.heights
    attrs = _attrs(plan, mt)
    # Class keys: the node's level codes in mixed radix, as the search's evaluation builds them.
    weights = [plan.node_weights(nd) for nd in nodes]
    used = sorted({key for ws in weights for chunk in ws for key in chunk})
    n_chunks = max(1, max(len(ws) for ws in weights))
    w_alias = {(ch, key): ident(f"w{ch}_{key[0]}_{key[1]}") for ch in range(n_chunks) for key in used}
    # Level indicators for the per-record sums: i_j_L = 1 when the node is at level L of QI j.
    levels = sorted({(j, lvl) for nd in nodes for j, lvl in enumerate(nd) if lvl < heights[j]})
    i_alias = {key: ident(f"i_{key[0]}_{key[1]}") for key in levels}
    rows_sql = []
    for gid, (nd, ws) in enumerate(zip(nodes, weights, strict=True)):
        vals = [str(gid)]
        for ch in range(n_chunks):
            chunk = ws[ch] if ch < len(ws) else {}
            vals += [str(chunk.get(key, 0)) for key in used]
        vals += ["1" if nd[j] == lvl else "0" for j, lvl in levels]
        rows_sql.append(Sql("(" + ", ".join(vals) + ")"))
    keys = []
    for ch in range(n_chunks):
        terms = [f"m.{plan.code_alias[key]} * n.{w_alias[(ch, key)]}" for key in used]
        keys.append(Sql(" + ".join(terms) if terms else "0"))
    node_cols = (
        [ident("gid")]
        + [w_alias[(ch, key)] for ch in range(n_chunks) for key in used]
        + [i_alias[key] for key in levels]
    )
    qweights = [c.weight for c in pol.quasi]
    sums, combos = [], []
    for kind in kinds:
        terms = []
        for j, lvl in levels:
            s_alias = ident(f"s_{kind}_{j}_{lvl}")
            sums.append({"col": mt.cols[(kind, j, lvl)], "alias": s_alias})
            w = f" * {lit(float(qweights[j]))}" if kind == "ncp" and qweights[j] != 1 else ""
            terms.append(f"n.{i_alias[(j, lvl)]} * m.{s_alias}{w}")
        combos.append({"kind": kind, "alias": ident(f"p_{kind}"), "expr": Sql(" + ".join(terms) or "0")})
    lab = "cm" in class_metrics and mt.label
    mu = "multiple_use" in class_metrics
    mu_cat = [
        {"p": Sql(f"mu_c{a}"), "sid": mt.sid[a], "mb": ident(f"mb{a}"), "out": ident(f"mu{a}"), "a": a}
        for a in range(len(mt.s_names))
        if mu and not mt.s_numeric[a]
    ]
    mu_num = [
        {
            "col": ident(f"y_{a}"),
            "lo": ident(f"ylo{a}"),
            "hi": ident(f"yhi{a}"),
            "span": ident(f"yspan{a}"),
            "out": ident(f"mu{a}"),
            "a": a,
        }
        for a in range(len(mt.s_names))
        if mu and mt.s_numeric[a]
    ]
    group_sids = list(dict.fromkeys([a["sid"] for a in attrs] + [y["sid"] for y in mu_cat]))
    checks = requirement_checks(pol, {s: f"a{i}" for i, s in enumerate(mt.s_names)})
    any_check = exp.or_(*[c for _, c in checks]) if checks else exp.false()
    rows = plan.be.query(
        "metrics/node",
        coded=mt.coded,
        meet_cols=[plan.code_alias[k] for k in used],
        group_sids=group_sids,
        lab=lab,
        lab_cols=[ident("lab")] if lab else [],
        sums=sums,
        mu_num=mu_num,
        mu_cat=mu_cat,
        node_rows=rows_sql,
        node_cols=node_cols,
        keys=keys,
        key_aliases=[ident(f"k_{i}") for i in range(len(keys))],
        combos=combos,
        attrs=attrs,
        any_check=Sql(any_check.sql(CANONICAL)),
    )
    out: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        gid, n_rows, _n_classes, bad = (int(x or 0) for x in row[:4])
        nd = nodes[gid]
        if n_rows != plan.n_rows or bad != results[nd].bad_records:
            raise SqlanonError(
                f"internal: metrics of node {nd} see {bad} suppressed of {n_rows} records, the search "
                f"{results[nd].bad_records} of {plan.n_rows}"
            )
        vals: dict[str, Any] = {}
        pos = 4
        for p in combos:
            vals[f"p_{p['kind']}"] = float(row[pos] or 0.0)
            pos += 1
        if lab:
            vals["cm_kept"] = int(row[pos] or 0)
            pos += 1
        for y in mu_cat + mu_num:
            vals[f"mu{y['a']}"] = float(row[pos] or 0.0)
            pos += 1
        out[nd] = vals
    if len(out) != len(nodes):
        raise SqlanonError(f"internal: metrics returned {len(out)} of {len(nodes)} nodes")
    return out


def score(plan: Plan, nodes: list, metric: str, known: dict | None = None) -> list[tuple[tuple, float]]:
    """(node, rank) pairs, rank oriented so that lower is better; :func:`value` turns it back."""
    _, _, higher_better = _spec(metric)
    why = undefined_reason(plan, metric)
    if why:
        raise SqlanonError(f"--metric {metric}: undefined for this policy: {why}")
    vals = compute(plan, nodes, [metric], known)
    out = []
    for node in nodes:
        v = vals[node][metric]
        assert v is not None
        out.append((node, -v if higher_better else v))
    return out


def value(rank: float, metric: str) -> float:
    """The metric's value from its rank (see :func:`score`)."""
    return -rank if _spec(metric)[2] else rank


# --------------------------------------------------------------------------------------------------
# Lower bounds on a node's rank, without a node query (branch-and-bound in sqlanon.publish.choose)
# --------------------------------------------------------------------------------------------------

#: Metrics with a lower bound on the rank (:func:`rank_lower_bound`).
