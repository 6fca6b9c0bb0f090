"""Mondrian's rounds cost their statements' execution, not their compilation (issue 33, task M1).

Each round runs the same few templates (round, cuts, done, split) on new relations. Rendered with
the relations and the next id as values, every round's text was new, so sqlglot parsed and
generated ~30 kB of SQL per round again (at 1e5 rows ~2 s of the 5.5 s; py-spy). They are now
holes: a template's shape is parsed once, and the rounds bind it. Here a table that takes many
rounds compiles no more statements than one that takes a few, and the cut tree is the same as the
reference's (tests/test_mondrian.py has the reference; tests/test_mondrian_rounds.py the hashes).
"""

from __future__ import annotations

import gc
from pathlib import Path

import duckdb
import pytest

import sqlanon.sql.compile as compile_mod
from sqlanon.engines import session
from sqlanon.lattice import prepare
from sqlanon.lattice.mondrian import mondrian
from sqlanon.policy import parse_policy
from tests.helpers import ages_duckdb


def _run(tmp_path: Path, distinct: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    """Mondrian (k = 2) on ``distinct`` ages, one record each, and a two-level hierarchy on a
    second QI: (rounds, partitions, statements other than drops parsed during the rounds)."""
    path = tmp_path / f"m{distinct}.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, 1000 + i AS age, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS z, "
        f"'x' AS s FROM range({distinct}) AS r(i)"
    )
    con.close()
    doc = {
        "source": "main.t",
        "columns": {
            "id": "insensitive",
            "age": "quasi",
            "z": {"role": "quasi", "hierarchy": {"map": {"a": ["ab"], "b": ["ab"]}}},
            "s": "sensitive",
        },
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian"},
    }
    pol = parse_policy(doc)
    parsed = [0]
    real = compile_mod.parse_one_statement

    def counting(text: str, *a, **kw):  # noqa: ANN002, ANN003, ANN202
        parsed[0] += not text.startswith("DROP")  # a drop is one short line (Spark frees by name)
        return real(text, *a, **kw)

    with session(f"duckdb:///{path}") as be:
        plan = prepare(be, pol)
        monkeypatch.setattr(compile_mod, "parse_one_statement", counting)
        res = mondrian(plan)
        monkeypatch.setattr(compile_mod, "parse_one_statement", real)
    return res.rounds, res.partitions, parsed[0]


def test_rounds_do_not_recompile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """256 ages take 8 rounds of halving (128 partitions of 2), 16 ages 4: the many rounds parse
    no more statements than the few (before: 30 against 20)."""
    few = _run(tmp_path, 16, monkeypatch)
    many = _run(tmp_path, 256, monkeypatch)
    assert (few[1], many[1]) == (8, 128)  # 2 records a partition: every halving allowed
    assert many[0] >= few[0] + 4
    assert many[2] <= few[2] + 1, (few, many)
    assert many[2] <= 20


def test_the_collector_is_paused_then_restored(tmp_path: Path) -> None:
    """The garbage collector is off during the rounds (the cut tree's allocations set off full
    collections of the whole heap) and as it was afterwards, on or off."""
    path = tmp_path / "g.duckdb"
    pol = ages_duckdb(path, 16, offset=0)
    during: list[bool] = []
    with session(f"duckdb:///{path}") as be:
        plan = prepare(be, pol)
        assert gc.isenabled()
        mondrian(plan, lambda *_: during.append(gc.isenabled()))
        assert gc.isenabled() and during and not any(during)
        gc.disable()
        try:
            mondrian(plan)
            assert not gc.isenabled()
        finally:
            gc.enable()


def _round_ctes(tmp_path: Path, quasi: int) -> int:
    """The CTEs of Mondrian's round statement for ``quasi`` QIs: one numeric (age), the rest along
    a two-level hierarchy each (k = 2, 16 records)."""
    path = tmp_path / f"c{quasi}.duckdb"
    con = duckdb.connect(str(path))
    zs = ", ".join(f"CASE WHEN (i >> {j}) % 2 = 0 THEN 'a' ELSE 'b' END AS z{j}" for j in range(quasi - 1))
    con.execute(f"CREATE TABLE t AS SELECT i AS id, 20 + i AS age, {zs}, 'x' AS s FROM range(16) AS r(i)")
    con.close()
    cols: dict = {"id": "insensitive", "age": "quasi", "s": "sensitive"}
    for j in range(quasi - 1):
        cols[f"z{j}"] = {"role": "quasi", "hierarchy": {"map": {"a": ["ab"], "b": ["ab"]}}}
    pol = parse_policy(
        {"source": "main.t", "columns": cols, "privacy": {"k": 2}, "search": {"algorithm": "mondrian"}}
    )
    with session(f"duckdb:///{path}") as be:
        mondrian(prepare(be, pol))
        stmt = next(s for s in be.log if "_mcuts_" in s.split(" AS ", 1)[0])
    import sqlglot
    from sqlglot import exp

    return len(list(sqlglot.parse_one(stmt, read="duckdb").find_all(exp.CTE)))


def test_a_round_is_one_statement_shape_whatever_the_quasi_identifiers(tmp_path: Path) -> None:
    """Issue 33, task M3: DuckDB spent ~0.035 s binding and optimising each round's statement
    whatever its rows, ~40 CTEs for the nine Adult QIs (a third of the rounds' time at 1e6 rows).
    The round now treats the QIs in long form (a dim column): its CTEs do not grow with the QIs
    (before: 4 more per QI along a hierarchy, 13 for 2 QIs against 29 for 6)."""
    few, many = _round_ctes(tmp_path, 2), _round_ctes(tmp_path, 6)
    assert few == many, (few, many)
    assert many <= 12


def test_rounds_do_not_render_their_templates_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: a shape was parsed once, but its Jinja template was still rendered every round
    (the create_temp wrapper around round.sql.j2: ~2 ms a round statement, 0.18 s at 1e6 rows).
    A statement whose signature was seen before is now bound without a render: 8 rounds render
    no more than 4 (drops aside: Spark frees a dropped relation's blocks by its name)."""
    counts = []
    for distinct in (16, 256):
        rendered = [0]
        real = compile_mod._rendered

        def counting(name, *a, real=real, rendered=rendered, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
            rendered[0] += name != "ddl/drop_table"
            return real(name, *a, **kw)

        monkeypatch.setattr(compile_mod, "_rendered", counting)
        rounds, partitions, _ = _run(tmp_path, distinct, monkeypatch)
        monkeypatch.setattr(compile_mod, "_rendered", real)
        counts.append((rounds, partitions, rendered[0]))
    (few_rounds, _, few), (many_rounds, _, many) = counts
    assert many_rounds >= few_rounds + 4
    assert many <= few, counts
