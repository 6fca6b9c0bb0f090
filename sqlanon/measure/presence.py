"""Delta-presence and k-map as assess figures and verdicts (definitions: :mod:`sqlanon.presence`).

One query (``templates/assess/presence.sql.j2``) joins the measured relation's classes with the
population generalised the same way; :func:`sqlanon.measure.assessment.assess_tables` calls
:func:`presence_figures` once the population's own checks (every class present in it, no class
larger there than in the population: ``_population_risk``) have passed. The search, the publish
re-verification and ``evaluate`` all reach these verdicts through ``assess``.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.policy import Policy
from sqlanon.sql.compile import CANONICAL, Sql, ident, lit


def presence_figures(
    be: Backend,
    policy: Policy,
    ft: Any,
    exprs: list[Sql] | None,
    allowed: int,
    eps: float,
    others: tuple[list[dict[str, Any]], Sql | None] = ([], None),
    reference: Any = None,
) -> tuple[dict[str, Any], dict[str, bool], dict[str, int], tuple[int, int] | None]:
    """(figures, satisfied, violations, union) of the policy's delta-presence and k-map against
    its population relation; nothing (union None) where the policy asks neither (or only the
    estimated k-map, which is a per-class size check: :func:`sqlanon.presence.presence_checks`).

    ``others`` = (statistics joins, predicate): assess's other per-class checks, any of them
    failing (None: none). ``union`` = (records, classes) of the classes that fail a bound here or
    one of those: the records a release must suppress, each counted once, since ARX's
    HashGroupify makes a class an outlier when any criterion fails it and compares the sum of
    the outliers with the limit. Each requirement within the budget alone is not enough.

    ``reference``: the source's frequency tables when a release is re-verified. A population
    class with no record in the release is then one without source records (delta = 0, which no
    suppression mends) only if the source generalised to the node has no record in it either: a
    class the release suppressed (for k, say) has source records, and ARX suppresses it rather
    than fail (HashGroupify's rule is for ``count == 0``). So the source's classes at the node are
    counted from ``reference`` (the node's expressions over its raw QI columns), and every one of
    them has a population class (the population contains the source: ``_population_risk``).

    ``ft``: the measured relation's :class:`~sqlanon.measure.assessment.FrequencyTables`;
    ``exprs``: the QI expressions over the population's columns (the release's node), default the
    plain columns. A class that violates can be suppressed (its records count against ``allowed``)
    except, for delta-presence, a population class no measured class matches (delta = 0 < min):
    ARX fails the whole transformation then, and so does this verdict. The figures:
    ``k_map.min_population_class`` (k-map holds for every k up to it) and ``delta_presence``'s
    ``min`` and ``max`` over the measured classes (0 as ``min`` where a population class is
    unmatched)."""
    pres = policy.privacy.presence
    if pres is None or not pres.needs_population:
        return {}, {}, {}, None
    pop = policy.population
    if pop is None:  # the policy refuses this; a release measured without its node lands here
        raise SqlanonError("population: delta-presence and k-map need the population relation")
    exprs = exprs or [ident(n) for n in ft.qi_names]
    join_on = exp.and_(
        *[
            exp.NullSafeEQ(
                this=exp.column(a.strip('"'), table="c", quoted=True),
                expression=exp.column(a.strip('"'), table="p", quoted=True),
            )
            for a in ft.q_aliases
        ]
    )
    kmap = pres.kmap if pres.kmap is not None and not pres.kmap.estimated else None
    delta = pres.delta
    row = be.query(
        "assess/presence",
        population=pop,
        classes=ft.classes,
        q_aliases=ft.q_aliases,
        q_exprs=exprs,
        group_exprs=[e for e in exprs if exp.maybe_parse(e, dialect=CANONICAL).find(exp.Column)],
        join_on=Sql(join_on.sql(CANONICAL)),
        joins=others[0],
        other=others[1] if others[1] is not None else Sql("1 = 0"),
        kmap_k=lit(kmap.k if kmap else 0),
        dmin=lit(float(delta.dmin - eps) if delta else -1.0),
        dmax=lit(float(delta.dmax + eps) if delta else 2.0),
        **_source_classes(reference, ft.qi_names, exprs),
    )[0]
    min_big_n, kmap_records, min_delta, max_delta, delta_records, unmatched, unmatched_records = row[:7]
    union = (int(row[7] or 0), int(row[8] or 0))
    # Population classes without a source record: the release's unmatched ones, or (a release
    # re-verified) the population's classes less the source's at the node.
    no_source = unmatched if reference is None else int(row[9] or 0) - int(row[10] or 0)
    figures: dict[str, Any] = {}
    satisfied: dict[str, bool] = {}
    violations: dict[str, int] = {}
    if kmap is not None:
        bad = int(kmap_records or 0)
        figures["k_map"] = {"k": kmap.k, "min_population_class": int(min_big_n or 0)}
        satisfied[kmap.label] = bad <= allowed
        violations[kmap.label] = bad
    if delta is not None:
        bad = int(delta_records or 0)
        unmatched = int(unmatched or 0)
        stuck = no_source > 0 and delta.dmin > 0  # delta = 0 < min where suppression cannot help
        figures["delta_presence"] = {
            "min": 0.0 if unmatched > 0 else float(min_delta),
            "max": float(max_delta),
            "dmin": delta.dmin,
            "dmax": delta.dmax,
            "unmatched_population_classes": unmatched,
            "unmatched_population_records": int(unmatched_records or 0),
        }
        satisfied[delta.label] = bad <= allowed and not stuck
        violations[delta.label] = bad
    return figures, satisfied, violations, union


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
