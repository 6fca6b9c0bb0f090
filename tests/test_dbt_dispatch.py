"""The generated dbt package holds no adapter macro that is a copy of its ``default__`` macro
(sqlanon/dbt/dispatch.py): dbt's ``adapter.dispatch(name, 'sqlanon')`` runs ``<adapter>__name`` where the
package has it and ``default__name`` otherwise, so a copy was dead weight (PostgreSQL's SQL is the
default's: its copies were 50 KB of the 241 KB sqlanon_sql.sql). What dispatch reaches for each adapter
is still that adapter's generated SQL; tests/test_dbt.py's ``dbt build`` runs it on DuckDB and PostgreSQL.
"""

from __future__ import annotations

import itertools
import re

import pytest

from sqlanon.dbt import dispatch, grassberger, macros

#: ``{% macro <adapter>__<name>(<args>) %}<body>{% endmacro %}``: the generated file's macros, none nested.
MACRO = re.compile(r"\{% macro (\w+?)__(\w+)\(([^)]*)\) %\}(.*?)\{% endmacro %\}", re.S)


def _shipped() -> dict[str, dict[str, str]]:
    """The shipped sqlanon_sql.sql's macros: name -> adapter -> body (with its arguments)."""
    text = (macros.package_dir() / macros.GENERATED).read_text(encoding="utf-8")
    found: dict[str, dict[str, str]] = {}
    for adapter, name, args, body in MACRO.findall(text):
        assert adapter not in found.setdefault(name, {}), f"{adapter}__{name} twice"
        found[name][adapter] = f"({args}){body}"
    assert text.count("{% macro ") == sum(map(len, found.values()))  # the pattern missed none
    return found


def _dispatched(variants: dict[str, str], adapter: str) -> str:
    """What dbt's dispatch runs for ``adapter`` (none of ADAPTERS is another's parent adapter)."""
    return variants.get(adapter, variants[dispatch.DEFAULT])


def test_no_two_adapter_variants_of_a_macro_are_identical() -> None:
    for name, variants in _shipped().items():
        assert dispatch.DEFAULT in variants, name
        for (a, body_a), (b, body_b) in itertools.combinations(variants.items(), 2):
            assert body_a != body_b, f"{a}__{name} and {b}__{name} are the same text"


@pytest.mark.parametrize("adapter", list(macros.ADAPTERS))
def test_dispatch_reaches_each_adapters_own_sql(adapter: str) -> None:
    """The macro dispatch picks for each adapter (its own, else default's) has the text generated
    for that adapter's dialect: leaving copies out changed no adapter's SQL."""
    shipped = _shipped()
    for test in macros.TESTS:
        args = f"(model, {', '.join(test.args)})\n"
        got = _dispatched(shipped[f"test_{test.name}"], adapter)
        assert got == args + macros.macro_body(test, adapter), (adapter, test.name)
    g = _dispatched(shipped[grassberger.G_MACRO], adapter)
    assert g == "(x)" + grassberger.g_body(macros.ADAPTERS[adapter])


def test_postgres_reads_default_and_the_package_shrank() -> None:
    """PostgreSQL's dialect is default's: the package has no postgres__ macro at all (before this,
    six test macros and G: 241,261 bytes; now 190,578)."""
    shipped = _shipped()
    assert not [name for name, variants in shipped.items() if "postgres" in variants]
    size = (macros.package_dir() / macros.GENERATED).stat().st_size
    assert size < 200_000, size
