"""Game-theoretic profitability with attack (Wan et al., PLoS ONE 2015; ARX 3.9.2's
``ProfitabilityProsecutor`` and ``ProfitabilityJournalist``, see :mod:`sqlanon.profitability`),
decided per class of a measured relation in SQL (``templates/assess/profitability.sql.j2``).

ARX keeps a class when the publisher's expected payout is positive (``RiskModelCostBenefit.
getExpectedPublisherPayout``): ``B (1 - IL) - (L p if G p - C > 0 else 0) > 0``, with p = 1 / the
class size (prosecutor) or 1 / its population size (journalist; 1 / the class size where the
population lacks the class, ARX's ``pcount == 0`` branch), and IL ARX's entropy-based information
loss of the class (``MetricSDNMEntropyBasedInformationLoss.getEntropyBasedInformationLoss``):

    IL = 1 + log10(prod_j share_j) / log10(prod_j size_j)     (0 when prod_j size_j = 1)

share_j is the share of quasi-identifier j's hierarchy rows that the class's label covers
(``DomainShareMaterialized``: the rows with that label at the node's level, over the row count
size_j). The shares depend only on the hierarchy, so they enter the SQL as literals: one CASE per
quasi-identifier maps the class's label to log10(share_j), and the per-class IL is their sum over
log10(prod size_j) plus 1 (a sum of logs, not ARX's log of a product: equal up to rounding).

The class table carries labels, not levels, so a label names its share whatever its level; a
string that is a label at two levels with different shares (a value spelt like a group above it)
takes the larger share (the larger loss: the publisher keeps fewer classes). The shares need the
hierarchy's rows: a ``map`` or ARX ``file`` hierarchy on every quasi-identifier (ARX's interval and
redaction builders have domain shares of their own that sqlanon does not reproduce); others are
refused. The hierarchy is read here (as :mod:`sqlanon.measure.tcloseness_hier` reads a sensitive
attribute's) because the measure layer sits below :mod:`sqlanon.transform`.
"""

from __future__ import annotations

import math
from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend
from sqlanon.errors import PolicyError, SqlanonError
from sqlanon.measure.tcloseness_hier import _rows
from sqlanon.policy import Policy
from sqlanon.profitability import Profitability
from sqlanon.sql.compile import CANONICAL, Sql, ident

STAR = "*"


def log_shares(policy: Policy, name: str) -> tuple[dict[str, float], float | None, float]:
    """Quasi-identifier ``name``'s labels -> log10 of their domain share, log10 of NULL's share at
    level 0 (None when NULL is not covered), and log10 of the domain size (ARX's row count).

    >>> from sqlanon.policy import parse_policy
    >>> p = parse_policy({"source": "t", "columns": {"a": {"role": "quasi",
    ...     "hierarchy": {"map": {"x": ["X"], "y": ["X"], "z": ["Z"], "w": ["Z"]}}}}, "privacy": {"k": 1}})
    >>> shares, null, size = log_shares(p, "a")
    >>> round(10 ** shares["x"], 6), round(10 ** shares["X"], 6), shares["*"], null, round(10**size)
    (0.25, 0.5, 0.0, None, 4)
    """
    spec = next(c.hierarchy for c in policy.columns if c.name == name)
    key = f"columns.{name}.hierarchy"
    if not spec or not any(form in spec for form in ("map", "file")):
        kind = next((f for f in ("mask", "interval", "date") if f in (spec or {})), "none")
        raise PolicyError(
            f"policy key 'privacy.profitability.attack': needs a map or file hierarchy on every "
            f"quasi-identifier (ARX's domain shares are the hierarchy's rows); {name!r} has {kind}"
        )
    rows, null_row = _rows(spec, key, policy.base_dir)
    chains = list(rows) + ([["\x00NULL", *null_row]] if null_row is not None else [])
    size = len(chains)
    counts: list[dict[str, int]] = []
    for chain in chains:
        for level, label in enumerate(chain):
            while len(counts) <= level:
                counts.append({})
            counts[level][label] = counts[level].get(label, 0) + 1
    shares: dict[str, float] = {}
    for level_counts in counts:
        for label, c in level_counts.items():
            shares[label] = max(shares.get(label, 0.0), c / size)
    shares.pop("\x00NULL", None)
    shares[STAR] = 1.0  # sqlanon's top level (ARX's root covers every row)
    null = None if null_row is None else math.log10(1 / size)
    return {v: math.log10(s) for v, s in shares.items()}, null, math.log10(size)


def _double(v: float) -> exp.Expression:
    # A double on every engine: PostgreSQL reads 0.30103 as NUMERIC, whose arithmetic rounds
    # differently from DuckDB's doubles.
    return exp.cast(exp.Literal.number(repr(float(v))), exp.DataType.build("double"))


