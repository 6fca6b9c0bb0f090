"""Utility and information-loss metrics of a lattice node, computed in the database, and choosing
the anonymisation by any of them.

A node is a level vector; its release is the source generalised to those levels with the records
of every class that violates the policy removed (record suppression, seed 002 section 2.4). Every
metric below is a metric of that release, measured against the source, with T = the source, N =
|T|, r = the number of quasi-identifiers, S = the suppressed records, L_j the node's level of
quasi-identifier j and h_j the height of its hierarchy. B_ij is the set of original values that
record i's label on X_j stands for: the values present in the source carrying that label (global
recoding, so B depends on the label only); probabilities are counted in the source. Logs are base 2.

How suppressed records count. Bayardo and Agrawal charge a suppressed record |T| in DM; Iyengar
charges it 1 in CM and in the multiple-use metric (the maximal loss). Every other per-record metric
counts a suppressed record as a record whose every quasi-identifier is fully generalised ('*': B is
the whole domain), which for most of them is the most it can lose (not for ``entropy_loss`` and
the private-MI metrics: see :func:`rank_lower_bound`); for average class size the suppressed records
form one more (fully generalised) class.

========================= ===================================================================
name                      formula (source)
========================= ===================================================================
``height``, ``absdist``   sum_j L_j (seed 002 section 3.1, eq. 1, Absdist)
``reldist``               sum_j L_j / h_j (seed 002 eq. 2, Reldist)
``precision``             1 - sum_{i,j} h_ij / h_j / (r N) (seed 002 eq. 3, Sweeney's Prec)
``discernibility``        sum_{kept E} |E|^2 + S N (seed 002 eq. 4; Bayardo & Agrawal)
``avg_class_size``        (N / #classes) / k (LeFevre et al.'s normalised average class size)
``ncp``                   1/(N r) sum_i sum_j w_j NCP_j(B_ij) (seed 002 eqs. 5-7)
``cm``                    (sum_{kept E} (|E| - majority label count) + S) / N (seed 000 4.1,
                          seed 002 eq. 8; Iyengar)
``multiple_use``          1/N (sum_{kept E} |E| l_E + S), l_E = (M_E - 1)/(M - 1) or
                          (U_E - L_E)/(U - L) (seed 000 section 4.2), mean over sensitive attributes
``entropy_loss``          1/N sum_i sum_j H(X_j | X_j in B_ij) (seed 002 eqs. 9-11, Pi_e)
``monotone_entropy``      1/N sum_i sum_j Pr(B_ij) H(X_j | B_ij) (seed 000 section 4.3, Pi_me)
``non_uniform_entropy``   1/N sum_i sum_j -log2 Pr(X_j = R_i(j) | B_ij) (Gionis & Tassa)
``mutual_information``    1/(N r) sum_j sum_i log2(Pr(R_i(j) | B_ij) / Pr(R_i(j))) (seed 000 4.4, U)
``mi_loss``               -1/(N r) sum_i sum_j log2 Pr(R_i(j) | B_ij) (seed 000 4.4, Pi_MI)
``private_mi``            1/(N r) sum_j sum_i log2(Pr(Y = S_i | B_ij) / Pr(Y = S_i)) (seed 000 4.5,
                          U_PMI), mean over sensitive attributes Y
``private_mi_loss``       -1/(N r) sum_i sum_j log2 Pr(Y = S_i | B_ij) (seed 000 4.5, Pi_PMI)
========================= ===================================================================

NCP_j is the categorical eq. 5 (0 when B holds one value, else |B| / |A_j|, values present in the
source) for a non-numeric quasi-identifier and the numerical eq. 6 ((max B - min B) / (max A_j -
min A_j)) for a numeric one; w_j is the quasi-identifier's ``weight`` (default 1) and, as in eq. 7,
the sum is divided by N r whatever the weights. The multiple-use metric is numerical for a numeric
sensitive attribute and categorical otherwise. CM predicts the original value of the policy's
``label`` column (also when the label is a quasi-identifier, generalised in the release); a label
that is neither a quasi-identifier nor sensitive costs one more scan of the source.

Monotonicity. A metric is monotone when it is never better at a more general node; then the optimum
lies among the minimal satisfying nodes. Without suppression every metric here is monotone on the
full-domain lattice: class-based ones because generalising only merges classes, record-based ones
because each cell's loss grows with its set B. That includes ``entropy_loss``: Gionis and Tassa show
Pi_e is not monotone for local recoding (seed 000 section 4.3), but with global recoding it equals
N sum_j H(X_j | X^_j), which cannot fall when X^_j is coarsened (it is then equal to
``non_uniform_entropy``). With suppression only the node-level distances (``height``, ``absdist``,
``reldist``) are monotone: generalising can cut the number of suppressed records, and so improve any
metric that counts them. :func:`candidates_for` returns the minimal nodes for a monotone metric and
every satisfying node otherwise.

SQL. A node's metrics come from the base frequency table (one scan of the source) in at most three
kinds of queries: the metrics' coded table (``templates/metrics/coded.sql.j2``, once per plan: every
per-record quantity at every level), its whole-table sums (``templates/metrics/totals.sql.j2``, once
per plan: a node without suppression needs nothing else for the record-level metrics, because with
global recoding they are sums over quasi-identifiers of per-level totals), and, per batch of nodes
that suppress records or need class-level figures (CM, multiple use),
``templates/metrics/node.sql.j2``, which rolls each node up, flags its violating classes and sums
what the metrics need over them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.sql.compile import CANONICAL, Sql, ident, lit


@dataclass(frozen=True)
class MetricInfo:
    """How to read a metric: direction, monotonicity (with and without suppression), range."""

    monotone: bool
    monotone_with_suppression: bool
    higher_is_better: bool
    range: str
    formula: str


METRIC_INFO: dict[str, MetricInfo] = {
    "height": MetricInfo(True, True, False, "[0, sum_j h_j]", "sum_j L_j (= absdist)"),
    "absdist": MetricInfo(True, True, False, "[0, sum_j h_j]", "sum_j L_j"),
    "reldist": MetricInfo(True, True, False, "[0, r]", "sum_j L_j / h_j"),
    "precision": MetricInfo(True, False, True, "[0, 1]", "1 - sum_{i,j} h_ij / h_j / (r N)"),
    "discernibility": MetricInfo(True, False, False, "[N, N^2]", "sum_{kept E} |E|^2 + S N"),
    "avg_class_size": MetricInfo(True, False, False, "[1/k, N/k]", "(N / #classes) / k"),
    "ncp": MetricInfo(True, False, False, "[0, sum_j w_j / r]", "1/(N r) sum_i sum_j w_j NCP_j(B_ij)"),
    "cm": MetricInfo(True, False, False, "[0, 1]", "(sum_E (|E| - majority(E)) + S) / N"),
    "multiple_use": MetricInfo(True, False, False, "[0, 1]", "(sum_E |E| l_E + S) / N"),
    "entropy_loss": MetricInfo(True, False, False, "[0, sum_j log2 |A_j|]", "1/N sum_{i,j} H(X_j|B_ij)"),
    "monotone_entropy": MetricInfo(
        True, False, False, "[0, sum_j H(X_j)]", "1/N sum_{i,j} Pr(B_ij) H(X_j|B_ij)"
    ),
    "non_uniform_entropy": MetricInfo(
        True, False, False, "[0, sum_j H(X_j)]", "1/N sum_{i,j} -log2 Pr(R_i(j)|B_ij)"
    ),
    "mutual_information": MetricInfo(
        True, False, True, "[0, mean_j H(X_j)]", "1/(N r) sum_{i,j} log2(Pr(R_i(j)|B_ij)/Pr(R_i(j)))"
    ),
    "mi_loss": MetricInfo(
        True, False, False, "[0, mean_j H(X_j)]", "-1/(N r) sum_{i,j} log2 Pr(R_i(j)|B_ij)"
    ),
    "private_mi": MetricInfo(
        True, False, True, "[0, H(Y)]", "1/(N r) sum_{i,j} log2(Pr(Y=S_i|B_ij)/Pr(Y=S_i))"
    ),
    "private_mi_loss": MetricInfo(
        True, False, False, "[mean_j H(Y|X_j), H(Y)]", "-1/(N r) sum_{i,j} log2 Pr(Y=S_i|B_ij)"
    ),
}

#: name -> (monotone without suppression, monotone with suppression, higher is better)
METRICS: dict[str, tuple[bool, bool, bool]] = {
    name: (m.monotone, m.monotone_with_suppression, m.higher_is_better) for name, m in METRIC_INFO.items()
}

#: Metrics read off the level vector alone.
NODE_METRICS = ("height", "absdist", "reldist")
#: Metrics read off the search's node evaluation (class and suppression counts).
COUNT_METRICS = ("precision", "discernibility", "avg_class_size")
#: Per-record metrics: the per-level column kinds each one needs (``pmi`` = one per attribute).
PHI_KINDS: dict[str, tuple[str, ...]] = {
    "ncp": ("ncp",),
    "entropy_loss": ("h",),
    "monotone_entropy": ("ph",),
    "non_uniform_entropy": ("lb",),
    "mutual_information": ("lb",),
    "mi_loss": ("lb",),
    "private_mi": ("pmi",),
    "private_mi_loss": ("pmi",),
}
#: Metrics that need class-level figures of every node (a node query even without suppression).
CLASS_METRICS = ("cm", "multiple_use")
SENSITIVE_METRICS = ("multiple_use", "private_mi", "private_mi_loss")

#: Nodes per metrics query.
BATCH = 64
#: A metric closer to 0 than this is reported as 0 (log sums that cancel leave ~1e-16).
ZERO = 1e-12


def monotone(plan: Any, metric: str) -> bool:
    m = _spec(metric)
    return m[0] if plan.allowed == 0 else m[1]


def _spec(metric: str) -> tuple[bool, bool, bool]:
    try:
        return METRICS[metric]
    except KeyError:
        raise SqlanonError(f"--metric: unknown metric {metric!r}; use one of {', '.join(METRICS)}") from None


def candidates_for(plan: Any, result: Any, metric: str) -> list:
    """Minimal nodes for a monotone metric, every satisfying node otherwise."""
    _spec(metric)
    if monotone(plan, metric) or result.algorithm == "datafly":
        return list(result.minimal)
    return sorted(result.satisfying)


def precision(plan: Any, node: tuple, suppressed: int) -> float:
    """Prec (seed 002 eq. 3) of a full-domain node: every kept cell of X_j is at level L_j, every
    suppressed cell counts as fully generalised (h_ij = h_j)."""
    heights = plan.heights
    n, n_qi = plan.n_rows, len(heights)
    kept_share = sum((lvl / h) if h else 0.0 for lvl, h in zip(node, heights, strict=True))
    loss = ((n - suppressed) * kept_share + suppressed * sum(1 for h in heights if h)) / (n_qi * n)
    return 1.0 - loss


# --------------------------------------------------------------------------------------------------
# Per-plan tables: the metrics' coded table and its whole-table sums
# --------------------------------------------------------------------------------------------------


@dataclass
class MetricTables:
    """The metrics' coded table of one plan and its whole-table figures (see the module docstring)."""

    coded: Any  # Relation
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


