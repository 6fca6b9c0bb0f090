"""What a search needs before its first node: the hierarchies, the base frequency table (the one
scan of the source), each hierarchy level coded as a small integer, and the suppression budget.
The lattice, its algorithms and monotonicity are described in the package docstring."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sqlglot import exp

from sqlanon.engines import Backend, Column
from sqlanon.errors import SqlanonError
from sqlanon.lattice.localdb import stage_coded
from sqlanon.lattice.localfreq import direct_copy
from sqlanon.likeness import likeness_monotone
from sqlanon.measure.assessment import (
    EPS,
    FrequencyTables,
    _sort_key,
    build_frequency_tables,
    check_columns,
    refuse_unsatisfiable_l,
)
from sqlanon.policy import Policy
from sqlanon.presence import resolve
from sqlanon.relation import Relation
from sqlanon.search_where import prefetch
from sqlanon.sql.compile import CANONICAL, Sql, ident
from sqlanon.transform.build import build_hierarchy
from sqlanon.transform.hierarchy import Hierarchy

#: The most hierarchies whose coverage bits one BIGINT column of the coded table carries; beyond
#: that the coverage check scans the base table (:func:`check_coverage`).
COVERAGE_BITS = 62

Node = tuple[int | None, ...]
Progress = Callable[[int, int, int], None]


class Pruning(Protocol):
    """What :func:`~sqlanon.lattice.algorithms.flash` needs to skip nodes that cannot be the
    optimum (``search.scope: optimum``); built by :func:`sqlanon.metrics.optimum.pruning` from the
    metric, which the lattice layer does not know. Ranks are oriented lower-is-better."""

    def rank(self, node: Node, res: NodeResult) -> float | None:
        """The exact rank of a checked satisfying node when it needs no query, else None."""
        ...

    def hopeless(self, node: Node, best: float) -> bool:
        """Whether the node's rank surely exceeds ``best`` (its query-free lower bound does): it
        can neither be nor tie the optimum, whatever it needs suppressed."""
        ...

    def bound(self, node: Node) -> float | None:
        """The node's query-free lower bound on its rank (None: no bound), monotone along
        generalisation."""
        ...


#: Nodes per evaluation query.
BATCH = 128
#: Nodes per part of a query: each part groups its source by the levels its nodes use (its meet)
#: before rolling up to each node, so a part of similar nodes reads far fewer rows than the source.
PART = 4
#: ... except when l or t is checked on a small source (fewer than PART_WIDE_BELOW rows): then a
#: part takes PART_WIDE nodes. Each part is its own meet and cross join, and on a small table the
#: meet saves little while the parts cost statement text and pipelines: Adult (19,502 coded rows),
#: t = 0.2 with 5 %, 16.3-16.5 s with parts of 4 against 12.3-12.8 s with 16 (8: 13.6 s, 32: 12.2 s,
#: one part of 128: 16.4-16.7 s); the 1e6-row table (276,373 coded rows) 25.7 s with 4 against
#: 31.8 s with 16. Class-size checks (GROUPING SETS) showed no difference either way on Adult.
PART_WIDE = 16
PART_WIDE_BELOW = 100_000
#: Binary searches :func:`flash` runs in step (their next nodes make one query): one per
#: FLASH_LANE_EVERY nodes checked until FLASH_LANES_FAST nodes are checked, then one per
#: FLASH_LANE_EVERY_FAST, at most FLASH_LANES.
FLASH_LANES = 128
FLASH_LANE_EVERY = 16
FLASH_LANES_FAST = 512
FLASH_LANE_EVERY_FAST = 8


#: Without suppression, on a small table (a coded table of fewer than PART_WIDE_BELOW rows) whose
#: walk checks class sizes and at most distinct values (k, a prosecutor bound, distinct l in the
#: staged walk), a statement's fixed cost is several nodes' work, and Flash runs one more binary
#: search in step per FLASH_LANE_EVERY_SMALL nodes checked, up to FLASH_LANES. Adult, precision
#: optimum, checks / queries / seconds against one per 16: on DuckDB k = 2 248 / 71 / 0.83 s ->
#: 173 / 25 / 0.50 s (ARX 217), k = 5 134 / 60 / 0.59 -> 163 / 24 / 0.49 (ARX 181), k = 5 +
#: distinct l = 3 124 / 72 / 0.67 -> 114 / 34 / 0.45 (ARX 122); on PostgreSQL (interleaved) k = 2
#: 1.52-1.53 -> 1.02-1.07 s, k = 5 0.95-1.04 -> 0.89-0.91 s, k = 5 + distinct l = 3 0.98-1.15 ->
#: 0.76-0.78 s. Not with suppression: k = 5 with 5 % checked 474 -> 596 nodes, 1.57-1.68 ->
#: 1.43-1.56 s on DuckDB but 4.80-5.50 -> 5.66-5.97 s on PostgreSQL, where a check costs more
#: than a statement. Nor where the walk evaluates t (k = 5 + t = 0.2: 24 -> 36 checks, ARX 26).
FLASH_LANE_EVERY_SMALL = 4


#: In read-only mode (``Backend.inline``) every statement recomputes the base frequency table
#: and the coded table as CTEs, a scan of the source each: Flash then runs one more binary search
#: in step per node checked (up to FLASH_LANES), trading checks for statements. PostgreSQL
#: read-only, 3e5 rows, k = 5, checks / statements / seconds: 221 / 69 / 63.2 s -> 381 / 11 /
#: 23.9 s without suppression, 227 / 69 / 84.5 s -> 277 / 10 / 31.2 s with 5 % (one per 4 checks:
#: 32.6 s and 44.6 s).
FLASH_LANE_EVERY_INLINE = 1


def lane_count(checked: int, small: bool = False, inline: bool = False) -> int:
    """How many binary searches :func:`~.algorithms.flash` runs in step after ``checked`` node checks
    (``small``: see :data:`FLASH_LANE_EVERY_SMALL`; ``inline``: :data:`FLASH_LANE_EVERY_INLINE`)."""
    if inline:
        return min(FLASH_LANES, max(1, checked // FLASH_LANE_EVERY_INLINE))
    if small:
        return min(FLASH_LANES, max(1, checked // FLASH_LANE_EVERY_SMALL))
    if checked < FLASH_LANES_FAST:
        return max(1, checked // FLASH_LANE_EVERY)
    return min(FLASH_LANES, checked // FLASH_LANE_EVERY_FAST)


#: Rollups :func:`flash` keeps of failing nodes: at most this many per round and in all, each at
#: least this many times smaller than the table it would otherwise roll up from. The meets it keeps
#: before a round (``algorithms._keep_meets``) have their own KEEP_PER_ROUND and share KEEP_MAX.
KEEP_PER_ROUND = 8
KEEP_MAX = 64
#: 8, not 2, since each keyed evaluation groups its branches apart (templates/search/
#: _key_branch.sql.j2): a rollup costs about two evaluations of its source, and one only 2-3 times
#: smaller seldom repays them. 1e6-row table, local walk from PostgreSQL (its DuckDB statements
#: timed), idle 2-core machine: 5 % 1.26-1.42 -> 0.90-1.01 s (21 rollups ->
#: none; whole process 3.77-4.15 -> 3.27-3.43 s); without suppression the same 25 rollups. 1e7
#: rows on DuckDB, replayed: 5 % 2.75-2.93 -> 2.33-2.90 s of CPU (4 rollups -> none), 0 % the same
#: 28; PostgreSQL's in-database walk at 1e6, 5 %: 31.9-54.4 -> 25.0-32.6 s (loaded machine).
KEEP_RATIO = 8
#: ... and only where that table has at least this many rows: creating a table costs a statement
#: (~8 ms on DuckDB), which a rollup repays only over a large table (Adult, ~20,000 coded rows:
#: its Flash took 1.5 s without rollups against 1.8-2.0 s with them; 1e7 rows, ~1 million coded
#: rows: 5.3-6.0 s with them against 6.8-7.0 s without; 1e6, 276,000 rows: the same either way).
KEEP_MIN_ROWS = 100_000


@dataclass(frozen=True)
class NodeResult:
    rows: int
    classes: int
    bad_records: int
    bad_classes: int
    dm_kept: int
    k_kept: int | None
    #: Records in classes smaller than the policy's relaxed k (:func:`~sqlanon.lattice.evaluator.
    #: relaxed_k`): the monotone relaxation's verdict read from a full evaluation, where Flash walks
    #: with the full policy (``Evaluator(size_k=...)``); None otherwise. Not part of equality: the
    #: same node's result is the same whether or not it was asked for.
    bad_size: int | None = field(default=None, compare=False)

    def ok(self, allowed: int) -> bool:
        return self.bad_records <= allowed

    def relaxed_ok(self, allowed: int) -> bool:
        """The relaxation (class sizes only) holds: requires ``bad_size``."""
        if self.bad_size is None:
            raise ValueError("internal: relaxed_ok on a result evaluated without size_k")
        return self.bad_size <= allowed


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

    @functools.cached_property
    def heights(self) -> list[int]:
        # Read per node by the searches and the metric bounds; the hierarchies never change.
        return [h.height for h in self.hierarchies]

    @property
    def qi_names(self) -> list[str]:
        return [h.column for h in self.hierarchies]

    @property
    def monotone(self) -> bool:
        """Whether the policy's satisfaction is monotone along generalisation, so that every
        search may tag the nodes above a satisfying node (and below a failing one) without a query.

        Without suppression every requirement here but delta-disclosure is monotone (seed 002 section
        3; Machanavajjhala et al. 2006 for l-diversity; :func:`sqlanon.likeness.likeness_monotone`).
        With suppression the test is "at most ``allowed`` records in violating classes", monotone
        where a merged class can violate only if both its parts do: then generalising never adds
        violating records. Class size (k, the prosecutor bound) and distinct l-diversity qualify (a
        merged class has at least each part's size and each part's distinct values); entropy and
        recursive l, t-closeness and beta-likeness do not (a violating part can drag a merged class
        below the threshold, so a node above a satisfying one may violate, and those are searched on
        their monotone relaxation, :func:`~sqlanon.lattice.evaluator.relaxed_k`).
        ARX marks distinct l-diversity monotonic with suppression too."""
        p = self.policy.privacy
        plain = not p.t and not p.likeness and all(r.kind == "distinct" for r in p.l)
        return (p.suppression == 0 or plain) and likeness_monotone(p)

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


def build_hierarchies(policy: Policy, columns: dict[str, Column] | None = None) -> list[Hierarchy]:
    """One hierarchy per quasi-identifier; ``columns`` (name -> Column, read from the engine) gives
    the types: numeric for intervals and value comparison, temporal for dates. Without them
    (``compile --levels`` with no database) intervals are numeric and anything else is text."""
    out = []
    for spec in policy.quasi:
        col = (columns or {}).get(spec.name)
        numeric = col.numeric if col is not None else _guess_numeric(spec.hierarchy)
        out.append(
            build_hierarchy(
                spec.name,
                spec.hierarchy,
                numeric=numeric,
                base_dir=policy.base_dir,
                temporal=col.temporal if col is not None else None,
                type_name=col.type if col is not None else None,
            )
        )
    return out


def _guess_numeric(spec: dict | None) -> bool:
    """Without a database: intervals are numeric; anything else is compared as text."""
    return bool(spec) and "interval" in spec


def code_name(key: tuple[int, int]) -> str:
    """The coded table's column for (quasi-identifier, level): its code at that level."""
    return f"c_{key[0]}_{key[1]}"


