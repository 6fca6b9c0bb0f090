"""The machine-learning utility charts of seed 002 section 5 (its figures 8-10), from the rows of
``sqlanon utility``: the information-loss metrics against k, the classifiers' balanced accuracy
and AUROC against k (the original data as a dashed line), and performance against each metric."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlanon.report.charts import _figure, _fmt, _integer_k, svg

LOSS = (("entropy_loss", "Pi_e (H)"), ("ncp", "NCP"), ("discernibility", "DM"), ("cm", "CM"))
COLOURS = {"naive_bayes": "#2e75b6", "logistic_regression": "#c0504d", "gradient_boosting": "#9bbb59"}
NAMES = {
    "naive_bayes": "naive Bayes (SQL)",
    "logistic_regression": "logistic regression",
    "gradient_boosting": "gradient boosting",
}


def _rows(u: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    original = next((r for r in u["releases"] if r["release"] == "original"), None)
    rows = [r for r in u["releases"] if r["release"] != "original" and r.get("models")]
    return original, rows


def loss_vs_k(u: Mapping[str, Any]) -> tuple[str, str]:
    _, rows = _rows(u)
    names = [(m, t) for m, t in LOSS if any(r["metrics"].get(m) is not None for r in rows)]
    fig, axes = _figure(9.6, 2.4, max(1, len(names)))
    for ax, (m, title) in zip(axes, names, strict=False):
        pts = [(r["k"], r["metrics"][m]) for r in rows if r["metrics"].get(m) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color="#444444")
        ax.set_title(title + " (lower is better)", fontsize=9)
        _integer_k(ax)
    sentence = (
        "The information lost by each release as k grows (Marchand 2019, fig. 8): the higher a curve, "
        "the more the release's quasi-identifiers were coarsened; these are the figures the search "
        "optimises, and the charts below ask whether a model notices."
    )
    return svg(fig, "ml_loss"), sentence


def performance_vs_k(u: Mapping[str, Any]) -> tuple[str, str]:
    original, rows = _rows(u)
    fig, axes = _figure(9.6, 3.0, 2)
    trainers = list(u["trainers"])
    for ax, what, title in zip(
        axes, ("balanced_accuracy", "auroc"), ("balanced accuracy", "AUROC"), strict=True
    ):
        for t in trainers:
            pts = [
                (r["k"], r["models"][t][what]) for r in rows if r["models"].get(t, {}).get(what) is not None
            ]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=COLOURS[t], label=NAMES[t])
            base = ((original or {}).get("models") or {}).get(t, {}).get(what)
            if base is not None:
                ax.axhline(base, color=COLOURS[t], linestyle="--", linewidth=1)
        ax.set_title(f"{title} (higher is better; dashed: the original data)", fontsize=9)
        _integer_k(ax)
    axes[0].legend(frameon=False, fontsize=8)
    sentence = _verdict(original, rows, trainers)
    return svg(fig, "ml_perf"), sentence


def _verdict(original: Mapping[str, Any] | None, rows: list[dict[str, Any]], trainers: list[str]) -> str:
    """One sentence: how much balanced accuracy the releases lose against the original."""
    parts = []
    for t in trainers:
        base = ((original or {}).get("models") or {}).get(t, {}).get("balanced_accuracy")
        vals = [
            r["models"][t]["balanced_accuracy"]
            for r in rows
            if r["models"].get(t, {}).get("balanced_accuracy") is not None
        ]
        if base is None or not vals:
            continue
        parts.append(
            f"{NAMES[t]} {_fmt(base)} on the original, {_fmt(min(vals))}-{_fmt(max(vals))} on the releases"
        )
    if not parts:
        return "How well a classifier trained on each release predicts the label on held-out rows."
    return (
        "How well a classifier trained on each release predicts the label on the 10 % of rows held out "
        "(the same rows for every release): balanced accuracy " + "; ".join(parts) + ". Close to the dashed "
        "line is good: the release still trains a model about as good as the original."
    )


def performance_vs_loss(u: Mapping[str, Any]) -> tuple[str, str]:
    _, rows = _rows(u)
    names = [(m, t) for m, t in LOSS if any(r["metrics"].get(m) is not None for r in rows)]
    fig, axes = _figure(9.6, 2.6, max(1, len(names)))
    for ax, (m, title) in zip(axes, names, strict=False):
        for t in u["trainers"]:
            pts = [
                (r["metrics"][m], r["models"][t]["balanced_accuracy"])
                for r in rows
                if r["metrics"].get(m) is not None
                and r["models"].get(t, {}).get("balanced_accuracy") is not None
            ]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=COLOURS[t], s=14, label=NAMES[t])
        ax.set_xlabel(title)
        ax.spines[["top", "right"]].set_visible(False)
    if len(axes):
        axes[0].set_ylabel("balanced accuracy")
    sentence = (
        "Each dot is one release's classifier: its balanced accuracy against that release's information "
        "loss (Marchand 2019, fig. 10). Dots falling to the right mean the metric predicts the damage; a "
        "flat row of dots means the metric says little about this task."
    )
    return svg(fig, "ml_scatter"), sentence
