"""Lower bounds on a node's rank that need no query, for branch and bound (see
:func:`rank_lower_bound`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlanon.lattice import Plan
from sqlanon.metrics.info import NODE_METRICS, ZERO, _spec, precision
from sqlanon.metrics.scoring import _value, tables, undefined_reason

BOUNDED_METRICS = (
    *NODE_METRICS,
    "precision",
    "avg_class_size",
    "ncp",
    "monotone_entropy",
    "non_uniform_entropy",
    "mi_loss",
    "mutual_information",
)

#: Relative slack when comparing a bound with a rank (float rounding of the two computations; the
#: absolute floor covers :data:`ZERO`, to which :func:`compute` snaps values).
BOUND_EPS = 1e-12
#: Candidates per :func:`score` call in the branch and bound of sqlanon.publish.choose.
CHOOSE_CHUNK = 128


@dataclass(frozen=True)
class _Unsuppressed:
    """Stands in for a node's NodeResult in :func:`_value`: the node as if it suppressed nothing."""

    bad_records: int = 0


def _rank(metric: str, v: float) -> float:
    """The rank :func:`score` gives the value ``v`` (snapped to 0 as :func:`compute` does)."""
    v = 0.0 if abs(v) < ZERO else v
    return -v if _spec(metric)[2] else v


def max_classes(plan: Plan, node: tuple) -> int:
    """An upper bound on the node's number of classes C: a class is one combination of the labels
    present at the node's levels, so C <= prod_j card(j, L_j) (card counts the labels present in
    the source; the top level '*' is one label), and C <= N (a class holds a record)."""
    c = 1
    for j, lvl in enumerate(node):
        c *= plan.card.get((j, lvl), 1)
        if c >= plan.n_rows:
            return plan.n_rows
    return c


def rank_lower_bound(plan: Plan, node: tuple, metric: str) -> float | None:
    """A lower bound on ``score(plan, [node], metric)``'s rank (lower is better) for any number s
    of suppressed records, 0 <= s <= min(plan.allowed, N); None when the metric has none.

    It needs no node query: only the level vector, the plan's heights, label counts (plan.card),
    N = plan.n_rows and, for the record-level metrics, the per-plan whole-table sums
    (:func:`tables`, built once per plan; :func:`score` builds them too). With s = 0 the bound is
    the node's exact rank for every metric below except ``avg_class_size``.
    Notation as in the module docstring; C = the node's classes, C <= :func:`max_classes`.

    * ``height``, ``absdist``, ``reldist``: the value itself (read off the level vector).
    * ``precision``: loss = ((N - s) ks + s r') / (r N) with ks = sum_{j: h_j > 0} L_j / h_j and
      r' = #{j: h_j > 0} (:func:`precision`). Since L_j / h_j <= 1, ks <= r', so
      loss = ks / r + s (r' - ks) / (r N) >= ks / r, its value at s = 0; rank = loss - 1 >=
      ks / r - 1 = -precision(plan, node, 0).
    * ``avg_class_size``: N / (kept classes + [s > 0]) / k. When s > 0 at least one class is
      suppressed, so kept + [s > 0] <= C in every case: value >= N / C / k.
    * ``ncp``, ``monotone_entropy``, ``non_uniform_entropy``, ``mi_loss``: each is
      sum_i sum_j w_j f_j(cell) / const with w_j > 0, and :func:`compute` replaces a suppressed
      record's cells at the node's level by fully generalised ones (f_j = top_j). Every cell
      satisfies f_j(B) <= top_j: NCP_j(B) <= 1 (|B| <= |A_j|, or span B <= span A_j), and NCP is 0
      for every B when A_j has one value or no range; Pr(B) H(X_j | B) <= H(X_j) (grouping:
      H(X_j) = H(the level's partition) + sum_B' Pr(B') H(X_j | B')); log2 n(B) <= log2 N (the
      lb column; -log2 Pr(R_i(j) | B) = log2 n(B) - lam). So suppression never lowers the sum,
      and the node's value without suppression (the per-level totals :attr:`MetricTables.totals`,
      no node query) is a lower bound; it is exact when s = 0.
    * ``mutual_information`` (higher is better): U = log2 N - lb / (N r), lb = sum_{i,j}
      log2 n(B_ij); suppression can only raise lb (as above), so it can only lower U and raise the
      rank -U: the rank without suppression is a lower bound.

    No bound: ``entropy_loss`` (H(X_j | B) can exceed H(X_j): values a x98, b, c with label
    {b, c}: H(X | {b, c}) = 1 > H(X) = 0.16, so suppressing b's class LOWERS the loss),
    ``private_mi``/``private_mi_loss`` (a record's log2(Pr(Y = S_i | B) / Pr(Y = S_i)) has either
    sign, top = 0, so suppression moves the sum either way), ``cm`` and ``multiple_use`` (only a
    trivial constant bound without the node's classes), ``discernibility``: DM = sum_{kept E}
    |E|^2 + s N >= max(N^2 / C, min(k, N) N) holds (Cauchy-Schwarz over at most C kept classes;
    g(s) = (N - s)^2 / C + s N rises with s when C >= 2, and C = 1 gives N^2 either way), but
    prod_j card(j, L_j) is far above the real class count near the optimum: on Adult (8
    quasi-identifiers, k = 5, 2 % suppression) it spared 327 of 1,639 scores and ran slower.
    """
    _spec(metric)
    if metric not in BOUNDED_METRICS or undefined_reason(plan, metric) is not None:
        return None
    n = plan.n_rows
    if metric in NODE_METRICS:
        return _rank(metric, _value(plan, None, metric, node, None, {}))
    if metric == "precision":
        return _rank(metric, precision(plan, node, 0))
    if metric == "avg_class_size":
        return _rank(metric, n / max_classes(plan, node) / plan.policy.k_or_1())
    return _rank(metric, _value(plan, tables(plan), metric, node, _Unsuppressed(), {}))


# --------------------------------------------------------------------------------------------------
# The ``evaluate`` and ``profile`` commands
# --------------------------------------------------------------------------------------------------
