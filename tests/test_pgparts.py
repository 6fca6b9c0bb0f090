"""Issue 33: a PostgreSQL scan split into page ranges (sqlanon/engines/pgparts.py) reads every
visible row exactly once, and only where a relation has pages (a plain table, a materialised view)
and PostgreSQL may run parallel workers. The reference is PostgreSQL's own COUNT and GROUP BY of
the whole table, after deletes and updates have left dead tuples and moved rows between pages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqlanon.engines import pgparts, session
from sqlanon.relation import Relation
from tests.conftest import TestDB, _make_db


@pytest.fixture
def pg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDB]:
    for db in _make_db("postgres", request, tmp_path):
        db.sql(
            "CREATE TABLE main.t AS SELECT i % 7 AS a, REPEAT('x', i % 50) AS b "
            "FROM GENERATE_SERIES(1, 20000) AS i"
        )
        db.sql("DELETE FROM main.t WHERE a = 3 AND LENGTH(b) < 10")
        db.sql("UPDATE main.t SET a = a + 100 WHERE LENGTH(b) = 17")  # new versions, other pages
        db.sql("INSERT INTO main.t SELECT 9, 'late' FROM GENERATE_SERIES(1, 500)")  # pages at the end
        db.sql("CREATE VIEW main.v AS SELECT * FROM main.t")
        db.sql("CREATE MATERIALIZED VIEW main.m AS SELECT * FROM main.t")
        yield db


def _groups(db: TestDB, rel: str, where: str = "TRUE") -> Counter:
    return Counter(
        {(a, b): n for a, b, n in db.sql(f"SELECT a, b, COUNT(*) FROM {rel} WHERE {where} GROUP BY a, b")}
    )


def test_parts_count_every_row_once(pg: TestDB, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 4)
    for rel in ("t", "m"):
        with session(pg.url) as be:
            parts = pgparts.page_parts(be, Relation(rel, "main"))
        assert parts is not None and len(parts) == 2  # one per worker (two: the default)
        whole = _groups(pg, f"main.{rel}")
        merged: Counter = Counter()
        for p in parts:
            merged.update(_groups(pg, f"main.{rel}", str(p)))
        deleted = sum(1 for i in range(1, 20001) if i % 7 == 3 and i % 50 < 10)
        assert merged == whole and sum(whole.values()) == 20000 - deleted + 500


def test_no_parts_without_pages_or_workers(pg: TestDB, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 4)
    with session(pg.url) as be:
        assert pgparts.page_parts(be, Relation("v", "main")) is None  # a view has no ctid
        assert pgparts.page_parts(be, Relation("nowhere", "main")) is None
    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 10**6)  # too small to split
    with session(pg.url) as be:
        assert pgparts.page_parts(be, Relation("t", "main")) is None
    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 4)
    name = pg.sql("SELECT CURRENT_DATABASE()")[0][0]
    pg.sql(f'ALTER DATABASE "{name}" SET max_parallel_workers_per_gather = 0')
    with session(pg.url) as be:
        assert pgparts.page_parts(be, Relation("t", "main")) is None
