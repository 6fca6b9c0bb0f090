"""Mondrian on numbers a double cannot hold (issue 33's leftover: the rounds' axis was DOUBLE).

An attacker's table: a BIGINT (or DECIMAL(38, 0), DECIMAL(38, 20)) quasi-identifier whose values
lie where doubles are far apart (2^60: 256 apart; 10^20: 16,384 apart), so that distinct values
round to one double. Cast to DOUBLE, the rounds' medians and the sides of a cut were computed on
rounded numbers while the published CASE tree compared the source's exact values with the rounded
median's literal: 2^60 - 1 and 2^60 + 1, one class of k = 2 in the rounds, were published on two
sides of ``<= 1152921504606846976``, a class of one record.

The expected partitions come from the reference of tests/test_mondrian.py (Mondrian from its
definition, row by row), given the values less their smallest: the reference reads numbers as
Python floats, and the definition (the value order, widths as ratios of differences) does not
change under a shift, with one quasi-identifier no width is compared. Each release (a view, the
CASE tree; a table, the partition map) is checked against it and by brute force (every class at
least k).
"""

from __future__ import annotations

import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TestDB
from tests.helpers import cli, write_policy
from tests.test_mondrian import reference

TWO60 = 2**60

#: (column type, the values around which rows are drawn, the unit of an offset)
CASES = {
    "bigint": ("BIGINT", TWO60, 1),
    "decimal38": ("DECIMAL(38,0)", Decimal(10**20), Decimal(40)),
    "decimal_frac": ("DECIMAL(38,20)", Decimal(1), Decimal("1e-18")),
}


def _values(kind: str, offsets: list[int | None]) -> list[Any]:
    _, base, unit = CASES[kind]
    return [None if o is None else base + o * unit for o in offsets]


def _release(
    db: TestDB,
    tmp_path: Path,
    kind: str,
    offsets: list[int | None],
    k: int,
    as_: str,
    where: str = "auto",
    load: bool = True,
) -> list[list[int]]:
    """Publish Mondrian's release of the offsets' values (one QI ``a``, None: NULL); its classes
    (row ids)."""
    vals = _values(kind, offsets)
    rows = [[i, v, "xy"[i % 2]] for i, v in enumerate(vals)]
    if load:
        db.load("ex", ["id", "a", "s"], rows, ["BIGINT", CASES[kind][0], "VARCHAR"])
    pol = {
        "source": "main.ex",
        "target": "main.ex_m",
        "columns": {"id": "insensitive", "a": "quasi", "s": "insensitive"},
        "privacy": {"k": k},
        "search": {"algorithm": "mondrian", "where": where},
    }
    code, _out, err = cli(
        "anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--as", as_, "--replace"
    )
    assert code == 0, err
    groups: dict[str, list[int]] = {}
    for i, label in db.sql("SELECT id, a FROM main.ex_m"):
        groups.setdefault(str(label), []).append(int(i))
    return sorted(sorted(g) for g in groups.values())


def _expected(offsets: list[int | None], k: int) -> list[list[int]]:
    lo = min(o for o in offsets if o is not None)
    rows = [{"id": i, "a": None if o is None else o - lo} for i, o in enumerate(offsets)]
    return sorted(sorted(p) for p in reference(rows, ["a"], [True], k))


@pytest.mark.parametrize("as_", ["view", "table"])
def test_values_one_double_apart_stay_in_their_class(db: TestDB, tmp_path: Path, as_: str) -> None:
    """The attack by hand: 2^60 - 1 and 2^60 + 1 are one double; k = 2 is met only by the exact cut
    after 2^60 + 1 ({0, 1} | {2, 3}). Before the fix the view published a class of one record
    (which re-verification refused: exit 2, "does not satisfy the policy", nothing published)."""
    offsets = [-1, 1, 1000, 1000]
    got = _release(db, tmp_path, "bigint", offsets, 2, as_)
    assert got == [[0, 1], [2, 3]] == _expected(offsets, 2)


