"""Issue 33, "1e9 rows on paper": how many distinct combinations of the nine QIs the benchmark's
``recombine`` table (benchmarks/data.py) has at N rows, and how many bytes its frequency table is
when it crosses from the warehouse to the local DuckDB, without building the table.

Row i takes sex, age, race, marital status and salary class from Adult row h1(i) (group A), the
other four QIs from row h2(i) (group B), and shifts the age by h3(i) mod 3 - 1 (kept only inside
17..90). Treating the hashes as independent uniform draws, a combination (a, b) with probability
p_a p_b appears at least once among N rows with probability 1 - (1 - p_a p_b)^N, so the expected
number of distinct combinations is the sum of that over all pairs. It agrees with the measured
tables within 0.2 % to 1e7, 0.7 % at 1e8 and 1.6 % at 3e8, but counts 8.9 % too many at 1e9
(5,564,649 against 5,108,456 measured): the hashes are linear in i, not independent draws, and
the model's error grows with N, so ``docs/performance.md`` uses the measured count.

``--measure`` counts instead: an in-memory DuckDB streams the same generator (benchmarks/data.py's
SQL, without storing its N rows) into the GROUP BY the search's scan runs, and the frequency table
that comes out, the nine values and a count per combination, is serialised as the Arrow IPC stream
that Spark's ``toArrow()`` hands the driver (PostgreSQL's COPY sends the same values as text). Why:
since the local DuckDB codes the frequency table itself, the raw values cross the wire, not the
level codes, and their size per row is measured here rather than assumed. One thread by default
(``--threads``), so that it can run beside other work: on a busy shared 2-core VM 1e8 rows took
37 s and 1e9 rows 401 s, the process peaking at 1.8 GB
(benchmarks/results/20261126T224838Z_paper-1e9_measure.txt).

``python -m benchmarks.paper_1e9 [--rows 1e6,1e9] [--measure 1e6,1e7,1e8] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

import numpy as np

from benchmarks.common import ADULT_DIR, COLUMNS, QI_LIST, SECOND_ROW
from benchmarks.data import age_bounds, generate_sql, load_base
from sqlanon.search_where import LOCAL_MAX_ROWS


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


def frequency_table(n: int, threads: int) -> Any:
    """The frequency table of the ``recombine`` table of ``n`` rows as an Arrow table (the nine
    QI values as the source types them and ``cnt``), grouped from the generator's rows as they are
    produced: the N rows are never stored, so 1e9 needs the memory of the groups, not of the rows."""
    import duckdb

    con = duckdb.connect(config={"threads": threads})
    try:
        base_rows = load_base(con)
        lo, hi = age_bounds(con)
        create = generate_sql("recombine", n, base_rows, lo, hi, f"range({n})", "range")
        head, tail = "CREATE TABLE main.adult AS ", " ORDER BY s.i"
        assert create.startswith(head) and create.endswith(tail), create
        rows = create[len(head) : -len(tail)]
        sql = f"SELECT {QI_LIST}, COUNT(*) AS cnt FROM ({rows}) AS g GROUP BY {QI_LIST}"
        con.execute("SELECT 1").fetchall()  # age_bounds' result finished: a relation may run next
        return con.sql(sql).to_arrow_table()  # no extra copy of the groups, unlike execute's
    finally:
        con.close()


def wire_bytes(table: Any) -> int:
    """Bytes of ``table`` as an Arrow IPC stream (uncompressed, batches of 64 Ki rows)."""
    import pyarrow as pa

    sink = pa.MockOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=65536)
    return int(sink.size())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e5,1e6,1e7,1e8,1e9", help="sizes to model")
    ap.add_argument("--measure", default="", help="sizes to count and serialise (e.g. 1e6,1e7)")
    ap.add_argument("--threads", type=int, default=1, help="DuckDB threads for --measure")
    args = ap.parse_args()
    pa, pb = groups()
    print(f"group A tuples {len(pa):,}, group B tuples {len(pb):,}, pairs {len(pa) * len(pb):,}")
    for n in (float(x) for x in args.rows.split(",")):
        distinct = expected_distinct(n, pa, pb)
        where = (
            "local" if distinct <= LOCAL_MAX_ROWS else f"database (over LOCAL_MAX_ROWS {LOCAL_MAX_ROWS:,})"
        )
        print(f"{n:.3g} rows: {distinct:,.0f} expected distinct QI combinations; search.where auto: {where}")
    for n in (int(float(x)) for x in args.measure.split(",") if x):
        t0 = time.perf_counter()
        table = frequency_table(n, args.threads)
        seconds = time.perf_counter() - t0
        size = wire_bytes(table)
        print(
            f"{n:.3g} rows measured: {table.num_rows:,} distinct QI combinations (model "
            f"{expected_distinct(n, pa, pb):,.0f}), Arrow {size / 1e6:,.1f} MB = "
            f"{size / table.num_rows:.1f} B a row, in memory {table.nbytes / 1e6:,.1f} MB; {seconds:.1f} s"
        )


if __name__ == "__main__":
    main()