#: The coded table's level codes are 4-byte INTEGERs below this many source records (every code is
#: below its column's distinct values), else BIGINT (templates/search/coded.sql.j2).
INT_CODES_BELOW = 2**31 - 1


def prepare(be: Backend, policy: Policy, *, walk: bool = True, coded: bool = True) -> Plan:
    """Check the columns and hierarchies, and build the base frequency table (one source scan).
    ``walk=False``: no search follows (``evaluate``, ``--levels``), so nothing is staged locally.
    ``coded=False``: only Mondrian follows, which works on the base frequency table and reads no
    level code: no coded table is built (nor staged), the coverage is checked on the base table
    (:func:`check_coverage`) and the plan's ``coded`` is the base frequency table itself, which
    serves the top node's check (the whole table as one class groups by no code). 1e7 rows,
    DuckDB, paired in one process: prepare and that check 1.34 -> 1.16 s (CPU 2.58 -> 2.26 s)."""
    cols = check_columns(be, policy)
    hierarchies = build_hierarchies(policy, cols)
    qi_names = [h.column for h in hierarchies]
    s_names = [c.name for c in policy.sensitive]
    sort_keys = [_sort_key(policy, n, ident(f"s_{i}")) for i, n in enumerate(s_names)]
    prefetch(be.dialect, policy.search.where)  # the local walk's imports, while the builds run
    # counted straight into the local walk's DuckDB where it will code locally (lattice/localfreq.py)
    direct = direct_copy(be, policy, qi_names, s_names, walk and coded)
    base = build_frequency_tables(
        be,
        policy.source,
        [ident(n) for n in qi_names],
        qi_names,
        [ident(n) for n in s_names],
        s_names,
        sort_keys,
        with_classes=False,
        create=direct.create if direct is not None else None,
    )
    local = direct.local if direct is not None else None
    freq_be = local or be  # where the base frequency table's rows are
    n_rows = int(freq_be.query("search/total", base=base.freq)[0][0] or 0)
    if n_rows == 0:
        raise SqlanonError(f"source: relation {str(policy.source)!r} is empty; there is nothing to anonymise")
    resolve(policy, n_rows)  # the estimated k-map's k' (sqlanon.presence), before any check is built
    preds = _coverage_predicates(hierarchies, base)
    flag_in_coded = coded and len(preds) <= COVERAGE_BITS
    if not flag_in_coded:
        check_coverage(freq_be, hierarchies, base)
    if not coded:
        _refuse_l(policy, freq_be, base)
        # Its rows (a COUNT of a table: metadata on DuckDB), which decide where a search runs
        # (sqlanon.lattice.local.location): the coded table would have had as many.
        rows = int(freq_be.query("search/cardinalities", coded=base.freq, aliases=[], flags=False)[0][0])
        allowed = math.floor(policy.privacy.suppression * n_rows + EPS)
        return Plan(be, policy, hierarchies, base, n_rows, allowed, base.freq, {}, {}, rows)
    code_alias: dict[tuple[int, int], Sql] = {}
    qis = []
    bits: dict[int, int] = {}
    for j, h in enumerate(hierarchies):
        levels = []
        for lvl in range(h.height):  # the top level is the constant '*': no code needed
            code_alias[(j, lvl)] = ident(code_name((j, lvl)))
            levels.append({"alias": code_alias[(j, lvl)], "expr": h.sql(lvl, base.q_aliases[j])})
        pred = preds.get(j) if flag_in_coded else None
        if pred is not None:
            bits[j] = 1 << len(bits)
        if levels or pred is not None:
            qis.append(
                {
                    "alias": base.q_aliases[j],
                    "dict": ident(f"d_{j}"),
                    "levels": levels,
                    "pred": pred,
                    "bit": bits.get(j, 0),
                }
            )
    # A code is below its column's number of distinct values, at most n_rows (coded.sql.j2).
    code_type = Sql("INTEGER" if n_rows < INT_CODES_BELOW else "BIGINT")
    keys = list(code_alias)
    coding = {"base": base.freq, "qis": qis, "sid_aliases": base.sid_aliases, "code_type": code_type}
    aliases = [code_alias[k] for k in keys]
    # coded in a local DuckDB where a walk follows on PostgreSQL (sqlanon/lattice/localdb.py)
    staged = stage_coded(be, policy, base, n_rows, coding, aliases, bool(bits), walk, local)
    if staged is None:
        # the dictionaries' values in one scan on PostgreSQL, NULL hash-joined on DuckDB (coded.sql.j2)
        pg, duck = be.dialect == "postgres", be.dialect == "duckdb"
        coded = be.create_temp("coded", "search/coded", **coding, one_scan=pg, null_safe=duck)
        # One scan of the coded table: its rows, the coverage bits, each level's number of labels.
        summary = be.query("search/cardinalities", coded=coded, aliases=aliases, flags=bool(bits))[0]
    else:
        coded, summary = staged
    base_rows = int(summary[0])
    if bits:
        # The coverage check on the coded table's dictionaries (see templates/search/coded.sql.j2).
        found = int(summary[1] or 0)
        _refuse_uncovered(be, base, [(j, hierarchies[j], preds[j]) for j, b in bits.items() if found & b])
    card = {k: int(v) for k, v in zip(keys, summary[2 if bits else 1 :], strict=True)}
    _refuse_l(policy, freq_be, base)
    allowed = math.floor(policy.privacy.suppression * n_rows + EPS)
    return Plan(be, policy, hierarchies, base, n_rows, allowed, coded, code_alias, card, base_rows)


