"""Mondrian's rounds after the speed-ups of issue 33 (ranks from per-value dictionaries, no CTE
materialised per round, only the live partitions' rows carried from round to round, the done rows
unioned at the end): the partitions are the ones its definition gives, worked out by hand here, on
DuckDB and PostgreSQL.

The table (k = 2; zip cut along its hierarchy a1, a2 -> a; b1, b2 -> b; then *; age on its values):

    id  zip  age    round 1: zip's width (4 - 1) / (4 - 1) = 1 ties age's (51 - 20) / 31 = 1, so
    0   a1   20     zip (declared first) is cut below its lowest common label *: a = {0, 1, 2},
    1   a1   22     b = {4, 5, 6, 7}.
    2   a2   21     round 2, a: zip (2 - 1) / 3 = 0.33 beats age 2 / 31, but its children a1 = {0, 1}
    4   b1   30     and a2 = {2} leave 1 < k; age's lower median 21 leaves {0, 2} | {1}, the value
    5   b1   51     below it {0} | {1, 2}: a is done. b: age (51 - 30) / 31 = 0.68 beats zip 0.33;
    6   b2   39     its lower median 39 gives {4, 6} | {5, 7}.
    7   b2   41     round 3: in each, zip leaves b1 | b2 = 1 | 1 and age 1 | 1: done.

So a is set aside as done in round 2 while b's halves go on to round 3: the release holds the rows
of both, in the partitions {0, 1, 2}, {4, 6}, {5, 7}.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import sqlanon
from tests.helpers import ages_duckdb

ROWS = [
    (0, "a1", 20, "x"),
    (1, "a1", 22, "y"),
    (2, "a2", 21, "x"),
    (4, "b1", 30, "x"),
    (5, "b1", 51, "y"),
    (6, "b2", 39, "x"),
    (7, "b2", 41, "y"),
]
WANT = {frozenset({0, 1, 2}), frozenset({4, 6}), frozenset({5, 7})}


def _policy(path: Path) -> Path:
    doc = {
        "source": "main.t",
        "target": "main.t_m",
        "columns": {
            "id": "insensitive",
            "zip": {
                "role": "quasi",
                "hierarchy": {"map": {"a1": ["a"], "a2": ["a"], "b1": ["b"], "b2": ["b"]}},
            },
            "age": "quasi",
            "s": "sensitive",
        },
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian"},
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def test_partitions_worked_by_hand(db, tmp_path):  # noqa: ANN001
    db.load(
        "t", ["id", "zip", "age", "s"], [list(r) for r in ROWS], ["BIGINT", "VARCHAR", "BIGINT", "VARCHAR"]
    )
    r = sqlanon.anonymise(_policy(tmp_path / "p.yaml"), db.url, publish_as="table").to_dict()
    assert r["partitions"] == 3
    groups: dict[tuple, set[int]] = {}
    for i, z, a in db.sql('SELECT id, "zip", "age" FROM main.t_m'):
        groups.setdefault((z, a), set()).add(i)
    assert {frozenset(g) for g in groups.values()} == WANT


def test_superseded_round_tables_are_dropped(tmp_path):  # noqa: ANN001
    """Each round's superseded working table and cuts are dropped when the round ends, so the rows
    held stay about two working tables, whatever the number of rounds (issue 33: 1e8 rows in
    bounded memory). 64 distinct ages, k = 2: 5 rounds of halving."""

    from sqlanon.engines import session
    from sqlanon.lattice import prepare
    from sqlanon.lattice.mondrian import mondrian

    path = tmp_path / "m.duckdb"
    pol = ages_duckdb(path, 64)
    with session(f"duckdb:///{path}") as be:
        res = mondrian(prepare(be, pol))
        names = [r[0] for r in be._conn.exec_driver_sql("SELECT table_name FROM duckdb_tables()").fetchall()]
        listed = list(be._temps)
    assert res.rounds >= 5 and res.partitions == 32
    assert sum("_mondrian_" in n for n in names) <= 2  # the first working table and the final one
    # ... and struck off the session's list, whose end dropped each again (47 statements at 1e6).
    assert listed and set(listed) <= set(names), sorted(set(listed) - set(names))
    assert sum("_mcuts_" in n for n in names) <= 1


def test_rounds_set_off_no_checkpoint_and_restore_the_setting(tmp_path):  # noqa: ANN001
    """DuckDB checkpointed the database at one of the rounds' commits (its automatic checkpoint past
    ``checkpoint_threshold``): at 1e6 rows one commit took 0.3-0.7 s, the others 1 ms. The rounds
    run with the threshold out of reach, and the user's own (global to the database) comes back."""

    from sqlanon.engines import session
    from sqlanon.lattice import prepare
    from sqlanon.lattice.mondrian import mondrian

    path = tmp_path / "c.duckdb"
    pol = ages_duckdb(path, 16)
    seen: list[str] = []
    with session(f"duckdb:///{path}") as be:

        def setting() -> str:
            return str(be._conn.exec_driver_sql("SELECT current_setting('checkpoint_threshold')").scalar())

        default = setting()
        res = mondrian(prepare(be, pol), lambda *_: seen.append(setting()))
        after = setting()
        be._conn.exec_driver_sql("SET checkpoint_threshold = '64MiB'")
        mondrian(prepare(be, pol))
        mine = setting()
    assert res.partitions == 8 and len(seen) >= 3
    assert default not in seen, seen  # raised for every round
    assert after == default
    assert mine == "64.0 MiB"


