"""Mondrian builds no coded table (issue 33, task M of session 8).

The lattice search codes every hierarchy level of the base frequency table (templates/search/
coded.sql.j2) and reads its cardinalities; Mondrian works on the base frequency table and read the
coded table once, to check the top node (the whole table as one class) and the hierarchies'
coverage. At 1e7 rows that was ~0.45 s of ~8.6 s. ``prepare(coded=False)``, which ``anonymise``
asks for with Mondrian, builds neither: the coverage is checked on the base table and the top node
on the base table too. Here: no coded table is created, the partitions are the same, and every
refusal before the first round (k above the rows, l above the distinct values, the whole table
failing, an uncovered value) reads as it did with the coded table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from sqlanon.engines import session
from sqlanon.errors import SqlanonError
from sqlanon.lattice import mondrian_cuts, prepare
from sqlanon.lattice.mondrian import mondrian
from sqlanon.policy import parse_policy
from sqlanon.publish import anonymise

#: 12 records: ages 20..31, z alternating a/b (a map hierarchy), s nine 'x' and three 'y'.
ROWS = [[i, 20 + i, "ab"[i % 2], "y" if i % 4 == 0 else "x"] for i in range(12)]


def _policy(db: Any, privacy: dict[str, Any], table: dict[str, list[str]] | None = None) -> Any:
    hier = {"map": table or {"a": ["ab"], "b": ["ab"]}}
    doc = {
        "source": db.rel("t"),
        "columns": {
            "id": "insensitive",
            "age": "quasi",
            "z": {"role": "quasi", "hierarchy": hier},
            "s": "sensitive",
        },
        "privacy": privacy,
        "search": {"algorithm": "mondrian"},
    }
    return parse_policy(doc)


def _load(db: Any) -> None:
    db.load("t", ["id", "age", "z", "s"], ROWS, ["BIGINT", "BIGINT", "VARCHAR", "VARCHAR"])


def _tree(res: Any) -> list[tuple]:
    return sorted((p, c.dim, c.med, c.med_text, tuple(c.children), c.labels) for p, c in res.cuts.items())


def test_count_only_mondrian_creates_no_coded_table(db: Any) -> None:
    """``anonymise`` with Mondrian and k = 2 runs no search/coded nor search/cardinalities on a
    coded table (before: both), still checks the coverage (search/uncovered_any), and finds the
    partitions that the plan with a coded table finds."""
    _load(db)
    pol = _policy(db, {"k": 2})
    with session(db.url) as be:
        names: list[str] = []
        real = be._sql

        def record(name: str, *a: Any, **kw: Any) -> Any:
            names.append(name)
            return real(name, *a, **kw)

        be._sql = record  # type: ignore[method-assign]
        out = anonymise(be, pol, dry_run=True)
        be._sql = real  # type: ignore[method-assign]
        assert "search/coded" not in names, names
        assert "search/uncovered_any" in names, names  # the coverage, on the base table
        with_coded = mondrian(prepare(be, pol))
        without = mondrian(prepare(be, pol, coded=False))
    # 12 records, k = 2: the ages halved twice (6, then 3 a partition; 3 make no two halves of 2)
    assert out["partitions"] == with_coded.partitions == 4
    assert _tree(without) == _tree(with_coded)
    assert without.metrics == with_coded.metrics


def _refusal(db: Any, pol: Any, coded: bool) -> str:
    with session(db.url) as be, pytest.raises(SqlanonError) as err:
        mondrian(prepare(be, pol, coded=coded))
    return str(err.value)


@pytest.mark.parametrize(
    ("privacy", "table", "want"),
    [
        ({"k": 13}, None, "privacy.k: k = 13 but the table has 12 rows; lower k"),
        ({"k": 2, "l": {"s": 3}}, None, "privacy.l"),  # 2 distinct values of s
        # entropy l = 2 needs an even split; 9 'x' to 3 'y' is not, even in the whole table
        ({"k": 2, "l": {"s": {"l": 2, "kind": "entropy"}}}, None, "mondrian: even the whole table"),
        ({"k": 2}, {"a": ["ab"]}, "columns.z.hierarchy: 1 value(s) present in 'z' are not covered"),
    ],
)
def test_refusals_before_the_rounds_are_unchanged(db: Any, privacy: dict, table: Any, want: str) -> None:
    """Each refusal is the one the plan with a coded table gives, word for word."""
    _load(db)
    pol = _policy(db, privacy, table)
    got = _refusal(db, pol, coded=False)
    assert got.startswith(want), got
    assert got == _refusal(db, pol, coded=True)


def test_cuts_read_as_arrays_or_as_tuples_make_the_same_tree(tmp_path: Path, monkeypatch: Any) -> None:
    """On DuckDB a round's cuts are read as NumPy arrays and added one step per cut; without NumPy
    (optional) as tuples, one step per child. A table whose rounds cut along a hierarchy (three
    children, a NULL label) and on an axis gives the same tree, children and labels either way."""
    path = tmp_path / "c.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, 20 + i % 40 AS age, "
        "CASE i % 4 WHEN 0 THEN 'a' WHEN 1 THEN 'b' WHEN 2 THEN 'c' END AS z, 'x' AS s "
        "FROM range(400) AS r(i)"
    )
    con.close()

    url = f"duckdb:///{path}"
    table = {"a": ["ab"], "b": ["ab"], "c": ["c"]}  # NULL z (i % 4 = 3) under ab too
    pol = parse_policy(
        {
            "source": "main.t",
            "columns": {
                "id": "insensitive",
                "age": "quasi",
                "z": {"role": "quasi", "hierarchy": {"map": table, "null": ["ab"]}},
                "s": "sensitive",
            },
            "privacy": {"k": 3},
            "search": {"algorithm": "mondrian"},
        }
    )
    with session(url) as be:
        arrays = mondrian(prepare(be, pol, coded=False))
    monkeypatch.setattr(mondrian_cuts, "_numpy", lambda: None)
    with session(url) as be:
        tuples = mondrian(prepare(be, pol, coded=False))
    assert any(c.labels and None in c.labels and len(c.children) == 3 for c in arrays.cuts.values())
    assert sum(c.labels is None for c in arrays.cuts.values()) >= 10  # cuts on the ages
    assert _tree(arrays) == _tree(tuples)
    assert all(type(c.med) is float and type(c.dim) is int for c in arrays.cuts.values())
