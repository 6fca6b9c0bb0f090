"""What ``sqlanon report`` shows, gathered from what the commands already compute (issue 14):
``assess`` of the source, the search (``anonymise --dry-run``), the release measured as
publishing verifies it (after suppression), every metric of the chosen node, ``profile`` over k,
how l and t spread over the classes, example labels of every level, and optionally the
machine-learning utility. Everything is an aggregate computed in the database; the page itself
is drawn by :mod:`sqlanon.report.html` from the dictionary returned here."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice import Evaluator, Plan, Progress, build_hierarchies, check_coverage, prepare
from sqlanon.measure.assessment import (
    FrequencyTables,
    _l_rank,
    _sort_key,
    assess,
    build_frequency_tables,
    check_columns,
    reference_context,
)
from sqlanon.measure.release import release_check, without_classes
from sqlanon.measure.release_stats import class_table
from sqlanon.measure.tcloseness_hier import hierarchy_of
from sqlanon.metrics import compute, metric_info, profile
from sqlanon.metrics.optimum import check_node_release
from sqlanon.ml.experiment import utility
from sqlanon.ml.shown import release_only
from sqlanon.policy import Policy
from sqlanon.publish import anonymise, mondrian_release
from sqlanon.relation import Relation
from sqlanon.sql.compile import ident
from sqlanon.transform.examples import release_labels
from sqlanon.transform.perturb import materialise
from sqlanon.transform.release import release_context


def _version() -> str:
    try:
        return version("sqlanon")
    except PackageNotFoundError:  # a checkout without an install
        return "unknown"


def report_data(
    be: Backend,
    policy: Policy,
    *,
    levels: tuple[int, ...] | None = None,
    algorithm: str | None = None,
    metric: str | None = None,
    ks: Sequence[int] = (2, 3, 5, 10, 20),
    label: str | None = None,
    ml_ks: Sequence[int] | None = None,
    sample: int = 100_000,
    trainers: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The report's data (the JSON of ``sqlanon report --json``, see docs/report.md)."""
    if policy.privacy.dp is not None:  # the page would show the source's figures beside an epsilon
        raise SqlanonError(
            "privacy.differential_privacy: the report's figures (the source's, its release at the node, "
            "the profile over k) are not SafePub's sample and its guarantee covers none of them; "
            "publish with sqlanon anonymise, which measures the published rows"
        )
    hierarchies = build_hierarchies(policy, check_columns(be, policy))
    before = assess(be, policy, validate=lambda ft: check_coverage(be, hierarchies, ft))
    search = anonymise(
        be, policy, dry_run=True, levels=levels, metric=metric, algorithm=algorithm, progress=progress
    )
    pert = materialise(be, policy)
    plan = prepare(be, pert.policy)
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    mondrian = search["algorithm"] == "mondrian"
    if mondrian:
        (_, names), part = mondrian_release(plan, policy)
        top = tuple(0 for _ in plan.heights)
        rel = _release(be, policy, plan, top, names, pert.ctx, part)
        after, _, _ = release_check(
            be, plan.policy, rel, reference=plan.base, n_rows=plan.n_rows, population_exprs=None
        )
        node = None
        metrics = dict(search.get("mondrian") or {})
    else:
        node = tuple(int(search["node"][q]) for q in plan.qi_names)
        rel = _release(be, policy, plan, node, src_cols, pert.ctx, None)
        after, _, _ = check_node_release(plan, rel, node)
        res = Evaluator(plan).evaluate([node])[node]
        metrics = compute(plan, [node], None, {node: res})[node]
    search.pop("published", None)
    # The release's SQL is the policy's program: a map hierarchy's CASE lists every raw value it maps,
    # the suppressed outliers' too (task A, session 8); `sqlanon compile` prints it for the operator.
    search.pop("sql", None)
    out: dict[str, Any] = {
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "sqlanon_version": _version(),
        "source": str(policy.source),
        "dialect": be.dialect,
        "policy": _policy_summary(policy, search),
        "before": without_classes(before),  # the source's classes may be ones the release suppressed
        "after": after,
        "search": search,
        "metrics": metrics,
        "metric_info": metric_info(plan),
        "levels": _levels(be, plan, search["node"] if node is not None else None, rel),
        "distributions": {
            "before": _distributions(be, plan.policy, plan.policy.source, None),
            "after": _distributions(be, plan.policy, rel, None),  # the release's own p(w) (H1)
        },
        "profile": profile(
            be, policy, ks, metric=metric, algorithm=search["algorithm"] if mondrian else algorithm
        ),
        "utility": None,
    }
    if label is not None:
        out["utility"] = utility(
            be,
            policy,
            label=label,
            ks=list(ml_ks or ks),
            sample=sample,
            algorithm="mondrian" if mondrian else algorithm,
            metric=metric,
            trainers=list(trainers) if trainers else ("naive_bayes",),
        )
    return release_only(out)  # no figure computed over the source's values (sqlanon.ml.shown)