#: The cut trees of Adult (30,162 rows, k = 5), hashed (every cut's partition, QI, cut point, median
#: text, children and labels, in pid order) as the code before issue 33's task M1 (fewer statements
#: per round: labels from the covers, children numbered in the round, levels looked up per value)
#: computed them. ``hier9``: the nine QIs, eight along the ARX hierarchies, age on its values;
#: ``mixed_l``: three along hierarchies, age on its values, race and workclass on their ranks, and
#: distinct 2-diversity of occupation (the halves' class statistics).
ADULT_TREES = {
    "hier9": (3911, 19, "5b8219465bc3f0c0"),
    "mixed_l": (2670, 18, "fa298412aad5610e"),
}
ADULT_QIS = {
    "hier9": (
        ["sex", "age", "race", "marital-status", "education", "native-country", "workclass"]
        + ["salary-class", "occupation"],
        [],
        {},
    ),
    "mixed_l": (
        ["sex", "marital-status", "education"],
        ["age", "race", "workclass"],
        {"l": {"occupation": 2}},
    ),
}


def _tree_hash(cuts: dict) -> str:  # noqa: ANN001
    import hashlib

    h = hashlib.sha256()
    for pid, c in sorted(cuts.items()):
        h.update(repr((pid, c.dim, c.med, c.med_text, c.children, c.labels)).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(ADULT_TREES))
