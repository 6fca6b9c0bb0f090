"""The generalisation lattice and its searches: Flash (the default), Incognito, Datafly and
exhaustive (MinGen).

A node is a vector of levels, one per quasi-identifier (``None`` for a quasi-identifier outside the
subset Incognito is looking at). A node satisfies the policy when the records in its classes that
violate any requirement (k, each l, each t, the prosecutor-risk bound) number at most the
suppression limit: those classes are the ones a release removes (seed 002 section 2.4, record
suppression).

Every node is evaluated in SQL by ``templates/search/evaluate.sql.j2``, many nodes per query. The
source is scanned exactly once, into the base frequency table; each level of each hierarchy is then
coded as a small integer (``templates/search/coded.sql.j2``), so that a node's classes are the
groups of one integer key (the level codes in mixed radix) and its frequency table is a rollup of
the batch's common rollup (the meet), never a rescan (seed 002 section 4.2, rollup property).
Flash also keeps the frequency tables of some failing nodes (temporary tables) and rolls the nodes
above them up from those instead of from the coded base table (:class:`Source`).
GROUPING SETS were measured first: 2-3x slower on DuckDB and PostgreSQL, and the SQL text of one
branch per node made sqlglot the bottleneck; the node table of weights keeps the SQL small.

Monotonicity. k-anonymity (with or without suppression), and l-diversity and t-closeness without
suppression, satisfy the generalisation and subset properties (seed 002 section 4.2; Machanavajjhala
et al. 2006 for l, Li et al. 2007 for t). l and t *with* suppression do not: generalising can merge a
good class into a bad one and raise the count of records to suppress. For such policies Incognito
runs on the monotone relaxation (class sizes only: k, and the least class size any l or the
prosecutor bound implies), then evaluates the full policy on every node the relaxation lets through
(as ARX does for non-monotonic criteria), so the result stays exact. Flash does the same.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from sqlanon.assess import (
    EPS,
    FrequencyTables,
    _l_rank,
    _sort_key,
    build_frequency_tables,
    check_columns,
    requirement_checks,
)
from sqlanon.engine import Backend
from sqlanon.errors import SqlanonError
from sqlanon.hierarchy import Hierarchy, build_hierarchy
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.compile import CANONICAL, Sql, ident

Node = tuple[int | None, ...]
Progress = Callable[[int, int, int], None]

#: Nodes per evaluation query.
BATCH = 128
#: Nodes per part of a query: each part groups its source by the levels its nodes use (its meet)
#: before rolling up to each node, so a part of similar nodes reads far fewer rows than the source.
PART = 4
#: Paths whose middle nodes :func:`flash` evaluates per round (one query).
FLASH_ROUND = 32
#: Rollups :func:`flash` keeps: at most this many per round and in all, each at least this many
#: times smaller than the table it would otherwise roll up from.
KEEP_PER_ROUND = 8
KEEP_MAX = 64
KEEP_RATIO = 2


@dataclass(frozen=True)
class NodeResult:
    rows: int
    classes: int
    bad_records: int
    bad_classes: int
    dm_kept: int
    k_kept: int | None

    def ok(self, allowed: int) -> bool:
        return self.bad_records <= allowed


@dataclass
class Plan:
    """What the search needs: the policy, one hierarchy per quasi-identifier, the base table."""

    be: Backend
    policy: Policy
    hierarchies: list[Hierarchy]
    base: FrequencyTables
    n_rows: int
    allowed: int
    coded: Relation
    code_alias: dict[tuple[int, int], Sql]
    card: dict[tuple[int, int], int]
    base_rows: int = 0  # rows of the coded table (classes x sensitive values of the bottom node)

    @property
    def heights(self) -> list[int]:
        return [h.height for h in self.hierarchies]

    @property
    def qi_names(self) -> list[str]:
        return [h.column for h in self.hierarchies]

    @property
    def monotone(self) -> bool:
        p = self.policy.privacy
        return p.suppression == 0 or not (p.l or p.t)

    def nodes_total(self) -> int:
        return math.prod(h + 1 for h in self.heights)

    def node_weights(self, node: Node) -> list[dict[tuple[int, int], int]]:
        """The node's class key as mixed-radix weights of its level codes: class key =
        sum(code * weight). Split into chunks whose radix product stays below 2^62 (no BIGINT
        overflow); a constant (fully suppressed) column or one outside the subset has no weight."""
        chunks: list[dict[tuple[int, int], int]] = []
        cur: list[tuple[tuple[int, int], int]] = []
        span = 1
        for j, lvl in enumerate(node):
            if lvl is None or self.card.get((j, lvl), 1) <= 1:
                continue
            c = self.card[(j, lvl)]
            if cur and span * c >= 2**62:
                chunks.append(_radix(cur))
                cur, span = [], 1
            cur.append(((j, lvl), c))
            span *= c
        if cur:
            chunks.append(_radix(cur))
        return chunks


def _radix(cols: list[tuple[tuple[int, int], int]]) -> dict[tuple[int, int], int]:
    weights: dict[tuple[int, int], int] = {}
    w = 1
    for key, card in reversed(cols):
        weights[key] = w
        w *= card
    return weights


def build_hierarchies(
    be: Backend | None, policy: Policy, types: dict[str, bool] | None = None
) -> list[Hierarchy]:
    """One hierarchy per quasi-identifier; ``types`` maps column -> numeric (read from the engine)."""
    out = []
    for spec in policy.quasi:
        numeric = (types or {}).get(spec.name)
        if numeric is None:
            numeric = _guess_numeric(spec.hierarchy)
        out.append(build_hierarchy(spec.name, spec.hierarchy, numeric=numeric, base_dir=policy.base_dir))
    return out


def _guess_numeric(spec: dict | None) -> bool:
    """Without a database: intervals are numeric; anything else is compared as text."""
    return bool(spec) and "interval" in spec


def prepare(be: Backend, policy: Policy) -> Plan:
    """Check the columns and hierarchies, and build the base frequency table (one source scan)."""
    cols = check_columns(be, policy)
    types = {name: c.numeric for name, c in cols.items()}
    hierarchies = build_hierarchies(be, policy, types)
    qi_names = [h.column for h in hierarchies]
    s_names = [c.name for c in policy.sensitive]
    sort_keys = [_sort_key(policy, n, ident(f"s_{i}")) for i, n in enumerate(s_names)]
    base = build_frequency_tables(
        be,
        policy.source,
        [ident(n) for n in qi_names],
        qi_names,
        [ident(n) for n in s_names],
        s_names,
        sort_keys,
        with_classes=False,
    )
    n_rows = int(be.query("search/total", base=base.freq)[0][0] or 0)
    if n_rows == 0:
        raise SqlanonError(f"source: relation {str(policy.source)!r} is empty; there is nothing to anonymise")
    check_coverage(be, hierarchies, base)
    code_alias: dict[tuple[int, int], Sql] = {}
    qis = []
    for j, h in enumerate(hierarchies):
        levels = []
        for lvl in range(h.height):  # the top level is the constant '*': no code needed
            code_alias[(j, lvl)] = ident(f"c_{j}_{lvl}")
            levels.append({"alias": code_alias[(j, lvl)], "expr": h.sql(lvl, base.q_aliases[j])})
        if levels:
            qis.append({"alias": base.q_aliases[j], "dict": ident(f"d_{j}"), "levels": levels})
    coded = be.create_temp("coded", "search/coded", base=base.freq, qis=qis, sid_aliases=base.sid_aliases)
    keys = list(code_alias)
    card_row = be.query("search/cardinalities", coded=coded, aliases=[code_alias[k] for k in keys])[0]
    card = {k: int(v) for k, v in zip(keys, card_row, strict=True)}
    for r in policy.privacy.l:
        m = int(
            be.query(
                "search/distinct_count", base=base.freq, col=base.sid_aliases[s_names.index(r.attribute)]
            )[0][0]
        )
        if r.l > m:
            raise SqlanonError(
                f"privacy.l.{r.attribute}: l = {r.l:g} exceeds the {m} distinct value(s) of "
                f"{r.attribute!r}; no release can satisfy it"
            )
    allowed = math.floor(policy.privacy.suppression * n_rows + EPS)
    base_rows = int(be.query("search/row_count", rel=coded)[0][0])
    return Plan(be, policy, hierarchies, base, n_rows, allowed, coded, code_alias, card, base_rows)


def check_coverage(be: Backend, hierarchies: Sequence[Hierarchy], base: FrequencyTables) -> None:
    """Refuse to search when a hierarchy does not cover a value present in the data."""
    for h, alias in zip(hierarchies, base.q_aliases, strict=True):
        pred = h.coverage_predicate(exp.column(alias.strip('"'), quoted=True))
        if pred is None:
            continue
        rows = be.query("search/uncovered", base=base.freq, col=alias, pred=Sql(pred.sql(CANONICAL)))
        if rows:
            total = int(rows[0][2])
            sample = ", ".join("NULL" if r[0] is None else repr(r[0]) for r in rows[:5])
            raise SqlanonError(
                f"columns.{h.column}.hierarchy: {len(rows) if len(rows) < 5 else 'at least 5'} value(s) "
                f"present in {h.column!r} are not covered ({total} distinct in all), e.g. {sample}"
            )


# --------------------------------------------------------------------------------------------------
# Node evaluation
# --------------------------------------------------------------------------------------------------


@dataclass
class Source:
    """A table nodes can roll up from: the coded base table (the bottom node) or a kept rollup."""

    node: Node
    rel: Relation
    rows: int

    def serves(self, node: Node) -> bool:
        # A node outside the full lattice (None: a quasi-identifier outside Incognito's subset) is
        # grouped by nothing for that quasi-identifier, which any table serves.
        return all(n is None or s <= n for s, n in zip(self.node, node, strict=True))


@dataclass
class Evaluator:
    plan: Plan
    relaxed: bool = False  # evaluate only the monotone class-size relaxation
    checked: int = 0
    queries: int = 0
    cache: dict[Node, NodeResult] = field(default_factory=dict)
    sources: list[Source] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.sources:
            bottom = tuple(0 for _ in self.plan.heights)
            self.sources.append(Source(bottom, self.plan.coded, self.plan.base_rows))

    def source_for(self, node: Node) -> Source:
        """The smallest kept table the node can roll up from (the highest one on a tie)."""
        return min((s for s in self.sources if s.serves(node)), key=lambda s: (s.rows, -sum(s.node)))

    def keep(self, node: Node, rows: int | None = None) -> Source:
        """Materialise the node's frequency table as a source for the nodes above it (``rows``:
        its row count when known, i.e. its class count when no sensitive ranks are kept)."""
        plan = self.plan
        src = self.source_for(node)
        cols = [
            plan.code_alias[(j, lvl)]
            for j, lo in enumerate(node)
            for lvl in range(lo or 0, plan.heights[j])
            if plan.card.get((j, lvl), 1) > 1
        ]
        sids = [a["sid"] for a in self._attrs()]
        rel = plan.be.create_temp("rollup", "search/rollup", source=src.rel, cols=cols, sid_aliases=sids)
        self.queries += 1
        if rows is None or sids:
            rows = int(plan.be.query("search/row_count", rel=rel)[0][0])
            self.queries += 1
        out = Source(tuple(lvl or 0 for lvl in node), rel, rows)
        self.sources.append(out)
        return out

    def _checks(self) -> list[tuple[str, exp.Expression]]:
        pol = self.plan.policy
        if not self.relaxed:
            return requirement_checks(pol, {s: f"a{i}" for i, s in enumerate(self.plan.base.s_names)})
        k = relaxed_k(pol)
        n = exp.column("n", table=exp.to_identifier("c"))
        return [("size", exp.LT(this=n, expression=exp.Literal.number(k)))]

    def _attrs(self) -> list[dict[str, Any]]:
        if self.relaxed:
            return []
        pol = self.plan.policy
        ordered = {r.attribute for r in pol.privacy.t if r.measure == "emd-ordered"}
        used = {r.attribute for r in pol.privacy.l} | {r.attribute for r in pol.privacy.t}
        out = []
        for i, s in enumerate(self.plan.base.s_names):
            if s in used:
                out.append(
                    {
                        "p": Sql(f"a{i}"),
                        "sid": self.plan.base.sid_aliases[i],
                        "l_rank": _l_rank(pol, s),
                        "ordered": s in ordered,
                    }
                )
        return out

    def evaluate(self, nodes: Iterable[Node]) -> dict[Node, NodeResult]:
        nodes = list(nodes)
        todo = [n for n in dict.fromkeys(nodes) if n not in self.cache]
        # Batch similar nodes: sorted by the levels of the most distinct quasi-identifiers first,
        # a batch shares their levels, so its common rollup (the meet) has few rows.
        plan = self.plan
        order = sorted(range(len(plan.heights)), key=lambda j: -plan.card.get((j, 0), 1))
        # Each node rolls up from the smallest kept table below it; one query serves several
        # tables (one part each), so kept tables do not multiply the queries.
        groups: dict[int, list[Node]] = {}
        for n in todo:
            groups.setdefault(id(self.source_for(n)), []).append(n)
        by_id = {id(s): s for s in self.sources}
        parts: list[tuple[Source, list[Node]]] = []
        size = 0
        for sid, group in groups.items():
            group.sort(key=lambda n: tuple(-1 if n[j] is None else n[j] for j in order))
            for i in range(0, len(group), PART):
                chunk = group[i : i + PART]
                if size + len(chunk) > BATCH and parts:
                    self._batch(parts)
                    parts, size = [], 0
                parts.append((by_id[sid], chunk))
                size += len(chunk)
        if parts:
            self._batch(parts)
        return {n: self.cache[n] for n in nodes}

    def _batch(self, parts: list[tuple[Source, list[Node]]]) -> None:
        """One query for the nodes of every part, each part rolling up from its own source."""
        plan = self.plan
        attrs = self._attrs()
        nodes = [n for _, ns in parts for n in ns]
        all_weights = [plan.node_weights(n) for n in nodes]
        n_chunks = max(1, max(len(ws) for ws in all_weights))
        ctx_parts = []
        gid = 0
        for i, (source, part_nodes) in enumerate(parts):
            weights = all_weights[gid : gid + len(part_nodes)]
            used = sorted({key for ws in weights for chunk in ws for key in chunk})
            w_alias = {(ch, key): ident(f"w{ch}_{key[0]}_{key[1]}") for ch in range(n_chunks) for key in used}
            rows_sql = []
            for ws in weights:
                vals = [str(gid)]
                gid += 1
                for ch in range(n_chunks):
                    chunk = ws[ch] if ch < len(ws) else {}
                    vals += [str(chunk.get(key, 0)) for key in used]
                rows_sql.append(Sql("(" + ", ".join(vals) + ")"))
            keys = []
            for ch in range(n_chunks):
                terms = [f"m.{plan.code_alias[key]} * n.{w_alias[(ch, key)]}" for key in used]
                keys.append(Sql(" + ".join(terms) if terms else "0"))
            ctx_parts.append(
                {
                    "source": source.rel,
                    "meet": ident(f"meet_{i}"),
                    "nodes": ident(f"nodes_{i}"),
                    "cells": ident(f"cells_{i}"),
                    "meet_cols": [plan.code_alias[k] for k in used],
                    "node_rows": rows_sql,
                    "node_cols": [ident("gid")]
                    + [w_alias[(ch, key)] for ch in range(n_chunks) for key in used],
                    "key_exprs": keys,
                }
            )
        checks = self._checks()
        any_check = exp.or_(*[c for _, c in checks]) if checks else exp.false()
        rows = plan.be.query(
            "search/evaluate",
            parts=ctx_parts,
            base=plan.base.freq,
            key_aliases=[ident(f"k_{i}") for i in range(n_chunks)],
            sid_aliases=[a["sid"] for a in attrs],
            attrs=attrs,
            any_check=Sql(any_check.sql(CANONICAL)),
        )
        self.queries += 1
        seen = set()
        for gid, n_rows, n_classes, bad, bad_classes, dm_kept, k_kept in rows:
            node = nodes[int(gid)]
            seen.add(node)
            self.cache[node] = NodeResult(
                int(n_rows),
                int(n_classes),
                int(bad or 0),
                int(bad_classes or 0),
                int(dm_kept or 0),
                None if k_kept is None else int(k_kept),
            )
        if len(seen) != len(nodes):
            raise SqlanonError(f"internal: evaluation returned {len(seen)} of {len(nodes)} nodes")
        self.checked += len(nodes)


def relaxed_k(policy: Policy) -> int:
    """The least class size the policy implies: k, ceil(l) for any l-diversity, and ceil(1/r) for a
    prosecutor-risk bound r (a class of n records has at most n distinct values and risk 1/n)."""
    k = policy.k_or_1()
    for r in policy.privacy.l:
        k = max(k, math.ceil(r.l - 1e-9))
    pros = policy.privacy.risk.get("prosecutor")
    if pros:
        k = max(k, math.ceil(1 / pros - 1e-9))
    return k


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
    """MinGen (seed 002 section 4.1): evaluate every node; the test oracle for the other searches."""
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
    """
    d = len(plan.heights)
    ev = Evaluator(plan, relaxed=not plan.monotone)
    total = plan.nodes_total()
    sat_prev: dict[tuple[int, ...], set[Node]] = {}
    pruned = 0
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
                else:
                    todo.append(n)
            for n, res in ev.evaluate(todo).items():
                status[n] = res.ok(plan.allowed)
            if progress:
                progress(ev.checked, pruned, max(total - len(final_status), 0))
        for n, ok in status.items():
            if ok:
                sat_now.setdefault(_subset_of(n), set()).add(n)
        sat_prev = sat_now
        if size == d:
            final_status = status
    return _finish("incognito", plan, ev, final_status, all_nodes(plan.heights))


