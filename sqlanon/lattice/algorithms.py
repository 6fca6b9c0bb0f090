"""The searches over the lattice: Flash (the default), Incognito, Datafly and exhaustive (MinGen).
The lattice's shape (predecessors, successors, minimal nodes) comes first; see the package
docstring for monotonicity and how non-monotone policies stay exact.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sqlanon.errors import SqlanonError
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.lattice.plan import (
    BATCH,
    FLASH_ROUND,
    KEEP_MAX,
    KEEP_PER_ROUND,
    KEEP_RATIO,
    Node,
    NodeResult,
    Plan,
    Progress,
)

# --------------------------------------------------------------------------------------------------
# Lattice helpers
# --------------------------------------------------------------------------------------------------


def predecessors(node: Node) -> list[Node]:
    return [
        node[:j] + (lvl - 1,) + node[j + 1 :] for j, lvl in enumerate(node) if lvl is not None and lvl > 0
    ]


def successors(node: Node, heights: Sequence[int]) -> list[Node]:
    return [
        node[:j] + (lvl + 1,) + node[j + 1 :]
        for j, lvl in enumerate(node)
        if lvl is not None and lvl < heights[j]
    ]


def height(node: Node) -> int:
    return sum(lvl for lvl in node if lvl is not None)


def all_nodes(heights: Sequence[int]) -> list[Node]:
    return sorted(itertools.product(*(range(h + 1) for h in heights)), key=lambda n: (height(n), n))


def minimal(satisfying: set[Node], universe: Iterable[Node]) -> list[Node]:
    """Satisfying nodes with no satisfying node strictly below them (exact for any predicate)."""
    below: dict[Node, bool] = {}
    for node in sorted(universe, key=lambda n: (height(n), n)):
        below[node] = any(p in satisfying or below.get(p, False) for p in predecessors(node))
    return sorted((n for n in satisfying if not below[n]), key=lambda n: (height(n), n))


# --------------------------------------------------------------------------------------------------
# Searches
# --------------------------------------------------------------------------------------------------


@dataclass
class SearchResult:
    algorithm: str
    satisfying: set[Node]
    minimal: list[Node]
    nodes_total: int
    nodes_checked: int
    queries: int
    results: dict[Node, NodeResult]


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
                    _project(node, sub) in sat_prev.get(sub, set())
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
                sat_now.setdefault(_subset_of(n), set()).add(n)
        sat_prev = sat_now
        if size == d:
            final_status = status
    return _finish("incognito", plan, ev, final_status, all_nodes(plan.heights), progress, space)


def incognito_space(heights: Sequence[int]) -> int:
    """Nodes of all of Incognito's subset lattices, the full one included: each QI at one of its
    h + 1 levels or outside the subset (h + 2 choices), less the empty subset.

    >>> incognito_space([1, 2])  # 2 + 3 single-QI nodes and the 2 x 3 full lattice
    11
    """
    return math.prod(h + 2 for h in heights) - 1


def _finish(
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
    evaluations (the README's ``nodes_checked``), which may exceed the lattice."""
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


