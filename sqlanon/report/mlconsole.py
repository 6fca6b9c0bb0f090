"""Console output of ``sqlanon utility`` (rich), in the style of :mod:`sqlanon.report.console`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from sqlanon.report.console import _explain, make_console, node_text, number

LOSS = (("entropy_loss", "Pi_e"), ("ncp", "NCP"), ("discernibility", "DM"), ("cm", "CM"))


def _f(v: Any) -> str:
    return number(v)  # one number format for every printed figure (issue 34)


def print_utility(r: Mapping[str, Any], console: Console | None = None, *, quiet: bool = False) -> None:
    console = console or make_console()
    sk = [t for t in r["trainers"] if t != "naive_bayes"]
    sample = f"; scikit-learn trainers on a sample of at most {r['sample']:,} rows" if sk else ""
    console.print(
        Text(
            f"machine-learning utility of {r['source']} ({r['dialect']}): label {r['label']}, releases by "
            f"{r['algorithm']}, split {100 * (1 - r['split']['test_share']):.0f}/"
            f"{100 * r['split']['test_share']:.0f} by a hash of the row key{sample}"
        )
    )
    t = Table()
    for name in ("release", "k", *(title for _, title in LOSS)):
        t.add_column(name, no_wrap=True)
    for name in r["trainers"]:
        t.add_column(f"{name}\nbal. acc.", justify="right")
        t.add_column(f"{name}\nAUROC", justify="right")
    for e in r["releases"]:
        cells = [e["release"], "" if e["k"] is None else str(e["k"])]
        cells += [_f((e.get("metrics") or {}).get(m)) for m, _ in LOSS]
        for name in r["trainers"]:
            m = (e.get("models") or {}).get(name) or {}
            cells += [_f(m.get("balanced_accuracy")), _f(m.get("auroc"))]
        t.add_row(*[Text(c) for c in cells])
    console.print(t)
    for e in r["releases"]:
        if e.get("node"):
            console.print(Text(f"k={e['k']}: {node_text(e['node'])}"))
        if e.get("error"):
            console.print(Text(f"k={e['k']}: {e['error']}"))
    first = next((e for e in r["releases"] if e["release"] == "original"), None)
    rows_note = ""
    if first and first.get("models"):
        m = next(iter(first["models"].values()))
        rows_note = (
            f" ({m.get('train_rows', 0):,} training and {m.get('test_rows', 0):,} test rows in the original)"
        )
    _explain(
        console,
        quiet,
        "One row per release: its information loss (lower is better) and how well a classifier "
        "trained on it predicts the label on the held-out rows (balanced accuracy: 0.5 is a coin "
        f"toss for two values, 1 perfect; AUROC likewise){rows_note}. Close to the original's row "
        "means the release still trains about as good a model.",
    )
