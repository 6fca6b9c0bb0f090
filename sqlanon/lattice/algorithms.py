"""The searches over the lattice: Flash (the default) here, Incognito, Datafly and exhaustive
(MinGen) in :mod:`sqlanon.lattice.searches`, and :func:`run_search`, which runs any of them.
The lattice's shape (predecessors, successors, minimal nodes) is in :mod:`sqlanon.lattice.shape`;
see the package docstring for monotonicity and how non-monotone policies stay exact.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter

from sqlanon.errors import SqlanonError
from sqlanon.lattice.evaluator import Evaluator, Source, relaxed_k
from sqlanon.lattice.plan import (
    KEEP_MAX,
    KEEP_MIN_ROWS,
    KEEP_PER_ROUND,
    KEEP_RATIO,
    PART_WIDE_BELOW,
    Node,
    Plan,
    Progress,
    Pruning,
    lane_count,
)
from sqlanon.lattice.result import SearchResult, finish, finish_pruned, optimum_result
from sqlanon.lattice.searches import datafly, exhaustive, incognito
from sqlanon.lattice.shape import (
    height,
    minimal,
    predecessors,
    successors,
)

# --------------------------------------------------------------------------------------------------
# Searches
# --------------------------------------------------------------------------------------------------


def flash(plan: Plan, progress: Progress | None = None, prune: Pruning | None = None) -> SearchResult:
    """Flash (Kohlmayer et al. 2012) as ARX implements it, with a few binary searches in step so
    that one query evaluates a few nodes.

    For a monotone predicate a satisfying node tags all its generalisations satisfying, and a
    failing node tags all its specialisations failing (generalisation property, seed 002 section
    4.2), so every node ends tagged and the minimal satisfying nodes are exact.

    The walk is ARX's ``FLASHAlgorithmImpl``: the untagged nodes, lowest first, each start a
    binary search; a binary search pops the best node of its queue, builds a path upwards through
    untagged nodes from it and bisects the path (a satisfying middle moves the search down, a
    failing one up); every failing node it checks queues its untagged successors. Orders (ARX's
    ``FLASHStrategy`` orders by height, then by precision): starts and queues take, among nodes of
    one height, the one with the fewest potential classes (the product of its levels' distinct
    value counts), and a path steps to the successor with the most (it generalises where the
    fewest distinct values are lost). On Adult (k = 5) these orders checked 149 nodes where ARX's
    own precision order checks 186 (both measured on the same recorded predicate).

    Where ARX checks one node at a time, several binary searches run in step (each its own start
    and queue) and their next nodes are evaluated in one query: a query costs far more than a
    node. Searches in step waste checks (a node one of them checks may tag another's), so they
    start as one and grow by one per 16 nodes checked; past 512 checks, by one per 8, up to 128
    (:func:`~.plan.lane_count`; on a small table without suppression, one per 4:
    :data:`~.plan.FLASH_LANE_EVERY_SMALL`; read-only, where each statement recomputes the working tables,
    one per check: :data:`~.plan.FLASH_LANE_EVERY_INLINE`). A search with few checks to make stays near ARX's
    one-at-a-time order, and one with thousands runs many in step. Replayed on Adult's recorded
    predicate (k = 5): without suppression one search alone checks 149 nodes in 149 queries, the
    per-16 rule 164 in 64, 32 searches from the start 245 in 18; with 5 % suppression the per-16
    rule checks 2,997 in 108 queries, at most
    32 searches 2,932 in 163. (On the 1e6-row benchmark table, growing faster from 256 checks
    on cost 384 checks without suppression, one more than ARX; from 512, 376.) A node already
    tagged when its turn comes is skipped without a query, as ARX skips it.

    A non-monotone policy is searched on its monotone relaxation and the full policy evaluated on
    what the relaxation lets through, as in :func:`incognito` (with ``prune``, only where the
    bound leaves it a chance: below).

    With ``prune`` (``search.scope: optimum``, a metric with a query-free lower bound) Flash also
    skips, as ARX's Flash does, every node whose lower bound on the metric's rank exceeds the best
    rank of a satisfying node checked so far (``best``): such a node can neither be nor tie the
    optimum, so it is left undecided (``None`` in the tags) and a binary search
    treats it as it treats a satisfying node (it moves down). The optimum stays exact: its bound is
    at most its rank, at most ``best`` at every moment, so it is never skipped and ends tagged
    satisfying; so does every node that ties it. The minimal nodes returned are then the minimal
    nodes whose bound does not exceed the final ``best`` (exact, because every bound used is
    monotone: a truly satisfying node below one of them has a bound no higher, so it was not
    skipped either). ARX's ``FLASHAlgorithmImpl`` prunes with the same comparison
    (``getLowerBound`` against the global optimum); with 5 % suppression listing every minimal node
    takes at least one check per minimal and per maximal failing node (2,144 on Adult, k = 5),
    finding the optimum far fewer.

    A non-monotone policy prunes too: the walk's tags come from the relaxation, but ``best`` only
    from nodes that satisfy the full policy, which is evaluated (one more query per round) on the
    relaxation's satisfying nodes not already ruled out. The relaxation's satisfying nodes whose
    bound does not exceed ``best`` are then evaluated in order of bound until the next one's does
    (:func:`~sqlanon.lattice.result.finish_pruned`). Measured on Adult (eight QIs, occupation
    sensitive, distinct l = 3, 5 %): 198 checks where listing every minimal node took 4,116 (ARX
    3.9.2: 165); with k = 5 as well, 239 against 3,706 (ARX 215). For t = 0.2 with 5 % the
    relaxation is k = 1 and the optimum lies high, so nearly every node is evaluated: 4,324 (ARX
    4,305). (Distinct l is monotone with suppression and no longer takes this path: see
    :attr:`~sqlanon.lattice.plan.Plan.monotone`; Adult 137 and 185 checks.)

    Where the relaxation is k = 1 it holds at every node: all are let through without a query.
    Where most walked nodes pass the relaxation (:data:`FUSE_AFTER`, :data:`FUSE_SHARE`), each
    would be evaluated twice (class sizes, then the full policy): the walk then evaluates the full
    policy and reads the relaxation from it (``NodeResult.bad_size``, the fused walk). Adult, 5 %:
    k = 5 + t = 0.2 3,691 -> 3,032 checks (ARX 3,036), 190 -> 121 queries; t = 0.2 alone 4,302
    (with :func:`~sqlanon.lattice.result.finish_pruned`'s shrinking last batches).

    A monotone policy with l or t checks is walked in two stages per round, as ARX checks a node
    (k before l): class sizes first, the full policy only on the nodes whose class sizes hold, the
    tags from the full policy; such a node counts as one check. Without suppression on every
    engine, with it only on :data:`STAGED` engines (with suppression most walked nodes pass the
    class sizes). Interleaved, one walk against the other (same nodes checked): DuckDB, Adult,
    distinct l = 3 at 0 % 0.86 -> 0.62-0.69 s, the 1e6-row table 1.70-1.79 -> 1.20-1.36 s, but with
    5 % 1.35-1.39 -> 1.49-1.63 s at 1e6; PostgreSQL, Adult, distinct l = 3 with 5 % 3.95-4.24 ->
    2.45-2.53 s, k = 5 as well 4.81-5.04 -> 2.59-2.65 s; PostgreSQL at 1e6 13.3-13.9 -> 12.8-13.0 s
    and 17.7-18.7 -> 14.0-14.3 s (0 %: 12.1-12.8 -> 7.9-8.0 s).

    Once the bound rules out most of the lattice (fewer than :data:`ARX_ORDER_BELOW` of a fixed
    sample of nodes remain open, tested when ``best`` improves), the walk takes ARX's
    ``FLASHStrategy`` order instead: by height, then the sum of level / hierarchy height, then the
    most distinct values kept (the sum of each level's distinct count over its bottom's); the
    remaining starts and every queue are re-sorted. Early on, the fewest-classes order finds good
    satisfying nodes sooner; late, ARX's order walks the few open nodes with fewer checks. Replayed
    on recorded predicates (k = 5, precision, checks / queries): Adult 134 / 60 at 0 % (unchanged;
    163 / 24 since :data:`~.plan.FLASH_LANE_EVERY_SMALL`) and 474 / 81 at 5 % (552 / 83 without the
    switch; ARX 181 and 986); the 1e6-row benchmark table 299 / 73 and 100 / 54 (148 / 61
    without; ARX 383 and 104). The threshold is tuned on
    those recordings: 0.3 and 0.5 give 107 and 104 at 1e6, 5 %.

    Progress: (nodes evaluated, nodes tagged or skipped without a query, undecided), summing to
    the lattice.
    """
    size_k = relaxed_k(plan.policy)
    # A monotone policy with l or t checks walks in two stages per round, as ARX checks k before
    # l: class sizes first, the full policy only where they hold, its tags from the full policy
    # (monotone). Not with suppression on engines outside STAGED, where most nodes pass the class
    # sizes (measurements: see the docstring).
    pol = plan.policy.privacy
    staged = (
        plan.monotone
        and size_k > 1
        and (plan.allowed == 0 or plan.be.dialect in STAGED)
        and bool(pol.l or pol.t)
    )
    ev = Evaluator(plan, relaxed=not plan.monotone or staged)
    small = (
        plan.base_rows < PART_WIDE_BELOW
        and plan.allowed == 0
        and not pol.t
        and all(r.kind == "distinct" for r in pol.l)
        and not ev.sensitive
    )
    # A non-monotone policy walks its monotone relaxation; with ``prune`` the full policy is also
    # evaluated on the relaxation's satisfying nodes as they are found, so that ``best`` is the rank
    # of a node that truly satisfies.
    full: Evaluator | None = None
    if staged:
        full = Evaluator(plan)
    elif prune is not None and not plan.monotone:
        full = Evaluator(plan, size_k=size_k)
    fused = False  # the walk evaluates the full policy and reads the relaxation from it (below)
    walked = passes = 0  # nodes the walk evaluated, and how many of them passed the relaxation
    best: float | None = None  # the best rank among checked satisfying nodes (with ``prune``)
    heights = plan.heights
    status: dict[Node, bool | None] = {}  # None: skipped by the bound (``prune``)
    # Every node with its height and the log of its potential classes (the product of its levels'
    # distinct value counts), built one quasi-identifier at a time rather than summed per node.
    logc = [
        [math.log(plan.card.get((j, lvl), 1) or 1) for lvl in range(h + 1)] for j, h in enumerate(heights)
    ]
    # ARX's FLASHStrategy order, taken once pruning rules out most of the lattice (below): a
    # node's summed precision and summed share of distinct values kept, built the same way.
    arx_prec = [[lvl / h if h else 0.0 for lvl in range(h + 1)] for h in heights]
    arx_kept = [
        [plan.card.get((j, lvl), 1) / max(plan.card.get((j, 0), 1), 1) for lvl in range(h + 1)]
        for j, h in enumerate(heights)
    ]
    keyed: list[tuple[int, float, float, float, Node]] = [(0, 0.0, 0.0, 0.0, ())]
    for j, h in enumerate(heights):
        lc, pr, kp = logc[j], arx_prec[j], arx_kept[j]
        keyed = [
            (hh + lvl, c + lc[lvl], p + pr[lvl], q + kp[lvl], n + (lvl,))
            for hh, c, p, q, n in keyed
            for lvl in range(h + 1)
        ]
    classes = {n: c for _, c, _, _, n in keyed}
    arx_keys = {n: (p, -q) for _, _, p, q, n in keyed}
    universe = [t[4] for t in sorted(keyed, key=itemgetter(0, 4))]
    keyed.sort(key=itemgetter(0, 1, 4))
    total = len(universe)
    if not plan.monotone and size_k <= 1:
        # The relaxation (classes of at least one record) holds at every node: each is let through
        # without a query, and the full policy is evaluated on them at the end.
        status.update(dict.fromkeys(universe, True))

    arx = False
    sample = universe[:: max(1, total // ARX_ORDER_SAMPLE)]
    arx_key = arx_keys.__getitem__

    def start_key(x: Node) -> tuple[int, float, float, Node]:
        return (sum(x), *arx_key(x), x) if arx else (sum(x), classes[x], 0.0, x)  # type: ignore[arg-type]

    def step_key(x: Node) -> tuple[float, float, Node]:
        return (*arx_key(x), x) if arx else (-classes[x], 0.0, x)

    def tag(node: Node, ok: bool) -> None:
        # Tagged sets stay closed (upwards for True, downwards for False), so propagation stops at
        # the first node already tagged; a skipped node (None) is overwritten and passed through.
        status[node] = ok
        stack = [node]
        while stack:
            x = stack.pop()
            for y in successors(x, heights) if ok else predecessors(x):
                if status.get(y, None) is None:
                    status[y] = ok
                    stack.append(y)

    def hopeless(x: Node) -> bool:
        """Skip ``x`` (tag it None) when its bound already loses to ``best``."""
        if prune is None or best is None or not prune.hopeless(x, best):
            return False
        status[x] = None
        return True

    queues: list[list[tuple[tuple[int, float, float, Node], Node]]] = []

    def binary_search(start: Node) -> Iterator[Node]:
        """ARX's ``binarySearch``: yields each node to check; its result is in ``status`` when
        the generator resumes."""
        queue = [(start_key(start), start)]
        queues.append(queue)
        while queue:
            _, head = heapq.heappop(queue)
            if head in status or hopeless(head):
                continue
            path = [head]
            while True:
                ups = [y for y in successors(path[-1], heights) if y not in status]
                if not ups:
                    break
                path.append(min(ups, key=step_key))
            lo, hi = 0, len(path) - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                x = path[mid]
                if x in status or hopeless(x):  # tagged meanwhile, or skipped: move down
                    hi = mid - 1
                    continue
                yield x
                if status[x]:
                    hi = mid - 1
                else:
                    for y in successors(x, heights):
                        if y not in status:
                            heapq.heappush(queue, (start_key(y), y))
                    lo = mid + 1

    starts = iter([t[4] for t in keyed])
    best_seen: float | None = None
    lanes: list[tuple[Iterator[Node], Node]] = []

    def advance(search: Iterator[Node]) -> None:
        for x in search:
            if x not in status:
                lanes.append((search, x))
                return

    while True:
        while len(lanes) < lane_count(walked, small, plan.be.inline):
            start = next((s for s in starts if s not in status and all(s != x for _, x in lanes)), None)
            if start is None:
                break
            advance(binary_search(start))
        if not lanes:
            break
        batch = list(dict.fromkeys(x for _, x in lanes))
        failed, passed = [], []
        walker = full if fused and full is not None else ev
        if not walker.sensitive:
            _keep_meets(walker, batch, classes)
        evaluated = walker.evaluate(batch)
        if staged:  # never fused: walker is ev
            # Class sizes first; the full policy's verdict replaces theirs where they hold.
            ups = [n for n, r in evaluated.items() if r.ok(plan.allowed)]
            if ups:
                evaluated = {**evaluated, **full.evaluate(ups)}  # type: ignore[union-attr]
        for node, res in evaluated.items():
            # The walk's verdict: the relaxation's for a non-monotone policy, else the policy's.
            ok = res.relaxed_ok(plan.allowed) if fused else res.ok(plan.allowed)
            if status.get(node) is None:
                tag(node, ok)
            if not ok:
                failed.append((height(node), res.classes, node))
            elif prune is not None:
                passed.append((node, res))
        walked += len(batch)
        passes += len(passed)
        if full is not None and passed and not staged:
            if walker is full:
                passed = [(n, r) for n, r in passed if r.ok(plan.allowed)]
            else:
                todo = [n for n, _ in passed if best is None or not prune.hopeless(n, best)]  # type: ignore[union-attr]
                in_full = full.evaluate(todo).items() if todo else []
                passed = [(n, r) for n, r in in_full if r.ok(plan.allowed)]
            # Where most nodes the walk checks pass the relaxation, nearly each is evaluated twice
            # (class sizes, then the full policy): walk with the full policy instead (FUSE_*).
            fused = fused or (
                walked >= FUSE_AFTER and passes >= FUSE_SHARE * walked and plan.be.dialect not in NO_FUSE
            )
        for node, res in passed:
            r = prune.rank(node, res)  # type: ignore[union-attr]
            if r is not None and (best is None or r < best):
                best = r
        if prune is not None and best is not None and not arx and best != best_seen:
            best_seen = best
            open_share = sum(1 for x in sample if not prune.hopeless(x, best)) / len(sample)
            if open_share < ARX_ORDER_BELOW:
                arx = True
                starts = iter(sorted((n for n in universe if n not in status), key=start_key))
                for q in queues:
                    q[:] = [(start_key(n), n) for _, n in q]
                    heapq.heapify(q)
        current, lanes = lanes, []
        for search, _ in current:
            advance(search)
        if walked >= KEEP_SENSITIVE_AFTER or not walker.sensitive:
            _keep_rollups(walker, failed, status, heights, hopeless)
        if progress:
            progress(walked, len(status) - walked, total - len(status))
    if len(status) != total:
        raise SqlanonError(f"internal: flash left {total - len(status)} of {total} nodes untagged")
    if full is not None and not staged:
        return finish_pruned(plan, ev, full, prune, best, status, universe, progress)  # type: ignore[arg-type]
    if full is None and (prune is None or best is None):
        return finish("flash", plan, ev, status, universe, progress, total)
    # Monotone: the tags are exact. Staged, a node evaluated in both stages (class sizes, then the
    # full policy) counts as one check, as ARX counts its checks (k first, then l or t where k
    # holds), and the results are the full policy's.
    checked, queries, results = ev.checked, ev.queries, dict(ev.cache)
    if full is not None:
        checked = len(ev.cache.keys() | full.cache.keys())
        queries, results = queries + full.queries, dict(full.cache)
    if progress:  # the last starts may have been skipped after the last round's report
        progress(checked, total - checked, 0)
    sat = {n for n, ok in status.items() if ok}
    if prune is None or best is None:
        return SearchResult("flash", sat, minimal(sat, universe), total, checked, queries, results)
    return optimum_result(sat, universe, prune, best, status, checked, queries, results)


#: Flash keeps rollups that carry sensitive values (l or t checked in the walk: one row per class
#: and value, not per class) only once the walk has checked this many nodes; a search that ends
#: sooner does not repay them. 1e6-row benchmark table, distinct l = 3 with 5 % (24 checks):
#: 1.46-1.49 s without them against 1.67-1.83 s with; k = 5 as well (31 checks): 1.90-1.96 s
#: against 2.05-2.22 s; without suppression (98 checks) they pay: 1.58-1.66 s against 1.91-1.98 s.
KEEP_SENSITIVE_AFTER = 48

#: A non-monotone policy's Flash walk switches from the relaxation (class sizes) to the full policy,
#: reading the relaxation's verdict from the full evaluation (NodeResult.bad_size), once at least
#: FUSE_AFTER nodes are walked and at least FUSE_SHARE of them passed the relaxation: each such
#: node would otherwise be evaluated twice. (measurements: see flash's docstring)
FUSE_AFTER = 8
FUSE_SHARE = 0.5
#: Engines whose full l/t check costs so much more than a class-size check that the fused walk
#: loses: PostgreSQL 15, Adult, k = 5 + t = 0.2 with 5 %: 42.7-42.9 s fused against 39.1-39.3 s
#: (on DuckDB the fused walk is ~15 % faster).
NO_FUSE = frozenset({"postgres"})

#: Engines on which Flash walks a monotone policy with l or t checks and suppression in two stages
#: per round, class sizes first and the full policy only on the nodes whose class sizes pass
#: (measurements: see flash's docstring). On DuckDB one full evaluation per node is cheaper.
STAGED = frozenset({"postgres"})

#: Flash switches to ARX's FLASHStrategy order once the nodes its bound has not ruled out fall
#: below this share of a sample of ARX_ORDER_SAMPLE nodes spread over the lattice.
ARX_ORDER_BELOW = 0.4
ARX_ORDER_SAMPLE = 1024


def _keep_rollups(
    ev: Evaluator,
    failed: list[tuple[int, int, Node]],
    status: dict[Node, bool | None],
    heights: Sequence[int],
    hopeless: Callable[[Node], bool] = lambda _: False,
) -> None:
    """Keep the frequency tables of failing nodes that are much smaller than the table they rolled
    up from: the untagged nodes above them will roll up from these instead (ARX keeps snapshots of
    checked nodes for the same reason). Not over a small table (:data:`KEEP_MIN_ROWS`), where the
    statement that creates a rollup costs more than it saves, nor in read-only mode, where a kept
    table is a CTE that every statement reading it recomputes from the (itself inlined) table
    below: PostgreSQL read-only, 3e5 rows, k = 5: 143.6 / 155.6 s with them, 61.3 / 61.6 s
    without (69 statements instead of 103)."""
    if ev.plan.be.inline:
        return
    kept = 0
    for _, classes, node in sorted(failed):
        if kept >= KEEP_PER_ROUND or len(ev.sources) >= KEEP_MAX:
            break
        rows = ev.source_for(node).rows
        if (
            rows >= KEEP_MIN_ROWS
            and classes * KEEP_RATIO <= rows
            and any(y not in status and not hopeless(y) for y in successors(node, heights))
        ):
            ev.keep(node, classes)
            kept += 1


#: Before a round, Flash takes the nodes that would roll up from one large table (at least
#: KEEP_MIN_ROWS rows) MEET_CHUNK at a time in the evaluator's batch order, and keeps the meet of
#: each MEET_MIN or more (their lowest level of each quasi-identifier) when its estimated rows are
#: at most 1/MEET_RATIO of that table's: they, and every later node above the meet, then roll up
#: from it. The estimate is the table's rows times the meet's potential classes over the table's
#: node's (the product of each level's distinct codes: independence; often far too low, which
#: costs two statements: the table and its row count), and no meet is kept that a checked node
#: above it proves too large (KEEP_RATIO).
#: Meets count towards KEEP_PER_ROUND (their own) and KEEP_MAX (shared with the failing nodes'
#: rollups). Measured on DuckDB, k = 5 without suppression, interleaved, in two sessions an hour
#: apart: 1e7 rows (memory_limit=500MB), the search after prepare 2.21-2.27 s -> 1.93-1.97 s and
#: 2.50-2.81 s -> 2.02-2.32 s (12 meets kept); the 1e6-row table 1.63-1.67 -> 1.54-1.61 s; with 5 %
#: unchanged (1e7: none kept; 1e6: 2.16-2.34 s either way). Chunks of 4 or 16 and ratios of 4 or 16
#: measured no better.
MEET_CHUNK = 8
MEET_MIN = 2
MEET_RATIO = 8


def _keep_meets(ev: Evaluator, batch: list[Node], classes: dict[Node, float]) -> None:
    """Keep the meets of similar nodes about to roll up from a large table (:data:`MEET_RATIO`);
    ``classes``: each node's log potential classes (:func:`flash`'s)."""
    if ev.plan.be.inline:  # read-only: a kept table is a CTE the engine recomputes, never cheaper
        return
    kept = 0
    groups: dict[int, tuple[Source, list[Node]]] = {}
    for n in batch:
        src = ev.source_for(n)
        if src.rows >= KEEP_MIN_ROWS:
            groups.setdefault(id(src), (src, []))[1].append(n)
    for src, group in groups.values():
        group.sort(key=ev.similar)
        for i in range(0, len(group), MEET_CHUNK):
            if len(ev.sources) >= KEEP_MAX or kept >= KEEP_PER_ROUND:
                return
            chunk = [n for n in group[i : i + MEET_CHUNK] if ev.source_for(n) is src]
            if len(chunk) < MEET_MIN:
                continue
            meet = tuple(min(levels) for levels in zip(*chunk, strict=True))
            if meet == src.node or math.exp(classes[meet] - classes[src.node]) * MEET_RATIO > 1:
                continue
            # The meet has at least the classes of any checked node above it: where those already
            # rule out a table KEEP_RATIO times smaller, the estimate was wrong.
            floor = max(
                (r.classes for n, r in ev.cache.items() if all(a <= b for a, b in zip(meet, n, strict=True))),
                default=0,
            )
            if floor * KEEP_RATIO <= src.rows:
                ev.keep(meet)
                kept += 1


ALGORITHMS: dict[str, Callable[[Plan, Progress | None], SearchResult]] = {
    "flash": flash,
    "incognito": incognito,
    "exhaustive": exhaustive,
    "datafly": datafly,
}


def run_search(
    plan: Plan, algorithm: str, progress: Progress | None = None, prune: Pruning | None = None
) -> SearchResult:
    """Run ``algorithm`` on ``plan``; ``prune`` (see :func:`flash`) is Flash's alone: the other
    searches list every minimal node. ``progress(checked, pruned, remaining)``: nodes evaluated,
    nodes decided without a query, nodes not yet decided. At every call the three sum to the space
    the algorithm walks, so ``checked`` never exceeds it: the lattice (``nodes_total``) for Flash,
    Datafly and exhaustive, the lattice and its subset lattices for Incognito
    (:func:`incognito_space`)."""
    try:
        fn = ALGORITHMS[algorithm]
    except KeyError:
        raise SqlanonError(f"search.algorithm: unknown {algorithm!r}; use {', '.join(ALGORITHMS)}") from None
    if fn is flash:
        return flash(plan, progress, prune)
    return fn(plan, progress)
