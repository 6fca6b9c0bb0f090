"""Mondrian (LeFevre, DeWitt and Ramakrishnan 2006; seed 002 section 4.3, Alg. 3): strict
multidimensional partitioning, computed inside the database in rounds.

The working table is the base frequency table (records with the same quasi-identifiers always
stay together, so a partition is a set of its rows) with each row's partition. A round is one
set-based step for every live partition at once (``templates/mondrian/round.sql.j2``): per
partition and quasi-identifier the normalised width, the lower median and whether both halves of
the cut satisfy every requirement of the policy; each partition takes the allowable cut on its
widest dimension, the others are done. The rounds are about log2(N / k): the cost is a small
multiple of a scan of the base frequency table. Python keeps the cut tree (the plan), never rows.

Conventions (the tests' reference follows them): a numeric QI without NULLs is cut on its
values and its width is (max - min) / (the table's max - min); any other QI is cut on the rank of
its value in value order (NULL last) and its width is (max rank - min rank) / (distinct - 1).
The median is the lower median by records (the smallest value whose running count reaches
half); the left half is ``value <= median``. Ties between widths go to the first QI declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.lattice.plan import Plan, Progress
from sqlanon.measure.assessment import _l_rank, checked_sensitive, requirement_checks
from sqlanon.relation import Relation
from sqlanon.sql.compile import CANONICAL, Sql, ident, lit

#: At most this many rounds (ids and the published CASE tree stay small; 2^64 partitions).
MAX_ROUNDS = 64


@dataclass(frozen=True)
class Dim:
    """One quasi-identifier on Mondrian's axes."""

    name: str
    numeric: bool  # cut on the values (else on the rank of the value)
    span: float  # the table's range of v (values or ranks), > 0
    card: int  # distinct values (NULL counted)
    weight: float = 1.0


@dataclass
class Cut:
    dim: int
    med: float  # v of the median (value or rank)
    med_text: str | None  # the median value as text (NULL: None)
    left: int
    right: int


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

    @property
    def leaves(self) -> int:
        return len(self.cuts) + 1


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
            }
        )
    checks = requirement_checks(policy, alias)
    if not checks:
        raise SqlanonError(
            "mondrian: the policy states no per-class requirement (k, l, t or risk.prosecutor)"
        )
    return attrs, Sql(exp.or_(*[c for _, c in checks]).sql(CANONICAL))


def mondrian(plan: Plan, progress: Progress | None = None) -> MondrianResult:
    """Partition the base frequency table; the cut tree and the final working table."""
    policy, be = plan.policy, plan.be
    unsupported = [r for r in policy.privacy.risk if r != "prosecutor"]
    if unsupported:
        raise SqlanonError(
            f"privacy.risk.{unsupported[0]}: a table-wide bound is not supported with mondrian "
            "(each cut is decided per partition); use a full-domain algorithm"
        )
    top = tuple(plan.heights)
    root = Evaluator(plan).evaluate([top])[top]
    if root.bad_records:
        raise SqlanonError(
            "mondrian: the whole table as one class does not satisfy the policy; no partition can"
        )
    types = {c.name: c for c in be.require_columns(policy.source, "source")}
    raw = [
        {"q": q, "numeric": types[n].numeric if n in types else False}
        for q, n in zip(plan.base.q_aliases, plan.qi_names, strict=True)
    ]
    row = be.query("mondrian/spans", base=plan.base.freq, dims=raw)[0]
    weights = {c.name: c.weight for c in policy.quasi}
    dims: list[Dim] = []
    ctx_dims = []
    for j, d in enumerate(raw):
        nulls, lo, hi, card = row[4 * j : 4 * j + 4]
        numeric = bool(d["numeric"]) and not nulls
        span = float(hi) - float(lo) if numeric else float(int(card) - 1)
        dims.append(
            Dim(plan.qi_names[j], numeric, span if span > 0 else 1.0, int(card), weights[plan.qi_names[j]])
        )
        ctx_dims.append(
            {
                "q": d["q"],
                "v": ident(f"v_{j}"),
                "numeric": numeric,
                "span": lit(float(dims[-1].span)),
                "card": lit(int(card)),
                "weight": lit(float(dims[-1].weight)),
            }
        )
    sids = plan.base.sid_aliases
    attrs, any_check = _attrs(plan)
    work = be.create_temp("mondrian", "mondrian/init", base=plan.base.freq, dims=ctx_dims, sid_aliases=sids)
    cuts: dict[int, Cut] = {}
    next_id, rounds, queries = 1, 0, 3
    while True:
        if rounds >= MAX_ROUNDS:
            raise SqlanonError(f"mondrian: more than {MAX_ROUNDS} rounds; this should not happen")
        found = be.create_temp(
            "mcuts",
            "mondrian/round",
            work=work,
            dims=ctx_dims,
            sid_aliases=sids,
            attrs=attrs,
            any_check=any_check,
        )
        rows = be.query("mondrian/cuts", cuts=found)
        queries += 2
        rounds += 1
        if not rows:
            break
        for pid, dim, med, med_text, r in rows:
            left = next_id + 2 * (int(r) - 1)
            cuts[int(pid)] = Cut(int(dim), float(med), med_text, left, left + 1)
        work = be.create_temp(
            "mondrian",
            "mondrian/split",
            work=work,
            cuts=found,
            dims=ctx_dims,
            sid_aliases=sids,
            next=lit(next_id),
        )
        queries += 1
        next_id += 2 * len(rows)
        if progress:
            progress(rounds, len(cuts), len(rows))
    m = be.query("mondrian/metrics", work=work, dims=ctx_dims)[0]
    metrics = {
        "ncp": float(m[0]),
        "discernibility": int(m[1]),
        "avg_class_size": (int(m[3]) / int(m[2])) / (policy.privacy.k or 1),
        "partitions": int(m[2]),
        "smallest_partition": int(m[4]),
    }
    return MondrianResult(dims, cuts, work, rounds, queries + 1, int(m[2]), metrics)
