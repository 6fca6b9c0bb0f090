"""``evaluate`` (every metric of one node) and ``profile`` (the optimum and its metrics for each k)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice import Evaluator, Levels, Plan, Progress, node_map, parse_levels, prepare
from sqlanon.lattice.mondrian import MondrianResult, mondrian_release
from sqlanon.lattice.mondrian_local import run_mondrian
from sqlanon.measure.assessment import assess
from sqlanon.measure.release import release_check, without_classes
from sqlanon.metrics.info import METRIC_INFO, ZERO, _spec, monotone
from sqlanon.metrics.optimum import choose, search
from sqlanon.metrics.scoring import compute
from sqlanon.policy import ALGORITHMS, Policy
from sqlanon.sql.compile import ident
from sqlanon.transform.perturb import materialise
from sqlanon.transform.release import release_context


def metric_info(plan: Plan) -> dict[str, dict[str, Any]]:
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


def evaluate_node(be: Backend, policy: Policy, levels: Levels) -> dict[str, Any]:
    """Every metric of one node (``QI=L,...``, unlisted quasi-identifiers at level 0), the node's
    suppression, and ``assess`` of the source generalised to the node before suppression. With
    perturbation: of the perturbed rows (the release's), and what perturbation did to them."""
    pert = materialise(be, policy)
    source, policy = policy.source, pert.policy
    plan = prepare(be, policy, walk=False)  # one node, evaluated in the warehouse: nothing staged
    node = parse_levels(levels, plan.qi_names, plan.heights)
    res = Evaluator(plan).evaluate([node])[node]
    vals = compute(plan, [node], None, {node: res})[node]
    qi_exprs = [h.sql(lvl, ident(h.column)) for h, lvl in zip(plan.hierarchies, node, strict=True)]
    assessed = assess(be, policy, qi_exprs=qi_exprs)
    assessed["source"] = str(source)
    out = {
        "source": str(source),
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
        "assess": without_classes(assessed),
    }
    if pert.measured is not None:
        out["perturbation"] = pert.measured
    return out


#: Metrics a Mondrian release has no value for, and why (README, *Mondrian*).
MONDRIAN_UNDEFINED = {
    "height": "defined by a node's levels; a local recoding has none",
    "absdist": "defined by a node's levels; a local recoding has none",
    "reldist": "defined by a node's levels; a local recoding has none",
    "precision": "defined by hierarchy levels; a numeric range [lo-hi] is no level",
    "private_mi": "not computed for a local recoding (needs n(B, y) for every range B)",
    "private_mi_loss": "not computed for a local recoding (needs n(B, y) for every range B)",
}


def mondrian_metrics(plan: Plan, res: MondrianResult) -> dict[str, float | None]:
    """Every metric defined for Mondrian's release, from the per-record sums of
    templates/mondrian/metrics.sql.j2, with the formulas of the README's metrics table (nothing
    is suppressed: DM is sum |E|^2, CM and multiple use count every class)."""
    s = res.sums
    n, r = s["n"], len(res.dims)
    out: dict[str, float | None] = {name: None for name in METRIC_INFO}
    out.update(
        {
            "ncp": s["ncp"] / (n * r),
            "discernibility": float(res.metrics["discernibility"]),
            "avg_class_size": float(res.metrics["avg_class_size"]),
            "entropy_loss": s["h"] / n,
            "monotone_entropy": s["ph"] / n,
            "non_uniform_entropy": (s["lb"] - s["lam"]) / n,
            "mi_loss": (s["lb"] - s["lam"]) / (n * r),
            "mutual_information": math.log2(n) - s["lb"] / (n * r),
        }
    )
    if s["cm_kept"] is not None:
        out["cm"] = s["cm_kept"] / n
    sens = [c.name for c in plan.policy.sensitive]
    if sens and len(s["mu"]) == len(sens):  # multiple use: categorical attributes only
        vals = [(kept / (m - 1) if m > 1 else 0.0) / n for kept, m in s["mu"].values()]
        out["multiple_use"] = sum(vals) / len(vals)
    return {k: (0.0 if v is not None and abs(v) < ZERO else v) for k, v in out.items()}


def evaluate_mondrian(be: Backend, policy: Policy) -> dict[str, Any]:
    """Every metric of Mondrian's release (:func:`mondrian_metrics`), and ``assess`` of the
    release itself: built as a temporary table exactly as publishing builds it, then measured."""
    pert = materialise(be, policy)
    source, search_pol = policy.source, pert.policy
    plan = prepare(be, search_pol)
    found, where = run_mondrian(plan, table=True)  # its rounds where search.where says
    (res, names), part = mondrian_release(plan, policy, found, table=True)
    top = tuple(0 for _ in plan.heights)
    ctx = release_context(policy, plan.hierarchies, top, names, pert.ctx, part)
    rel = be.create_temp("mrelease", "publish/_release", **ctx)
    assessed, bad, missing = release_check(
        be, search_pol, rel, reference=plan.base, n_rows=plan.n_rows, population_exprs=None
    )
    assessed["source"] = str(source)
    out = {
        "source": str(source),
        "dialect": be.dialect,
        "algorithm": "mondrian",
        **where,
        "node": None,
        "partitions": res.partitions,
        "smallest_partition": res.metrics["smallest_partition"],
        "rows": plan.n_rows,
        "classes": res.partitions,
        "suppressed_records": missing,
        "suppressed_classes": 0,
        "allowed_suppression": plan.allowed,
        "satisfies": not bad and missing <= plan.allowed,
        "metrics": mondrian_metrics(plan, res),
        "metric_info": metric_info(plan),
        "assess_scope": "Mondrian's release (each record's QIs its partition's summary)",
        "assess": assessed,
    }
    if pert.measured is not None:
        out["perturbation"] = pert.measured
    return out


def _mondrian_entry(plan: Plan, k: int, info: dict[str, Any], metric: str) -> dict[str, Any]:
    """A profile row for Mondrian: its partitions and every metric defined for a local recoding
    (:func:`mondrian_metrics`; the others are null)."""
    try:
        res = run_mondrian(plan)[0]
    except SqlanonError as e:
        return {"k": k, "node": None, "error": str(e)}
    vals: dict[str, Any] = {name: None for name in info}
    vals.update(mondrian_metrics(plan, res))
    return {
        "k": k,
        "node": None,
        "partitions": res.partitions,
        "optimum": vals[metric],
        "suppressed_records": 0,
        "classes": res.partitions,
        "metrics": vals,
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


def parse_algorithms(text: str | None, default: str) -> list[str]:
    """``flash,mondrian`` -> ["flash", "mondrian"]: profile compares them k by k.

    >>> parse_algorithms("flash, mondrian", "flash")
    ['flash', 'mondrian']
    """
    if text is None:
        return [default]
    out = [a.strip() for a in text.split(",") if a.strip()]
    for a in out:
        if a not in ALGORITHMS:
            raise SqlanonError(f"--algorithm: {a!r} is not one of {', '.join(ALGORITHMS)}")
    if not out:
        raise SqlanonError("--algorithm: give at least one algorithm, e.g. --algorithm flash,mondrian")
    return list(dict.fromkeys(out))


def profile(
    be: Backend,
    policy: Policy,
    ks: Sequence[int],
    metric: str | None = None,
    algorithm: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """For each k (and each algorithm of a comma-separated ``algorithm``): the policy with that k,
    searched, its optimum by ``metric`` and all its metrics."""
    metric = metric or policy.search.metric
    _spec(metric)
    source, policy = policy.source, materialise(be, policy).policy
    algorithms = parse_algorithms(algorithm, policy.search.algorithm)
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
        for alg in algorithms:
            entry = (
                _mondrian_entry(plan, k, info, metric)
                if alg == "mondrian"
                else _node_entry(plan, k, alg, metric, progress)
            )
            rows.append({"algorithm": alg, **entry})
    return {
        "source": str(source),
        "dialect": be.dialect,
        "metric": metric,
        "algorithm": ",".join(algorithms),
        "suppression": policy.privacy.suppression,
        "profile": rows,
        "metric_info": info or {},
    }


def _node_entry(plan: Plan, k: int, algorithm: str, metric: str, progress: Progress | None) -> dict[str, Any]:
    """A profile row for a full-domain search: its optimum by ``metric`` and all its metrics."""
    result = search(plan, algorithm, metric, progress)
    entry: dict[str, Any] = {
        "k": k,
        "minimal_node_count": len(result.minimal),
        "nodes_checked": result.nodes_checked,
    }
    try:
        node, best = choose(plan, result, metric)
    except SqlanonError as e:
        entry.update({"node": None, "error": str(e)})
        return entry
    vals = compute(plan, [node], None, result.results)[node]
    res = result.results.get(node)
    if res is None:
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
    return entry
