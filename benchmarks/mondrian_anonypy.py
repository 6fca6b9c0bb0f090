"""Mondrian beside its pandas peer anonypy (issue 34 item 10), on Adult without hierarchies.

Run from the repository root (anonypy is not a dependency of sqlanon: install it into the venv):

    .venv/bin/pip install anonypy
    .venv/bin/python -m benchmarks.mondrian_anonypy                 # Adult, k = 5
    .venv/bin/python -m benchmarks.mondrian_anonypy --rows 1e5 --k 5,10

QIs age (numeric), sex, race, marital-status, education (text, no hierarchy), as the issue measured.
Both releases are scored by one function written here (not sqlanon's metrics): per class and QI,
NCP is (max - min) / (the table's max - min) for age and |distinct values| / |the table's distinct
values| for a text QI (0 for one value); the table's NCP is the mean over records and QIs. sqlanon
publishes a table (partition map) in DuckDB and its classes are read back by their labels; anonypy's
are its partitions. `--rows N` (N > 30,162) recombines two Adult rows per record as
benchmarks/README.md's `recombine` does (sex, age, race, marital status from one row, education from
another; seeded), so both tools see the same table. Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

QIS = ["age", "sex", "race", "marital-status", "education"]
ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"


def load_rows(n: int | None, seed: int = 34) -> list[dict[str, Any]]:
    """Adult's rows (QIs only, with an id), or ``n`` rows recombining two Adult rows each."""
    import csv

    with ADULT.open(newline="", encoding="utf-8") as f:
        base = [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(f, delimiter=";")]
    for r in base:
        r["age"] = int(r["age"])
    if n is None or n <= len(base):
        rows = base[: n or len(base)]
    else:
        rnd = random.Random(seed)
        rows = []
        for _ in range(n):
            a, b = rnd.choice(base), rnd.choice(base)
            rows.append({**{q: a[q] for q in QIS if q != "education"}, "education": b["education"]})
    return [{"id": i, **{q: r[q] for q in QIS}} for i, r in enumerate(rows)]


def ncp(rows: list[dict[str, Any]], classes: list[list[int]]) -> float:
    """The mean NCP over records and QIs of a partitioning (lists of row indexes)."""
    lo, hi = min(r["age"] for r in rows), max(r["age"] for r in rows)
    card = {q: len({r[q] for r in rows}) for q in QIS if q != "age"}
    total = 0.0
    for part in classes:
        ages = [rows[i]["age"] for i in part]
        cell = (max(ages) - min(ages)) / (hi - lo)
        for q, c in card.items():
            d = len({rows[i][q] for i in part})
            cell += d / c if d > 1 else 0.0
        total += cell * len(part)
    return total / (len(rows) * len(QIS))


def run_sqlanon(rows: list[dict[str, Any]], k: int, tmp: Path) -> tuple[list[list[int]], float]:
    """Publish Mondrian's release as a DuckDB table; its classes (by label) as row indexes."""
    import duckdb

    import sqlanon

    path = tmp / f"a{k}.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE OR REPLACE TABLE main.adult (id BIGINT, age BIGINT, sex VARCHAR, race VARCHAR, "
        '"marital-status" VARCHAR, education VARCHAR)'
    )
    import pandas as pd

    frame = pd.DataFrame(rows, columns=["id", *QIS])  # noqa: F841 - read by DuckDB below
    con.execute("INSERT INTO main.adult SELECT * FROM frame")
    con.close()
    policy = {
        "source": "main.adult",
        "target": "main.adult_m",
        "columns": {"id": "insensitive", **{q: "quasi" for q in QIS}},
        "privacy": {"k": k},
        "search": {"algorithm": "mondrian"},
    }
    t0 = time.perf_counter()
    sqlanon.anonymise(policy, str(path), replace=True, publish_as="table")
    seconds = time.perf_counter() - t0
    con = duckdb.connect(str(path))
    cols = ", ".join(f'"{q}"' for q in QIS)
    groups: dict[tuple, list[int]] = {}
    for row in con.execute(f"SELECT id, {cols} FROM main.adult_m").fetchall():
        groups.setdefault(tuple(row[1:]), []).append(int(row[0]))
    con.close()
    return list(groups.values()), seconds


def run_anonypy(rows: list[dict[str, Any]], k: int) -> tuple[list[list[int]], float]:
    """anonypy's Mondrian on the same rows (text QIs as pandas categories, as its README does)."""
    import pandas as pd
    from anonypy.mondrian import Mondrian

    df = pd.DataFrame(rows)
    for q in QIS[1:]:
        df[q] = df[q].astype("category")
    t0 = time.perf_counter()
    parts = Mondrian(df, QIS).partition(k=k)
    seconds = time.perf_counter() - t0
    return [list(map(int, p)) for p in parts], seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=float, default=None, help="rows (default: Adult's 30,162)")
    ap.add_argument("--k", default="5", help="comma-separated k values")
    args = ap.parse_args()
    rows = load_rows(None if args.rows is None else int(args.rows))
    print(f"{len(rows):,} rows, QIs {', '.join(QIS)} without hierarchies")
    print("| tool | k | NCP | partitions | smallest | largest | seconds |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for k in (int(x) for x in args.k.split(",")):
            for name, (classes, secs) in (
                ("sqlanon", run_sqlanon(rows, k, Path(d))),
                ("anonypy", run_anonypy(rows, k)),
            ):
                sizes = [len(c) for c in classes]
                assert sum(sizes) == len(rows), name  # no record suppressed by either
                print(
                    f"| {name} | {k} | {ncp(rows, classes):.4f} | {len(classes):,} | {min(sizes)} "
                    f"| {max(sizes):,} | {secs:.2f} |"
                )


if __name__ == "__main__":
    main()
