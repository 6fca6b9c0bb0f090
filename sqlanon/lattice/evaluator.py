"""Evaluating lattice nodes in SQL, many per query: each node is a rollup of the coded base table
or of a kept rollup (:class:`Source`), grouped by one integer key (its level codes in mixed radix),
its classes checked against every requirement at once (``templates/search/evaluate.sql.j2``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.lattice.plan import BATCH, PART, PART_WIDE, PART_WIDE_BELOW, Node, NodeResult, Plan, code_name
from sqlanon.likeness import checked_attributes
from sqlanon.measure.assessment import EPS, _l_rank, requirement_checks
from sqlanon.measure.tcloseness_hier import freq_hier_context
from sqlanon.policy import Policy
from sqlanon.profitability import profitability_min_size
from sqlanon.relation import Relation
from sqlanon.sql.compile import CANONICAL, Hole, Sql, ident


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
    #: With the full policy, also count the records in classes smaller than this (NodeResult.
    #: bad_size): Flash's fused walk reads the relaxation's verdict from the full evaluation.
    size_k: int | None = None
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
        sids = [a["sid"] for a in self.attrs]
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

    @functools.cached_property
    def any_check(self) -> Sql:
        """The predicate on a class ``c`` that violates any requirement (FALSE without one); the
        same for every batch of this evaluator, so built once."""
        checks = self._checks()
        return Sql((exp.or_(*[c for _, c in checks]) if checks else exp.false()).sql(CANONICAL))

    @property
    def sensitive(self) -> bool:
        """Whether this evaluator's statements (and kept rollups) carry sensitive values."""
        return bool(self.attrs)

    @functools.cached_property
    def attrs(self) -> list[dict[str, Any]]:
        """The sensitive attributes this evaluator's statements check (none when relaxed): the
        policy never changes, so built once."""
        if self.relaxed:
            return []
        pol = self.plan.policy
        ordered = {r.attribute for r in pol.privacy.t if r.measure == "emd-ordered"}
        used = checked_attributes(pol.privacy)
        recursive = {r.attribute for r in pol.privacy.l if r.kind == "recursive"}
        likeness = {r.attribute for r in pol.privacy.likeness}
        # Attributes only distinct l asks of: the checks read their distinct values per class alone.
        other = {r.attribute for r in pol.privacy.l if r.kind != "distinct"}
        other |= {r.attribute for r in pol.privacy.t} | likeness
        distinct_only = {r.attribute for r in pol.privacy.l if r.kind == "distinct"} - other
        out = []
        for i, s in enumerate(self.plan.base.s_names):
            if s in used:
                out.append(
                    {
                        "p": Sql(f"a{i}"),
                        "sid": self.plan.base.sid_aliases[i],
                        "l_rank": _l_rank(pol, s),
                        "ordered": s in ordered,
                        "tail": s in recursive,
                        "distinct_only": s in distinct_only,
                        "likeness": s in likeness,
                        **freq_hier_context(self.plan.be, pol, s, self.plan.base),  # emd-hierarchical
                    }
                )
        return out

    @functools.cached_property
    def _similar_order(self) -> list[int]:
        plan = self.plan
        return sorted(range(len(plan.heights)), key=lambda j: -plan.card.get((j, 0), 1))

    def similar(self, node: Node) -> tuple[int, ...]:
        """The order batches take (and Flash's kept meets, ``_keep_meets``): the levels of the
        most distinct quasi-identifiers first, so that neighbours share them and their meet is
        small."""
        return tuple(-1 if node[j] is None else node[j] for j in self._similar_order)  # type: ignore[misc]

    def evaluate(self, nodes: Iterable[Node]) -> dict[Node, NodeResult]:
        nodes = list(nodes)
        todo = [n for n in dict.fromkeys(nodes) if n not in self.cache]
        # Batch similar nodes: sorted by the levels of the most distinct quasi-identifiers first,
        # a batch shares their levels, so its common rollup (the meet) has few rows.
        # Each node rolls up from the smallest kept table below it; one query serves several
        # tables (one part each), so kept tables do not multiply the queries.
        groups: dict[int, list[Node]] = {}
        for n in todo:
            groups.setdefault(id(self.source_for(n)), []).append(n)
        by_id = {id(s): s for s in self.sources}
        sensitive = self.sensitive
        parts: list[tuple[Source, list[Node]]] = []
        size = 0
        for sid, group in groups.items():
            group.sort(key=self.similar)
            step = PART_WIDE if sensitive and by_id[sid].rows < PART_WIDE_BELOW else PART
            for i in range(0, len(group), step):
                chunk = group[i : i + step]
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
        attrs = self.attrs
        if not attrs and self._batch_sets(parts):
            return
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
                # Codes may be 4-byte INTEGERs (plan.INT_CODES_BELOW): widened before the product.
                terms = [f"CAST(m.{plan.code_alias[key]} AS BIGINT) * n.{w_alias[(ch, key)]}" for key in used]
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
        # A class's number is gid * radix + its key where every key fits one chunk and the product
        # stays below 2^62 (templates/search/evaluate.sql.j2), else the template ranks the keys.
        radix = 1 + max(
            (sum((plan.card[key] - 1) * w for key, w in ws[0].items()) for ws in all_weights if ws), default=0
        )
        cid_radix = radix if n_chunks == 1 and radix * len(nodes) < CID_RADIX_MAX else None
        rows = plan.be.query(
            "search/evaluate",
            parts=ctx_parts,
            base=plan.base.freq,
            cid_radix=cid_radix,
            key_aliases=[ident(f"k_{i}") for i in range(n_chunks)],
            sid_aliases=[a["sid"] for a in attrs],
            attrs=attrs,
            any_check=self.any_check,
            size_k=self.size_k,
        )
        self.queries += 1
        seen = set()
        for gid, *counts in rows:
            node = nodes[int(gid)]
            seen.add(node)
            self.cache[node] = _node_result(counts)
        if len(seen) != len(nodes):
            raise SqlanonError(f"internal: evaluation returned {len(seen)} of {len(nodes)} nodes")
        self.checked += len(nodes)

    def _node_columns(self, node: Node) -> tuple[Sql, ...]:
        """The code columns that define the node's classes (a constant column defines nothing)."""
        return tuple(self.plan.code_alias[key] for key in self._key_levels(node))

    def _key_levels(self, node: Node) -> tuple[tuple[int, int], ...]:
        """The (quasi-identifier, level) pairs whose codes define the node's classes."""
        plan = self.plan
        return tuple(
            (j, lvl) for j, lvl in enumerate(node) if lvl is not None and plan.card.get((j, lvl), 1) > 1
        )

    def _batch_keys(self, parts: list[tuple[Source, list[Node]]]) -> bool:
        """Class sizes only, on a :data:`KEYED` engine: one branch per source and set of code
        columns, its classes numbered by one integer key (templates/search/evaluate_keys.sql.j2,
        each branch a compiled shape: templates/search/_key_branch.sql.j2). False (nothing run)
        where a key's radix product would not fit below :data:`CID_RADIX_MAX`."""
        plan = self.plan
        branches: dict[tuple[int, tuple[tuple[int, int], ...]], list[Node]] = {}
        sources: dict[int, Source] = {}
        for source, part_nodes in parts:
            sources[id(source)] = source
            for n in part_nodes:
                branches.setdefault((id(source), self._key_levels(n)), []).append(n)
        ctx = []
        for gid, (sid, levels) in enumerate(branches):
            radix = math.prod(plan.card[key] for key in levels)
            if radix >= CID_RADIX_MAX:
                return False
            terms, weight = [], 1
            for key in levels:
                terms.append({"code": Hole(code_name(key)), "weight": Hole(weight)})
                weight *= plan.card[key]
            # Codes may be 4-byte INTEGERs (plan.INT_CODES_BELOW): widened before the product
            # unless every partial sum stays below the key's radix < 2^31, where 4-byte arithmetic
            # is exact on every engine (and 17 % faster on DuckDB: Adult 5 %, 0.36 -> 0.30 s).
            wide = radix >= NARROW_KEY_BELOW
            ctx.append({"gid": Hole(gid), "terms": terms, "wide": wide, "source": Hole(sources[sid].rel)})
        rows = plan.be.query("search/evaluate_keys", branches=ctx, any_check=self.any_check)
        self.queries += 1
        owners = list(branches.values())
        self._record(parts, ((owners[int(gid)], counts) for gid, *counts in rows))
        return True

    def _record(
        self, parts: list[tuple[Source, list[Node]]], rows: Iterable[tuple[list[Node], list]]
    ) -> None:
        """Cache a class-size batch's results: each row's counts for the nodes it stands for (the
        nodes of one set of code columns share their classes)."""
        seen: set[Node] = set()
        for nodes, counts in rows:
            result = _node_result(counts)
            for node in nodes:
                self.cache[node] = result
                seen.add(node)
        expected = {n for _, ns in parts for n in ns}
        if seen != expected:
            raise SqlanonError(f"internal: evaluation returned {len(seen)} of {len(expected)} nodes")
        self.checked += len(expected)

    def _batch_sets(self, parts: list[tuple[Source, list[Node]]]) -> bool:
        """Class sizes only: one GROUPING SETS aggregation per part (templates/search/
        evaluate_sets.sql.j2), or on a :data:`KEYED` engine one keyed branch per set
        (:meth:`_batch_keys`). Nodes with the same code columns have the same classes and share a
        set. False (nothing run) where a part's columns would not fit a BIGINT bit mask."""
        if self.plan.be.dialect in KEYED and self._batch_keys(parts):
            return True
        ctx_parts = []
        owners: list[dict[int, list[Node]]] = []
        for source, part_nodes in parts:
            sets: dict[tuple[Sql, ...], list[Node]] = {}
            for n in part_nodes:
                sets.setdefault(self._node_columns(n), []).append(n)
            used = list(dict.fromkeys(c for cols in sets for c in cols))
            if len(used) > MASK_BITS:
                return False
            bit = {c: 1 << i for i, c in enumerate(used)}
            # GROUPING(c) is 1 where c is not grouped in the row's set: the mask of a set is the
            # sum of the bits of the used columns it leaves out.
            masks = {sum(b for c, b in bit.items() if c not in cols): ns for cols, ns in sets.items()}
            owners.append(masks)
            mask = " + ".join(f"GROUPING({c}) * {b}" for c, b in bit.items()) if used else "0"
            ctx_parts.append(
                {"source": source.rel, "sets": list(sets), "grouped": bool(used), "mask": Sql(mask)}
            )
        rows = self.plan.be.query("search/evaluate_sets", parts=ctx_parts, any_check=self.any_check)
        self.queries += 1
        self._record(parts, ((owners[int(part)][int(mask)], counts) for part, mask, *counts in rows))
        return True