def tables(plan: Any) -> MetricTables:
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
            from sqlanon.assess import FrequencyTables, _sort_key

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


def undefined_reason(plan: Any, metric: str) -> str | None:
    """Why ``metric`` has no value for this policy (None when it has one)."""
    pol = plan.policy
    if metric == "cm" and pol.label_column is None:
        return "the policy names no label column (top-level key 'label')"
    if metric in SENSITIVE_METRICS and not pol.sensitive:
        return "the policy declares no sensitive attribute"
    return None


def compute(
    plan: Any,
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
            from sqlanon.search import Evaluator

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


def _value(plan: Any, mt: MetricTables | None, m: str, node: tuple, res: Any, q: dict[str, Any]) -> float:
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


def _attrs(plan: Any, mt: MetricTables) -> list[dict[str, Any]]:
    """The sensitive attributes the policy's l and t requirements read (class statistics)."""
    from sqlanon.assess import _l_rank

    pol = plan.policy
    ordered = {r.attribute for r in pol.privacy.t if r.measure == "emd-ordered"}
    used = {r.attribute for r in pol.privacy.l} | {r.attribute for r in pol.privacy.t}
    return [
        {"p": Sql(f"a{i}"), "sid": mt.sid[i], "l_rank": _l_rank(pol, s), "ordered": s in ordered}
        for i, s in enumerate(mt.s_names)
        if s in used
    ]


def _node_query(
    plan: Any,
    mt: MetricTables,
    nodes: list[tuple],
    kinds: list[str],
    class_metrics: list[str],
    results: dict,
) -> dict[tuple, dict[str, Any]]:
    from sqlanon.assess import requirement_checks

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


def score(plan: Any, nodes: list, metric: str, known: dict | None = None) -> list[tuple[tuple, float]]:
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
BOUNDED_METRICS = (
    *NODE_METRICS,
    "precision",
    "avg_class_size",
    "ncp",
    "monotone_entropy",
    "non_uniform_entropy",
    "mi_loss",
    "mutual_information",
)
#: Relative slack when comparing a bound with a rank (float rounding of the two computations; the
#: absolute floor covers :data:`ZERO`, to which :func:`compute` snaps values).
BOUND_EPS = 1e-12
#: Candidates per :func:`score` call in the branch and bound of sqlanon.publish.choose.
CHOOSE_CHUNK = 128


@dataclass(frozen=True)
class _Unsuppressed:
    """Stands in for a node's NodeResult in :func:`_value`: the node as if it suppressed nothing."""

    bad_records: int = 0


def _rank(metric: str, v: float) -> float:
    """The rank :func:`score` gives the value ``v`` (snapped to 0 as :func:`compute` does)."""
    v = 0.0 if abs(v) < ZERO else v
    return -v if _spec(metric)[2] else v


def max_classes(plan: Any, node: tuple) -> int:
    """An upper bound on the node's number of classes C: a class is one combination of the labels
    present at the node's levels, so C <= prod_j card(j, L_j) (card counts the labels present in
    the source; the top level '*' is one label), and C <= N (a class holds a record)."""
    c = 1
    for j, lvl in enumerate(node):
        c *= plan.card.get((j, lvl), 1)
        if c >= plan.n_rows:
            return plan.n_rows
    return c


def rank_lower_bound(plan: Any, node: tuple, metric: str) -> float | None:
    """A lower bound on ``score(plan, [node], metric)``'s rank (lower is better) for any number s
    of suppressed records, 0 <= s <= min(plan.allowed, N); None when the metric has none.

    It needs no node query: only the level vector, the plan's heights, label counts (plan.card),
    N = plan.n_rows and, for the record-level metrics, the per-plan whole-table sums
    (:func:`tables`, built once per plan; :func:`score` builds them too). With s = 0 the bound is
    the node's exact rank for every metric below except ``avg_class_size``.
    Notation as in the module docstring; C = the node's classes, C <= :func:`max_classes`.

    * ``height``, ``absdist``, ``reldist``: the value itself (read off the level vector).
    * ``precision``: loss = ((N - s) ks + s r') / (r N) with ks = sum_{j: h_j > 0} L_j / h_j and
      r' = #{j: h_j > 0} (:func:`precision`). Since L_j / h_j <= 1, ks <= r', so
      loss = ks / r + s (r' - ks) / (r N) >= ks / r, its value at s = 0; rank = loss - 1 >=
      ks / r - 1 = -precision(plan, node, 0).
    * ``avg_class_size``: N / (kept classes + [s > 0]) / k. When s > 0 at least one class is
      suppressed, so kept + [s > 0] <= C in every case: value >= N / C / k.
    * ``ncp``, ``monotone_entropy``, ``non_uniform_entropy``, ``mi_loss``: each is
      sum_i sum_j w_j f_j(cell) / const with w_j > 0, and :func:`compute` replaces a suppressed
      record's cells at the node's level by fully generalised ones (f_j = top_j). Every cell
      satisfies f_j(B) <= top_j: NCP_j(B) <= 1 (|B| <= |A_j|, or span B <= span A_j), and NCP is 0
      for every B when A_j has one value or no range; Pr(B) H(X_j | B) <= H(X_j) (grouping:
      H(X_j) = H(the level's partition) + sum_B' Pr(B') H(X_j | B')); log2 n(B) <= log2 N (the
      lb column; -log2 Pr(R_i(j) | B) = log2 n(B) - lam). So suppression never lowers the sum,
      and the node's value without suppression (the per-level totals :attr:`MetricTables.totals`,
      no node query) is a lower bound; it is exact when s = 0.
    * ``mutual_information`` (higher is better): U = log2 N - lb / (N r), lb = sum_{i,j}
      log2 n(B_ij); suppression can only raise lb (as above), so it can only lower U and raise the
      rank -U: the rank without suppression is a lower bound.

    No bound: ``entropy_loss`` (H(X_j | B) can exceed H(X_j): values a x98, b, c with label
    {b, c}: H(X | {b, c}) = 1 > H(X) = 0.16, so suppressing b's class LOWERS the loss),
    ``private_mi``/``private_mi_loss`` (a record's log2(Pr(Y = S_i | B) / Pr(Y = S_i)) has either
    sign, top = 0, so suppression moves the sum either way), ``cm`` and ``multiple_use`` (only a
    trivial constant bound without the node's classes), ``discernibility``: DM = sum_{kept E}
    |E|^2 + s N >= max(N^2 / C, min(k, N) N) holds (Cauchy-Schwarz over at most C kept classes;
    g(s) = (N - s)^2 / C + s N rises with s when C >= 2, and C = 1 gives N^2 either way), but
    prod_j card(j, L_j) is far above the real class count near the optimum: on Adult (8
    quasi-identifiers, k = 5, 2 % suppression) it spared 327 of 1,639 scores and ran slower.
    """
    _spec(metric)
    if metric not in BOUNDED_METRICS or undefined_reason(plan, metric) is not None:
        return None
    n = plan.n_rows
    if metric in NODE_METRICS:
        return _rank(metric, _value(plan, None, metric, node, None, {}))
    if metric == "precision":
        return _rank(metric, precision(plan, node, 0))
    if metric == "avg_class_size":
        return _rank(metric, n / max_classes(plan, node) / plan.policy.k_or_1())
    return _rank(metric, _value(plan, tables(plan), metric, node, _Unsuppressed(), {}))


# --------------------------------------------------------------------------------------------------
# The ``evaluate`` and ``profile`` commands
# --------------------------------------------------------------------------------------------------


def metric_info(plan: Any) -> dict[str, dict[str, Any]]:
    """Per metric: better direction, monotone for this policy, range, formula."""
    return {
        name: {
            "better": "higher" if m.higher_is_better else "lower",
            "monotone": monotone(plan, name),
            "range": m.range,
            "formula": m.formula,
        }
        for name, m in METRIC_INFO.items()
    }


def evaluate_node(be: Any, policy: Any, levels: str) -> dict[str, Any]:
    """Every metric of one node (``QI=L,...``, unlisted quasi-identifiers at level 0), the node's
    suppression, and ``assess`` of the source generalised to the node before suppression."""
    from sqlanon.assess import assess
    from sqlanon.search import Evaluator, node_map, parse_levels, prepare

    plan = prepare(be, policy)
    node = parse_levels(levels, plan.qi_names, plan.heights)
    res = Evaluator(plan).evaluate([node])[node]
    vals = compute(plan, [node], None, {node: res})[node]
    qi_exprs = [h.sql(lvl, ident(h.column)) for h, lvl in zip(plan.hierarchies, node, strict=True)]
    assessed = assess(be, policy, qi_exprs=qi_exprs)
    return {
        "source": str(policy.source),
        "dialect": be.dialect,
        "node": node_map(plan, node),
        "rows": plan.n_rows,
        "classes": res.classes - res.bad_classes,
        "suppressed_records": res.bad_records,
        "suppressed_classes": res.bad_classes,
        "allowed_suppression": plan.allowed,
        "satisfies": res.ok(plan.allowed),
        "metrics": vals,
        "metric_info": metric_info(plan),
        "assess_scope": "the source generalised to this node, before suppression",
        "assess": assessed,
    }


def parse_ks(text: str) -> list[int]:
    """``2,3,5`` -> [2, 3, 5] (each k a whole number >= 1).

    >>> parse_ks("2, 3,5")
    [2, 3, 5]
    """
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            k = int(part)
        except ValueError:
            raise SqlanonError(f"--k: {part!r} is not a whole number") from None
        if k < 1:
            raise SqlanonError(f"--k: k must be at least 1, got {k}")
        out.append(k)
    if not out:
        raise SqlanonError("--k: give at least one k, e.g. --k 2,3,5")
    return list(dict.fromkeys(out))


def profile(
    be: Any,
    policy: Any,
    ks: Sequence[int],
    metric: str | None = None,
    algorithm: str | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """For each k: the policy with that k, searched, its optimum by ``metric`` and all its metrics."""
    from sqlanon.publish import choose
    from sqlanon.search import node_map, prepare, run_search

    metric = metric or policy.search.metric
    _spec(metric)
    algorithm = algorithm or policy.search.algorithm
    rows = []
    info = None
    first = None
    for k in ks:
        pol_k = dataclasses.replace(policy, privacy=dataclasses.replace(policy.privacy, k=k))
        if first is None:
            plan = first = prepare(be, pol_k)
        else:
            # k changes neither the base frequency table nor the coded levels: one source scan
            # serves every k (and the metrics' tables built for one k serve the next).
            plan = dataclasses.replace(first, policy=pol_k)
            cached = getattr(first, "_sqlanon_metric_tables", None)
            if cached is not None:
                plan._sqlanon_metric_tables = cached  # noqa: SLF001
        info = info or metric_info(plan)
        result = run_search(plan, algorithm, progress)
        entry: dict[str, Any] = {
            "k": k,
            "minimal_node_count": len(result.minimal),
            "nodes_checked": result.nodes_checked,
        }
        try:
            node, best = choose(plan, result, metric)
        except SqlanonError as e:
            entry.update({"node": None, "error": str(e)})
            rows.append(entry)
            continue
        vals = compute(plan, [node], None, result.results)[node]
        res = result.results.get(node)
        if res is None:
            from sqlanon.search import Evaluator

            res = Evaluator(plan).evaluate([node])[node]
        entry.update(
            {
                "node": node_map(plan, node),
                "optimum": best["value"],
                "suppressed_records": res.bad_records,
                "classes": res.classes - res.bad_classes,
                "metrics": vals,
            }
        )
        rows.append(entry)
    return {
        "source": str(policy.source),
        "dialect": be.dialect,
        "metric": metric,
        "algorithm": algorithm,
        "suppression": policy.privacy.suppression,
        "profile": rows,
        "metric_info": info or {},
    }


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _node_text(node: dict[str, int] | None) -> str:
    if node is None:
        return "-"
    return ",".join(f"{q}={lvl}" for q, lvl in node.items())


def print_evaluate(r: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    from sqlanon.report import print_assess

    console = console or Console()
    ok = "satisfies" if r["satisfies"] else "does NOT satisfy"
    console.print(
        f"[bold]node {_node_text(r['node'])}[/bold] on {r['source']} ({r['dialect']}): {ok} the policy; "
        f"suppressed {r['suppressed_records']} of {r['rows']} records "
        f"(allowed {r['allowed_suppression']})"
    )
    t = Table(title="utility and information loss of the release")
    for col in ("metric", "value", "better", "range", "monotone"):
        t.add_column(col)
    for name, v in r["metrics"].items():
        i = r["metric_info"][name]
        t.add_row(name, _fmt(v), i["better"], i["range"], "yes" if i["monotone"] else "no")
    console.print(t)
    print_assess(r["assess"], console, title=f"Assessment ({r['assess_scope']}) of")


def print_profile(r: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    console.print(
        f"[bold]utility profile[/bold] of {r['source']} ({r['dialect']}): optimum by {r['metric']} "
        f"({r['algorithm']}), suppression limit {r['suppression']:.2%}"
    )
    rows = r["profile"]
    qis = next((list(e["node"]) for e in rows if e.get("node")), [])
    t = Table(caption=f"node = levels of {', '.join(qis)}" if qis else None)
    t.add_column("metric", overflow="fold")
    t.add_column("better")
    for e in rows:
        t.add_column(f"k={e['k']}", overflow="fold")
    t.add_row("node", "", *[",".join(map(str, e["node"].values())) if e.get("node") else "-" for e in rows])
    t.add_row("suppressed", "", *[_fmt(e.get("suppressed_records")) for e in rows])
    t.add_row("classes", "", *[_fmt(e.get("classes")) for e in rows])
    for name, i in r["metric_info"].items():
        t.add_row(name, i["better"], *[_fmt((e.get("metrics") or {}).get(name)) for e in rows])
    console.print(t)
    for e in rows:
        if e.get("error"):
            console.print(f"k={e['k']}: {e['error']}")
