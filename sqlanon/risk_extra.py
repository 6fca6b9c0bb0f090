"""ARX 3.9.2's remaining risk figures and estimators (issue 35), beside :mod:`sqlanon.uniqueness`.

* Grassberger's entropy estimator for entropy l-diversity (``EntropyLDiversity(l, GRASSBERGER)``):
  ``privacy.l.<attr>: {kind: entropy, l: L, estimator: grassberger}``. ARX's estimate of a class's
  entropy in nats is G(n) - sum_w c_w G(c_w) / n with G ARX's table and series
  (``templates/_macros/sensitive.sql.j2``, macro ``grassberger_g``: the per-class figure
  ``entropy_g`` is computed in the database); a class passes when it is at least ln l and the
  class holds at least ceil(l) distinct values (ARX's ``LDiversity.minSize``).
* ``AverageReidentificationRisk(average, highestRisk, recordsAtRisk)``'s second bound:
  ``privacy.risk.records_at_risk: {risk: R, share: S}``: the share of records in classes smaller
  than ARX's size threshold for R (``ParameterTranslation.getSizeThreshold``: ceil(1/R) up to
  ARX's relative precision) is at most S.
* ``RiskModelSampleRisks`` / ``RiskModelSampleSummary``: the lowest prosecutor risk and the shares
  of records at the highest and at the lowest risk, from the class-size histogram.
* ``RiskModelAttributes``: per set of quasi-identifiers, distinction (classes / records) and
  separation (the share of record pairs that differ on the set: (n^2 - sum s^2) / (n (n - 1))),
  from one GROUPING SETS query over the class table (``templates/assess/attribute_risks.sql.j2``).
  ARX lists every non-empty subset of the QIs (2^q - 1); sqlanon lists the subsets by size, 1, 2,
  ... while their number stays within :data:`MAX_ATTRIBUTE_SETS`, and always the whole set.

Every figure but ``entropy_g`` is a function of a few numbers per class or per set: they run here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlanon.errors import PolicyError

RECORDS_AT_RISK = "records_at_risk"
#: The most QI subsets ``assess`` reports distinction and separation for (plus the whole set).
MAX_ATTRIBUTE_SETS = 64
#: ARX's ParameterTranslation.RELATIVE_THRESHOLD_PRECISION.
_ARX_PRECISION = 0.01


class RecordsAtRiskBound(float):
    """``privacy.risk.records_at_risk``: the share bound (a float, as the other risk bounds are),
    carrying the highest risk ``risk`` whose exceeding records it counts."""

    risk: float = 1.0

    @property
    def size_threshold(self) -> int:
        """ARX's ``ParameterTranslation.getSizeThreshold(risk)``: records in classes smaller than
        this are at risk (1/R rounded down unless that moves the risk by >= 1 % of R)."""
        size = 1.0 / self.risk
        floor = math.floor(size)
        if 1.0 / floor - 1.0 / size >= _ARX_PRECISION * self.risk:
            floor += 1
        return int(floor)


def parse_records_at_risk(raw: Any) -> RecordsAtRiskBound:
    """``{risk: R, share: S}``, 0 < R <= 1, 0 <= S <= 1; a bad value is one PolicyError naming the key."""
    key = f"privacy.risk.{RECORDS_AT_RISK}"
    if not isinstance(raw, Mapping):
        raise PolicyError(f"policy key {key!r}: expected a mapping {{risk, share}}")
    for k in raw:
        if k not in ("risk", "share"):
            raise PolicyError(f"policy key '{key}.{k}': unknown key; allowed: risk, share")
    vals = {}
    for k, lo_open in (("risk", True), ("share", False)):
        v = raw.get(k)
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or not ((0 < v) if lo_open else (0 <= v)) or v > 1:
            want = "(0, 1]" if lo_open else "[0, 1]"
            raise PolicyError(f"policy key '{key}.{k}': expected a number in {want}, got {v!r}")
        vals[k] = float(v)
    out = RecordsAtRiskBound(vals["share"])
    out.risk = vals["risk"]
    return out


@dataclass(frozen=True)
class LRank:
    """What ``_macros/sensitive.sql.j2``'s per-class statistics need to know of one sensitive
    attribute's l requirements: ``rank``, the recursive l's rank (rendered as a literal), and
    ``grassberger``, whether a Grassberger entropy l is asked of the attribute, so that every
    caller (the search, assess, publish, mondrian, metrics) computes ARX's estimate exactly where
    a check reads it, and nowhere else (a view's readers would pay for it on every read)."""

    rank: int
    grassberger: bool = False


def l_rank_of(rank: int, policy: Any, attr: str) -> LRank:
    """``rank`` as an :class:`LRank` for ``attr`` under ``policy``."""
    grassberger = any(
        r.attribute == attr and r.kind == "entropy" and r.estimator == "grassberger" for r in policy.privacy.l
    )
    return LRank(rank, grassberger)


def grassberger_violation(
    entropy_g: exp.Expression,
    distinct: exp.Expression,
    l: float,  # noqa: E741 - the literature's name
    bound: float,
) -> exp.Expression:
    """A class violates Grassberger entropy l when its estimate (bits) is below ``bound``
    (log2 l less assess's tolerance) or it holds fewer than ceil(l) distinct values (ARX)."""
    return exp.or_(
        exp.LT(this=entropy_g, expression=exp.Literal.number(repr(bound))),
        exp.LT(this=distinct, expression=exp.Literal.number(math.ceil(l))),
    )


def sample_risks(hist: Mapping[int, int], risk_bounds: Mapping[str, float]) -> dict[str, Any]:
    """``RiskModelSampleRisks``' lowest risk and the shares of records at the highest and lowest
    risk, and the share of records at risk for a ``records_at_risk`` bound, from the class-size
    histogram (size -> classes)."""
    n = sum(s * c for s, c in hist.items())
    if not n:
        return {}
    lo, hi = min(hist), max(hist)
    out: dict[str, Any] = {
        "prosecutor_min": 1.0 / hi,
        "share_at_highest": lo * hist[lo] / n,
        "share_at_lowest": hi * hist[hi] / n,
    }
    bound = risk_bounds.get(RECORDS_AT_RISK)
    if isinstance(bound, RecordsAtRiskBound):
        below = sum(s * c for s, c in hist.items() if s < bound.size_threshold)
        out[RECORDS_AT_RISK] = below / n
        out["records_at_risk_size"] = bound.size_threshold
    return out


def attribute_sets(q: int) -> list[tuple[int, ...]]:
    """The QI subsets (indices) assess reports: by size while within :data:`MAX_ATTRIBUTE_SETS`,
    then the whole set.

    >>> len(attribute_sets(4)), len(attribute_sets(8))
    (15, 37)
    """
    out: list[tuple[int, ...]] = []
    for size in range(1, q + 1):
        sets = list(itertools.combinations(range(q), size))
        if len(out) + len(sets) > MAX_ATTRIBUTE_SETS and size < q:
            break
        out += sets
    if not out or len(out[-1]) != q:
        out.append(tuple(range(q)))
    return out


def attribute_risks(be: Any, ft: Any) -> list[dict[str, Any]]:
    """``RiskModelAttributes``: distinction and separation per QI subset, one query."""
    q = len(ft.q_aliases)
    if q == 0:
        return []
    sets = attribute_sets(q)
    rows = be.query(
        "assess/attribute_risks",
        classes=ft.classes,
        q_aliases=ft.q_aliases,
        sets=[[ft.q_aliases[i] for i in s] for s in sets],
    )
    # GROUPING(q_i) is 1 where q_i is not grouped: the mask of a set has the bits of the others.
    by_mask = {int(r[0]): (int(r[1]), int(r[2]), float(r[3])) for r in rows}
    full = (1 << q) - 1
    out = []
    for s in sets:
        classes, n, sq = by_mask[full - sum(1 << i for i in s)]
        pairs = n * (n - 1.0)
        out.append(
            {
                "quasi_identifiers": [ft.qi_names[i] for i in s],
                "distinction": classes / n,
                "separation": (n * float(n) - sq) / pairs if pairs else 0.0,
            }
        )
    return out


def grassberger_figures(be: Any, policy: Any, name: str, stats: Any) -> dict[str, Any]:
    """``{"entropy_grassberger": l}``: the largest l Grassberger's entropy l-diversity allows on
    ``name`` (assess's per-class table ``stats``), beside Shannon's ``entropy``: one aggregate over
    the per-class table (``policy`` and ``name`` are kept for a caller that wants it per rule)."""
    del policy, name
    (v,) = be.query("assess/grassberger", stats=stats)[0]
    return {"entropy_grassberger": None if v is None else float(v)}


def describe_risks(risk: Mapping[str, Any]) -> str:
    """One console line: ARX's lowest risk, the records at either end, records at risk, and the
    QI set that singles out the most records alone besides the whole set (lowest distinction wins ties)."""
    if "prosecutor_min" not in risk:
        return ""
    out = (
        f"risk: prosecutor min {risk['prosecutor_min']:.4g}; records at the highest risk "
        f"{risk['share_at_highest']:.2%}, at the lowest {risk['share_at_lowest']:.2%}"
    )
    if RECORDS_AT_RISK in risk:
        out += f"; records in classes below {risk['records_at_risk_size']}: {risk[RECORDS_AT_RISK]:.2%}"
    sets = [
        a
        for a in risk.get("attributes", [])
        if 0 < len(a["quasi_identifiers"]) < len(risk["attributes"][-1]["quasi_identifiers"])
    ]
    if sets:
        top = max(sets, key=lambda a: (a["distinction"], -len(a["quasi_identifiers"])))
        out += (
            f"; most distinct QI subset {', '.join(top['quasi_identifiers'])}: distinction "
            f"{top['distinction']:.4g}, separation {top['separation']:.4g}"
        )
    return out