def _node_result(counts: list[Any]) -> NodeResult:
    """A node's row of an evaluation statement: records, classes, violating records and classes,
    sum n^2 over kept classes, the smallest kept class (NULL when none is kept), and with
    ``size_k`` the records in classes smaller than it."""
    n_rows, n_classes, bad, bad_classes, dm_kept, k_kept, *rest = counts
    return NodeResult(
        int(n_rows),
        int(n_classes),
        int(bad or 0),
        int(bad_classes or 0),
        int(dm_kept or 0),
        None if k_kept is None else int(k_kept),
        int(rest[0] or 0) if rest else None,
    )


#: Engines whose class-size batches run as keyed branches (:meth:`Evaluator._batch_keys`) rather
#: than GROUPING SETS: measured in templates/search/evaluate_keys.sql.j2 (faster on DuckDB,
#: slower on PostgreSQL).
KEYED = frozenset({"duckdb"})
#: The most code columns one part may group by (GROUPING() bits summed into a BIGINT mask).
MASK_BITS = 62
#: A keyed branch's key is computed in the codes' own 4-byte type while its radix stays below this.
NARROW_KEY_BELOW = 2**31
#: A batch's classes are numbered gid * radix + key (no sort) while that product stays below this,
#: else by rank (templates/search/evaluate.sql.j2).
CID_RADIX_MAX = 2**62


def relaxed_k(policy: Policy) -> int:
    """The least class size the policy implies: k, l for distinct and recursive l (integers), and
    ceil(1/r) for a prosecutor-risk bound r (a class of n records has at most n distinct values and
    risk 1/n). Entropy l holds where H >= log2(l) - EPS (:func:`~sqlanon.measure.assessment.
    requirement_checks`) and H <= log2(n), so a class needs n >= l * 2^-EPS records; the bound taken,
    ceil(l * 2^(-2 EPS)), stays at or below that whatever l's last digits (l = 2.0000000012 needs 2
    records, not 3), and the relaxation never fails a class the policy accepts."""
    k = policy.k_or_1()
    for r in policy.privacy.l:
        if r.kind == "entropy":
            k = max(k, math.ceil(r.l * 2 ** (-2 * EPS)))
        else:
            k = max(k, math.ceil(r.l - 1e-9))
    pros = policy.privacy.risk.get("prosecutor")
    if pros:
        k = max(k, math.ceil(1 / pros - 1e-9))
    return max(k, profitability_min_size(policy.privacy))  # a class size, like k