def _refuse_l(policy: Policy, be: Backend, base: FrequencyTables) -> None:
    """Refuse an l that no class can reach: above the sensitive attribute's distinct values."""
    for r in policy.privacy.l:
        col = base.sid_aliases[base.s_names.index(r.attribute)]
        refuse_unsatisfiable_l(r, int(be.query("search/distinct_count", base=base.freq, col=col)[0][0]))


def check_coverage(be: Backend, hierarchies: Sequence[Hierarchy], base: FrequencyTables) -> None:
    """Refuse to search when a hierarchy does not cover a value present in the data: one scan of
    the base frequency table flags every hierarchy at once, and only a flagged one's sample is
    read (at 1e7 rows, 0.28 s in nine scans before). The lattice search's :func:`prepare` tests
    the same predicates on the coded table's dictionaries instead (no scan of its own)."""
    preds = _coverage_predicates(hierarchies, base)
    if not preds:
        return
    flags = be.query("search/uncovered_any", base=base.freq, preds=list(preds.values()))[0]
    flagged = [(j, hierarchies[j], p) for (j, p), flag in zip(preds.items(), flags, strict=True) if flag]
    _refuse_uncovered(be, base, flagged)


def _coverage_predicates(hierarchies: Sequence[Hierarchy], base: FrequencyTables) -> dict[int, Sql]:
    """Each hierarchy's coverage predicate on its base-table column (true for a value it does not
    cover), by quasi-identifier position; none for a hierarchy that covers everything."""
    out = {}
    for j, (h, alias) in enumerate(zip(hierarchies, base.q_aliases, strict=True)):
        pred = h.coverage_predicate(exp.column(alias.strip('"'), quoted=True))
        if pred is not None:
            out[j] = Sql(pred.sql(CANONICAL))
    return out


def _refuse_uncovered(be: Backend, base: FrequencyTables, flagged: list[tuple[int, Hierarchy, Sql]]) -> None:
    """The one-line refusal for the first flagged hierarchy (j: its position), naming a sample of
    its uncovered values (the most frequent first) and their number."""
    for j, h, pred in flagged:
        rows = be.query("search/uncovered", base=base.freq, col=base.q_aliases[j], pred=pred)
        if rows:
            total = int(rows[0][2])
            sample = ", ".join("NULL" if r[0] is None else repr(r[0]) for r in rows[:5])
            hint = ""
            if any(r[0] is None for r in rows):
                hint = "; cover NULL with 'null: [label1, ...]' beside the map, or a NULL row in the file"
            raise SqlanonError(
                f"columns.{h.column}.hierarchy: {len(rows) if len(rows) < 5 else 'at least 5'} value(s) "
                f"present in {h.column!r} are not covered ({total} distinct in all), e.g. {sample}{hint}"
            )


# --------------------------------------------------------------------------------------------------
# Node evaluation
# --------------------------------------------------------------------------------------------------
