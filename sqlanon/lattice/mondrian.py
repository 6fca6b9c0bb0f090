"""Mondrian (LeFevre, DeWitt and Ramakrishnan 2006; seed 002 section 4.3, Alg. 3): strict
multidimensional partitioning, computed inside the database in rounds.

The working table is the base frequency table (records with the same quasi-identifiers always
stay together, so a partition is a set of its rows) with each row's partition. A round is one
set-based step for every live partition at once (``templates/mondrian/round.sql.j2``): per
partition and quasi-identifier the normalised width, the lower median and whether both halves of
the cut satisfy every requirement of the policy; each partition takes the allowable cut on its
widest dimension, the others are done. The rounds are about log2(N / k): the cost is a small
multiple of a scan of the base frequency table. Python keeps the cut tree (the plan), never rows.
A round is four statements (the cuts, one row per child with its id; reading them; setting the
done rows aside; splitting the rest), each rendered and compiled once for all rounds: the
relations and the next id are holes (:class:`~sqlanon.sql.shapes.Hole`), and a statement whose
context's signature was seen before is bound without a render (:func:`sqlanon.sql.compile.to_sql`).
Each quasi-identifier's values are grouped once per round (GROUP BY partition, value); a
hierarchy's levels come from a small table of each value's labels (``levels.sql.j2``), whose text
also labels the children of a cut along it. Where a hierarchy's labels nest, its values are ranked
label by label, so a partition's lowest common label follows from its lowest and highest rank
(``ranges.sql.j2``). Each row carries a bitmask of the QIs its partition has exhausted (one value;
the value level along a hierarchy), which no descendant can be cut on: a round does not group them
(29 % of the (row, QI) pairs at 1e6 rows).

Conventions (the tests' reference follows them): a numeric QI without NULLs is cut on its values and
its width is (max - min) / (the table's max - min); where a double may not hold its values exactly
(a BIGINT past 2^53, a DECIMAL of more digits) the rounds order them by rank, the same cuts on the
exact values, and the release compares with the median's exact text. Any other QI with a hierarchy
is cut along it, top-down (LeFevre et al. 2006 section 4, Fung et al.'s top-down specialisation): a
partition's lowest common label is replaced by the labels one level down, one child each, and its
width is (cover - 1) / (distinct - 1), the cover being the table's distinct values under that label.
A QI with neither is cut on the rank of its value in value order (NULL last), width (the partition's
distinct values) / (the table's), anonypy's span of a categorical column (on Adult it keeps more
than (max rank - min rank) / (distinct - 1) does: NCP 0.0126 against 0.0153 for k = 5,
benchmarks/mondrian_anonypy.py). On an axis (numbers or ranks) two cut points are tried, in order:
the lower median by records (the smallest value whose running count reaches half), then the
partition's value just below it; the left half is ``value <= cut point``. The second is what keeps a
cut when the most common value is also the last (Male, White on Adult: the median cut leaves the
right half empty): whenever some cut point of the value order leaves both halves with at least k
records, one of these two does, since the running counts only grow (LeFevre et al. 2006 and anonypy
likewise cut a categorical axis so that both halves are non-empty). A cut is allowable when every
child satisfies the policy. Ties between widths go to the first QI declared, then to the median cut.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend
from sqlanon.engines.duckdb_checkpoint import no_checkpoint
from sqlanon.errors import SqlanonError
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.lattice.mondrian_cuts import Cut, read_cuts
from sqlanon.lattice.plan import Plan, Progress
from sqlanon.measure.assessment import _l_rank, checked_sensitive, requirement_checks
from sqlanon.measure.tcloseness_hier import freq_hier_context
from sqlanon.policy import Policy
from sqlanon.profitability import is_table_wide
from sqlanon.relation import Relation
from sqlanon.sql.compile import CANONICAL, Hole, Sql, ident, lit
from sqlanon.transform.partition import (
    TreeCut,
    double_exact,
    float_columns,
    map_key,
    partition_context,
)
from sqlanon.transform.release import internal_prefix

#: At most this many rounds (ids and the published CASE tree stay small; 2^64 partitions).
MAX_ROUNDS = 64
#: Fewer than this many values (ranks, rows) fit a 32-bit INTEGER column of the working table.
INT_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Dim:
    """One quasi-identifier on Mondrian's axes."""

    name: str
    numeric: bool  # cut on the values (else on the rank of the value, or along its hierarchy)
    span: float  # the table's range of v (numbers) or distinct values - 1 (ranks), > 0
    card: int  # distinct values (NULL counted)
    weight: float = 1.0
    levels: int = 0  # > 0: cut along the hierarchy, whose levels 0 .. levels - 1 are coded