def _release(
    be: Backend,
    policy: Policy,
    plan: Plan,
    node: tuple[int, ...],
    src_cols: list[str],
    perturb: dict[str, Any] | None,
    partition: dict[str, Any] | None,
) -> Relation:
    """The release as a session-temporary table, by the release's own SQL (suppression applied)."""
    ctx = release_context(policy, plan.hierarchies, node, src_cols, perturb, partition)
    return be.create_temp("release", "publish/_release", **ctx)


def _policy_summary(policy: Policy, search: dict[str, Any]) -> dict[str, Any]:
    p = policy.privacy
    # Each requirement as data (kind, attribute, measure, bound) beside its label: the page
    # re-parsed its own labels and broke on names holding ": " or "]" (issue 32).
    checks: list[dict[str, Any]] = [{"kind": "k", "bound": p.k}] if p.k else []
    checks += [{"kind": "l", "attribute": r.attribute, "measure": r.kind, "bound": r.l} for r in p.l]
    checks += [{"kind": "t", "attribute": r.attribute, "measure": r.measure, "bound": r.t} for r in p.t]
    checks += [{"kind": "risk", "measure": kind, "bound": bound} for kind, bound in p.risk.items()]
    checks += [
        {"kind": "likeness", "attribute": r.attribute, "measure": r.model, "bound": r.bound}
        for r in p.likeness
    ]
    labels = [f"k >= {p.k}"] if p.k else []
    labels += [r.label for r in p.l] + [r.label for r in p.t]
    labels += [f"risk.{kind} <= {bound:g}" for kind, bound in p.risk.items()]
    labels += [r.label for r in p.likeness]
    reqs = [{**c, "label": lab} for c, lab in zip(checks, labels, strict=True)]
    return {
        "source": str(policy.source),
        "target": str(policy.target) if policy.target else None,
        "columns": [
            {"name": c.name, "role": c.role, **({"action": c.action} if c.role == "identifier" else {})}
            for c in policy.columns
        ],
        "requirements": labels,
        "checks": reqs,
        "suppression": p.suppression,
        "suppression_mode": p.suppression_mode,
        "algorithm": search["algorithm"],
        "metric": (search.get("optimum") or {}).get("metric"),
    }


def _levels(be: Backend, plan: Plan, node: dict[str, int] | None, rel: Relation) -> dict[str, Any]:
    """Per QI: its chosen level (None for Mondrian), its height, and an example label of the
    chosen level and each coarser one, from the release's largest class (``rel``, suppression
    applied): never a finer level, a suppressed class or a value (sqlanon/transform/examples.py)."""
    hs = plan.hierarchies
    labels = release_labels(be, plan.policy, hs, node, release=rel, coarser=True) if node else {}
    out = {}
    for h in hs:
        ex = {str(lv): lab for lv, lab in sorted(labels.get(h.column, {}).items())}
        out[h.column] = {
            "level": None if node is None else node[h.column],
            "height": h.height,
            "examples": ex,
        }
    return out


def _distributions(
    be: Backend, policy: Policy, rel: Relation, reference: FrequencyTables | None
) -> dict[str, dict[str, list[list[float]]]]:
    """{attribute: {measure: [[bin lower edge, classes, records], ...]}} over the classes of ``rel``
    (grouped by its QI columns as they are), by ``templates/report/distribution.sql.j2`` over the
    same per-class statistics as ``assess`` (t against ``reference``'s distribution when given)."""
    s_names = [c.name for c in policy.sensitive]
    if not s_names:
        return {}
    qi_names = [c.name for c in policy.quasi]
    sort_keys = [_sort_key(policy, n, ident(f"s_{i}")) for i, n in enumerate(s_names)]
    ft = build_frequency_tables(
        be, rel, [ident(n) for n in qi_names], qi_names, [ident(n) for n in s_names], s_names, sort_keys
    )
    out: dict[str, dict[str, list[list[float]]]] = {}
    for i, name in enumerate(s_names):
        ctx = reference_context(reference, name)
        stats, _ = class_table(be, policy, ft, i, _l_rank(policy, name), reference, ctx)
        hist: dict[str, list[list[float]]] = {}
        hier = hierarchy_of(policy, name) is not None
        for measure, b, scale, classes, records in be.query("report/distribution", stats=stats, hier=hier):
            hist.setdefault(str(measure), []).append([int(b) / int(scale), int(classes), int(records)])
        out[name] = hist
    return out
