"""scikit-learn trainers on a bounded sample of a release (issue 14): logistic regression and
gradient boosting, as seed 002 section 5 trains scikit-learn models on each anonymised table.

The sample is read from the database (``templates/utility/sample.sql.j2``: at most ``limit``
rows, in a reproducible order independent of the split). Features, as the seed formats them: a
generalised number becomes two numbers, its interval's bounds; a hierarchy label or any text
becomes a category (one-hot, at most 64 per feature, rarer ones pooled); a number kept as it is
stays a number. The optional extra ``ml`` installs scikit-learn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql, ident

TRAINERS = ("logistic_regression", "gradient_boosting")
MAX_CATEGORIES = 64


@dataclass(frozen=True)
class Sample:
    is_test: list[bool]
    y: list[str]
    cats: list[list[str]]  # per row, one text per categorical feature ('NULL' for NULL)
    nums: list[list[float]]  # per row, one number per numeric feature (nan for NULL)


def read_sample(
    be: Backend,
    rows: Relation,
    *,
    label: str,
    cats: list[str],
    nums: list[str],
    bounds: list[tuple[Sql, str]],
    key: Sql,
    u: Sql,
    v: Sql,
    test_share: float,
    limit: int,
) -> Sample:
    """At most ``limit`` rows: categorical features as text, numbers, and the bounds (lo, hi) of
    each (original value alias, generalised label column) in ``bounds``."""
    data = be.query(
        "utility/sample",
        rows=rows,
        label=ident(label),
        cats=[ident(c) for c in cats],
        nums=[ident(n) for n in nums],
        bounds=[{"x": x, "label": ident(lab)} for x, lab in bounds],
        key=key,
        u=u,
        v=v,
        test_share=test_share,
        limit=limit,
    )
    nc = len(cats)
    out = Sample([], [], [], [])
    for r in data:
        out.is_test.append(bool(r[1]))
        out.y.append(str(r[2]))
        out.cats.append(["NULL" if x is None else str(x) for x in r[3 : 3 + nc]])
        out.nums.append([float("nan") if x is None else float(x) for x in r[3 + nc :]])
    return out


def _sklearn() -> Any:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SqlanonError(
            "utility: the scikit-learn trainers need scikit-learn (pip install 'sqlanon[ml]'); "
            "or pass --trainers naive_bayes"
        ) from None
    from sklearn import ensemble, impute, linear_model, metrics, preprocessing

    return ensemble, impute, linear_model, metrics, preprocessing


def _features(s: Sample, train: list[int], test: list[int]) -> tuple[Any, Any]:
    import numpy as np

    _, impute, _, _, preprocessing = _sklearn()
    parts_tr, parts_te = [], []
    if s.cats and s.cats[0]:
        cat = np.array(s.cats, dtype=object)
        enc = preprocessing.OneHotEncoder(
            handle_unknown="infrequent_if_exist", max_categories=MAX_CATEGORIES, sparse_output=False
        )
        parts_tr.append(enc.fit_transform(cat[train]))
        parts_te.append(enc.transform(cat[test]))
    if s.nums and s.nums[0]:
        num = np.array(s.nums, dtype=float)
        fill = impute.SimpleImputer(strategy="median", keep_empty_features=True)
        scale = preprocessing.StandardScaler()
        parts_tr.append(scale.fit_transform(fill.fit_transform(num[train])))
        parts_te.append(scale.transform(fill.transform(num[test])))
    if not parts_tr:
        return np.zeros((len(train), 1)), np.zeros((len(test), 1))
    return np.hstack(parts_tr), np.hstack(parts_te)


def macro_auroc(y: list[str], classes: list[str], proba: Any) -> float | None:
    """Macro one-vs-rest AUROC over the classes with positives and negatives in ``y`` (for two
    classes the usual AUROC), as the in-SQL naive Bayes reports it."""
    from sklearn.metrics import roc_auc_score

    aucs = []
    for i, c in enumerate(classes):
        truth = [t == c for t in y]
        if any(truth) and not all(truth):
            aucs.append(float(roc_auc_score(truth, proba[:, i])))
    return sum(aucs) / len(aucs) if aucs else None


def train(s: Sample, trainers: list[str], seed: int = 0) -> dict[str, dict[str, Any]]:
    """Fit each trainer on the sample's training rows and score its test rows."""
    _sklearn()  # a clear error without scikit-learn, before any work
    train_ix = [i for i, t in enumerate(s.is_test) if not t]
    test_ix = [i for i, t in enumerate(s.is_test) if t]
    y_tr = [s.y[i] for i in train_ix]
    y_te = [s.y[i] for i in test_ix]
    out: dict[str, dict[str, Any]] = {}
    if len(set(y_tr)) < 2 or not test_ix:
        for name in trainers:
            out[name] = {
                "balanced_accuracy": None,
                "auroc": None,
                "train_rows": len(y_tr),
                "test_rows": len(y_te),
            }
        return out
    x_tr, x_te = _features(s, train_ix, test_ix)
    # One thread: scikit-learn's OpenMP threads busy-wait, and on a machine already busy (the
    # database, other jobs) gradient boosting on 300 rows took 19 s instead of 0.7 s.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        _fit_all(out, trainers, x_tr, y_tr, x_te, y_te, seed)
    return out


def _fit_all(
    out: dict[str, Any], trainers: list[str], x_tr: Any, y_tr: Any, x_te: Any, y_te: Any, seed: int
) -> None:
    ensemble, _, linear_model, metrics, _ = _sklearn()
    for name in trainers:
        if name == "logistic_regression":
            model = linear_model.LogisticRegression(max_iter=2000)
        else:
            model = ensemble.HistGradientBoostingClassifier(random_state=seed)
        model.fit(x_tr, y_tr)
        proba = model.predict_proba(x_te)
        pred = model.classes_[proba.argmax(axis=1)]
        out[name] = {
            "balanced_accuracy": float(metrics.balanced_accuracy_score(y_te, pred)),
            "auroc": macro_auroc(y_te, list(model.classes_), proba),
            "train_rows": len(y_tr),
            "test_rows": len(y_te),
        }
