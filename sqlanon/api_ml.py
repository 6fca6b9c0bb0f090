"""The Python API of the machine-learning utility and the report (issue 14): ``sqlanon utility``
and ``sqlanon report``, on the same conventions as :mod:`sqlanon.api` (results with
``.to_dict()`` equal to the CLI's ``--json``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlanon.api import DatabaseLike, PolicyLike, ProgressFn, _node, _Result, _session, load_policy
from sqlanon.metrics import parse_ks
from sqlanon.ml import report_data as _report_data
from sqlanon.ml import utility as _utility
from sqlanon.ml.experiment import DEFAULT_SAMPLE, parse_trainers


@dataclass(frozen=True)
class UtilityResult(_Result):
    """``sqlanon utility --json``: per release, its information loss and its classifiers' scores."""

    label: str = ""
    releases: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, d: dict[str, Any]) -> UtilityResult:
        return cls(d, d["label"], d["releases"])


@dataclass(frozen=True)
class ReportResult(_Result):
    """``sqlanon report --json``: everything the HTML page shows (``write_report`` draws it)."""


def utility(
    policy: PolicyLike,
    db: DatabaseLike = None,
    *,
    label: str,
    ks: Sequence[int] | str = tuple(range(2, 11)),
    sample: int = DEFAULT_SAMPLE,
    algorithm: str | None = None,
    metric: str | None = None,
    trainers: Sequence[str] | str | None = None,
    progress: ProgressFn | None = None,
) -> UtilityResult:
    """Seed 002 section 5: for each k, a classifier for ``label`` trained on the release and on the
    original (same 90/10 split), its balanced accuracy and AUROC beside Pi_e, NCP, DM and CM."""
    pol = load_policy(policy)
    k_values = parse_ks(ks if isinstance(ks, str) else ",".join(str(k) for k in ks))
    names = parse_trainers(trainers)
    with _session(db) as be:
        out = _utility(
            be,
            pol,
            label=label,
            ks=k_values,
            sample=sample,
            algorithm=algorithm,
            metric=metric,
            trainers=names,
            progress=progress,
        )
    return UtilityResult.of(out)


def report_data(
    policy: PolicyLike,
    db: DatabaseLike = None,
    *,
    levels: str | Mapping[str, int] | None = None,
    algorithm: str | None = None,
    metric: str | None = None,
    ks: Sequence[int] | str = (2, 3, 5, 10, 20),
    label: str | None = None,
    ml_ks: Sequence[int] | str | None = None,
    sample: int = DEFAULT_SAMPLE,
    trainers: Sequence[str] | str | None = None,
    progress: ProgressFn | None = None,
) -> ReportResult:
    """What ``sqlanon report`` shows (``sqlanon.write_report(result, "report.html")`` draws it):
    the source assessed, the search, the release measured, its metrics, ``profile`` over ``ks``,
    and with ``label`` the machine-learning utility over ``ml_ks`` (default ``ks``)."""
    pol = load_policy(policy)
    node = _node(pol, levels)
    k_values = parse_ks(ks if isinstance(ks, str) else ",".join(str(k) for k in ks))
    ml_values = None
    if ml_ks is not None:
        ml_values = parse_ks(ml_ks if isinstance(ml_ks, str) else ",".join(str(k) for k in ml_ks))
    with _session(db) as be:
        out = _report_data(
            be,
            pol,
            levels=node,
            algorithm=algorithm,
            metric=metric,
            ks=k_values,
            label=label,
            ml_ks=ml_values,
            sample=sample,
            trainers=parse_trainers(trainers) if trainers else None,
            progress=progress,
        )
    return ReportResult(out)
