"""Issue 33, task M4: Mondrian's rounds leave out the quasi-identifiers a partition has exhausted.

A partition with one value of a QI (on an axis), or whose lowest common label along a hierarchy is
the value level, can never be cut there again, nor can any of its descendants (their values are a
subset). The working table carries a bitmask ``ex`` per row of those QIs (bit j for the j-th QI;
templates/mondrian/round.sql.j2, split.sql.j2) and a round's per-QI grouping skips them. Checked
here against a reference computed in Python from the rows alone: after each split, a row's ``ex`` is
the set of QIs on which the partition it came from had a single value. The cut trees themselves are
held unchanged by tests/test_mondrian_rounds.py (hashes on Adult).
"""

from __future__ import annotations

import random

from sqlanon.engines.base import Backend


def _rows() -> list[list]:
    rnd = random.Random(33)
    rows = []
    for i in range(60):
        z = rnd.choice(["a1", "a2", "b1", "b2"])
        sex = "F" if z.startswith("a") and rnd.random() < 0.9 else rnd.choice(["F", "M"])
        rows.append([i, z, 20 + rnd.randrange(12), sex, rnd.choice(["x", "y"])])
    return rows


def test_exhausted_qis_are_marked_as_the_rows_give_them(db, monkeypatch) -> None:  # noqa: ANN001
    from sqlanon.engines import session
    from sqlanon.lattice import prepare
    from sqlanon.lattice.mondrian import mondrian
    from sqlanon.policy import parse_policy

    db.load(
        "t", ["id", "zip", "age", "sex", "s"], _rows(), ["BIGINT", "VARCHAR", "BIGINT", "VARCHAR", "VARCHAR"]
    )
    doc = {
        "source": "main.t",
        "columns": {
            "id": "insensitive",
            "zip": {
                "role": "quasi",
                "hierarchy": {"map": {"a1": ["a"], "a2": ["a"], "b1": ["b"], "b2": ["b"]}},
            },
            "age": "quasi",
            "sex": "quasi",
            "s": "sensitive",
        },
        "privacy": {"k": 2},
        "search": {"algorithm": "mondrian"},
    }
    real = Backend.create_temp
    state: dict = {"work": None, "checked": 0, "marked": 0}

    def rows_of(be, rel, cols):  # noqa: ANN001, ANN202
        return be._run(f"SELECT {', '.join(cols)} FROM {rel.table().sql(be.dialect)}").fetchall()

    def spy(self, stem, template, **ctx):  # noqa: ANN001, ANN003, ANN202
        before = None
        if template == "mondrian/split":
            before = rows_of(self, state["work"], ["rid", "pid", "v_0", "v_1", "v_2"])
        rel = real(self, stem, template, **ctx)
        if template == "mondrian/init":
            state["work"] = rel
        if template == "mondrian/split":
            values: dict[int, list[set]] = {}
            parent = {}
            for rid, pid, *v in before:
                parent[int(rid)] = int(pid)
                for j, x in enumerate(v):
                    values.setdefault(int(pid), [set(), set(), set()])[j].add(x)
            for rid, ex in rows_of(self, rel, ["rid", "ex"]):
                sets = values[parent[int(rid)]]
                want = sum(1 << j for j, s in enumerate(sets) if len(s) == 1)
                assert int(ex) == want, (rid, ex, want)
                state["checked"] += 1
                state["marked"] += want != 0
            state["work"] = rel
        return rel

    monkeypatch.setattr(Backend, "create_temp", spy)
    with session(db.url) as be:
        res = mondrian(prepare(be, parse_policy(doc)))
    assert res.rounds >= 3
    assert state["checked"] > 60 and state["marked"] > 0
