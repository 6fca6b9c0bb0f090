"""Issue 33: the search's counts stay 64-bit integers in every table the walk reads. DuckDB's SUM of
a BIGINT is a 128-bit HUGEINT (PostgreSQL's a NUMERIC): the local DuckDB's sum of PostgreSQL's
page ranges (sqlanon/lattice/localdb.py ``sum_rows``) made the coded table's counts HUGEINTs, and
every kept rollup (templates/search/rollup.sql.j2) made its own counts so on DuckDB, NUMERIC on
PostgreSQL. Every walk statement then summed them in 128 bits or as NUMERIC (the 1e6-row walk at
5 %, its statements replayed on DuckDB: 0.79-0.81 -> 0.69-0.72 s). The figures are the same: the
counts are at most the source's rows."""

from __future__ import annotations

from typing import Any

import pytest

from sqlanon.engines import pgparts, session
from sqlanon.lattice import prepare
from sqlanon.lattice.evaluator import Evaluator
from tests.test_local_freq import _policy, _small, pg  # noqa: F401 - the fixtures


def _count_type(be: Any, rel: Any) -> str:
    """The type of ``rel``'s column cnt as the engine names it."""
    name = rel.table().sql(be.dialect)
    fn = "pg_typeof" if be.dialect == "postgres" else "typeof"
    return str(be._conn.exec_driver_sql(f"SELECT {fn}(cnt) FROM {name} LIMIT 1").scalar()).lower()


def test_the_summed_ranges_code_into_bigint_counts(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setattr(pgparts, "PART_MIN_PAGES", 1)  # two page ranges, summed locally
    with session(pg.url) as be:
        plan = prepare(be, _policy())
        assert be.staged is not None
        local = be.staged[1]
        assert _count_type(local, plan.base.freq) == "hugeint"  # the sums (freq/base, not the walk's)
        assert _count_type(local, plan.coded) == "bigint"


@pytest.mark.parametrize("where", ["database", "local"])
def test_kept_rollups_count_in_bigint(pg: Any, where: str) -> None:  # noqa: F811
    """A kept rollup's counts, in the warehouse (PostgreSQL: SUM gives NUMERIC) and in the local
    DuckDB (SUM gives HUGEINT), with the rollup's own total the source's rows."""
    with session(pg.url) as be:
        plan = prepare(be, _policy(where=where))
        if where == "local":
            from sqlanon.lattice.local import local_plan

            with local_plan(plan) as lp:
                ev = Evaluator(lp)
                src = ev.keep((0, 1, 0, 1))
                assert _count_type(lp.be, src.rel) == "bigint"
                total = lp.be.query("search/total", base=src.rel)[0][0]
        else:
            ev = Evaluator(plan)
            src = ev.keep((0, 1, 0, 1))
            assert _count_type(be, src.rel) == "bigint"
            total = be.query("search/total", base=src.rel)[0][0]
    assert int(total) == plan.n_rows
