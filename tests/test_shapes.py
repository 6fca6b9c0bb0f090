"""Compiled shapes (sqlanon.sql.compile.Hole): a statement whose values are holes is parsed and
generated once per shape, and each later statement of the same shape is the cached text with its
values put in. These tests hold the bound text against the text the whole-tree path generates from
the same values, and check that a hostile identifier stays one quoted identifier."""

from __future__ import annotations

from unittest import mock

import pytest
import sqlglot
from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql import compile as compile_mod
from sqlanon.sql.compile import Hole, parse_one_statement, to_sql

DIALECTS = ["duckdb", "postgres", "tsql", "spark"]
CHECK = compile_mod.Sql("c.n < 5")


def _branches(src: Relation, names: list[list[str]], wide: set[int] = frozenset()) -> list[dict]:  # type: ignore[assignment]
    out = []
    for gid, cols in enumerate(names):
        terms = [{"code": Hole(c), "weight": Hole(7**i)} for i, c in enumerate(cols)]
        out.append({"gid": Hole(gid), "terms": terms, "wide": gid in wide, "source": Hole(src)})
    return out


def _whole_tree(name: str, dialect: str, **ctx: object) -> str:
    """The path without shapes: everything rendered, parsed and generated at once (a read-only
    session's path, forced by a CTE that nothing reads)."""
    unused = {"sqlanon_nothing_reads_this": parse_one_statement("SELECT 1 AS x", "select")}
    return to_sql(name, dialect, inline=unused, **ctx)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bound_shape_is_the_whole_tree_text(dialect: str) -> None:
    src = Relation("sqlanon_coded_x_1")
    branches = _branches(src, [[], ["c_0_0", "c_1_2"], ["c_2_1", "c_0_1", "c_3_0"]], wide={2})
    shaped = to_sql("search/evaluate_keys", dialect, branches=branches, any_check=CHECK)
    whole = _whole_tree("search/evaluate_keys", dialect, branches=branches, any_check=CHECK)
    if dialect == "tsql":
        # Inside one tree sqlglot names T-SQL's bare column in a derived table (cnt AS cnt); a
        # branch compiled alone keeps it bare, which names it the same.
        whole = whole.replace("cnt AS cnt", "cnt")
    assert shaped == whole
    assert shaped.count(" UNION ALL ") == 2
    assert "CAST(" in shaped and shaped.count("CAST(") == 3  # the wide branch alone


def test_a_shape_is_parsed_once_and_bound_per_statement() -> None:
    src = Relation("sqlanon_coded_x_2")
    first = to_sql(
        "search/evaluate_keys", "postgres", branches=_branches(src, [["c_0_0", "c_1_0"]]), any_check=CHECK
    )
    with mock.patch.object(compile_mod, "parse_one_statement", side_effect=AssertionError("parsed")):
        second = to_sql(
            "search/evaluate_keys", "postgres", branches=_branches(src, [["c_4_1", "c_2_0"]]), any_check=CHECK
        )
    assert first != second
    assert '"c_4_1" * 1 + "c_2_0" * 7' in second and "c_0_0" not in second


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_hostile_identifier_stays_one_identifier(dialect: str) -> None:
    hostile = 'c"] `x`; DROP TABLE t; --'
    src = Relation('we"ird`] table')
    sql = to_sql("search/evaluate_keys", dialect, branches=_branches(src, [[hostile]]), any_check=CHECK)
    (tree,) = sqlglot.parse(sql, read=dialect)
    assert isinstance(tree, exp.Select)
    assert hostile in {c.name for c in tree.find_all(exp.Column)}
    assert src.name in {t.name for t in tree.find_all(exp.Table)}
    assert not list(tree.find_all(exp.Drop))


@pytest.mark.parametrize("value", [-1, True, 1.5, None, b"x"])
def test_a_hole_refuses_anything_but_a_count_a_name_or_a_relation(value: object) -> None:
    with pytest.raises(SqlanonError, match="a hole holds a count"):
        Hole(value)  # type: ignore[arg-type]


def test_a_hole_shared_by_two_places_is_bound_in_each() -> None:
    """A branch whose context holds one Hole object in two places is rendered rather than bound
    from the signature cache (whose paths could not tell the places apart); a later branch of the
    same signature with two holes gets each its own value."""
    src = Relation("sqlanon_coded_x_3")
    shared = Hole(3)
    twice = [{"code": Hole("a"), "weight": shared}, {"code": Hole("b"), "weight": shared}]
    apart = [{"code": Hole("a"), "weight": Hole(3)}, {"code": Hole("b"), "weight": Hole(5)}]
    texts = []
    for terms in (twice, apart, twice):
        branch = {"gid": Hole(0), "terms": terms, "wide": False, "source": Hole(src)}
        texts.append(to_sql("search/evaluate_keys", "duckdb", branches=[branch], any_check=CHECK))
    assert '"a" * 3 + "b" * 3 AS k' in texts[0] and texts[0] == texts[2]
    assert '"a" * 3 + "b" * 5 AS k' in texts[1]
