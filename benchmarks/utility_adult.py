"""Seed 002 section 5's question answered on Adult (issue 14): ``sqlanon utility`` for
k = 2..10 with ``salary-class`` as the label, the eight other columns quasi-identifiers with the
ARX hierarchies, on DuckDB. Writes the JSON to ``benchmarks/results/`` and the README's chart to
``docs/``. Run from the repository root:

    python -m benchmarks.utility_adult --algorithm flash --suppression 0.02
    python -m benchmarks.utility_adult --algorithm mondrian
    python -m benchmarks.utility_adult --chart benchmarks/results/<file>.json   # the chart again
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import tempfile
import time
from pathlib import Path

import duckdb

import sqlanon
from sqlanon.report.charts import _figure, svg
from sqlanon.report.mlcharts import COLOURS, NAMES

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT.parent / "shared" / "data" / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def policy(suppression: float) -> dict:
    cols: dict = {
        q: {"role": "quasi", "hierarchy": {"file": str(ADULT / f"adult_hierarchy_{q}.csv")}} for q in QIS
    }
    cols["salary-class"] = {"role": "insensitive"}
    return {"source": "main.adult", "columns": cols, "privacy": {"k": 2, "suppression": suppression}}


def load(path: Path) -> None:
    con = duckdb.connect(str(path))
    types = {q: "VARCHAR" for q in [*QIS, "salary-class"]} | {"age": "INTEGER"}
    con.execute(
        f"CREATE TABLE main.adult AS SELECT * FROM read_csv('{ADULT / 'adult.csv'}', delim=';', "
        f"header=true, columns={types!r})"
    )
    con.close()


def chart(u: dict, out: Path) -> None:
    """Balanced accuracy and AUROC against k for each trainer (dashed: the original data), and
    NCP against k: seed 002's figures 8 and 9 in one picture."""
    fig, axes = _figure(10.5, 3.0, 3)
    rows = [r for r in u["releases"] if r["release"] != "original"]
    orig = next(r for r in u["releases"] if r["release"] == "original")
    for ax, what, title in zip(
        axes, ("balanced_accuracy", "auroc"), ("balanced accuracy", "AUROC"), strict=False
    ):
        for t in u["trainers"]:
            ax.plot(
                [r["k"] for r in rows],
                [r["models"][t][what] for r in rows],
                marker="o",
                color=COLOURS[t],
                label=NAMES[t],
            )
            ax.axhline(orig["models"][t][what], color=COLOURS[t], linestyle="--", linewidth=1)
        ax.set_title(f"{title} (dashed: original)", fontsize=9)
        ax.set_xlabel("k")
    axes[0].legend(frameon=False, fontsize=8)
    axes[2].plot([r["k"] for r in rows], [r["metrics"]["ncp"] for r in rows], marker="o", color="#444444")
    axes[2].set_title("NCP of the release (lower is better)", fontsize=9)
    axes[2].set_xlabel("k")
    fig.suptitle(f"Adult, label salary-class, releases by {u['algorithm']}", fontsize=10)
    out.write_text(svg(fig, out.stem), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--algorithm", default="flash")
    ap.add_argument("--suppression", type=float, default=0.0)
    ap.add_argument("--k", default="2,3,4,5,6,7,8,9,10")
    ap.add_argument("--chart", default=None, help="Only draw the chart of a saved JSON.")
    args = ap.parse_args()
    if args.chart:
        u = json.loads(Path(args.chart).read_text())["utility"]
        chart(u, ROOT / "docs" / f"utility_adult_{u['algorithm']}.svg")
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "adult.duckdb"
        load(db)
        t0 = time.perf_counter()
        u = sqlanon.utility(
            policy(args.suppression), str(db), label="salary-class", ks=args.k, algorithm=args.algorithm
        ).to_dict()
        seconds = time.perf_counter() - t0
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "benchmarks" / "results" / f"{stamp}_utility-adult_{args.algorithm}.json"
    meta = {"seconds": seconds, "machine": platform.platform(), "python": platform.python_version()}
    meta |= {"suppression": args.suppression, "duckdb": duckdb.__version__}
    out.write_text(json.dumps({"run": meta, "utility": u}, indent=1), encoding="utf-8")
    chart(u, ROOT / "docs" / f"utility_adult_{args.algorithm}.svg")
    print(f"{out} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
