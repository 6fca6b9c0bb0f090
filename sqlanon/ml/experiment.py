"""``sqlanon utility``: seed 002 section 5's experiment. For each release (the optimal full-domain
node for each k, or Mondrian's partitioning for each k) and for the original data, train a
classifier for the label on the release's training rows and score it on its test rows (the same
deterministic 90/10 split everywhere, :mod:`sqlanon.ml.rows`), and report balanced accuracy and
AUROC beside the information-loss metrics Pi_e (``entropy_loss``), NCP, DM (``discernibility``)
and CM of that release.

Trainers: ``naive_bayes`` in SQL (:mod:`sqlanon.ml.bayes`, every row, every engine) and the
scikit-learn ``logistic_regression`` and ``gradient_boosting`` (:mod:`sqlanon.ml.models`, on a
bounded sample of each release, the same rows wherever the release keeps them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.lattice import Evaluator, Progress, prepare
from sqlanon.metrics import compute, profile
from sqlanon.ml.bayes import ALPHA, naive_bayes
from sqlanon.ml.models import TRAINERS, read_sample, train
from sqlanon.ml.rows import TEST_SHARE, Keyed, keyed_source, no_requirements, release_rows
from sqlanon.policy import Policy
from sqlanon.publish import mondrian_release
from sqlanon.relation import Relation
from sqlanon.sql.compile import ident

ALL_TRAINERS = ("naive_bayes", *TRAINERS)
DEFAULT_SAMPLE = 100_000
#: The information-loss metrics seed 002 section 5 sets the classifiers beside (H is Pi_e).
LOSS_METRICS = ("entropy_loss", "ncp", "discernibility", "cm")


def parse_trainers(text: str | Sequence[str] | None) -> list[str]:
    """``naive_bayes,logistic_regression`` -> the list (default: all three).

    >>> parse_trainers("naive_bayes")
    ['naive_bayes']
    """
    if text is None:
        return list(ALL_TRAINERS)
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    for t in names:
        if t not in ALL_TRAINERS:
            raise SqlanonError(f"--trainers: unknown trainer {t!r}; one of {', '.join(ALL_TRAINERS)}")
    if not names:
        raise SqlanonError("--trainers: name at least one trainer")
    return list(dict.fromkeys(names))


def _check_label(policy: Policy, label: str) -> None:
    names = {c.name: c for c in policy.columns}
    if label not in names:
        raise SqlanonError(f"--label: {label!r} is not a declared column of the policy")
    if names[label].role == "identifier":
        raise SqlanonError(f"--label: {label!r} is an identifier (not released as is); use a released column")
    if policy.perturbed:
        raise SqlanonError("utility: policies with perturb: columns are not supported by utility yet")


def utility(
    be: Backend,
    policy: Policy,
    *,
    label: str,
    ks: Sequence[int],
    sample: int = DEFAULT_SAMPLE,
    algorithm: str | None = None,
    metric: str | None = None,
    trainers: Sequence[str] = ALL_TRAINERS,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The documented JSON object of ``sqlanon utility --json`` (see docs/utility.md)."""
    _check_label(policy, label)
    if sample < 10:
        raise SqlanonError(f"--sample: at least 10 rows, got {sample}")
    pol = dataclasses.replace(policy, label_column=label)
    algorithm = algorithm or pol.search.algorithm
    prof = profile(be, pol, ks, metric=metric, algorithm=algorithm, progress=progress)
    plan = prepare(be, pol)
    keyed = keyed_source(be, pol)
    types = {c.name: c for c in keyed.columns}
    feats = [c.name for c in pol.columns if c.role != "identifier" and c.name != label]
    qis = set(plan.qi_names)
    numeric_qis = [q for q in plan.qi_names if types[q].numeric and q != label]
    shape = {
        "features": feats,
        "cats": [f for f in feats if not types[f].numeric],
        "nums": [f for f in feats if types[f].numeric and f not in qis],
        "bounds": [(ident(f"{keyed.prefix}x_{i}"), q) for i, q in enumerate(numeric_qis)],
    }
    runs = []
    free = no_requirements(pol)
    base = release_rows(be, free, plan, keyed, None, numeric_qis=numeric_qis)
    bottom = tuple(0 for _ in plan.heights)
    plan_free = dataclasses.replace(plan, policy=free)
    known = {bottom: Evaluator(plan_free).evaluate([bottom])[bottom]}
    loss = compute(plan_free, [bottom], LOSS_METRICS, known)[bottom]
    first = {
        "release": "original",
        "k": None,
        "node": None,
        "metrics": {m: loss.get(m) for m in LOSS_METRICS},
    }
    runs.append(_run(be, base, first, keyed, label, shape, sample, trainers))
    for row in prof["profile"]:
        k = row["k"]
        entry: dict[str, Any] = {"release": algorithm, "k": k, "node": row.get("node")}
        entry["metrics"] = {m: (row.get("metrics") or {}).get(m) for m in LOSS_METRICS}
        entry["suppressed_records"] = row.get("suppressed_records")
        entry["classes"] = row.get("classes")
        if row.get("error"):
            entry["error"] = row["error"]
            runs.append(entry)
            continue
        pol_k = dataclasses.replace(pol, privacy=dataclasses.replace(pol.privacy, k=k))
        plan_k = dataclasses.replace(plan, policy=pol_k)
        if algorithm == "mondrian":
            _, part = mondrian_release(plan_k, dataclasses.replace(pol_k, source=keyed.rel))
            rel = release_rows(be, pol_k, plan_k, keyed, None, part, numeric_qis)
        else:
            node = tuple(int(row["node"][q]) for q in plan.qi_names)
            rel = release_rows(be, pol_k, plan_k, keyed, node, numeric_qis=numeric_qis)
        runs.append(_run(be, rel, entry, keyed, label, shape, sample, trainers))
    return {
        "source": str(policy.source),
        "dialect": be.dialect,
        "label": label,
        "algorithm": algorithm,
        "metric": prof["metric"],
        "split": {"test_share": TEST_SHARE, "key": pol.key or "the whole declared row"},
        "sample": sample,
        "trainers": list(trainers),
        "naive_bayes_alpha": ALPHA,
        "features": {
            "categorical": shape["cats"],
            "numeric": shape["nums"],
            "interval_bounds": numeric_qis,
        },
        "releases": runs,
    }


def _run(
    be: Backend,
    rel: Relation,
    entry: dict[str, Any],
    keyed: Keyed,
    label: str,
    shape: dict[str, Any],
    sample: int,
    trainers: Sequence[str],
) -> dict[str, Any]:
    models: dict[str, Any] = {}
    if "naive_bayes" in trainers:
        nb = naive_bayes(
            be, rel, features=shape["features"], label=label, key=keyed.key, u=keyed.u, test_share=TEST_SHARE
        )
        models["naive_bayes"] = {
            "balanced_accuracy": nb.balanced_accuracy,
            "auroc": nb.auroc,
            "train_rows": nb.train_rows,
            "test_rows": nb.test_rows,
        }
    sk = [t for t in trainers if t in TRAINERS]
    if sk:
        s = read_sample(
            be,
            rel,
            label=label,
            cats=shape["cats"],
            nums=shape["nums"],
            bounds=shape["bounds"],
            key=keyed.key,
            u=keyed.u,
            v=keyed.v,
            test_share=TEST_SHARE,
            limit=sample,
        )
        entry["sample_rows"] = len(s.y)
        models.update(train(s, sk))
    entry.setdefault("metrics", {m: None for m in LOSS_METRICS})
    entry["models"] = models
    return entry