@dataclass
class MondrianResult:
    """The cut tree (partition id -> cut; a partition without one is a leaf), the working table
    (each base row's final partition), the rounds and queries it took, and its metrics."""

    dims: list[Dim]
    cuts: dict[int, Cut]
    work: Relation
    rounds: int
    queries: int
    partitions: int
    metrics: dict[str, Any] = field(default_factory=dict)
    #: The release's per-record sums (templates/mondrian/metrics.sql.j2) that
    #: sqlanon.metrics.evaluate turns into every metric defined for a local recoding.
    sums: dict[str, Any] = field(default_factory=dict)
    #: The quasi-identifiers' values of the working table's rows (by ``rid``).
    values: Relation | None = None

    @property
    def leaves(self) -> int:
        return self.partitions


def _attrs(plan: Plan) -> tuple[list[dict[str, Any]], Sql]:
    """The sensitive attributes the policy checks, and the violation predicate (as the search's)."""
    policy = plan.policy
    attrs, alias = [], {}
    for i, s, ordered in checked_sensitive(policy):
        alias[s] = f"a{i}"
        attrs.append(
            {
                "p": Sql(f"a{i}"),
                "sid": plan.base.sid_aliases[i],
                "l_rank": _l_rank(policy, s),
                "ordered": ordered,
                **freq_hier_context(plan.be, policy, s, plan.base),  # emd-hierarchical
            }
        )
    checks = requirement_checks(policy, alias)
    if not checks:
        raise SqlanonError(
            "mondrian: the policy states no per-class requirement (k, l, t or risk.prosecutor)"
        )
    return attrs, Sql(exp.or_(*[c for _, c in checks]).sql(CANONICAL))


