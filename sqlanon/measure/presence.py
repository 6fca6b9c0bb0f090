"""Delta-presence, k-map and the profitability games that read the population or a class's
labels, per class as ARX 3.9.2 decides them (definitions: :mod:`sqlanon.presence`,
:mod:`sqlanon.profitability`).

ARX checks every criterion on each class (``HashGroupify.isPrivacyModelFulfilled``): a class that
fails any is an outlier, suppressed where the outliers' records together stay within the
suppression limit. So do these: :func:`population_checks` gives ``assess`` one temporary table of
each class's population records and information loss (``templates/assess/population_classes.sql.j2``)
and the checks over it, counted with k's; :func:`release_filter` drops the failing classes from a
node's release (``templates/_macros/population_filter.sql.j2``), which the search measures for
each candidate and publish re-verifies. :func:`presence_figures` reports delta-presence's and
k-map's figures and the one failure suppression cannot mend (a population class without a source
record).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.measure.profitability_attack import information_loss, publisher_payout
from sqlanon.policy import Policy
from sqlanon.profitability import Profitability
from sqlanon.sql.compile import CANONICAL, Sql, ident


def class_predicates(
    policy: Policy, n: exp.Expression, big_n: exp.Expression, il: exp.Expression | None, eps: float
) -> list[tuple[str, exp.Expression]]:
    """(label, violation predicate) of every per-class criterion that reads the population or the
    class's labels, over a class's records ``n``, its population records ``big_n`` (NULL where the
    population lacks the class, or none is read) and its information loss ``il``: k-map (ARX's
    ``KMap``: pcount >= k), delta-presence (``DPresence``: dmin <= n / pcount <= dmax, up to
    ``eps``), the journalist's no-attack game (``ProfitabilityJournalistNoAttack``: pcount >= K)
    and the attack games (``ProfitabilityProsecutor`` / ``Journalist``: the publisher's payout > 0).

    ARX decides each of them per class (HashGroupify's ``isPrivacyModelFulfilled``): a class that
    fails one is an outlier, suppressed with the classes that fail k, l or t, and the node is
    anonymous where the outliers' records stay within the suppression limit. So they are checks
    like k's, for assess (:func:`population_checks`) and the release (:func:`release_filter`).
    A NULL ``big_n`` fails k-map, delta-presence and the journalist's threshold (fail-closed)."""
    pres = policy.privacy.presence
    prof: Profitability | None = policy.privacy.profitability
    out: list[tuple[str, exp.Expression]] = []
    missing = exp.Is(this=big_n.copy(), expression=exp.Null())

    def below(bound: int) -> exp.Expression:
        return exp.or_(missing.copy(), exp.LT(this=big_n.copy(), expression=exp.Literal.number(bound)))

    if pres is not None and pres.kmap is not None and not pres.kmap.estimated:
        out.append((pres.kmap.label, below(pres.kmap.k)))
    if pres is not None and pres.delta is not None:
        delta = exp.Div(this=exp.cast(n.copy(), exp.DataType.build("double")), expression=big_n.copy())
        lo = exp.LT(this=delta.copy(), expression=_double(pres.delta.dmin - eps))
        hi = exp.GT(this=delta, expression=_double(pres.delta.dmax + eps))
        out.append((pres.delta.label, exp.or_(missing.copy(), lo, hi)))
    if prof is not None and prof.model == "journalist" and not prof.attack:
        out.append((prof.label, below(prof.threshold)))
    if prof is not None and prof.attack:
        assert il is not None
        size = n if prof.model == "prosecutor" else exp.Coalesce(this=big_n.copy(), expressions=[n.copy()])
        prob = exp.Div(this=_double(1.0), expression=size.copy())
        payout = publisher_payout(prof, il, prob)
        out.append((prof.label, exp.Not(this=exp.Paren(this=exp.GT(this=payout, expression=_double(0.0))))))
    return out


def _double(v: float) -> exp.Expression:
    return exp.cast(exp.Literal.number(repr(float(v))), exp.DataType.build("double"))


def reads_population(policy: Policy) -> bool:
    """Whether a per-class criterion of :func:`class_predicates` applies to the policy."""
    pres = policy.privacy.presence
    prof = policy.privacy.profitability
    return (pres is not None and pres.needs_population) or (
        prof is not None and (prof.attack or prof.model == "journalist")
    )


def _pop_context(policy: Policy, exprs: list[Sql], aliases: list[Sql], left: str) -> dict[str, Any]:
    """The population's classes at the node (``pop``: ``exprs`` over its columns, as ``aliases``)
    and the NULL-safe join of table ``left``'s ``aliases`` with them; no population without one."""
    if policy.population is None:
        return {"population": None}
    join_on = exp.and_(
        *[
            exp.NullSafeEQ(
                this=exp.column(a.strip('"'), table=left, quoted=True),
                expression=exp.column(a.strip('"'), table="p", quoted=True),
            )
            for a in aliases
        ]
    )
    return {
        "population": policy.population,
        "q_exprs": exprs,
        "group_exprs": [e for e in exprs if exp.maybe_parse(e, dialect=CANONICAL).find(exp.Column)],
        "join_on": Sql(join_on.sql(CANONICAL)),
    }


def population_checks(
    be: Backend, policy: Policy, ft: Any, exprs: list[Sql] | None, eps: float
) -> tuple[list[dict[str, Any]], list[tuple[str, exp.Expression]]]:
    """assess's joins and checks for :func:`class_predicates` (none where none applies): one
    temporary table ``pc`` per measured relation, its class id ``cid``, population records ``big_n``
    (the population generalised by ``exprs``, the node's expressions over its columns) and
    information loss ``il``, joined to the class table like the sensitive statistics, so that
    :func:`sqlanon.measure.assessment.assess_tables` counts each check's records and the union of
    every failing class against the suppression limit as it does for k."""
    if not reads_population(policy):
        return [], []
    if policy.population is not None:  # assess/population's error, before any query reads it
        have = {c.name for c in be.require_columns(policy.population, "population")}
        if lacking := [n for n in ft.qi_names if n not in have]:
            raise SqlanonError(
                f"population: relation {str(policy.population)!r} has no column {lacking[0]!r}"
            )
    prof = policy.privacy.profitability
    attack = prof is not None and prof.attack
    il = information_loss(policy, ft.q_aliases) if attack else _double(0.0)
    pc = be.create_temp(
        "pcls",
        "assess/population_classes",
        classes=ft.classes,
        q_aliases=ft.q_aliases,
        il=Sql(il.sql(CANONICAL)),
        **_pop_context(policy, exprs or [ident(n) for n in ft.qi_names], ft.q_aliases, "c"),
    )
    checks = class_predicates(policy, _col("n", "c"), _col("big_n", "pc"), _col("il", "pc"), eps)
    return [{"rel": pc, "alias": ident("pc")}], checks


def release_filter(policy: Policy, qi_exprs: dict[str, Sql], eps: float) -> dict[str, Any] | None:
    """The context of ``_macros/population_filter.sql.j2``, which removes from a node's release
    (``templates/publish/_release.sql.j2``, already without the classes that fail k, l or t) the
    classes that fail :func:`class_predicates`, so that the release suppresses every outlier ARX
    would. ``qi_exprs``: each quasi-identifier's expression in the release (the node's
    generalisation of the source column of that name; the same expression over the population's
    column generalises the population), published under the column's name; the release's classes
    are grouped by those columns. None where no criterion applies, and with ``suppression_mode:
    mask`` or perturbation (their classes are not those columns: such a release keeps the failing
    class, and the search's re-verification passes the node over, stricter than ARX)."""
    if not reads_population(policy) or policy.privacy.suppression_mode == "mask" or policy.perturbed:
        return None
    names = [c.name for c in policy.quasi]
    if set(names) - set(qi_exprs):
        raise SqlanonError("internal: the release lacks a quasi-identifier column")
    prof = policy.privacy.profitability
    aliases = [ident(f"sqlanon_pq_{i}") for i in range(len(names))]
    il = information_loss(policy, aliases) if prof is not None and prof.attack else None
    big_n = _col("big_n", "p") if policy.population is not None else exp.Null()
    checks = class_predicates(policy, _col("n", "c"), big_n, il, eps)
    match = exp.and_(
        *[
            exp.NullSafeEQ(this=exp.column(n, table="r", quoted=True), expression=_col(a.strip('"'), "b"))
            for n, a in zip(names, aliases, strict=True)
        ]
    )
    return {
        "cols": [ident(n) for n in names],
        "q": aliases,
        "check": Sql(exp.or_(*[c for _, c in checks]).sql(CANONICAL)),
        "match": Sql(match.sql(CANONICAL)),
        **_pop_context(policy, [qi_exprs[n] for n in names], aliases, "c"),
    }


def _col(name: str, table: str) -> exp.Column:
    return exp.column(name, table=exp.to_identifier(table), quoted=True)


def presence_figures(
    be: Backend,
    policy: Policy,
    ft: Any,
    exprs: list[Sql] | None,
    reference: Any = None,
) -> tuple[dict[str, Any], dict[str, bool]]:
    """(figures, verdicts) of the policy's delta-presence and k-map against its population
    relation; nothing where the policy asks neither (or only the estimated k-map, which is a
    per-class size check: :func:`sqlanon.presence.presence_checks`). Each class's verdict, and its
    suppression, is :func:`population_checks`'s; the verdict here is the one rule suppression
    cannot mend, HashGroupify's: a population class with no source record (delta = 0) fails
    delta-presence with min > 0 and the whole node, unless the policy has a criterion with a
    minimal class size (k, l, the estimated k-map, the prosecutor's no-attack game), which ARX
    checks first and which passes such a class over without counting it (``isPrivacyModelFulfilled``
    returns 0 for count 0 < the minimal size, before delta-presence is asked).

    ``reference``: the source's frequency tables when a release is re-verified. A population
    class with no record in the release is then one without source records only if the source
    generalised to the node has no record in it either: a class the release suppressed has
    source records, and ARX suppresses it rather than fail. So the source's classes at the node
    are counted from ``reference`` (the node's expressions over its raw QI columns), and every one
    of them has a population class (the population contains the source: ``_population_risk``).

    ``ft``: the measured relation's :class:`~sqlanon.measure.assessment.FrequencyTables`;
    ``exprs``: the QI expressions over the population's columns (the release's node), default the
    plain columns. The figures: ``k_map.min_population_class`` (k-map holds for every k up to it)
    and ``delta_presence``'s ``min`` and ``max`` over the measured classes (0 as ``min`` where a
    population class is unmatched)."""
    pres = policy.privacy.presence
    if pres is None or not pres.needs_population:
        return {}, {}
    pop = policy.population
    if pop is None:  # the policy refuses this; a release measured without its node lands here
        raise SqlanonError("population: delta-presence and k-map need the population relation")
    exprs = exprs or [ident(n) for n in ft.qi_names]
    row = be.query(
        "assess/presence",
        classes=ft.classes,
        q_aliases=ft.q_aliases,
        **_pop_context(policy, exprs, ft.q_aliases, "c"),
        **_source_classes(reference, ft.qi_names, exprs),
    )[0]
    min_big_n, min_delta, max_delta, unmatched, unmatched_records, pop_classes, src_classes = row
    # Population classes without a source record: the release's unmatched ones, or (a release
    # re-verified) the population's classes less the source's at the node.
    no_source = int(unmatched or 0) if reference is None else int(pop_classes or 0) - int(src_classes or 0)
    figures: dict[str, Any] = {}
    satisfied: dict[str, bool] = {}
    if pres.kmap is not None and not pres.kmap.estimated:
        figures["k_map"] = {"k": pres.kmap.k, "min_population_class": int(min_big_n or 0)}
    delta = pres.delta
    if delta is not None:
        unmatched = int(unmatched or 0)
        figures["delta_presence"] = {
            "min": 0.0 if unmatched > 0 else float(min_delta),
            "max": float(max_delta),
            "dmin": delta.dmin,
            "dmax": delta.dmax,
            "unmatched_population_classes": unmatched,
            "unmatched_population_records": int(unmatched_records or 0),
        }
        if no_source > 0 and delta.dmin > 0 and not has_minimal_class_size(policy):
            satisfied[delta.label] = False  # delta = 0 < min where suppression cannot help
    return figures, satisfied


def has_minimal_class_size(policy: Policy) -> bool:
    """Whether ARX's configuration would have a minimal class size (``getMinimalGroupSize`` below
    Integer.MAX_VALUE): k-anonymity, l-diversity, the estimated k-map, the prosecutor's no-attack
    game (each ``isMinimalClassSizeAvailable``)."""
    priv = policy.privacy
    km = priv.presence.kmap if priv.presence is not None else None
    prof = priv.profitability
    return bool(
        priv.k
        or priv.l
        or (km is not None and km.estimated)
        or (prof is not None and prof.model == "prosecutor" and not prof.attack)
    )


def _source_classes(reference: Any, qi_names: list[str], exprs: list[Sql]) -> dict[str, Any]:
    """The template's ``src_freq`` and ``src_group``: the source's frequency table and the node's
    expressions rewritten over its raw QI columns (``q_0``, ...), or no ``src_freq`` without a
    reference (the measured relation is the source itself)."""
    if reference is None:
        return {"src_freq": None, "src_group": []}
    alias = {n: a for n, a in zip(reference.qi_names, reference.q_aliases, strict=True)}

    def over_ref(e: Sql) -> exp.Expression:
        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and node.name in alias:
                return exp.maybe_parse(alias[node.name], dialect=CANONICAL).copy()
            return node

        return exp.maybe_parse(e, dialect=CANONICAL).copy().transform(swap)

    rewritten = [over_ref(e) for e in exprs]
    if set(qi_names) - set(alias):
        raise SqlanonError("internal: the source's frequency table lacks a quasi-identifier")
    group = [Sql(e.sql(CANONICAL)) for e in rewritten if e.find(exp.Column)]
    return {"src_freq": reference.freq, "src_group": group}
