"""The dbt package writes Grassberger's G table once (sqlanon/dbt/grassberger.py): one table macro,
a small G macro per adapter that loops over it, and calls of that macro where the test macros
had the table inlined (twice per adapter: ten copies, 43 KB of the 286 KB sqlanon_sql.sql)."""

from __future__ import annotations

import math
from typing import Any

import jinja2
import pytest

from sqlanon.dbt import macros
from tests.conftest import TestDB

FIRST = "1.2703628454614782"  # -G(0) of ARX's table: printed once per copy of the table


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def _raise_return(value: Any) -> None:
    raise _Return(value)


def _package(adapter: str) -> Any:
    """The generated macros as callables, with the two dbt features they use: adapter.dispatch
    (``<adapter>__name``, else ``default__name``) and return()."""
    env = jinja2.Environment()
    module: Any = None

    def dispatch(name: str, _namespace: str) -> Any:
        found = getattr(module, f"{adapter}__{name}", None) or getattr(module, f"default__{name}")

        def call(*args: Any) -> Any:
            try:
                return str(found(*args))
            except _Return as r:
                return r.value

        return call

    env.globals.update(
        adapter=type("Adapter", (), {"dispatch": staticmethod(dispatch)})(), **{"return": _raise_return}
    )
    module = env.from_string(macros.generate()).module
    return dispatch


def _grassberger_g(x: int) -> float:
    """G at x - x mod 2 (ARX's EntropyEstimator), from Grassberger's (2003) recurrence, written here:
    G(0) = G(1) = -gamma - ln 2, G(2) = G(0) + 2, G(2h + 2) = G(2h) + 2 / (2h + 1); above 100 ARX
    uses the series ln m + 1/(6 m^2) - 7/(60 m^4) + 31/(126 m^6) (m = x - x mod 2), within 1e-12."""
    m = x - x % 2
    g = -0.5772156649015329 - math.log(2)
    for h in range(0, m // 2):
        g += 2 if h == 0 else 2 / (2 * h + 1)
    return g


def test_the_package_holds_the_table_once() -> None:
    text = macros.generate()
    assert text.count(FIRST) == 1
    assert text.count("macro default__sqlanon_grassberger_table()") == 1
    # postgres__ macros would be default__'s text: dispatch reaches default__ (tests/test_dbt_dispatch.py)
    adapters = [a for a in macros.ADAPTERS if a != "postgres"]
    for adapter in adapters:
        assert f"macro {adapter}__sqlanon_grassberger_g(x)" in text
    assert text.count("adapter.dispatch('sqlanon_grassberger_g', 'sqlanon')") == 2 * len(adapters)
    assert len(text) < 200_000  # 286 KB with ten tables, 241 KB with postgres__ copies of default__


@pytest.mark.parametrize("adapter", list(macros.ADAPTERS))
def test_the_table_is_grassbergers(adapter: str) -> None:
    table = _package(adapter)("sqlanon_grassberger_table", "sqlanon")()
    assert len(table) == 51
    for i, v in enumerate(table):
        assert math.isclose(v, _grassberger_g(2 * i), rel_tol=1e-12, abs_tol=1e-12), i


def test_the_g_macro_computes_g_on_each_engine(db: TestDB) -> None:
    adapter = "duckdb" if db.kind == "duckdb" else "postgres"
    g = _package(adapter)("sqlanon_grassberger_g", "sqlanon")("x")
    values = ", ".join(f"({v})" for v in range(0, 131))
    got = dict(
        db.sql(f"SELECT x, {g} FROM (SELECT CAST(v AS BIGINT) AS x FROM (VALUES {values}) AS t(v)) AS s")
    )
    for x in range(0, 131):
        # Above 100 the series drops terms of order m^-8: 1e-12 relative at m = 102.
        assert math.isclose(got[x], _grassberger_g(x), rel_tol=1e-12, abs_tol=1e-12), (x, got[x])