def mondrian(plan: Plan, progress: Progress | None = None, *, scratch: bool = False) -> MondrianResult:
    """Partition the base frequency table; the cut tree and the final working table.

    ``scratch``: ``plan.be`` holds copies made for these rounds alone (the local DuckDB of
    :mod:`sqlanon.lattice.mondrian_local`), so the coded table is dropped once the whole table's
    check has read it, and the frequency table once Mondrian's numbered copy of it is built
    (unless a t-closeness hierarchy reads it each round): at 1e6 rows 63 MB of the local DuckDB's
    137 MB before the first round.

    Python's cyclic garbage collector is paused meanwhile: the cut tree's objects (74,050 cuts at
    1e6 rows) hold no cycles, but their allocation set off full collections that walked the
    whole heap again and again (about a tenth of the time before statements were cached)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        with no_checkpoint(plan.be):
            return _mondrian(plan, progress, scratch)
    finally:
        if paused:
            gc.enable()


def _mondrian(plan: Plan, progress: Progress | None, scratch: bool) -> MondrianResult:
    policy, be = plan.policy, plan.be
    unsupported = [f"risk.{r}" for r in policy.privacy.risk if r != "prosecutor"]
    if is_table_wide(policy.privacy):  # journalist profitability reads the population, release-wide
        unsupported.insert(0, "profitability")
    if unsupported:
        raise SqlanonError(
            f"privacy.{unsupported[0]}: a table-wide bound is not supported with mondrian "
            "(each cut is decided per partition); use a full-domain algorithm"
        )
    if be.inline:  # every round's inputs would be the last round's CTEs, nested twice over
        raise SqlanonError(
            "search.where: database: Mondrian's rounds need temporary tables, which this connection may "
            "not create (kept as CTEs, each round nests the last twice: the cost doubles per round); "
            "set search.where: local (a view), or connect with a role that may create temporary tables"
        )
    top = tuple(plan.heights)
    root = Evaluator(plan).evaluate([top])[top]
    # Without a coded table (prepare(coded=False)) the top node was checked on the base table.
    coded = plan.coded.name != plan.base.freq.name
    queries = _drop(be, [plan.coded]) if scratch and coded and plan.coded.name in be._temps else 0
    if root.bad_records:
        k = policy.privacy.k or 1
        if k > plan.n_rows:
            raise SqlanonError(f"privacy.k: k = {k} but the table has {plan.n_rows} rows; lower k")
        raise SqlanonError(
            "mondrian: even the whole table taken as one class does not satisfy the policy, so no "
            "partition of it can; relax the requirements (privacy.k, l, t) or raise privacy.suppression"
        )
    types = {c.name: c for c in be.require_columns(policy.source, "source")}
    specs = {c.name: c for c in policy.quasi}
    raw = [
        {"q": q, "numeric": types[n].numeric if n in types else False}
        for q, n in zip(plan.base.q_aliases, plan.qi_names, strict=True)
    ]
    row = be.query("mondrian/spans", base=plan.base.freq, dims=raw)[0]
    dims: list[Dim] = []
    ctx_dims = []
    for j, d in enumerate(raw):
        nulls, lo, hi, card = row[4 * j : 4 * j + 4]
        name = plan.qi_names[j]
        # An axis of values only where its range is finite: a double's Infinity or NaN (PostgreSQL
        # sorts NaN above every number) would put inf or nan into the statements' arithmetic and
        # text; such a column is cut on its values' ranks instead, as a text one is.
        numeric = bool(d["numeric"]) and not nulls and math.isfinite(float(hi) - float(lo))
        # Cut on the values' ranks where a double may not hold them exactly (a BIGINT past 2^53, a
        # DECIMAL of more digits): its width still from the values (the dictionary's x).
        ranked = not numeric or not double_exact(types[name], float(lo), float(hi))
        h = plan.hierarchies[j]
        # Along the hierarchy: a non-numeric axis whose QI declares one (its levels below '*').
        levels = h.height if not numeric and specs[name].hierarchy is not None else 0
        span = float(hi) - float(lo) if numeric else float(int(card) - 1)
        # Ranked values whose range is small beside their size (2^60 + 0 ... 2^60 + 60: one double):
        # their widths from exact differences, x = (value - least) / range (dict.sql.j2), span 1.
        offset = numeric and ranked and int(card) > 1 and span < max(abs(float(lo)), abs(float(hi))) / 2
        span = 1.0 if offset else span
        dims.append(Dim(name, numeric, span if span > 0 else 1.0, int(card), specs[name].weight, levels))
        ctx_dims.append(
            {
                "j": j,
                "q": d["q"],
                "v": ident(f"v_{j}"),
                "numeric": numeric,
                "ranked": ranked,  # v is the value's rank (init.sql.j2), not the value as a DOUBLE
                "offset": offset,  # x of the dictionary: the value's offset from the least, over the range
                "span": lit(float(dims[-1].span)),
                "card": lit(int(card)),
                "narrow": int(card) < INT_LIMIT,  # its ranks fit an INTEGER (init.sql.j2)
                "base": int(card) + 1,  # above any level's code or count of labels
                "weight": lit(float(dims[-1].weight)),
                # Its bit in the working table's mask of exhausted QIs (round.sql.j2's ex): a BIGINT's 62.
                "bit": 1 << j if j < 62 else 0,
                "codes": [
                    {"lvl": lvl, "col": ident(f"g_{j}_{lvl}"), "expr": h.sql(lvl, d["q"])}
                    for lvl in range(levels)
                ],
            }
        )
    sids = plan.base.sid_aliases
    attrs, any_check = _attrs(plan)
    vals = be.create_temp("mvalues", "mondrian/values", base=plan.base.freq)
    if scratch and plan.base.freq.name in be._temps and not any(a["hier"] for a in attrs):
        queries += _drop(be, [plan.base.freq])
    narrow = plan.n_rows < INT_LIMIT  # the rids (at most one a source row) fit an INTEGER (init.sql.j2)
    work = be.create_temp(
        "mondrian", "mondrian/init", vals=vals, dims=ctx_dims, sid_aliases=sids, narrow=narrow
    )
    hier = any(d.levels for d in dims)
    levels = be.create_temp("mlevels", "mondrian/levels", vals=vals, dims=ctx_dims) if hier else None
    covers = be.create_temp("mcovers", "mondrian/covers", levels=levels) if hier else None
    # Where a hierarchy's labels nest (checked on the table's values), its ranks run label by label
    # (init.sql.j2): a partition's lowest common label comes from its lowest and highest rank.
    tangled = {int(r[0]) for r in be.query("mondrian/nests", levels=levels)} if hier else set()
    ctx_dims = [{**c, "nested": bool(c["codes"]) and c["j"] not in tangled} for c in ctx_dims]
    nested = any(c["nested"] for c in ctx_dims)
    ranges = be.create_temp("mranges", "mondrian/ranges", levels=levels, dims=ctx_dims) if nested else None
    # The labels' text by (dim, level, code): the children of a cut along a hierarchy, for the
    # release's CASE tree (a few hundred rows).
    labels = {
        (int(dim), int(lvl), int(code)): None if int(is_null) else label
        for dim, lvl, code, label, is_null in (be.query("mondrian/labels", covers=covers) if hier else [])
    }
    ranked = any(c["ranked"] and not c["codes"] for c in ctx_dims)
    dictionary = (
        be.create_temp("mdict", "mondrian/dict", work=work, vals=vals, dims=ctx_dims) if ranked else None
    )
    cuts: dict[int, Cut] = {}
    hier_dims = [bool(d.levels) for d in dims]
    next_id, rounds, queries = 1, 0, queries + 4 + 4 * hier + ranked + nested
    # work holds the live partitions' rows only; each round's done rows are set aside in parts
    # (templates/mondrian/done.sql.j2) and unioned at the end. full, the first working table, keeps
    # the table-wide sensitive domains (t-closeness); with no sensitive attribute to check it is
    # dropped after the first round as any other.
    full, parts, live_parts = work, [], 1
    while True:
        if rounds >= MAX_ROUNDS:
            raise SqlanonError(f"mondrian: more than {MAX_ROUNDS} rounds; this should not happen")
        # Relations and the next id as holes: each statement is compiled once, not once a round.
        found = be.create_temp(
            "mcuts",
            "mondrian/round",
            work=Hole(work),
            full=Hole(full),
            covers=_hole(covers),
            levels=_hole(levels),
            ranges=_hole(ranges),
            dict=_hole(dictionary),
            dims=ctx_dims,
            sid_aliases=sids,
            attrs=attrs,
            any_check=any_check,
        )
        new, children = read_cuts(be, found, cuts, next_id, hier_dims, labels)
        queries += 2
        rounds += 1
        if not children:
            break
        if new < live_parts:  # some live partitions are done: their rows are final
            parts.append(be.create_temp("mdone", "mondrian/done", work=Hole(work), cuts=Hole(found)))
            queries += 1
        done_with = [work, found] if work != full or not attrs else [found]
        work = be.create_temp(
            "mondrian",
            "mondrian/split",
            work=Hole(work),
            cuts=Hole(found),
            levels=_hole(levels),
            dims=ctx_dims,
            sid_aliases=sids,
            next=Hole(next_id),
        )
        queries += 1
        queries += _drop(be, done_with)
        live_parts = children
        next_id += live_parts
        if progress:
            progress(rounds, len(cuts), new)
    if parts:  # the last round's rows are done too
        parts.append(work)
        work = be.create_temp("mondrian", "mondrian/union", parts=parts)
        queries += 1 + _drop(be, [p for p in parts if p != full])
    if attrs and full != work:
        queries += _drop(be, [full])
    names = plan.qi_names
    lab = None
    label = policy.label_column
    if label in names:  # its rank groups the records as its value does
        lab = ident(f"v_{names.index(label)}")
    elif label in [c.name for c in policy.sensitive]:
        lab = sids[[c.name for c in policy.sensitive].index(label)]
    categorical = [
        (c.name, sids[i])
        for i, c in enumerate(policy.sensitive)
        if not (types[c.name].numeric if c.name in types else False)
    ]
    mu = [sid for _, sid in categorical]
    ctx = {"levels": levels, "ranges": ranges, "dict": dictionary, "dims": ctx_dims, "lab": lab, "mu": mu}
    row = be.query("mondrian/metrics", work=work, **ctx)[0]
    n_parts, n, smallest, dm = (int(x) for x in row[:4])
    ncp, h, ph, lb, lam = (float(x or 0.0) for x in row[4:9])
    sums: dict[str, Any] = {"n": n, "ncp": ncp, "h": h, "ph": ph, "lb": lb, "lam": lam}
    sums["cm_kept"] = int(row[9]) if lab is not None else None
    sums["mu"] = {
        name: (float(row[10 + 2 * i] or 0.0), int(row[11 + 2 * i])) for i, (name, _) in enumerate(categorical)
    }
    metrics = {
        "ncp": ncp / (n * len(dims)),
        "discernibility": dm,
        "avg_class_size": (n / n_parts) / (policy.privacy.k or 1),
        "partitions": n_parts,
        "smallest_partition": smallest,
    }
    return MondrianResult(dims, cuts, work, rounds, queries + 1, n_parts, metrics, sums, vals)


def _analyze(be: Backend, rel: Relation) -> None:
    """PostgreSQL: gather the statistics of a temporary table a later statement joins on
    (autovacuum never analyses temporary tables). Without them the planner guesses, and a wrong
    guess of one row made the release's partition CTEs nested loops over the partitions."""
    if be.dialect == "postgres" and not be.inline:
        be._run(f"ANALYZE {rel.table().sql(be.dialect)}")


