"""ARX 3.9.2's ``RiskModelSampleWildcard`` (issue 35): the prosecutor risk when a suppressed cell
('*') is a wildcard that matches any value (El Emam's sample risk, ARX's reading of suppression).

A record's risk is 1 / (the records of every class that agrees with its class on each cell where
neither holds '*'), itself included. ARX's figures: the average over the records, the highest and
the lowest, and the share of records whose matching set is smaller than the size a
``records_at_risk`` risk bound implies (``ParameterTranslation.getSizeThreshold``). Without a '*'
in the class table these are the ordinary prosecutor figures.

Computed in the database from the class table (``templates/assess/wildcard_risk.sql.j2``) by star
pattern (the set of QIs where a class holds '*'): a class is compared with the classes of each
pattern through one hash join on a key that masks both sides to '*' where either pattern has it,
never cell by cell (issue 33: that nested loop over classes x wildcard classes was 5.8-7.3 s of a
1e5-row Mondrian publish on PostgreSQL). The join probes each class once per star pattern; above
:data:`MAX_WILDCARD_ROWS` such probes the figure is skipped with a note.

Records '*' in every quasi-identifier are left out, of the matches and of the records, as ARX
does (``DataHandleInput.isOutlier``: a record suppressed in all QIs is an outlier); a table of
nothing else has figures 0, as in ARX.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlanon.risk_extra import RECORDS_AT_RISK, RecordsAtRiskBound

STAR = "*"  # sqlanon.transform.hierarchy's suppression label (a layer above: not imported)
MAX_WILDCARD_ROWS = 25_000_000  # classes x star patterns: the probe side of the wildcard risk's hash join


def wildcard_risk(be: Any, ft: Any, risk_bounds: Mapping[str, float]) -> dict[str, Any]:
    """``risk.wildcard``: ARX's RiskModelSampleWildcard figures on the class table ``ft.classes``,
    or ``{"skipped": why}`` above the row bound; ``{}`` without quasi-identifiers."""
    if not ft.q_aliases:
        return {}
    counts = be.query("assess/wildcard_count", classes=ft.classes, q_aliases=ft.q_aliases, wildcard=STAR)
    by_pattern = {"".join(str(int(f)) for f in row[:-1]): int(row[-1]) for row in counts}
    n_wild = sum(c for p, c in by_pattern.items() if "1" in p)
    patterns = sorted(p for p in by_pattern if "0" in p)  # a class '*' everywhere is left out
    star_patterns = [p for p in patterns if "1" in p]
    n_classes = sum(by_pattern[p] for p in patterns)
    if n_classes * len(star_patterns) > MAX_WILDCARD_ROWS:
        why = f"{n_classes} classes x {len(star_patterns)} patterns of '*' exceed {MAX_WILDCARD_ROWS:,} rows"
        return {
            "skipped": why,
            "wildcard_classes": n_wild,
        }
    bound = risk_bounds.get(RECORDS_AT_RISK)
    size = bound.size_threshold if isinstance(bound, RecordsAtRiskBound) else 0
    avg = hi = lo = at_risk = None  # only classes '*' everywhere: figures 0, as in ARX
    if patterns:
        avg, hi, lo, at_risk, _ = be.query(
            "assess/wildcard_risk",
            classes=ft.classes,
            q_aliases=ft.q_aliases,
            wildcard=STAR,
            patterns=patterns,
            star_patterns=star_patterns,
            size_threshold=size,
        )[0]
    out: dict[str, Any] = {
        "average": float(avg or 0.0),
        "highest": float(hi or 0.0),
        "lowest": float(lo or 0.0),
        "wildcard_classes": n_wild,
    }
    if size:
        out[RECORDS_AT_RISK] = float(at_risk or 0.0)
        out["records_at_risk_size"] = size
    return out


def describe_wildcard(risk: Mapping[str, Any]) -> str:
    """One console line, only where the table has '*' cells (otherwise the prosecutor line says it)."""
    w = risk.get("wildcard") or {}
    if not w.get("wildcard_classes"):
        return ""
    if "skipped" in w:
        return f"risk with '*' as wildcard: skipped ({w['skipped']})"
    out = f"risk with '*' as wildcard: avg {w['average']:.4g}, highest {w['highest']:.4g}, "
    out += f"lowest {w['lowest']:.4g}"
    if RECORDS_AT_RISK in w:
        out += f"; records matching fewer than {w['records_at_risk_size']}: {w[RECORDS_AT_RISK]:.2%}"
    return out
