"""A second reading of Mondrian's exact cuts (tests/test_mondrian_exact.py), as an attacker.

A median cut on ranks (a QI with NULLs, or one a double cannot hold) is published from its value's
text (transform/partition.py ``_number``). Two literals were not the value the rounds cut at:
a REAL's text (0.1) read as a double is not the real 0.1 (0.10000000149011612), and PostgreSQL
compares ``real <= numeric`` as doubles, so the median went to the right of its own cut; and a
DECIMAL's fraction became ``CAST(... AS DOUBLE)`` on Spark (every number literal with a point is
made DOUBLE there: sql/compile.py), where 1.00000000000000000001 and ...04 are one double.

The expected classes come from the reference of tests/test_mondrian.py (Mondrian from its
definition), on the values' offsets from their least (see tests/test_mondrian_exact.py).
"""

from __future__ import annotations

import random
import re
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TestDB
from tests.helpers import cli, write_policy
from tests.test_mondrian import reference


def _policy(tmp_path: Path, k: int) -> Path:
    return write_policy(
        tmp_path,
        {
            "source": "main.ex",
            "target": "main.ex_m",
            "columns": {"id": "insensitive", "a": "quasi"},
            "privacy": {"k": k},
            "search": {"algorithm": "mondrian"},
        },
    )


@pytest.mark.parametrize("as_", ["view", "table"])
def test_a_real_median_is_published_as_the_real(db: TestDB, tmp_path: Path, as_: str) -> None:
    """A REAL QI with NULLs (cut on ranks, its median from the text '0.2'): every class is the
    reference's. Before, PostgreSQL's view compared ``a <= 0.2`` as doubles, false for the real
    0.2 itself, and moved the median's records into the next class."""
    offsets = [1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 5, 5, None, None]
    rows = [[i, None if o is None else str(Decimal(o) / 10)] for i, o in enumerate(offsets)]
    db.load("ex", ["id", "a"], rows, ["BIGINT", "REAL"])
    code, _out, err = cli("anonymise", str(_policy(tmp_path, 3)), "--db", db.url, "--as", as_, "--replace")
    assert code == 0, err
    groups: dict[str, list[int]] = {}
    for i, label in db.sql("SELECT id, a FROM main.ex_m"):
        groups.setdefault(str(label), []).append(int(i))
    want = reference([{"id": i, "a": o} for i, o in enumerate(offsets)], ["a"], [True], 3)
    assert sorted(sorted(g) for g in groups.values()) == sorted(sorted(p) for p in want)


def _compiled(tmp_path: Path, typ: str, values: list[str | None], dialect: str) -> str:
    """``sqlanon compile`` of Mondrian over one QI ``a`` of type ``typ`` (a DuckDB file)."""
    path = tmp_path / "c.duckdb"
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE ex (id BIGINT, a {typ})")
    con.executemany(f"INSERT INTO ex VALUES (?, CAST(? AS {typ}))", list(enumerate(values)))
    con.close()
    code, out, err = cli(
        "compile", str(_policy(tmp_path, 2)), "--dialect", dialect, "--db", f"duckdb:///{path}"
    )
    assert code == 0, err
    return out


def test_spark_sql_keeps_a_decimal_median_exact(tmp_path: Path) -> None:
    """The printed Spark SQL of a DECIMAL(38,20) QI compares with the median's exact digits, not a
    DOUBLE (1.0 for all four values: one side for every record)."""
    vals = [f"1.0000000000000000000{i}" for i in range(1, 5)] + [None]
    out = _compiled(tmp_path, "DECIMAL(38,20)", vals, "spark")
    assert "'1.00000000000000000003' AS DECIMAL" in out and "AS DOUBLE) THEN" not in out


def test_spark_sql_of_a_huge_double_median_is_a_double_literal(tmp_path: Path) -> None:
    """A DOUBLE QI near 1e300: its median was written as its 301 digits, a literal Spark reads as a
    DECIMAL (38 digits at most). The printed SQL holds no number of more than 38 digits."""
    out = _compiled(tmp_path, "DOUBLE", [f"{i}e300" for i in range(1, 5)], "spark")
    assert "<=" in out and not re.search(r"\d{39}", out)


