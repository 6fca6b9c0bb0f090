"""Choosing the optimum by a metric among the candidates the metric allows, by branch and bound on
query-free lower bounds; table-wide risk bounds checked on each candidate's release."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sqlanon.errors import EmptyRelationError, SqlanonError
from sqlanon.lattice import Node, NodeResult, Plan, Progress, SearchResult, run_search
from sqlanon.lattice.local import local_plan, location
from sqlanon.lattice.local_measure import LocalMeasure, measures_locally
from sqlanon.measure.release import release_check
from sqlanon.metrics.bounds import BOUND_EPS, CHOOSE_CHUNK, _rank, rank_lower_bound
from sqlanon.metrics.info import COUNT_METRICS, NODE_METRICS, PHI_KINDS, candidates_for
from sqlanon.metrics.scoring import _value, score, tables, value
from sqlanon.policy import Policy
from sqlanon.presence import release_bounds
from sqlanon.profitability import is_table_wide
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql, ident
from sqlanon.transform.release import release_context


class BoundPruning:
    """Flash's pruning by the metric (:class:`sqlanon.lattice.Pruning`; ``search.scope: optimum``).

    ``hopeless``: :func:`~sqlanon.metrics.bounds.rank_lower_bound` (no query, cached per node)
    exceeds ``best`` by more than the relative slack :data:`BOUND_EPS` that
    :func:`choose_among` allows for rounding, so skipping agrees with its branch and bound.
    ``rank``: a checked satisfying node's exact rank where the check's counts give it without a
    query: the level-vector metrics, the count metrics (precision, discernibility, average class
    size: the suppressed records and kept classes are in the NodeResult) and, for a node that
    suppresses nothing, the per-record metrics (their value without suppression is the per-level
    totals). Each bound used is monotone along generalisation (:func:`rank_lower_bound`'s proofs:
    a label at a higher level covers more values and is present in fewer labels), which the
    minimal-node listing of :func:`~sqlanon.lattice.algorithms.flash` relies on.
    """

    def __init__(self, plan: Plan, metric: str) -> None:
        self.plan, self.metric = plan, metric
        self.bounds: dict[Node, float | None] = {}
        self._cutoff: tuple[float, float] = (math.nan, math.nan)  # (best, the bound that loses to it)

    def bound(self, node: Node) -> float | None:
        if node not in self.bounds:
            self.bounds[node] = rank_lower_bound(self.plan, node, self.metric)
        return self.bounds[node]

    def hopeless(self, node: Node, best: float) -> bool:
        # Called ~23,000 times per Flash search on Adult with 5 % suppression: the cutoff is
        # computed once per best, the bound once per node.
        b = self.bounds[node] if node in self.bounds else self.bound(node)
        if b is None:
            return False
        if self._cutoff[0] != best:
            self._cutoff = (best, best + BOUND_EPS * max(1.0, abs(best)))
        return b > self._cutoff[1]

    def rank(self, node: Node, res: NodeResult) -> float | None:
        m = self.metric
        if m in NODE_METRICS or m in COUNT_METRICS:
            mt = None
        elif m in PHI_KINDS and res.bad_records == 0:
            mt = tables(self.plan)
        else:
            return None
        return _rank(m, _value(self.plan, mt, m, node, res, {}))


def pruning(plan: Plan, metric: str) -> BoundPruning | None:
    """Flash's pruning for ``metric`` under the plan's policy, or None where it does not apply:
    ``search.scope: minimal``, a table-wide risk bound (:func:`choose` may have to fall back to
    worse candidates, so none may be skipped), or a metric without a query-free bound."""
    if plan.policy.search.scope != "optimum" or global_bounds(plan.policy):
        return None
    if rank_lower_bound(plan, tuple(0 for _ in plan.heights), metric) is None:
        return None
    return BoundPruning(plan, metric)


def search(plan: Plan, algorithm: str, metric: str, progress: Progress | None = None) -> SearchResult:
    """The lattice search for the optimum by ``metric``: Flash prunes by the metric's bound unless
    the policy says ``search.scope: minimal`` (:func:`pruning`)."""
    return run_search(plan, algorithm, progress, pruning(plan, metric))


def walk(
    plan: Plan, algorithm: str, metric: str, progress: Progress | None = None, where: str | None = None
) -> tuple[SearchResult, Node, dict[str, Any], dict[str, Any]]:
    """:func:`search` and :func:`choose` where ``search.where`` says (``where``: ``--search-in``;
    :func:`sqlanon.lattice.local.location`): in the database, or on a local copy of the coded table
    (:func:`~sqlanon.lattice.local.local_plan`). The last item says where and how many rows crossed.

    Locally, the optimum is chosen there too unless choosing reads more than the search's tables:
    a table-wide risk bound measures candidate releases of the source, a label outside the
    quasi-identifiers and sensitive attributes scans the source again; both are chosen in the
    database, from the local walk's results (a node's result is the same wherever it is counted)."""
    if location(plan, where) == "database":
        result = search(plan, algorithm, metric, progress)
        node, best = choose(plan, result, metric)
        return result, node, best, {"search_location": "database", "rows_transferred": 0}
    pol = plan.policy
    label = pol.label_column
    read = {c.name for c in pol.columns if c.role in ("quasi", "sensitive")}
    here = not global_bounds(pol) and (label is None or label in read)
    with local_plan(plan) as lp:
        result = search(lp, algorithm, metric, progress)
        if here:
            node, best = choose(lp, result, metric)
        moved = lp.be.moved  # type: ignore[attr-defined]
    if not here:
        node, best = choose(plan, result, metric)
    return result, node, best, {"search_location": "local", "rows_transferred": moved}


def choose(plan: Plan, result: SearchResult, metric: str) -> tuple[Node, dict[str, Any]]:
    """The optimum by ``metric`` (:func:`choose_among`); with a table-wide risk bound (average,
    marketer, journalist), the best-ranked satisfying node whose release also meets it.

    The lattice search decides per class; table-wide risks are properties of a whole release, so
    each candidate, best first, is measured like a published release until one passes: a
    count-only release from the source in one pass (:func:`one_pass`), any other materialised as a
    temporary table first. Exact: every satisfying node is a candidate, and the first to pass
    in rank order is the optimum among those that meet every requirement.
    """
    node, info = choose_among(plan, result, metric)
    if not global_bounds(plan.policy):
        return node, info
    tried: set[Node] = set()
    src_cols = [c.name for c in plan.be.require_columns(plan.policy.source, "source")]
    while True:
        ctx = release_context(plan.policy, plan.hierarchies, node, src_cols)
        rel = None if one_pass(ctx) else plan.be.create_temp("release", "publish/_release", **ctx)
        try:
            _result, bad, missing = check_node_release(plan, rel, node, ctx)
        except EmptyRelationError:  # every class suppressed (k-map, a game: sqlanon.measure.presence)
            bad, missing = ["all"], plan.n_rows
        if not bad and missing <= plan.allowed:
            info["risk_checked"] = len(tried) + 1
            return node, info
        tried.add(node)
        try:
            node, info = choose_among(plan, result, metric, exclude=tried)
        except SqlanonError:
            raise SqlanonError(
                f"no generalisation meets the table-wide risk bounds ({', '.join(bad)} fails at every one "
                f"of the {len(tried)} satisfying node(s)); relax privacy.risk"
            ) from None


def choose_among(
    plan: Plan, result: SearchResult, metric: str, exclude: set[Node] | None = None
) -> tuple[Node, dict[str, Any]]:
    """The optimum by ``metric`` among the candidates the metric allows (see sqlanon.metrics).

    Branch and bound where the metric has a lower bound on a node's rank that needs no node query
    (:func:`sqlanon.metrics.rank_lower_bound`): the candidates are scored in order of (bound,
    height, node), in chunks of 1, 2, 4, ... up to CHOOSE_CHUNK nodes per :func:`score` call, and
    scoring stops at the first candidate whose bound exceeds the best rank so far (plus a relative
    1e-12 for rounding). Every later candidate's bound is at least as high, so none can beat or tie
    the best; a candidate whose bound equals it is still scored, so the result is the one scoring
    every candidate gives: the least (rank, height, node). Other metrics score every candidate.
    ``scored`` in the returned dict counts the candidates scored, ``candidates`` all of them.
    """
    cands = candidates_for(plan, result, metric)
    if exclude is not None:
        # Table-wide risk bounds are not decided per node by the search: every satisfying node
        # is a candidate, not only the minimal ones.
        cands = sorted(n for n in result.satisfying if n not in exclude)
    if not cands:
        k = plan.policy.privacy.k or 1
        if k > plan.n_rows:  # issue 34: name the cause when no class can ever reach k
            raise SqlanonError(f"privacy.k: k = {k} but the table has {plan.n_rows} rows; lower k")
        raise SqlanonError(
            "no generalisation satisfies the policy within the suppression limit "
            f"({plan.allowed} records); raise privacy.suppression or relax the requirements"
        )

    def key(nv: tuple[Node, float]) -> tuple:
        return (nv[1], sum(nv[0]), nv[0])

    bounds = [rank_lower_bound(plan, nd, metric) for nd in cands]
    if any(b is None for b in bounds):
        scored = score(plan, cands, metric, result.results)
        best = min(scored, key=key)
        n_scored = len(scored)
    else:
        order = sorted(zip(bounds, cands, strict=True), key=lambda bn: (bn[0], sum(bn[1]), bn[1]))
        best = None
        n_scored = i = 0
        size = 1  # chunk sizes 1, 2, 4, ... CHOOSE_CHUNK: few wasted scores when the first is best
        while i < len(order):
            limit = float("inf") if best is None else best[1] + BOUND_EPS * max(1.0, abs(best[1]))
            chunk = []
            while i < len(order) and len(chunk) < size and order[i][0] <= limit:
                chunk.append(order[i][1])
                i += 1
            if not chunk:
                break  # the next bound, and every later one, exceeds the best rank
            for nv in score(plan, chunk, metric, result.results):
                if best is None or key(nv) < key(best):
                    best = nv
            n_scored += len(chunk)
            size = min(2 * size, CHOOSE_CHUNK)
        assert best is not None
    return best[0], {
        "metric": metric,
        "value": value(best[1], metric),
        "scored": n_scored,
        "candidates": len(cands),
    }


def global_bounds(policy: Policy) -> bool:
    """Whether the policy bounds a table-wide risk (average, marketer, journalist): these are
    checked on a node's release, after the lattice search (which decides per class)."""
    if release_bounds(policy):  # delta-presence, k-map against the population (sqlanon.presence)
        return True
    return any(kind != "prosecutor" for kind in policy.privacy.risk) or is_table_wide(policy.privacy)


