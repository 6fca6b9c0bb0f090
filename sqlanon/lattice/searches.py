"""The searches beside Flash (:mod:`sqlanon.lattice.algorithms`): exhaustive (MinGen, the test
oracle), Incognito and Datafly. They walk the lattice through :mod:`sqlanon.lattice.shape`; see the
package docstring for monotonicity and how non-monotone policies stay exact.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from sqlanon.errors import SqlanonError
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.lattice.plan import BATCH, Node, Plan, Progress
from sqlanon.lattice.result import SearchResult, finish
from sqlanon.lattice.shape import all_nodes, height, minimal, predecessors, project, subset_of


def exhaustive(plan: Plan, progress: Progress | None = None) -> SearchResult:
    """MinGen (seed 002 section 4.1): evaluate every node; the test oracle for the other searches.
    Progress: (checked, 0, not yet checked), summing to the lattice size (see :func:`run_search`)."""
    ev = Evaluator(plan)
    nodes = all_nodes(plan.heights)
    for i in range(0, len(nodes), BATCH):
        ev.evaluate(nodes[i : i + BATCH])
        if progress:
            progress(ev.checked, 0, len(nodes) - ev.checked)
    sat = {n for n in nodes if ev.cache[n].ok(plan.allowed)}
    return SearchResult(
        "exhaustive", sat, minimal(sat, nodes), len(nodes), ev.checked, ev.queries, dict(ev.cache)
    )


def incognito(plan: Plan, progress: Progress | None = None) -> SearchResult:
    """Incognito (seed 002 section 4.2; LeFevre et al. 2005).

    Iteration i looks at the quasi-identifier subsets of size i. Its candidates are the level
    vectors whose every (i-1)-subset projection satisfied in iteration i-1 (subset property). Each
    iteration walks its candidates bottom-up by height; a candidate with a satisfying direct
    predecessor is tagged satisfying without a query (generalisation property); the others of one
    height are evaluated together, many per query. For a non-monotone policy the walk uses the
    monotone relaxation and the full policy is evaluated afterwards on what it lets through.

    Progress counts the space Incognito walks: every node of every subset lattice, the full
    lattice included, prod_j (h_j + 2) - 1 nodes (each QI at one of its h_j + 1 levels or outside
    the subset, less the empty subset). ``checked`` counts the evaluated ones, ``pruned`` those
    decided without a query (by the subset or the generalisation property), ``remaining`` the rest,
    so the three always sum to that space and ``checked`` never exceeds it. Counting the subset
    lattices' evaluations against the full lattice alone reported more nodes checked than exist
    (issue 15).
    """
    d = len(plan.heights)
    ev = Evaluator(plan, relaxed=not plan.monotone)
    space = incognito_space(plan.heights)
    sat_prev: dict[tuple[int, ...], set[Node]] = {}
    pruned = 0  # nodes decided without a query
    final_status: dict[Node, bool] = {}
    for size in range(1, d + 1):
        sat_now: dict[tuple[int, ...], set[Node]] = {}
        candidates: list[Node] = []
        for subset in itertools.combinations(range(d), size):
            ranges = [range(plan.heights[j] + 1) if j in subset else [None] for j in range(d)]
            for node in itertools.product(*ranges):
                if size > 1 and not all(
                    project(node, sub) in sat_prev.get(sub, set())
                    for sub in itertools.combinations(subset, size - 1)
                ):
                    pruned += 1
                    continue
                candidates.append(node)
        status: dict[Node, bool] = {}
        cand_set = set(candidates)
        by_height: dict[int, list[Node]] = {}
        for n in candidates:
            by_height.setdefault(height(n), []).append(n)
        for h in sorted(by_height):
            todo = []
            for n in by_height[h]:
                if any(status.get(p) for p in predecessors(n) if p in cand_set):
                    status[n] = True  # generalisation property
                    pruned += 1
                else:
                    todo.append(n)
            for n, res in ev.evaluate(todo).items():
                status[n] = res.ok(plan.allowed)
            if progress:
                progress(ev.checked, pruned, space - ev.checked - pruned)
        for n, ok in status.items():
            if ok:
                sat_now.setdefault(subset_of(n), set()).add(n)
        sat_prev = sat_now
        if size == d:
            final_status = status
    return finish("incognito", plan, ev, final_status, all_nodes(plan.heights), progress, space)


def incognito_space(heights: Sequence[int]) -> int:
    """Nodes of all of Incognito's subset lattices, the full one included: each QI at one of its
    h + 1 levels or outside the subset (h + 2 choices), less the empty subset.

    >>> incognito_space([1, 2])  # 2 + 3 single-QI nodes and the 2 x 3 full lattice
    11
    """
    return math.prod(h + 2 for h in heights) - 1


def datafly(plan: Plan, progress: Progress | None = None) -> SearchResult:
    """Datafly (seed 002 section 4.1, Alg. 2; Sweeney 2002): from the bottom node, generalise once
    more the quasi-identifier with the most distinct values at its current level, until the policy
    holds with at most the allowed suppression. Greedy: the result satisfies the policy but need
    not be minimal or optimal.

    Stopping rule. Sweeney's Datafly stops as soon as at most k records remain in classes smaller
    than k, and suppresses them ("when all but p <= k records are in an equivalence class of size k
    or more, the p records are suppressed"; Alg. 2's loop runs "while more than k records have
    distinct tuples"). sqlanon applies that rule within the policy's own limit: Datafly stops at
    the first node whose violating records (of any requirement: k, l, t, the prosecutor bound) are
    at most ``plan.allowed``, the records ``privacy.suppression`` allows, and suppresses them.

    - Where the policy allows at least k records (``allowed >= k``), stopping at
      max(allowed, k) = allowed violating records is Sweeney's rule with the user's larger budget:
      it stops no later than Sweeney's p <= k would (fewer generalisation steps), and never
      suppresses more than the policy allows.
    - Where it allows fewer than k records (``suppression: 0``, the default, or a share of a small
      table), Sweeney's rule would suppress up to k records the policy forbids. That is never done
      silently: Datafly keeps generalising until the violating records fit the policy's limit
      (possibly up to every quasi-identifier at '*'). A user who accepts Sweeney's k records says
      so with ``privacy.suppression`` >= k / N.

    The stopping test is thus the satisfaction test of every search (``NodeResult.ok``), and the
    node Datafly returns always satisfies the policy it will be published under.

    Progress: (nodes evaluated, nodes it will never visit, the most steps left: sum_j (h_j - L_j)),
    summing to the lattice size.
    """
    ev = Evaluator(plan)
    total = plan.nodes_total()
    node: Node = tuple(0 for _ in plan.heights)
    while True:
        res = ev.evaluate([node])[node]
        done = res.ok(plan.allowed)
        if progress:
            left = 0 if done else sum(h - lvl for h, lvl in zip(plan.heights, node, strict=True))
            progress(ev.checked, total - ev.checked - left, left)
        if done:
            break
        open_qis = [j for j, lvl in enumerate(node) if lvl < plan.heights[j]]
        if not open_qis:
            if plan.monotone:
                raise SqlanonError(
                    "datafly: even full suppression of every quasi-identifier violates the policy"
                )
            raise SqlanonError(
                "datafly: no node on its greedy path satisfies the policy (entropy or recursive l or t "
                "with suppression is not monotone, so one may lie off the path; search.algorithm: flash "
                "finds it)"
            )
        # Distinct values at the current level: the code cardinalities, counted when coding.
        best = max(open_qis, key=lambda j: (plan.card[(j, node[j])], -j))
        node = node[:best] + (node[best] + 1,) + node[best + 1 :]
    return SearchResult("datafly", {node}, [node], total, ev.checked, ev.queries, dict(ev.cache))
