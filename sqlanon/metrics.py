"""Information-loss metrics used to choose among satisfying nodes (lower score is better).

Each metric has a direction and a monotonicity flag. For a monotone metric (never better at a more
general node) the optimum lies among the minimal nodes; for the others every satisfying node is a
candidate. A metric that depends on the suppressed records is monotone only without suppression.

* ``height``: sum of the levels (Absdist, seed 002 section 3.1, eq. 1). Monotone. Lower is better.
* ``precision``: Sweeney's Prec (seed 002 section 3.1, eq. 3), 1 - mean over cells of
  level / height; suppressed records count as fully generalised. Range [0, 1], higher is better.
* ``discernibility``: DM = sum over kept classes of |E|^2 + |suppressed| * |T| (Bayardo and
  Agrawal; seed 002 section 3.2). Lower is better.
"""

from __future__ import annotations

from typing import Any

from sqlanon.errors import SqlanonError

#: name -> (monotone without suppression, monotone with suppression, higher is better)
METRICS: dict[str, tuple[bool, bool, bool]] = {
    "height": (True, True, False),
    "precision": (True, False, True),
    "discernibility": (True, False, False),
}


def monotone(plan: Any, metric: str) -> bool:
    m = _spec(metric)
    return m[0] if plan.allowed == 0 else m[1]


def _spec(metric: str) -> tuple[bool, bool, bool]:
    try:
        return METRICS[metric]
    except KeyError:
        raise SqlanonError(f"--metric: unknown metric {metric!r}; use one of {', '.join(METRICS)}") from None


def candidates_for(plan: Any, result: Any, metric: str) -> list:
    """Minimal nodes for a monotone metric, every satisfying node otherwise."""
    _spec(metric)
    if monotone(plan, metric) or result.algorithm == "datafly":
        return list(result.minimal)
    return sorted(result.satisfying)


def precision(plan: Any, node: tuple, suppressed: int) -> float:
    heights = plan.heights
    n, n_qi = plan.n_rows, len(heights)
    kept_share = sum((lvl / h) if h else 0.0 for lvl, h in zip(node, heights, strict=True))
    loss = ((n - suppressed) * kept_share + suppressed * sum(1 for h in heights if h)) / (n_qi * n)
    return 1.0 - loss


def score(plan: Any, nodes: list, metric: str, known: dict | None = None) -> list[tuple[tuple, float]]:
    """(node, rank) pairs, rank oriented so that lower is better; :func:`value` turns it back."""
    _, _, higher_better = _spec(metric)
    from sqlanon.search import Evaluator

    results = dict(known or {})
    missing = [n for n in nodes if n not in results]
    if metric != "height" and missing:
        results.update(Evaluator(plan).evaluate(missing))
    out = []
    for node in nodes:
        if metric == "height":
            v = float(sum(node))
        elif metric == "precision":
            v = precision(plan, node, results[node].bad_records)
        else:
            r = results[node]
            v = float(r.dm_kept + r.bad_records * plan.n_rows)
        out.append((node, -v if higher_better else v))
    return out


def value(rank: float, metric: str) -> float:
    """The metric's value from its rank (see :func:`score`)."""
    return -rank if _spec(metric)[2] else rank
