"""Compiled shapes (sqlanon.sql.shapes): a statement whose values are holes is parsed and
generated once per shape, and each later statement of the same shape is the cached text with its
values put in. These tests hold the bound text against the text the whole-tree path generates from
the same values (equal but for one alias sqlglot adds on T-SQL), check that a hostile identifier
stays one quoted identifier, and that a shape whose placeholder is not a token of its own, or a
hole of the wrong kind, is refused."""

from __future__ import annotations

import enum
from unittest import mock

import pytest
import sqlglot
from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql import compile as compile_mod
from sqlanon.sql import shapes
from sqlanon.sql.compile import Hole, generate, parse_one_statement, to_sql

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
    # The wide branch alone widens its codes (each branch casts its SUM of counts).
    assert shaped.count(" AS BIGINT) * ") == 3 and shaped.count("CAST(SUM(") == 3


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


class Flag(enum.IntEnum):
    FIRST = 0


class Sneaky(int):
    def __str__(self) -> str:
        return "1; DROP TABLE victim; --"


@pytest.mark.parametrize("value", [-1, True, 1.5, None, b"x", Flag.FIRST, Sneaky(0), compile_mod.Sql("x")])
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


def test_a_hole_of_the_wrong_kind_is_refused_even_when_its_shape_is_cached() -> None:
    """The branch cache keys on each hole's kind: a relation where an identifier goes is refused
    by the ident filter, also after a well-typed branch of the same shape was bound."""
    src = Relation("sqlanon_coded_x_4")
    good = {
        "gid": Hole(0),
        "terms": [{"code": Hole("a"), "weight": Hole(1)}],
        "wide": False,
        "source": Hole(src),
    }
    to_sql("search/evaluate_keys", "duckdb", branches=[good], any_check=CHECK)
    bad = dict(good, terms=[{"code": Hole(Relation("other")), "weight": Hole(1)}], source=Hole(5))
    with pytest.raises(SqlanonError, match="ident filter expects an identifier"):
        to_sql("search/evaluate_keys", "duckdb", branches=[bad], any_check=CHECK)


def test_a_template_cannot_see_a_holes_value() -> None:
    hole = Hole(7)
    assert repr(hole) == "Hole(int)" and not [a for a in dir(hole) if "value" in a]
    with pytest.raises(SqlanonError, match="tested a hole"):
        bool(hole)
    with pytest.raises(SqlanonError, match="printed outside a placeholder"):
        str(hole)


# Shapes whose placeholders a bound value could escape or reinterpret: each is refused on the
# dialects named (all four where None). {p} is placeholder 0, {s} a union_all site; then the
# placeholders' kinds and the statement's kind. Found by reviewing the mechanism adversarially.
UNSAFE = {
    "in a comment": ("SELECT 1 AS x /* {p} */ FROM t", ("str",), "select", None),
    "in a string": ("SELECT 'note: {p} end' AS x FROM t", ("str",), "select", None),
    "in a quoted name": ('SELECT "a{p}" AS x FROM t', ("str",), "select", None),
    "a digit glued after": ("SELECT {p}0 AS x FROM t", ("int",), "select", None),
    "a call": ("SELECT {p}(1) AS x FROM t", ("str",), "select", None),
    "a count qualified": ("SELECT t.{p} AS x FROM t", ("int",), "select", None),
    "a count as a table": ("SELECT 1 AS x FROM {p}", ("int",), "select", None),
    "a relation as a column": ("SELECT {p} AS x FROM t", ("Relation",), "select", None),
    "a relation qualified": ("SELECT 1 AS x FROM s.{p}", ("Relation",), "select", None),
    "a site with a WHERE": (
        "SELECT * FROM (SELECT * FROM {s} WHERE g = 0) AS u",
        ("splice",),
        "select",
        None,
    ),
    "a site not in parentheses": ("SELECT 9 AS g EXCEPT SELECT * FROM {s}", ("splice",), "select", None),
    "a site aliased": ("SELECT * FROM (SELECT * FROM {s} AS v) AS u", ("splice",), "select", None),
    "a site sampled": (
        "SELECT * FROM (SELECT * FROM {s} TABLESAMPLE (10 PERCENT)) AS u",
        ("splice",),
        "select",
        None,
    ),
    # The dialect's rewrite puts the placeholder in a string: T-SQL's EXEC('...').
    "T-SQL EXEC": ("CREATE TABLE IF NOT EXISTS o AS SELECT {p} AS c FROM t", ("str",), "create", ["tsql"]),
    # DuckDB writes MAKE_INTERVAL as INTERVAL '... {p} month'.
    "an interval": ("SELECT MAKE_INTERVAL(a, {p}) AS iv FROM t", ("str",), "select", ["duckdb"]),
    # A count beside a dot reads as a decimal: PostgreSQL and Spark write STRUCT_EXTRACT as {p}.k.
    "a count beside a dot": (
        "SELECT STRUCT_EXTRACT({p}, 'k') AS x FROM t",
        ("int",),
        "select",
        ["postgres", "spark"],
    ),
}


@pytest.mark.parametrize(
    ("case", "dialect"),
    [(c, d) for c in sorted(UNSAFE) for d in UNSAFE[c][3] or DIALECTS],
)
def test_an_unsafe_shape_is_refused(case: str, dialect: str) -> None:
    template, kinds, kind, _ = UNSAFE[case]
    text = template.format(p=shapes.placeholder(0, False), s=shapes.placeholder(0, True).split()[-1])
    tree = parse_one_statement(text, kind)
    with pytest.raises(SqlanonError, match="internal"):
        shapes.split(tree, generate(tree.copy(), dialect), kinds, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_relation_hole_after_select_star_is_a_table(dialect: str) -> None:
    """``SELECT * FROM {{ r|rel }}`` looks like a union_all site in the generated text; it is
    bound as the relation it is."""
    text = f"SELECT * FROM {shapes.placeholder(0, False)} AS s"
    tree = parse_one_statement(text, "select")
    parts = shapes.split(tree, generate(tree.copy(), dialect), ("Relation",), dialect)
    src = Relation('we"ird`] t', "s")
    (bound,) = sqlglot.parse(shapes.bind(parts, [Hole(src)], dialect), read=dialect)
    assert [(t.name, t.db) for t in bound.find_all(exp.Table)] == [(src.name, "s")]


def test_a_union_all_branch_is_one_plain_select() -> None:
    with pytest.raises(SqlanonError, match="plain SELECT"):
        parse_one_statement("SELECT 1 AS g ORDER BY 1 LIMIT 1", "branch")
    with pytest.raises(SqlanonError, match="union_all of no"):
        to_sql("search/evaluate_keys", "duckdb", branches=[], any_check=CHECK)