def _hole(rel: Relation | None) -> Hole | None:
    return None if rel is None else Hole(rel)


def _drop(be: Backend, rels: list[Relation]) -> int:
    """Drop a round's superseded tables now, not at the session's end: the rows held then stay
    about two working tables whatever the number of rounds (at 1e8 rows, ~25 copies of a
    2.9-million-row table otherwise). Read-only mode keeps them as CTEs: nothing to drop. A dropped
    table is struck off the session's list, which the session's end would otherwise drop again (a
    statement each: 47 at 1e6 rows).

    DuckDB frees a dropped table's blocks only when the transaction that dropped it commits (it
    could yet roll back): the rounds ran in one implicit transaction, so every round's working
    table stayed in memory to the end (1e6 rows: +34 MB a round, 683 MB after 25 rounds; at 1e8
    the 8.5 GB of the local copy). The drops are committed at once. Mondrian never runs inside a
    publish's explicit transaction (:meth:`~sqlanon.engines.base.Backend.atomic`), and a
    temporary table outlives a commit."""
    if be.inline:
        return 0
    for rel in rels:
        # Spark frees a dropped relation's blocks by its name (a relation); elsewhere a hole, so the
        # drop is compiled once, not parsed again each round.
        be.execute("ddl/drop_table", kind="drop", target=rel if be.dialect == "spark" else Hole(rel))
        if rel.name in be._temps:
            be._temps.remove(rel.name)
    if be.dialect == "duckdb":
        be.commit()
    return len(rels)


