"""Naive Bayes trained and scored entirely in SQL (issue 14): GROUP BY counts of the training
rows, Laplace smoothing, posteriors and the two quality figures computed by the database, so no
row leaves it and it runs on every engine (``templates/utility/nb_*.sql.j2``).

The model (the multinomial-categorical naive Bayes of Mitchell, *Machine Learning*, 1997,
section 6.9, with the m-estimate's Laplace case): P(y) = n_y / N over the training rows,
P(x_j = v | y) = (n_{j,v,y} + alpha) / (n_y + alpha V_j) with V_j the number of distinct values
of feature j in the release (NULL one of them), and the prediction argmax_y
log P(y) + sum_j log P(x_j | y). Every feature is a category (its text), a generalised label
included: naive Bayes is the model a full-domain release suits best, a label being a category.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlanon.engines import Backend
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql, ident, lit

#: Laplace smoothing (add-one).
ALPHA = 1.0


@dataclass(frozen=True)
class BayesResult:
    balanced_accuracy: float | None
    auroc: float | None
    train_rows: int
    test_rows: int
    scores: Relation  # per test row and class: score, rank (1 = predicted), posterior p


def naive_bayes(
    be: Backend,
    rows: Relation,
    *,
    features: list[str],
    label: str,
    key: Sql,
    u: Sql,
    test_share: float,
    alpha: float = ALPHA,
) -> BayesResult:
    """Train on the rows with u >= ``test_share``, score those below, in SQL."""
    common = {
        "rows": rows,
        "features": [ident(f) for f in features],
        "label": ident(label),
        "key": key,
        "u": u,
        "test_share": test_share,
    }
    counts = be.create_temp("nbcount", "utility/nb_counts", **common) if features else rows
    scores = be.create_temp(
        "nbscore",
        "utility/nb_scores",
        counts=counts,
        fa=[ident(f"f{i}") for i in range(len(features))],
        alpha=lit(float(alpha)),
        **common,
    )
    bal, auc, n_test, n_train = be.query("utility/nb_quality", scores=scores, **common)[0]
    return BayesResult(
        None if bal is None else float(bal),
        None if auc is None else float(auc),
        int(n_train or 0),
        int(n_test or 0),
        scores,
    )
