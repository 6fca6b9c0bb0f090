"""``evaluate`` (every metric of one node) and ``profile`` (the optimum and its metrics for each k)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice import Evaluator, Plan, Progress, node_map, parse_levels, prepare, run_search
from sqlanon.lattice.mondrian import mondrian
from sqlanon.measure.assessment import assess
from sqlanon.metrics.info import METRIC_INFO, _spec, monotone
from sqlanon.metrics.optimum import choose
from sqlanon.metrics.scoring import compute
from sqlanon.policy import Policy
from sqlanon.sql.compile import ident
from sqlanon.transform.perturb import materialise


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


def evaluate_node(be: Backend, policy: Policy, levels: str) -> dict[str, Any]:
    """Every metric of one node (``QI=L,...``, unlisted quasi-identifiers at level 0), the node's
    suppression, and ``assess`` of the source generalised to the node before suppression. With
    perturbation: of the perturbed rows (the release's), and what perturbation did to them."""
    pert = materialise(be, policy)
    source, policy = policy.source, pert.policy
    plan = prepare(be, policy)
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
        "assess": assessed,
    }
    if pert.measured is not None:
        out["perturbation"] = pert.measured
    return out


def _mondrian_entry(plan: Plan, k: int, info: dict[str, Any]) -> dict[str, Any]:
    """A profile row for Mondrian: its partitions and the metrics it defines for a local recoding
    (NCP, discernibility, average class size; the others are null: they are defined per node)."""
    try:
        res = mondrian(plan)
    except SqlanonError as e:
        return {"k": k, "node": None, "error": str(e)}
    vals: dict[str, Any] = {name: None for name in info}
    vals.update({m: res.metrics[m] for m in ("ncp", "discernibility", "avg_class_size")})
    return {
        "k": k,
        "node": None,
        "partitions": res.partitions,
        "optimum": res.metrics["ncp"],
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


def profile(
    be: Backend,
    policy: Policy,
    ks: Sequence[int],
    metric: str | None = None,
    algorithm: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """For each k: the policy with that k, searched, its optimum by ``metric`` and all its metrics."""
    metric = metric or policy.search.metric
    _spec(metric)
    source, policy = policy.source, materialise(be, policy).policy
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
        if algorithm == "mondrian":
            rows.append(_mondrian_entry(plan, k, info))
            continue
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
        "source": str(source),
        "dialect": be.dialect,
        "metric": metric,
        "algorithm": algorithm,
        "suppression": policy.privacy.suppression,
        "profile": rows,
        "metric_info": info or {},
    }