def mondrian_release(
    plan: Plan, policy: Policy, res: MondrianResult | None = None, *, table: bool = False
) -> tuple[tuple[MondrianResult, list[str]], dict[str, Any]]:
    """Run Mondrian on ``plan`` and build the release's partition context (``policy``: the
    user's policy, whose column names the release reads). ``table``: the release is materialised
    in this session (a published table), so records find their partition through a map of the
    final working table (any number of partitions) instead of the CASE tree (a view, printed SQL:
    at most ``TREE_LIMIT`` partitions)."""
    res = mondrian(plan) if res is None else res
    be = plan.be
    cols = be.require_columns(policy.source, "source")
    types = {c.name: c for c in cols}
    tree = {
        pid: TreeCut(
            res.dims[c.dim].name,
            res.dims[c.dim].numeric,
            c.med,
            c.med_text,
            tuple(c.children),
            None if c.labels is None else tuple(c.labels),
            plan.hierarchies[c.dim],
        )
        for pid, c in res.cuts.items()
    }
    numeric = {d.name: d.numeric for d in res.dims}
    names = [c.name for c in cols]
    internal = internal_prefix(names + [c.name for c in policy.columns])
    part_map = None
    if table:
        key = map_key([f"b.{q}" for q in plan.base.q_aliases], float_columns(plan.hierarchies, types))
        part_map = be.create_temp("mmap", "mondrian/map", work=res.work, vals=res.values, key=key)
        _analyze(be, part_map)
    ctx = partition_context(
        plan.policy, plan.hierarchies, tree, numeric, types, internal, res.partitions, part_map
    )
    return (res, names), ctx