def information_loss(policy: Policy, aliases: list[Sql]) -> exp.Expression:
    """The per-class IL over the class table ``c`` (its label columns ``aliases``), NULL for a
    label the hierarchy does not list."""
    terms: list[exp.Expression] = []
    max_il = 0.0
    for spec, alias in zip(policy.quasi, aliases, strict=True):
        shares, null, size = log_shares(policy, spec.name)
        max_il += size
        col = exp.column(alias.strip('"'), table=exp.to_identifier("c"))
        case: exp.Expression = exp.Case(
            this=exp.cast(col.copy(), exp.DataType.build("text")),
            ifs=[exp.If(this=exp.Literal.string(v), true=_double(s)) for v, s in shares.items()],
        )
        if null is not None:
            is_null = exp.Is(this=col.copy(), expression=exp.Null())
            case = exp.Case(ifs=[exp.If(this=is_null, true=_double(null))], default=case)
        terms.append(exp.Paren(this=case))
    if max_il == 0 or not terms:  # ARX: no information, none lost
        return _double(0.0)
    total = terms[0]
    for t in terms[1:]:
        total = exp.Add(this=total, expression=t)
    return exp.Add(
        this=_double(1.0), expression=exp.Div(this=exp.Paren(this=total), expression=_double(max_il))
    )


def publisher_payout(
    p: Profitability, il: exp.Expression | None = None, prob: exp.Expression | None = None
) -> exp.Expression:
    """ARX's ``getExpectedPublisherPayout`` over ``il`` and ``prob`` (default ``g.il``, ``g.prob``)."""
    # Parenthesised: sqlglot nests the trees as given, and 1 - (1 + x / y) must not print as 1 - 1 + x / y.
    il = exp.Paren(this=il) if il is not None else exp.column("il", table="g")
    prob = exp.Paren(this=prob) if prob is not None else exp.column("prob", table="g")
    benefit = exp.Mul(
        this=_double(p.publisher_benefit),
        expression=exp.Paren(this=exp.Sub(this=_double(1), expression=il.copy())),
    )
    adversary = exp.Sub(
        this=exp.Mul(this=_double(p.adversary_gain), expression=prob.copy()),
        expression=_double(p.adversary_cost),
    )
    loss = exp.Case(
        ifs=[
            exp.If(
                this=exp.GT(this=adversary, expression=_double(0)),
                true=exp.Mul(this=_double(p.publisher_loss), expression=prob.copy()),
            )
        ],
        default=_double(0),
    )
    return exp.Sub(this=benefit, expression=loss)


def attack_figures(
    be: Backend, policy: Policy, ft: Any, population_exprs: list[Sql] | None
) -> dict[str, Any] | None:
    """The records and classes whose publisher payout is not positive, and the smallest payout,
    of the measured classes ``ft.classes`` (None without ``attack: true``). The journalist's
    measure without a population (a release measured without its node) takes p = 1 / the class
    size, ARX's fallback: at least the population's p, so the payout is no higher (fail-closed)."""
    p: Profitability | None = getattr(policy.privacy, "profitability", None)
    if p is None or not p.attack:
        return None
    ctx: dict[str, Any] = {"population": None}
    if p.model == "journalist" and policy.population is not None:
        exprs = population_exprs or [ident(n) for n in ft.qi_names]
        join_on = exp.and_(
            *[
                exp.NullSafeEQ(
                    this=exp.column(a.strip('"'), table="c"), expression=exp.column(a.strip('"'), table="p")
                )
                for a in ft.q_aliases
            ]
        )
        ctx = {
            "population": policy.population,
            "q_exprs": exprs,
            "group_exprs": [e for e in exprs if exp.maybe_parse(e, dialect=CANONICAL).find(exp.Column)],
            "join_on": Sql(join_on.sql(CANONICAL)),
        }
    row = be.query(
        "assess/profitability",
        classes=ft.classes,
        q_aliases=ft.q_aliases,
        il=Sql(information_loss(policy, ft.q_aliases).sql(CANONICAL)),
        payout=Sql(publisher_payout(p).sql(CANONICAL)),
        **ctx,
    )[0]
    bad_records, bad_classes, payout_min, unlisted = row
    if int(unlisted or 0):
        raise SqlanonError(
            f"privacy.profitability: {int(unlisted)} class(es) carry a label no quasi-identifier's "
            "hierarchy lists (its domain share, and so ARX's information loss, is undefined)"
        )
    return {
        "records": int(bad_records or 0),
        "classes": int(bad_classes or 0),
        "publisher_payout_min": None if payout_min is None else float(payout_min),
    }
