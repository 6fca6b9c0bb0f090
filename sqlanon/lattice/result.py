"""What a search returns, and how a walk's tags become it: for a non-monotone policy the full
policy's pass over the nodes the monotone relaxation let through (:func:`finish`), or its branch
and bound by the metric's bound when Flash prunes (:func:`finish_pruned`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlanon.lattice.evaluator import Evaluator
from sqlanon.lattice.plan import BATCH, Node, NodeResult, Plan, Progress, Pruning
from sqlanon.lattice.shape import height, minimal


@dataclass
class SearchResult:
    algorithm: str
    satisfying: set[Node]
    minimal: list[Node]
    nodes_total: int
    nodes_checked: int
    queries: int
    results: dict[Node, NodeResult]
    #: Nodes Flash ruled out by the metric's bound without a check (``search.scope: optimum``).
    pruned: int = 0
    #: What ``minimal`` lists: ``minimal`` every minimal node; ``optimum`` (Flash with pruning)
    #: the minimal nodes whose metric bound does not exceed the best rank Flash checked (every
    #: minimal node that could be optimal).
    scope: str = "minimal"


def finish(
    name: str,
    plan: Plan,
    ev: Evaluator,
    status: dict[Node, bool],
    universe: list[Node],
    progress: Progress | None = None,
    space: int | None = None,
) -> SearchResult:
    """The result of a walk over ``status``: for a non-monotone policy the walk used the monotone
    relaxation, so the full policy is evaluated on every node the relaxation let through.

    The pass over the full policy re-evaluates nodes the walk already decided, so its last progress
    report counts distinct nodes evaluated by either pass (never more than ``space``, the nodes the
    walk covers) and leaves none remaining. ``SearchResult.nodes_checked`` stays the number of
    evaluations (``nodes_checked``, docs/search.md), which may exceed the lattice."""
    sat = {n for n, ok in status.items() if ok}
    checked, queries = ev.checked, ev.queries
    results: dict[Node, NodeResult] = dict(ev.cache)
    if not plan.monotone:
        full = Evaluator(plan)
        res = full.evaluate(sorted(sat, key=lambda n: (height(n), n)))
        sat = {n for n, r in res.items() if r.ok(plan.allowed)}
        checked += full.checked
        queries += full.queries
        results = dict(full.cache)
        if progress:
            distinct = len(ev.cache.keys() | full.cache.keys())
            progress(distinct, (space or len(universe)) - distinct, 0)
    return SearchResult(name, sat, minimal(sat, universe), len(universe), checked, queries, results)


#: finish_pruned's last batches: each takes 1 / TAIL_SPLIT of the candidates left.
TAIL_SPLIT = 3


def finish_pruned(
    plan: Plan,
    ev: Evaluator,
    full: Evaluator,
    prune: Pruning,
    best: float | None,
    status: dict[Node, bool | None],
    universe: list[Node],
    progress: Progress | None,
) -> SearchResult:
    """Flash's end for a non-monotone policy with pruning: branch and bound over the nodes the
    relaxation lets through, in order of their bound. The full policy is evaluated on them until
    the next bound exceeds the best rank of a truly satisfying node (every later one's is at least
    as high). Exact: the optimum's bound is at most its rank, so it is never skipped, and every
    node below an evaluated one has a bound no higher (the bounds are monotone), so the minimal
    nodes among the satisfying ones found are minimal in the whole lattice."""
    # Nodes the walk already evaluated in full are left out: their ranks are in ``best``.
    cands = sorted(
        (n for n, ok in status.items() if ok and n not in full.cache),
        key=lambda n: (-math.inf if (b := prune.bound(n)) is None else b, height(n), n),
    )
    todo: list[Node] = []

    def run() -> None:
        nonlocal best
        for node, res in full.evaluate(todo).items():
            r = prune.rank(node, res) if res.ok(plan.allowed) else None
            if r is not None and (best is None or r < best):
                best = r
        todo.clear()

    for i, node in enumerate(cands):  # in order of bound: once one is hopeless, every later one is too
        if best is not None and prune.hopeless(node, best):
            # The rest are ruled out by the bound; those no query has looked at (none is in
            # full.cache) count as pruned.
            for rest in cands[i:]:
                if rest not in ev.cache:
                    status[rest] = None
            break
        todo.append(node)
        # Batches of BATCH, and over the last TAIL_SPLIT * BATCH candidates a 1 / TAIL_SPLIT of
        # those left: the batch that finds the final ``best`` evaluates the candidates after it in
        # the same query, hopeless or not.
        if len(todo) >= min(BATCH, max(1, (len(cands) - i + len(todo)) // TAIL_SPLIT)):
            run()
    if todo:
        run()
    sat = {n for n, r in full.cache.items() if r.ok(plan.allowed)}
    if progress:
        distinct = len(ev.cache.keys() | full.cache.keys())
        progress(distinct, len(universe) - distinct, 0)
    checked, queries = ev.checked + full.checked, ev.queries + full.queries
    return optimum_result(sat, universe, prune, best, status, checked, queries, dict(full.cache))


def optimum_result(
    sat: set[Node],
    universe: list[Node],
    prune: Pruning,
    best: float | None,
    status: dict[Node, bool | None],
    checked: int,
    queries: int,
    results: dict[Node, NodeResult],
) -> SearchResult:
    """Flash's result with pruning (``search.scope: optimum``): the satisfying nodes found, and
    the minimal ones whose bound does not exceed ``best`` (every minimal node that could be
    optimal); ``pruned`` counts the nodes the bound ruled out without a check."""
    keep = [n for n in minimal(sat, universe) if best is None or not prune.hopeless(n, best)]
    skipped = sum(1 for ok in status.values() if ok is None)
    total = len(universe)
    return SearchResult("flash", sat, keep, total, checked, queries, results, pruned=skipped, scope="optimum")