@pytest.mark.parametrize("db", [pytest.param("spark", marks=pytest.mark.spark)], indirect=True)
def test_spark_long_and_decimal(db: TestDB, tmp_path: Path) -> None:
    """Spark shares the templates: a LongType and a DecimalType(38, 0) QI, each published as a view
    (the CASE tree, Spark's literals), give the reference's classes."""
    offsets = [-1, 1, 1000, 1000, 3, 3]
    for kind in ("bigint", "decimal38"):
        assert _release(db, tmp_path, kind, offsets, 2, "view") == _expected(offsets, 2), kind


@pytest.mark.parametrize("kind", sorted(CASES))
def test_same_partitions_as_the_reference(db: TestDB, tmp_path: Path, kind: str) -> None:
    """Random values a few doubles apart (most of them share a double with others), k = 3: the
    view's classes are the reference's, and each holds k."""
    rnd = random.Random(f"{kind}-{db.kind}")
    offsets = [rnd.randint(-700, 700) for _ in range(40)]
    want = _expected(offsets, 3)
    assert len(want) > 4  # the exact values allow many cuts
    got = _release(db, tmp_path, kind, offsets, 3, "view")
    assert got == want
    assert min(Counter(i for g in got for i in g).values()) == 1 and min(map(len, got)) >= 3


@pytest.mark.parametrize("as_", ["view", "table"])
def test_a_median_cut_on_ranks_is_published_exactly(db: TestDB, tmp_path: Path, as_: str) -> None:
    """With NULLs the BIGINT is cut on its ranks (its median's text from the data): the CASE tree
    compared with the text read as a float, 2^60, which put 2^60 + 1 on the wrong side."""
    offsets: list[int | None] = [-1, 1, 1000, 1000, None, None]
    got = _release(db, tmp_path, "bigint", offsets, 2, as_)
    assert got == _expected(offsets, 2) and min(map(len, got)) >= 2


def test_postgres_numeric_rounds_stay_in_the_warehouse(db: TestDB, tmp_path: Path) -> None:
    """PostgreSQL's unconstrained numeric crosses to the local DuckDB as a DOUBLE, where 10^20 - 40
    and 10^20 + 40 are one value: under auto the rounds run in the warehouse (the reference's
    partitions), and search.where: local is refused in one line."""
    if db.kind != "postgres":
        pytest.skip("PostgreSQL's numeric")
    offsets = [-1, 1, 1000, 1000, 3, 3]
    # DECIMAL(38,0): information_schema names it numeric, as it does an unconstrained one
    assert _release(db, tmp_path, "decimal38", offsets, 2, "table") == _expected(offsets, 2)
    with pytest.raises(AssertionError, match=r"column a is PostgreSQL numeric.*search.where: database"):
        _release(db, tmp_path, "decimal38", offsets, 2, "table", "local", load=False)


def test_a_median_of_minus_infinity_is_a_cast(db: TestDB, tmp_path: Path) -> None:
    """A double's -Infinity as the median of its ranks (the range is not finite): the CASE tree
    compares with CAST('-Infinity' AS DOUBLE), where the float's text ``-inf`` was read as a column."""
    rows = [[i, float("-inf") if i < 6 else float(1 + i % 2)] for i in range(12)]
    db.load("ex", ["id", "a"], rows, ["BIGINT", "DOUBLE PRECISION"])
    pol = {
        "source": "main.ex",
        "target": "main.ex_m",
        "columns": {"id": "insensitive", "a": "quasi"},
        "privacy": {"k": 3},
        "search": {"algorithm": "mondrian"},
    }
    code, _out, err = cli(
        "anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--as", "view", "--replace"
    )
    assert code == 0, err
    classes = Counter(str(a) for _, a in db.sql("SELECT id, a FROM main.ex_m"))
    assert sorted(classes.values()) == [3, 3, 6] and min(classes.values()) >= 3, classes
