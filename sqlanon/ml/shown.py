"""The metrics the report shows of a release: only those a reader can work out from the release
and the counts the page states (the source's records N, the suppressed S).

The others read source values the release hides: NCP divides by the range of the source's values
(its oldest and youngest person, whether published or suppressed), the entropies and mutual
informations count the source's values inside each published band, multiple use counts the
sensitive values of every class, suppressed ones included. On a release that suppressed a 97-year-
old, giving the same record the age 150 moved the page's NCP from 0.2881 to 0.2792 and giving it
another disease moved multiple use from 0.44 to 0.51, the published rows unchanged (task A, session
8). The page shows them as n/a; ``sqlanon evaluate`` prints them for the operator.
"""

from __future__ import annotations

from typing import Any

from sqlanon.metrics import METRIC_INFO

#: The node's levels (height, absdist, reldist), the published classes' sizes with N and S
#: (precision, discernibility, avg_class_size) and the label's majority in each published class (cm).
RELEASE_METRICS = frozenset(
    {"height", "absdist", "reldist", "precision", "discernibility", "avg_class_size", "cm"}
)
#: Every other metric: computed over the source's values.
SOURCE_METRICS = frozenset(METRIC_INFO) - RELEASE_METRICS


def blank(metrics: dict[str, Any] | None) -> dict[str, Any] | None:
    """``metrics`` with each source metric null; other keys (Mondrian's partition sizes) kept."""
    if metrics is None:
        return None
    return {m: None if m in SOURCE_METRICS else v for m, v in metrics.items()}


def release_only(data: dict[str, Any]) -> dict[str, Any]:
    """The report's data with the source metrics null: the release's metrics, the chosen node's
    optimum (where its metric is one), Mondrian's figures, every row of the profile over k and
    every release of the machine-learning section."""
    data["metrics"] = blank(data["metrics"])
    search = data["search"]
    if isinstance(search.get("optimum"), dict) and search["optimum"].get("metric") in SOURCE_METRICS:
        search["optimum"] = {**search["optimum"], "value": None}
    if isinstance(search.get("mondrian"), dict):
        search["mondrian"] = blank(search["mondrian"])
    prof = data.get("profile") or {}
    for row in prof.get("profile") or []:
        if "metrics" in row:
            row["metrics"] = blank(row["metrics"])
        if prof.get("metric") in SOURCE_METRICS and "optimum" in row:
            row["optimum"] = None
    for row in (data.get("utility") or {}).get("releases") or []:  # the ML section's releases
        if isinstance(row.get("metrics"), dict):
            row["metrics"] = blank(row["metrics"])
    return data
