"""Delta-disclosure privacy and beta-likeness as per-class checks and as assess figures.

The definitions and their sources are in :mod:`sqlanon.likeness`; the per-class statistics ``dd``,
``bl`` and ``ble`` they read come from ``templates/_macros/sensitive.sql.j2``. The checks join the
others of :func:`sqlanon.measure.assessment.requirement_checks`, so that the search, assess, the
publish re-verification and the release's own per-class check all apply them alike.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlanon.likeness import checked_attributes
from sqlanon.policy import Policy

__all__ = ["checked_attributes", "likeness_checks", "likeness_figures"]


def _col(alias: str, name: str) -> exp.Column:
    return exp.column(name, table=exp.to_identifier(alias))


def _num(x: float) -> exp.Literal:
    return exp.Literal.number(repr(float(x)))


def likeness_checks(
    policy: Policy, stats_alias: dict[str, str], eps: float
) -> list[tuple[str, exp.Expression]]:
    """(label, violation predicate) per likeness requirement, over the per-attribute table.

    ``eps`` is assess's tolerance: a non-strict bound (beta) is met up to ``eps`` (an exact
    (q - p)/p = beta satisfies, whatever the last bit of the division); delta-disclosure's bound is
    strict (ARX: ``|log2(q/p)| >= delta`` fails), so an exact ``|log2(q/p)| = delta`` must fail
    however the logarithm rounds: the check fails from ``delta - eps`` on.

    >>> from sqlanon.likeness import LikenessRequirement as R
    >>> from types import SimpleNamespace as NS
    >>> pol = NS(privacy=NS(likeness=(R("w", "beta-enhanced", 0.5),)))
    >>> [(label, e.sql("duckdb")) for label, e in likeness_checks(pol, {"w": "a0"}, 1e-9)]
    [('beta[w]: enhanced likeness <= 0.5', 'a0.bl > 0.500000001 OR a0.ble > 1e-09')]
    """
    out: list[tuple[str, exp.Expression]] = []
    for r in policy.privacy.likeness:
        a = stats_alias[r.attribute]
        if r.model == "delta-disclosure":
            check: exp.Expression = exp.GTE(this=_col(a, "dd"), expression=_num(r.bound - eps))
        else:
            check = exp.GT(this=_col(a, "bl"), expression=_num(r.bound + eps))
            if r.model == "beta-enhanced":  # (q - p)/p > min(beta, -ln p) <=> > beta or + ln p > 0
                check = exp.or_(check, exp.GT(this=_col(a, "ble"), expression=_num(eps)))
        out.append((r.label, check))
    return out


def likeness_figures(max_dd: Any, max_bl: Any, max_ble: Any, eps: float) -> dict[str, float | None]:
    """The table-wide figures of one sensitive attribute (maxima over its classes), as assess's
    JSON gives them: ``delta_disclosure`` (the release is delta-disclosure private for every
    delta above it), ``beta`` (the least beta basic beta-likeness holds for) and ``beta_enhanced``
    (the least beta enhanced beta-likeness holds for; None where some value's
    (q - p)/p exceeds -ln p, so that no beta suffices)."""
    bl = float(max_bl)
    return {
        "delta_disclosure": float(max_dd),
        "beta": bl,
        "beta_enhanced": bl if float(max_ble) <= eps else None,
    }
