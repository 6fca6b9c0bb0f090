"""``sqlanon assess``: measure how identifiable a relation is, inside the database.

One scan of the source builds the base frequency table (GROUP BY the quasi-identifiers and the
sensitive attributes); every figure is then computed in SQL from it and from the class table
derived from it. Only aggregates (one row per figure, the class-size histogram and the five most
disclosive classes) come back to Python. The only relations created are session-temporary tables,
dropped when the command ends: ``assess`` never writes to a persistent relation.

Formulas: seed 000 sections 3.1-3.3 (k, l, t) and 5 (risks); seed 004 section 3 (I1, I2, H(W),
l_max = 2^H(W), l_t = 2^(H(W) - t), I(W; QI groups)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend
from sqlanon.errors import EmptyRelationError, SqlanonError
from sqlanon.measure.columns import check_columns
from sqlanon.measure.likeness import checked_attributes, likeness_checks, likeness_figures
from sqlanon.measure.presence import population_checks, presence_figures
from sqlanon.measure.profitability_attack import attack_figures
from sqlanon.measure.release_stats import sensitive_tables
from sqlanon.measure.tcloseness_hier import hier_figure
from sqlanon.measure.wildcard import wildcard_risk
from sqlanon.policy import LRequirement, Policy, TRequirement
from sqlanon.presence import presence_checks, resolve
from sqlanon.profitability import profitability_assessment, profitability_checks
from sqlanon.relation import Relation
from sqlanon.risk_extra import (
    LRank,
    attribute_risks,
    grassberger_figures,
    grassberger_violation,
    l_rank_of,
    sample_risks,
)
from sqlanon.sql.compile import CANONICAL, Sql, ident, is_constant, lit
from sqlanon.uniqueness import uniqueness_risk

#: Relative tolerance when comparing a floating-point figure with a threshold: an entropy of
#: exactly log2(l) or an EMD of exactly t must count as satisfying the requirement.
EPS = 1e-9
TOP_CLASSES = 5


def _q(alias: str, col: str) -> exp.Column:
    return exp.column(col, table=exp.to_identifier(alias))


def _sql(e: exp.Expression) -> Sql:
    return Sql(e.sql(CANONICAL))


@dataclass
class FrequencyTables:
    """The base frequency table and the class table of one relation, as session-temporary tables."""

    freq: Relation
    classes: Relation  # the class table; the frequency table itself when built without classes
    q_aliases: list[Sql]
    s_aliases: list[Sql]
    sid_aliases: list[Sql]
    qi_names: list[str]
    s_names: list[str]


def build_frequency_tables(
    be: Backend,
    source: Relation,
    qi_exprs: list[Sql],
    qi_names: list[str],
    s_exprs: list[Sql],
    s_names: list[str],
    sort_keys: list[Sql] | None = None,
    *,
    with_classes: bool = True,
    class_check: Sql | None = None,
    n_alias: Sql | None = None,
    ranks: bool = True,
    weight: Sql | None = None,
    create: Callable[..., Relation] | None = None,
) -> FrequencyTables:
    """Scan ``source`` once into the base frequency table, then derive the class table from it.
    Without ``with_classes`` (the search) the table has no cid and no class table is made: the sort
    that numbers the classes is skipped. With ``class_check`` (a predicate on ``g.<n_alias>``, the
    class's size) the classes for which it holds are left out: the frequency table of a
    count-only release, built from its source (:func:`sqlanon.measure.release.release_check`).
    Without ``ranks``: only grouped (no cid, sid_i: :func:`number`); ``weight``: a column of
    ``source`` counting each row's records, summed instead of counting rows; ``create``: builds
    the base table in place of ``be.create_temp`` (the local walk's copy, ``lattice.localdb``)."""
    q_aliases = [ident(f"q_{i}") for i in range(len(qi_exprs))]
    s_aliases = [ident(f"s_{i}") for i in range(len(s_exprs))]
    sid_aliases = [ident(f"sid_{i}") for i in range(len(s_exprs))]
    freq = (create or be.create_temp)(
        "freq",
        "freq/base",
        source=source,
        q_exprs=qi_exprs,
        q_aliases=q_aliases,
        s_exprs=s_exprs,
        s_aliases=s_aliases,
        sid_aliases=sid_aliases,
        sort_keys=sort_keys or s_aliases,
        with_cid=with_classes,
        group_exprs=[e for e in qi_exprs + s_exprs if not is_constant(e)],
        class_check=class_check,
        n_alias=n_alias,
        ranks=ranks,
        weight=weight,
    )
    if not with_classes or not ranks:
        return FrequencyTables(freq, freq, q_aliases, s_aliases, sid_aliases, list(qi_names), list(s_names))
    classes = be.create_temp("cls", "freq/classes", freq=freq, q_aliases=q_aliases)
    return FrequencyTables(freq, classes, q_aliases, s_aliases, sid_aliases, list(qi_names), list(s_names))


def _sort_key(policy: Policy, name: str, alias: Sql) -> Sql:
    spec = policy.column(name)
    if not spec.order:
        return alias
    case = exp.Case(
        this=exp.maybe_parse(alias, dialect=CANONICAL),
        ifs=[
            exp.If(this=exp.maybe_parse(lit(v), dialect=CANONICAL), true=exp.Literal.number(i))
            for i, v in enumerate(spec.order)
        ],
    )
    return _sql(case)


def _l_rank(policy: Policy, attr: str) -> LRank:
    """The l used for the recursive tail: the policy's recursive l for ``attr``, else 2."""
    rank = next((int(r.l) for r in policy.privacy.l if r.attribute == attr and r.kind == "recursive"), 2)
    return l_rank_of(rank, policy, attr)  # also carries whether Grassberger's estimate is asked


def refuse_unsatisfiable_l(r: LRequirement, m: int) -> None:
    """Refuse ``r`` when no class can meet it over an attribute with ``m`` distinct values (the
    search's and assess's up-front check). Entropy l is judged with the check's own tolerance
    (H >= log2(l) - EPS, and H <= log2(m)), so l = 2.0000000012 over two values is satisfiable;
    distinct and recursive l need at least l values."""
    if r.kind == "entropy" and m > 0:
        unsatisfiable = math.log2(m) < math.log2(r.l) - EPS
    else:
        unsatisfiable = r.l > m
    if unsatisfiable:
        raise SqlanonError(
            f"privacy.l.{r.attribute}: l = {r.l:g} exceeds the {m} distinct value(s) of "
            f"{r.attribute!r}; no release can satisfy it"
        )


def _l_violation(r: LRequirement, alias: str) -> exp.Expression:
    if r.kind == "distinct":
        return exp.LT(this=_q(alias, "distinct_values"), expression=exp.Literal.number(int(r.l)))
    if r.kind == "entropy":
        bound = math.log2(r.l) - EPS
        if r.estimator == "grassberger":  # sqlanon.risk_extra: ARX's estimate and its ceil(l) values
            return grassberger_violation(_q(alias, "entropy_g"), _q(alias, "distinct_values"), r.l, bound)
        return exp.LT(this=_q(alias, "entropy"), expression=exp.Literal.number(repr(bound)))
    # recursive (c, l): violated unless r1 < c * tail
    return exp.GTE(
        this=_q(alias, "r1"),
        expression=exp.Mul(this=exp.Literal.number(repr(float(r.c))), expression=_q(alias, "tail")),
    )


T_COLUMN = {
    "emd-equal": "emd_equal",
    "emd-ordered": "emd_ordered",
    "kl": "kl",
    "emd-hierarchical": "emd_hier",
}


def _t_violation(r: TRequirement, alias: str) -> exp.Expression:
    return exp.GT(this=_q(alias, T_COLUMN[r.measure]), expression=exp.Literal.number(repr(r.t + EPS)))


def checked_sensitive(policy: Policy) -> list[tuple[int, str, bool]]:
    """The sensitive attributes an l, t or likeness requirement names: (index among ``policy.sensitive``,
    name, whether an ordered EMD is asked of it). Their class statistics feed
    :func:`requirement_checks` under the alias ``a<index>``."""
    used = checked_attributes(policy.privacy)
    ordered = {r.attribute for r in policy.privacy.t if r.measure == "emd-ordered"}
    return [(i, c.name, c.name in ordered) for i, c in enumerate(policy.sensitive) if c.name in used]


def requirement_checks(policy: Policy, stats_alias: dict[str, str]) -> list[tuple[str, exp.Expression]]:
    """(label, violation predicate over the class table ``c`` and per-attribute tables)."""
    checks: list[tuple[str, exp.Expression]] = []
    k = policy.privacy.k
    if k:
        checks.append(("k", exp.LT(this=_q("c", "n"), expression=exp.Literal.number(k))))
    for r in policy.privacy.l:
        checks.append((r.label, _l_violation(r, stats_alias[r.attribute])))
    for r in policy.privacy.t:
        checks.append((r.label, _t_violation(r, stats_alias[r.attribute])))
    checks += likeness_checks(policy, stats_alias, EPS)
    checks += presence_checks(policy)  # the estimated k-map's k' (sqlanon.presence)
    checks += profitability_checks(policy.privacy)  # Wan et al. 2015, prosecutor: a class size
    pros = policy.privacy.risk.get("prosecutor")
    if pros is not None:
        # 1/n > r  <=>  n * r < 1: the classes whose records exceed the prosecutor bound.
        checks.append(
            (
                f"risk.prosecutor <= {pros:g}",
                exp.LT(
                    this=exp.Mul(this=_q("c", "n"), expression=exp.Literal.number(repr(pros))),
                    expression=exp.Literal.number(1),
                ),
            )
        )
    return checks


def reference_context(reference: FrequencyTables | None, name: str) -> dict[str, Any]:
    """The template context naming the source's frequency table for sensitive attribute ``name``
    (t-closeness of a release compares with the source's distribution), or no reference."""
    if reference is None:
        return {"ref_freq": None}
    j = reference.s_names.index(name)
    return {
        "ref_freq": reference.freq,
        "ref_s_alias": reference.s_aliases[j],
        "ref_sid_alias": reference.sid_aliases[j],
    }


def assess(
    be: Backend,
    policy: Policy,
    relation: Relation | None = None,
    qi_exprs: list[Sql] | None = None,
    reference: FrequencyTables | None = None,
    population_exprs: list[Sql] | None = None,
    validate: Callable[[FrequencyTables], None] | None = None,
    class_check: tuple[Sql, Sql] | None = None,
    local: Callable[[FrequencyTables], AbstractContextManager[Backend]] | None = None,
    create: Callable[..., Relation] | None = None,
) -> dict[str, Any]:
    """Measure ``relation`` (default: the policy's source) and return the documented JSON object.

    ``validate`` is called with the frequency tables before anything is measured (the API checks
    there that every hierarchy covers the values present).

    ``reference``: the source's frequency tables, when a published relation is re-verified; the
    t-closeness and likeness checks then take p(w) from the source, as in the search, while every
    figure returned is the relation's own (sqlanon/measure/release_stats.py).
    ``population_exprs``: the QI expressions over the population's columns (a published release's
    node applied to the population), default the ``qi_exprs`` themselves.
    ``class_check``: (predicate, size alias), see :func:`build_frequency_tables`.
    ``local``: where the checks run once the frequency tables are built (the warehouse groups,
    a local DuckDB measures: :mod:`sqlanon.lattice.local_measure`); without a population table only.
    ``create``: builds the frequency table in place of ``be.create_temp`` (:func:`build_frequency_tables`).
    """
    rel = relation or policy.source
    check_columns(be, policy, rel)
    qi_names = [c.name for c in policy.quasi]
    s_names = [c.name for c in policy.sensitive]
    qi_exprs = qi_exprs or [ident(n) for n in qi_names]
    sort_keys = [_sort_key(policy, n, ident(f"s_{i}")) for i, n in enumerate(s_names)]
    check, n_alias = class_check or (None, None)
    near_checks = local is not None and policy.population is None
    ft = build_frequency_tables(
        be,
        rel,
        qi_exprs,
        qi_names,
        [ident(n) for n in s_names],
        s_names,
        sort_keys,
        class_check=check,
        n_alias=n_alias,
        ranks=not near_checks,
        create=create,
    )
    if validate is not None:
        validate(ft)
    if not near_checks:
        return assess_tables(be, policy, ft, rel, reference, population_exprs or qi_exprs)
    with local(ft) as near:
        numbered = number(near, ft, sort_keys)
        result = assess_tables(near, policy, numbered, rel, reference, population_exprs or qi_exprs)
    return {**result, "dialect": be.dialect}  # the relation's engine, not the checks' DuckDB


def number(be: Backend, grouped: FrequencyTables, sort_keys: list[Sql]) -> FrequencyTables:
    """``grouped`` (built without ranks) numbered where the checks run, by the same template: on
    Spark the unpartitioned windows of cid and sid_i order the whole grouped table in one task."""
    g = grouped
    return build_frequency_tables(
        be, g.freq, g.q_aliases, g.qi_names, g.s_aliases, g.s_names, sort_keys, weight=ident("cnt")
    )


def assess_tables(
    be: Backend,
    policy: Policy,
    ft: FrequencyTables,
    rel: Relation,
    reference: FrequencyTables | None = None,
    population_exprs: list[Sql] | None = None,
) -> dict[str, Any]:
    k_policy = policy.k_or_1()
    summary = be.query("assess/summary", classes=ft.classes, k=k_policy)[0]
    n_rows = int(summary[0] or 0)
    if n_rows == 0:
        raise EmptyRelationError(f"source: relation {str(rel)!r} is empty; there is nothing to measure")
    if reference is None:  # the source (not a release of it): its size derives k-map's k'
        resolve(policy, n_rows)
    n_classes, k_min = int(summary[1]), int(summary[2])
    hist = {int(size): int(cnt) for size, cnt in be.query("assess/size_histogram", classes=ft.classes)}

    l_div: dict[str, Any] = {}
    t_close: dict[str, Any] = {}
    likeness: dict[str, Any] = {}
    info: dict[str, Any] = {}
    stats_alias: dict[str, str] = {}
    joins = []
    for i, (name, alias) in enumerate(zip(ft.s_names, ft.s_aliases, strict=True)):
        sort_key = _sort_key(policy, name, alias)
        if sort_key != alias:
            bad = be.query("assess/order_check", freq=ft.freq, s_alias=alias, sort_key=sort_key)
            if bad:
                raise SqlanonError(
                    f"columns.{name}.order: does not list {len(bad)}+ value(s) present, e.g. {bad[0][0]!r}"
                )
        l_rank = _l_rank(policy, name)
        # Figures from the relation's own p(w); a re-verified release's t and likeness checks
        # against the source's (sqlanon/measure/release_stats.py: never shown).
        ref_ctx = reference_context(reference, name)
        stats, checked, hier = sensitive_tables(be, policy, ft, i, l_rank, reference, ref_ctx)
        stats_alias[name] = f"s{i}"
        joins.append({"rel": checked, "alias": ident(f"s{i}")})
        row = be.query("assess/sensitive_summary", stats=stats)[0]
        (l_distinct, min_h, max_kl, max_eq, max_ord, c_min, short, h_w, m, mi, cond_h, *lk) = row
        distinct_count = int(m)
        for r in policy.privacy.l:
            if r.attribute == name:
                refuse_unsatisfiable_l(r, distinct_count)
        rec_req = next((r for r in policy.privacy.l if r.attribute == name and r.kind == "recursive"), None)
        l_div[name] = {
            "distinct": int(l_distinct),
            "entropy": 2.0 ** float(min_h),
            "recursive": {
                "l": l_rank.rank,
                "c_min": None if int(short) > 0 or c_min is None else float(c_min),
                "classes_with_fewer_than_l_values": int(short),
                "c": rec_req.c if rec_req else None,
            },
        }
        t_close[name] = {"emd_equal": float(max_eq), "emd_ordered": float(max_ord), "kl": float(max_kl)}
        if hier:  # emd-hierarchical (sqlanon/measure/tcloseness_hier.py)
            t_close[name]["emd_hierarchical"] = hier_figure(be, stats)
        likeness[name] = likeness_figures(*lk, EPS)
        l_div[name].update(grassberger_figures(be, policy, name, stats))  # sqlanon.risk_extra
        t_req = next((r for r in policy.privacy.t if r.attribute == name), None)
        h = float(h_w)
        tops = {}
        for key, order_by in (("top_i1", "s.kl"), ("top_i2", "s.h_w - s.entropy")):
            rows = be.query(
                "assess/top_classes",
                stats=stats,
                classes=ft.classes,
                q_aliases=ft.q_aliases,
                order_by=Sql(order_by),
                limit=TOP_CLASSES,
            )
            tops[key] = [
                {
                    "class": dict(
                        zip(ft.qi_names, [_jsonable(v) for v in r[: len(ft.qi_names)]], strict=True)
                    ),
                    "size": int(r[-3]),
                    "i1": float(r[-2]),
                    "i2": float(r[-1]),
                }
                for r in rows
            ]
        info[name] = {
            "entropy": h,
            "distinct_values": distinct_count,
            "l_max": 2.0**h,
            "l_t": (2.0 ** (h - t_req.t)) if (t_req and t_req.measure == "kl") else None,
            "mutual_information": float(mi),
            "conditional_entropy": float(cond_h),
            **tops,
        }

    # Requirements, each with the records in the classes that violate it.
    checks = requirement_checks(policy, stats_alias)
    pjoins, pchecks = population_checks(be, policy, ft, population_exprs, EPS)  # k-map, delta-presence,
    joins, checks = joins + pjoins, checks + pchecks  # profitability per class, as ARX (measure/presence)
    allowed = math.floor(policy.privacy.suppression * n_rows + EPS)
    satisfied: dict[str, bool] = {}
    violations: dict[str, int] = {}
    any_records = 0
    any_classes = 0
    if checks:
        any_check = exp.or_(*[c for _, c in checks])
        row = be.query(
            "assess/violations",
            classes=ft.classes,
            joins=joins,
            checks=[_sql(c) for _, c in checks],
            any_check=_sql(any_check),
        )[0]
        for (label, _), v in zip(checks, row[: len(checks)], strict=True):
            violations[label] = int(v or 0)
            satisfied[label] = int(v or 0) <= allowed
        any_records, any_classes = int(row[-2] or 0), int(row[-1] or 0)

    risk = {
        "prosecutor_max": 1.0 / k_min,
        "prosecutor_avg": n_classes / n_rows,
        "marketer": n_classes / n_rows,
        "journalist": None,
        **uniqueness_risk(hist, policy.privacy.risk),  # sample and population uniqueness
        **sample_risks(hist, policy.privacy.risk),  # ARX's lowest risk, records at risk (risk_extra)
        "attributes": attribute_risks(be, ft),  # ARX's RiskModelAttributes (risk_extra)
        "wildcard": wildcard_risk(be, ft, policy.privacy.risk),  # '*' matches any (measure/wildcard)
    }
    if policy.population is not None:
        risk.update(_population_risk(be, policy, ft, population_exprs))
    presence, pres_ok = presence_figures(be, policy, ft, population_exprs, reference)
    satisfied.update(pres_ok)  # delta-presence's unmatched population class (sqlanon/measure/presence.py)
    for kind, bound in policy.privacy.risk.items():
        if kind == "prosecutor":
            continue  # class-local: checked with suppression above
        value = risk["prosecutor_avg" if kind == "average" else kind]
        satisfied[f"risk.{kind} <= {bound:g}"] = value is not None and value <= bound + EPS
    attack = attack_figures(be, policy, ft, population_exprs)  # Wan et al. with attack, per class
    prof = profitability_assessment(policy.privacy, k_min, _min_population(risk), attack)
    if checks or policy.privacy.risk or prof or pres_ok:
        satisfied["all"] = all(satisfied.values()) and any_records <= allowed

    return {
        "source": str(rel),
        "dialect": be.dialect,
        "quasi_identifiers": ft.qi_names,
        "sensitive": ft.s_names,
        "rows": n_rows,
        "classes": n_classes,
        "k": k_min,
        "class_sizes": {str(s): c for s, c in sorted(hist.items())},
        "records_below_k": int(summary[4]),
        "share_below_k": int(summary[4]) / n_rows,
        "classes_below_k": int(summary[5]),
        "policy_k": k_policy,
        "l_diversity": l_div,
        "t_closeness": t_close,
        "likeness": likeness,
        **({"presence": presence} if presence else {}),
        **({"profitability": prof["figures"]} if prof else {}),
        "information": info,
        "risk": risk,
        "satisfied": satisfied,
        "violations": violations,
        "suppression": {
            "limit": policy.privacy.suppression,
            "allowed_records": allowed,
            "records_violating_any": any_records,
            "classes_violating_any": any_classes,
        },
    }


def _population_risk(
    be: Backend, policy: Policy, ft: FrequencyTables, exprs: list[Sql] | None = None
) -> dict[str, float]:
    pop = policy.population
    assert pop is not None
    pcols = {c.name for c in be.require_columns(pop, "population")}
    for name in ft.qi_names:
        if name not in pcols:
            raise SqlanonError(f"population: relation {str(pop)!r} has no column {name!r}")
    join_on = exp.and_(
        *[exp.NullSafeEQ(this=_q("c", a.strip('"')), expression=_q("p", a.strip('"'))) for a in ft.q_aliases]
    )
    row = be.query(
        "assess/population",
        population=pop,
        classes=ft.classes,
        q_aliases=ft.q_aliases,
        q_exprs=exprs or [ident(n) for n in ft.qi_names],
        group_exprs=[e for e in exprs or [ident(n) for n in ft.qi_names] if not is_constant(e)],
        join_on=_sql(join_on),
    )[0]
    min_big_n, sum_ratio, n_rows, missing = row
    if int(missing or 0) > 0:
        raise SqlanonError(
            f"population: {int(missing)} class(es) of the source are larger in the source than in "
            f"{str(pop)!r}; the population must contain every source record"
        )
    return {"journalist": 1.0 / float(min_big_n), "marketer": float(sum_ratio) / float(n_rows)}


def _min_population(risk: dict[str, Any]) -> int | None:
    """The smallest population class among the classes (1 / journalist risk, a count: rounded so
    that 1 / (1 / 6) compares as 6), None without a population."""
    return round(1.0 / risk["journalist"]) if risk.get("journalist") else None


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)
