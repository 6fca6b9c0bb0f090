"""What each metric is: direction, monotonicity, range, formula; and which nodes can be optimal.
The formulas and their sources are listed in the package docstring."""

from __future__ import annotations

from dataclasses import dataclass

from sqlanon.errors import SqlanonError
from sqlanon.lattice import Plan, SearchResult


@dataclass(frozen=True)
class MetricInfo:
    """How to read a metric: direction, monotonicity (with and without suppression), range."""

    monotone: bool
    monotone_with_suppression: bool
    higher_is_better: bool
    range: str
    formula: str


METRIC_INFO: dict[str, MetricInfo] = {
    "height": MetricInfo(True, True, False, "[0, sum_j h_j]", "sum_j L_j (= absdist)"),
    "absdist": MetricInfo(True, True, False, "[0, sum_j h_j]", "sum_j L_j"),
    "reldist": MetricInfo(True, True, False, "[0, r]", "sum_j L_j / h_j"),
    "precision": MetricInfo(True, False, True, "[0, 1]", "1 - sum_{i,j} h_ij / h_j / (r N)"),
    "discernibility": MetricInfo(True, False, False, "[N, N^2]", "sum_{kept E} |E|^2 + S N"),
    "avg_class_size": MetricInfo(True, False, False, "[1/k, N/k]", "(N / #classes) / k"),
    "ncp": MetricInfo(True, False, False, "[0, sum_j w_j / r]", "1/(N r) sum_i sum_j w_j NCP_j(B_ij)"),
    "cm": MetricInfo(True, False, False, "[0, 1]", "(sum_E (|E| - majority(E)) + S) / N"),
    "multiple_use": MetricInfo(True, False, False, "[0, 1]", "(sum_E |E| l_E + S) / N"),
    "entropy_loss": MetricInfo(True, False, False, "[0, sum_j log2 |A_j|]", "1/N sum_{i,j} H(X_j|B_ij)"),
    "monotone_entropy": MetricInfo(
        True, False, False, "[0, sum_j H(X_j)]", "1/N sum_{i,j} Pr(B_ij) H(X_j|B_ij)"
    ),
    "non_uniform_entropy": MetricInfo(
        True, False, False, "[0, sum_j H(X_j)]", "1/N sum_{i,j} -log2 Pr(R_i(j)|B_ij)"
    ),
    "mutual_information": MetricInfo(
        True, False, True, "[0, mean_j H(X_j)]", "1/(N r) sum_{i,j} log2(Pr(R_i(j)|B_ij)/Pr(R_i(j)))"
    ),
    "mi_loss": MetricInfo(
        True, False, False, "[0, mean_j H(X_j)]", "-1/(N r) sum_{i,j} log2 Pr(R_i(j)|B_ij)"
    ),
    "private_mi": MetricInfo(
        True, False, True, "[0, H(Y)]", "1/(N r) sum_{i,j} log2(Pr(Y=S_i|B_ij)/Pr(Y=S_i))"
    ),
    "private_mi_loss": MetricInfo(
        True, False, False, "[mean_j H(Y|X_j), H(Y)]", "-1/(N r) sum_{i,j} log2 Pr(Y=S_i|B_ij)"
    ),
}

#: name -> (monotone without suppression, monotone with suppression, higher is better)
METRICS: dict[str, tuple[bool, bool, bool]] = {
    name: (m.monotone, m.monotone_with_suppression, m.higher_is_better) for name, m in METRIC_INFO.items()
}

#: Metrics read off the level vector alone.
NODE_METRICS = ("height", "absdist", "reldist")
#: Metrics read off the search's node evaluation (class and suppression counts).
COUNT_METRICS = ("precision", "discernibility", "avg_class_size")
#: Per-record metrics: the per-level column kinds each one needs (``pmi`` = one per attribute).
PHI_KINDS: dict[str, tuple[str, ...]] = {
    "ncp": ("ncp",),
    "entropy_loss": ("h",),
    "monotone_entropy": ("ph",),
    "non_uniform_entropy": ("lb",),
    "mutual_information": ("lb",),
    "mi_loss": ("lb",),
    "private_mi": ("pmi",),
    "private_mi_loss": ("pmi",),
}
#: Metrics that need class-level figures of every node (a node query even without suppression).
CLASS_METRICS = ("cm", "multiple_use")
SENSITIVE_METRICS = ("multiple_use", "private_mi", "private_mi_loss")

#: Nodes per metrics query.
BATCH = 64
#: A metric closer to 0 than this is reported as 0 (log sums that cancel leave ~1e-16).
ZERO = 1e-12


def monotone(plan: Plan, metric: str) -> bool:
    m = _spec(metric)
    return m[0] if plan.allowed == 0 else m[1]


def _spec(metric: str) -> tuple[bool, bool, bool]:
    try:
        return METRICS[metric]
    except KeyError:
        raise SqlanonError(f"--metric: unknown metric {metric!r}; use one of {', '.join(METRICS)}") from None


def candidates_for(plan: Plan, result: SearchResult, metric: str) -> list:
    """Minimal nodes for a monotone metric, every satisfying node otherwise."""
    _spec(metric)
    if monotone(plan, metric) or result.algorithm == "datafly":
        return list(result.minimal)
    return sorted(result.satisfying)


def precision(plan: Plan, node: tuple, suppressed: int) -> float:
    """Prec (seed 002 eq. 3) of a full-domain node: every kept cell of X_j is at level L_j, every
    suppressed cell counts as fully generalised (h_ij = h_j)."""
    heights = plan.heights
    n, n_qi = plan.n_rows, len(heights)
    kept_share = sum((lvl / h) if h else 0.0 for lvl, h in zip(node, heights, strict=True))
    loss = ((n - suppressed) * kept_share + suppressed * sum(1 for h in heights if h)) / (n_qi * n)
    return 1.0 - loss


# --------------------------------------------------------------------------------------------------
# Per-plan tables: the metrics' coded table and its whole-table sums
# --------------------------------------------------------------------------------------------------