def test_widths_of_values_one_double_apart(db: TestDB, tmp_path: Path) -> None:
    """Two QIs: a BIGINT 2^60 + 0 ... 2^60 + 60 (all one double) and an INTEGER 0 ... 100. The
    widths of the first came from its values as doubles, all 0, so the INTEGER was cut where
    Mondrian (the reference, on the exact offsets) cuts the BIGINT: other classes (9, not 10)."""
    rnd = random.Random(7)
    oa, ob = [rnd.randint(0, 60) for _ in range(40)], [rnd.randint(0, 100) for _ in range(40)]
    rows = [[i, str(2**60 + a), b] for i, (a, b) in enumerate(zip(oa, ob, strict=True))]
    db.load("ex", ["id", "a", "b"], rows, ["BIGINT", "BIGINT", "INTEGER"])
    pol = {
        "source": "main.ex",
        "target": "main.ex_m",
        "columns": {"id": "insensitive", "a": "quasi", "b": "quasi"},
        "privacy": {"k": 3},
        "search": {"algorithm": "mondrian"},
    }
    code, _out, err = cli(
        "anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--as", "view", "--replace"
    )
    assert code == 0, err
    groups: dict[tuple[str, str], list[int]] = {}
    for i, la, lb in db.sql("SELECT id, a, b FROM main.ex_m"):
        groups.setdefault((str(la), str(lb)), []).append(int(i))
    ref_rows = [{"id": i, "a": a, "b": b} for i, (a, b) in enumerate(zip(oa, ob, strict=True))]
    want = reference(ref_rows, ["a", "b"], [True, True], 3)
    assert sorted(sorted(g) for g in groups.values()) == sorted(sorted(p) for p in want)


@pytest.mark.parametrize(
    ("spelling", "exact"),
    [
        ("DECIMAL(18,3)", [True, False]),  # DuckDB; 15 digits: within 10^12
        ("numeric(10,2)", [True, False]),
        ("decimal(38,0)", [True, False]),  # Spark: an integer within 2^53
        ("NUMERIC", [False, False]),  # PostgreSQL's catalogue: no scale, any digits
        ("numeric", [False, False]),
        ("HUGEINT", [True, False]),
        ("UBIGINT", [True, False]),
        ("bigint", [True, False]),
        ("BIGINT UNSIGNED", [False, False]),  # not a spelling we know: ranked, never wrong
        ("DECIMAL(38,20)", [False, False]),
        ("real", [True, True]),
        ("double precision", [True, True]),
        ("FLOAT", [True, True]),
    ],
)
def test_double_exact_reads_each_catalogue_spelling(spelling: str, exact: list[bool]) -> None:
    """Whether a double holds the values exactly: [values within +-10^11, a value at 2^53] (2^53 is
    a double, but so is 2^53 + 1 rounded: the bound is strict)."""
    from sqlanon.engines.base import Column
    from sqlanon.transform.partition import double_exact

    col = Column("a", spelling)
    assert [double_exact(col, -1e11, 1e11), double_exact(col, 0.0, 2.0**53)] == exact


def test_a_table_keys_minus_zero_as_zero(db: TestDB, tmp_path: Path) -> None:
    """A DOUBLE QI holding both -0.0 and 0.0 (one value to GROUP BY, and to ``<=``), published as a
    table: every record has its partition, the reference's. Before, the partition map's key had the
    zero GROUP BY kept ('-0.0') and the other zero's records matched none: exit 2, "2 records
    missing" (PostgreSQL; 4 on DuckDB), nothing published."""
    texts = ["-0.0", "0.0", "-0.0", "0.0", "1", "1", "2", "2", "3", "-1", "-1", "-1"]
    typ = "DOUBLE" if db.kind == "duckdb" else "DOUBLE PRECISION"
    db.load("ex", ["id", "a"], [[i, t] for i, t in enumerate(texts)], ["BIGINT", typ])
    code, _out, err = cli(
        "anonymise", str(_policy(tmp_path, 3)), "--db", db.url, "--as", "table", "--replace"
    )
    assert code == 0, err
    groups: dict[str, list[int]] = {}
    for i, label in db.sql("SELECT id, a FROM main.ex_m"):
        groups.setdefault(str(label), []).append(int(i))
    want = reference([{"id": i, "a": float(t) + 1} for i, t in enumerate(texts)], ["a"], [True], 3)
    assert sorted(sorted(g) for g in groups.values()) == sorted(sorted(p) for p in want)