def node_exprs(plan: Plan, node: Node) -> list[Sql]:
    """The node's generalisation of each QI column, in the policy's order (the release's QI
    expressions, :func:`sqlanon.transform.release.release_context`)."""
    return [h.sql(int(lvl or 0), ident(h.column)) for h, lvl in zip(plan.hierarchies, node, strict=True)]


def population_exprs(plan: Plan, node: Node) -> list[Sql] | None:
    """The node's generalisation of the population's QI columns (None without a population)."""
    if plan.policy.population is None:
        return None
    return node_exprs(plan, node)


def check_node_release(
    plan: Plan,
    rel: Relation | None,
    node: Node,
    ctx: dict[str, Any] | None = None,
    local: LocalMeasure | None = None,
    create: Callable[..., Relation] | None = None,
) -> tuple[dict[str, Any], list[str], int]:
    """:func:`~sqlanon.measure.release.release_check` of ``node``'s release ``rel``.

    With the release's context ``ctx`` (:func:`~sqlanon.transform.release.release_context`) a
    count-only release of the source's own rows is measured from the source in one pass instead
    (:func:`one_pass`); ``rel`` may then be None (nothing to read). ``local``: where the checks run
    (default :func:`local_measure`'s choice); ``create``: builds its frequency table (``assess``)."""
    from_source = None
    if ctx is not None and one_pass(ctx):
        rel, from_source = plan.policy.source, (node_exprs(plan, node), ctx["class_check"], ctx["n_alias"])
    assert rel is not None
    return release_check(
        plan.be,
        plan.policy,
        rel,
        reference=plan.base,
        n_rows=plan.n_rows,
        population_exprs=population_exprs(plan, node),
        from_source=from_source,
        local=local or local_measure(plan, rel),
        create=create,
    )


def local_measure(plan: Plan, rel: Relation) -> LocalMeasure | None:
    """Where a release of ``plan`` is measured (:mod:`sqlanon.lattice.local_measure`): a local
    DuckDB once the warehouse has grouped ``rel``, else None (every statement in the warehouse)."""
    if not measures_locally(plan.be, plan.policy, plan.base_rows, plan.n_rows):
        return None
    return LocalMeasure(plan.be, [rel, plan.policy.source], [plan.base])


def one_pass(ctx: dict[str, Any]) -> bool:
    """Whether a release (its :func:`~sqlanon.transform.release.release_context`) can be measured
    from its source in one GROUP BY: its classes need only their size (no l or t, records
    removed rather than masked), and it reads the source's own rows (no perturbation, no
    Mondrian partition)."""
    # popf: the release also drops classes failing a population criterion (sqlanon.measure.presence).
    return bool(ctx["count_only"]) and not ctx["pt"] and not ctx["mp"] and not ctx.get("popf")
