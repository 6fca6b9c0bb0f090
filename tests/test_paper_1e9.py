"""benchmarks/paper_1e9.py (docs/performance.md, "1e9 rows on a Spark cluster, on paper"): its
measured frequency table is the benchmark's, and its byte count is the Arrow layout's."""

from __future__ import annotations

import pytest

from tests.conftest import ADULT_DIR

pytestmark = pytest.mark.skipif(not (ADULT_DIR / "adult.csv").exists(), reason="needs ../shared/data/adult")


def test_the_measured_frequency_table_is_the_benchmarks_and_its_bytes_the_arrow_layout() -> None:
    from benchmarks.paper_1e9 import expected_distinct, frequency_table, groups, wire_bytes

    table = frequency_table(100_000, threads=1)
    # 55,436: the floor's classes at 1e5 rows in every benchmark run (benchmarks/results/*1e5*.json)
    assert table.num_rows == 55_436
    assert sum(table.column("cnt").to_pylist()) == 100_000
    assert abs(expected_distinct(1e5, *groups()) / 55_436 - 1) < 0.002
    # Arrow's layout: per string value its UTF-8 bytes and a 4-byte offset, 8 bytes per integer
    strings = [f.name for f in table.schema if str(f.type) == "string"]
    ints = [f.name for f in table.schema if str(f.type) == "int64"]
    assert len(strings) + len(ints) == 10 and "cnt" in ints
    payload = sum(len(v.encode()) + 4 for c in strings for v in table.column(c).to_pylist())
    payload += 8 * table.num_rows * len(ints)
    assert payload <= wire_bytes(table) <= payload * 1.01
