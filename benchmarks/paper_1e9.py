"""Issue 33, "1e9 rows on paper": how many distinct combinations of the nine QIs the benchmark's
``recombine`` table (benchmarks/data.py) has at N rows, without building it.

Row i takes sex, age, race, marital status and salary class from Adult row h1(i) (group A), the
other four QIs from row h2(i) (group B), and shifts the age by h3(i) mod 3 - 1 (kept only inside
17..90). Treating the hashes as independent uniform draws, a combination (a, b) with probability
p_a p_b appears at least once among N rows with probability 1 - (1 - p_a p_b)^N, so the expected
number of distinct combinations is the sum of that over all pairs (``docs/performance.md`` checks it
against the measured 1e6, 1e7 and 1e8 tables). ``python -m benchmarks.paper_1e9 [--rows 1e6,1e9]``.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from benchmarks.common import ADULT_DIR, COLUMNS, SECOND_ROW


def groups() -> tuple[np.ndarray, np.ndarray]:
    """The probabilities of the distinct group-A tuples (age shifted) and group-B tuples."""
    a: Counter = Counter()
    b: Counter = Counter()
    with (ADULT_DIR / "adult.csv").open(encoding="utf-8") as f:
        head = next(f).rstrip("\n").split(";")
        idx = {c: head.index(c) for c in COLUMNS}
        for line in f:
            v = line.rstrip("\n").split(";")
            age = int(v[idx["age"]])
            rest = tuple(v[idx[c]] for c in COLUMNS if c not in SECOND_ROW and c != "age")
            for d in (-1, 0, 1):  # the shift, each a third; outside 17..90 the age stays
                shifted = age + d if 17 <= age + d <= 90 else age
                a[(shifted, *rest)] += 1 / 3
            b[tuple(v[idx[c]] for c in SECOND_ROW)] += 1
    pa = np.array(list(a.values())) / sum(a.values())
    pb = np.array(list(b.values())) / sum(b.values())
    return pa, pb


def expected_distinct(n: float, pa: np.ndarray, pb: np.ndarray) -> float:
    total = 0.0
    for i in range(0, len(pa), 2048):
        p = np.outer(pa[i : i + 2048], pb)
        total += float(-np.expm1(n * np.log1p(-p)).sum())
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e5,1e6,1e7,1e8,1e9")
    args = ap.parse_args()
    pa, pb = groups()
    print(f"group A tuples {len(pa):,}, group B tuples {len(pb):,}, pairs {len(pa) * len(pb):,}")
    for n in (float(x) for x in args.rows.split(",")):
        print(f"{n:.0e} rows: {expected_distinct(n, pa, pb):,.0f} expected distinct QI combinations")


if __name__ == "__main__":
    main()