def flash(plan: Plan, progress: Progress | None = None) -> SearchResult:
    """Binary search on paths through the full lattice with predictive tagging in both directions,
    after Flash (Kohlmayer et al. 2012) and OLA (El Emam et al. 2009), batched for SQL.

    For a monotone predicate a satisfying node tags all its generalisations satisfying, and a
    failing node tags all its specialisations failing (generalisation property, seed 002 section
    4.2), so every node ends tagged and the minimal satisfying nodes are exact. Each round builds
    disjoint paths upwards through untagged nodes, from the lowest untagged ones (each step
    generalises the quasi-identifier with the most distinct values at its current level, as Datafly
    would), and evaluates the middle node of every path, up to one batch per query: the binary
    searches of many paths advance together. Only full-lattice nodes are evaluated, unlike
    Incognito's subset lattices. A non-monotone policy is searched on its monotone relaxation and the
    full policy evaluated on what the relaxation lets through, as in :func:`incognito`.

    Progress: (nodes evaluated, nodes tagged without a query, untagged), summing to the lattice.
    """
    ev = Evaluator(plan, relaxed=not plan.monotone)
    heights = plan.heights
    universe = all_nodes(heights)
    total = len(universe)
    status: dict[Node, bool] = {}

    def tag(node: Node, ok: bool) -> None:
        # Tagged sets stay closed (upwards for True, downwards for False), so propagation stops at
        # the first node already tagged.
        status[node] = ok
        stack = [node]
        while stack:
            x = stack.pop()
            for y in successors(x, heights) if ok else predecessors(x):
                if y not in status:
                    status[y] = ok
                    stack.append(y)

    def step_key(x: Node, j: int) -> tuple[int, int]:
        return (-plan.card.get((j, x[j]), 1), j)

    order = sorted(universe, key=lambda n: (height(n), n))
    while len(status) < total:
        claimed: set[Node] = set()
        mids: list[Node] = []
        for start in order:
            if start in status or start in claimed:
                continue
            path = [start]
            x = start
            while True:
                steps = [j for j in range(len(heights)) if x[j] < heights[j]]
                nxt = None
                for j in sorted(steps, key=lambda j: step_key(x, j)):
                    y = x[:j] + (x[j] + 1,) + x[j + 1 :]
                    if y not in status and y not in claimed:
                        nxt = y
                        break
                if nxt is None:
                    break
                path.append(nxt)
                x = nxt
            claimed.update(path)
            mids.append(path[len(path) // 2])
            if len(mids) >= FLASH_ROUND:
                break
        failed = []
        for node, res in ev.evaluate(mids).items():
            if node not in status:
                tag(node, res.ok(plan.allowed))
                if not res.ok(plan.allowed):
                    failed.append((height(node), res.classes, node))
        # Keep the frequency tables of failing nodes that are much smaller than the table they
        # rolled up from: the untagged nodes above them will roll up from these instead.
        kept = 0
        for _, classes, node in sorted(failed):
            if kept >= KEEP_PER_ROUND or len(ev.sources) >= KEEP_MAX:
                break
            if classes * KEEP_RATIO <= ev.source_for(node).rows and any(
                y not in status for y in successors(node, heights)
            ):
                ev.keep(node, classes)
                kept += 1
        order = [n for n in order if n not in status]
        if progress:
            progress(ev.checked, len(status) - ev.checked, total - len(status))
    return _finish("flash", plan, ev, status, universe, progress, total)


def _project(node: Node, subset: tuple[int, ...]) -> Node:
    return tuple(lvl if j in subset else None for j, lvl in enumerate(node))


def _subset_of(node: Node) -> tuple[int, ...]:
    return tuple(j for j, lvl in enumerate(node) if lvl is not None)


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
            raise SqlanonError("datafly: even full suppression of every quasi-identifier violates the policy")
        # Distinct values at the current level: the code cardinalities, counted when coding.
        best = max(open_qis, key=lambda j: (plan.card[(j, node[j])], -j))
        node = node[:best] + (node[best] + 1,) + node[best + 1 :]
    return SearchResult("datafly", {node}, [node], total, ev.checked, ev.queries, dict(ev.cache))


ALGORITHMS: dict[str, Callable[[Plan, Progress | None], SearchResult]] = {
    "flash": flash,
    "incognito": incognito,
    "exhaustive": exhaustive,
    "datafly": datafly,
}


def run_search(plan: Plan, algorithm: str, progress: Progress | None = None) -> SearchResult:
    """Run ``algorithm`` on ``plan``. ``progress(checked, pruned, remaining)``: nodes evaluated,
    nodes decided without a query, nodes not yet decided. At every call the three sum to the space
    the algorithm walks, so ``checked`` never exceeds it: the lattice (``nodes_total``) for Flash,
    Datafly and exhaustive, the lattice and its subset lattices for Incognito
    (:func:`incognito_space`)."""
    try:
        fn = ALGORITHMS[algorithm]
    except KeyError:
        raise SqlanonError(f"search.algorithm: unknown {algorithm!r}; use {', '.join(ALGORITHMS)}") from None
    return fn(plan, progress)


def node_map(plan: Plan, node: Node) -> dict[str, int]:
    return {name: int(lvl) for name, lvl in zip(plan.qi_names, node, strict=True) if lvl is not None}


def parse_levels(text: str, plan_names: Sequence[str], heights: Sequence[int]) -> Node:
    """``QI=L,QI=L`` -> a full node (unlisted quasi-identifiers stay at level 0)."""
    levels = dict.fromkeys(plan_names, 0)
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, val = part.rpartition("=")
        if not sep or name not in levels:
            raise SqlanonError(f"--levels: {part!r} does not name a quasi-identifier (QI=LEVEL)")
        try:
            lvl = int(val)
        except ValueError:
            raise SqlanonError(f"--levels: level {val!r} for {name!r} is not a whole number") from None
        h = heights[list(plan_names).index(name)]
        if not 0 <= lvl <= h:
            raise SqlanonError(f"--levels: {name!r} has levels 0..{h}, got {lvl}")
        levels[name] = lvl
    return tuple(levels[n] for n in plan_names)