def test_adult_cut_trees_unchanged(name: str, tmp_path: Path) -> None:
    import duckdb

    from sqlanon.engines import session
    from sqlanon.lattice import prepare
    from sqlanon.lattice.mondrian import mondrian
    from sqlanon.policy import parse_policy
    from tests.conftest import ADULT_DIR

    if not (ADULT_DIR / "adult.csv").is_file():
        pytest.skip("Adult data absent (../shared/data/adult)")
    path = tmp_path / "adult.duckdb"
    con = duckdb.connect(str(path))
    csv = str(ADULT_DIR / "adult.csv").replace("'", "''")
    con.execute(f"CREATE TABLE main.adult AS SELECT * FROM read_csv('{csv}', delim=';', header=true)")
    con.close()
    hier, plain, extra = ADULT_QIS[name]
    cols: dict = {
        q: {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{q}.csv")}} for q in hier
    }
    cols.update({q: "quasi" for q in plain})
    if extra:
        cols["occupation"] = "sensitive"
    doc = {
        "source": "main.adult",
        "columns": cols,
        "privacy": {"k": 5, **extra},
        "search": {"algorithm": "mondrian"},
    }
    with session(f"duckdb:///{path}") as be:
        res = mondrian(prepare(be, parse_policy(doc)))
    assert (res.partitions, res.rounds, _tree_hash(res.cuts)) == ADULT_TREES[name]


def test_adult_cut_tree_unchanged_on_the_level_by_level_path(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A hierarchy whose labels do not nest keeps the level-by-level lowest common label
    (round.sql.j2's lv_j, ls_j, m_j): forced here for every QI on Adult, the same cut tree as the
    ranges path that nesting hierarchies take (test_adult_cut_trees_unchanged)."""
    from sqlanon.engines.base import Backend

    real = Backend.query

    def all_tangled(self, name, /, **ctx):  # noqa: ANN001, ANN002, ANN003, ANN202
        if name == "mondrian/nests":
            return [(j,) for j in range(16)]
        return real(self, name, **ctx)

    monkeypatch.setattr(Backend, "query", all_tangled)
    test_adult_cut_trees_unchanged("hier9", tmp_path)


def _hier_doc(mapping: dict) -> dict:
    return {
        "source": "main.t",
        "columns": {
            "id": "insensitive",
            "z": {"role": "quasi", "hierarchy": {"map": mapping}},
            "s": "sensitive",
        },
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian"},
    }


def test_hierarchy_ranks_run_label_by_label(db) -> None:  # noqa: ANN001
    """Issue 33, task M3: a QI cut along its hierarchy is ranked in the hierarchy's order, so each
    label's values are consecutive ranks and a partition's lowest common label follows from its
    lowest and highest rank. In value order (the ranks before) label A = {x, z} was not a run: x 1,
    y 2, z 3. The partitions are the definition's: z's width is 1 at '*'; its children A = {x, z}
    (4 records) and B = {y} (2); A's children x | z have 2 each: {x}, {y}, {z}."""
    from sqlanon.engines import session
    from sqlanon.lattice import prepare
    from sqlanon.lattice.mondrian import mondrian
    from sqlanon.policy import parse_policy

    rows = [[i, z, "s"] for i, z in enumerate("xxyyzz")]
    db.load("t", ["id", "z", "s"], rows, ["BIGINT", "VARCHAR", "VARCHAR"])
    doc = _hier_doc({"x": ["A"], "y": ["B"], "z": ["A"]})
    with session(db.url) as be:
        plan = prepare(be, parse_policy(doc))
        res = mondrian(plan)
        work, vals = (r.table().sql(be.dialect) for r in (res.work, res.values))
        q = plan.base.q_aliases[0]
        sql = f"SELECT b.{q}, MIN(w.v_0) FROM {work} AS w JOIN {vals} AS b ON b.rid = w.rid GROUP BY b.{q}"
        ranks = {str(z): int(v) for z, v in be._run(sql).fetchall()}
    assert ranks == {"x": 1, "z": 2, "y": 3}
    assert res.partitions == 3
    assert res.cuts[0].labels == ["A", "B"] and res.cuts[1].labels == ["x", "z"]


def test_labels_that_do_not_nest_are_found(db) -> None:  # noqa: ANN001
    """nests.sql.j2 names the QIs whose labels do not nest (a label with two labels above it), which
    keep the level-by-level path: here dim 1's level-1 label 1 sits under both 1 and 2 at level 2."""
    from sqlanon.engines import session
    from sqlanon.relation import Relation

    levels = [[0, 1, 0, 1], [0, 2, 0, 2], [0, 1, 1, 1], [0, 2, 1, 1]]  # dim 0 nests
    levels += [[1, 1, 0, 1], [1, 2, 0, 2], [1, 1, 1, 1], [1, 2, 1, 1], [1, 1, 2, 1], [1, 2, 2, 2]]
    db.load("lv", ["dim", "v", "lvl", "code"], levels, ["BIGINT"] * 4)
    with session(db.url) as be:
        assert be.query("mondrian/nests", levels=Relation("lv", "main")) == [(1,)]