def _finish(
    name: str, plan: Plan, ev: Evaluator, status: dict[Node, bool], universe: list[Node]
) -> SearchResult:
    """The result of a walk over ``status``: for a non-monotone policy the walk used the monotone
    relaxation, so the full policy is evaluated on every node the relaxation let through."""
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
    return _finish("flash", plan, ev, status, universe)


def _project(node: Node, subset: tuple[int, ...]) -> Node:
    return tuple(lvl if j in subset else None for j, lvl in enumerate(node))


def _subset_of(node: Node) -> tuple[int, ...]:
    return tuple(j for j, lvl in enumerate(node) if lvl is not None)


def datafly(plan: Plan, progress: Progress | None = None) -> SearchResult:
    """Datafly (seed 002 section 4.1; Sweeney 1997): from the bottom node, generalise once more the
    quasi-identifier with the most distinct values at its current level, until the policy holds
    with at most the allowed suppression. Greedy: the result satisfies the policy but need not be
    minimal or optimal."""
    ev = Evaluator(plan)
    node: Node = tuple(0 for _ in plan.heights)
    while True:
        res = ev.evaluate([node])[node]
        if progress:
            progress(ev.checked, 0, 0)
        if res.ok(plan.allowed):
            break
        open_qis = [j for j, lvl in enumerate(node) if lvl < plan.heights[j]]
        if not open_qis:
            raise SqlanonError("datafly: even full suppression of every quasi-identifier violates the policy")
        # Distinct values at the current level: the code cardinalities, counted when coding.
        best = max(open_qis, key=lambda j: (plan.card[(j, node[j])], -j))
        node = node[:best] + (node[best] + 1,) + node[best + 1 :]
    return SearchResult("datafly", {node}, [node], plan.nodes_total(), ev.checked, ev.queries, dict(ev.cache))


ALGORITHMS: dict[str, Callable[[Plan, Progress | None], SearchResult]] = {
    "flash": flash,
    "incognito": incognito,
    "exhaustive": exhaustive,
    "datafly": datafly,
}


def run_search(plan: Plan, algorithm: str, progress: Progress | None = None) -> SearchResult:
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
