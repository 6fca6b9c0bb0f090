"""Mondrian on a double quasi-identifier holding Infinity (and NaN, which PostgreSQL sorts above
every number): its range is not finite, so it is cut on its values' ranks as a text column is,
instead of rendering ``inf`` into the statements (a reviewer's finding: "Referenced column inf",
exit 2). The reference is the definition: every published class has at least k records."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.conftest import TestDB
from tests.helpers import cli, write_policy


def test_mondrian_cuts_a_double_with_infinity(db: TestDB, tmp_path: Path) -> None:
    odd = ["Infinity"] + (["-Infinity", "NaN"] if db.kind == "postgres" else [])
    rows = [[float(odd[i % len(odd)]) if i % 37 == 0 else float(i % 21), 20 + i % 30] for i in range(300)]
    db.load("p", ["score", "age"], rows, ["DOUBLE PRECISION", "INTEGER"])
    pol = {
        "source": "main.p",
        "target": "main.p_anon",
        "columns": {"score": "quasi", "age": "quasi"},
        "privacy": {"k": 5},
        "search": {"algorithm": "mondrian"},
    }
    for as_ in ("view", "table"):
        code, out, err = cli(
            "anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--as", as_, "--replace"
        )
        assert code == 0, err
        sizes = Counter(tuple(map(str, r)) for r in db.sql('SELECT score, age FROM "main"."p_anon"'))
        assert sum(sizes.values()) == 300 and min(sizes.values()) >= 5, sizes
        assert len(sizes) > 10  # cut, not one class
