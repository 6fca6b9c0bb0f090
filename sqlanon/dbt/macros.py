"""The dbt package's SQL, generated from sqlanon's own templates (one source of truth).

Each generic test of ``dbt_package/`` (``sqlanon_k_anonymity``, ``sqlanon_l_diversity``,
``sqlanon_t_closeness``, ``sqlanon_max_risk``, ``sqlanon_delta_disclosure``, ``sqlanon_beta_likeness``)
dispatches to one macro per adapter. Their bodies are
not written by hand: :func:`generate` renders ``templates/dbt/<test>.sql.j2`` (which builds on
``freq/base``, ``freq/classes`` and ``_macros/sensitive.sql.j2``, the SQL assess, the search and the
release run) through the compile path, with placeholder identifiers standing for what only dbt
knows (the model, the columns, the thresholds), generates it for each adapter's dialect, and turns
the placeholders into Jinja:

- an item of a list (a SELECT column, a GROUP BY key, a window's ORDER BY key) that names the one
  placeholder quasi-identifier becomes a ``{% for %}`` loop over ``quasi_identifiers``;
- every other placeholder becomes an expression (``{{ model }}``, ``{{ adapter.quote(sensitive) }}``,
  ``{{ k }}``, ...).

An adapter whose macro would be ``default__``'s text gets none: dbt's dispatch falls back to
``default__`` (:mod:`sqlanon.dbt.dispatch`), so PostgreSQL, whose SQL is the default's, reads it.

``dbt_package/macros/sqlanon_sql.sql`` is this module's output, committed so that the package
works from a checkout; ``tests/test_dbt.py`` regenerates it and fails on any difference.
Regenerate with ``python -m sqlanon.dbt.macros``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlglot import exp

from sqlanon.dbt import dispatch, grassberger
from sqlanon.errors import SqlanonError
from sqlanon.measure.assessment import EPS, T_COLUMN
from sqlanon.relation import Relation
from sqlanon.risk_extra import LRank
from sqlanon.sql.base import CANONICAL, Sql, ident, lit
from sqlanon.sql.compile import dialect_tree, parse_one_statement, render

#: dbt adapter -> the sqlglot dialect its macro is generated for. ``default`` (any other adapter)
#: gets PostgreSQL's SQL: standard window functions, IS NOT DISTINCT FROM, DOUBLE PRECISION. An
#: adapter's macro whose text is default's is left out (``postgres``: dispatch reaches default__).
ADAPTERS: dict[str, str] = {
    "default": "postgres",
    "duckdb": "duckdb",
    "postgres": "postgres",
    "spark": "spark",
    "sqlserver": "tsql",
}

_QI = "__sqlanon_qi_0__"  # the one quasi-identifier of a render: loops over quasi_identifiers
_QA = "__sqlanon_qa_0__"  # its internal alias in the frequency table
_LOOP = "__sqlanon_loop_{}__"
_L_RANK = 2000000011  # a sentinel number: the recursive l's rank, set by the test macro

#: Placeholder identifier -> the Jinja that replaces it in the macro body.
SCALARS: dict[str, str] = {
    "__sqlanon_model__": "{{ model }}",
    "__sqlanon_reference__": "{{ sqlanon_reference }}",
    "__sqlanon_s__": "{{ adapter.dispatch('sqlanon_quote', 'sqlanon')(sensitive) }}",
    "__sqlanon_sort__": "{{ sqlanon_sort_key }}",
    "__sqlanon_hlabels__": "({{ sqlanon_hier_rows }})",  # emd-hierarchical's labels, as rows
    "__sqlanon_k__": "{{ k }}",
    "__sqlanon_l__": "{{ l }}",
    "__sqlanon_c__": "{{ c }}",
    "__sqlanon_t__": "{{ t }}",
    "__sqlanon_max__": "{{ max }}",
    "__sqlanon_delta__": "{{ delta }}",
    "__sqlanon_beta__": "{{ beta }}",
}
LOOP_OPEN = "{% for sqlanon_qi in quasi_identifiers %}"
LOOP_CLOSE = "{% if not loop.last %}, {% endif %}{% endfor %}"
#: A column name as an identifier: through sqlanon_quote (dbt_package/macros/sqlanon.sql), which
#: doubles the quote character; dbt's adapter.quote does not, so a name holding '"' ended it.
QI_JINJA = "{{ adapter.dispatch('sqlanon_quote', 'sqlanon')(sqlanon_qi) }}"
QA_JINJA = "sqlanon_q{{ loop.index0 }}"


@dataclass(frozen=True)
class Test:
    """One generic test: its arguments and its variants (a Jinja condition and a render context)."""

    name: str
    args: tuple[str, ...]
    template: str
    variants: tuple[tuple[str | None, dict[str, Any]], ...] = field(default=((None, {}),))


TESTS: tuple[Test, ...] = (
    Test("sqlanon_k_anonymity", ("quasi_identifiers", "k"), "dbt/k_anonymity"),
    Test(
        "sqlanon_l_diversity",
        ("quasi_identifiers", "sensitive", "l", "kind", "c", "estimator"),
        "dbt/l_diversity",
        (
            ("kind == 'distinct'", {"kind": "distinct"}),
            # ARX's Grassberger estimate (entropy_g) before the plain entropy: the first match wins.
            ("kind == 'entropy' and estimator == 'grassberger'", {"kind": "entropy", "grassberger": True}),
            ("kind == 'entropy'", {"kind": "entropy"}),
            ("kind == 'recursive'", {"kind": "recursive"}),
        ),
    ),
    Test(
        "sqlanon_t_closeness",
        ("quasi_identifiers", "sensitive", "t", "measure", "order", "reference", "hierarchy"),
        "dbt/t_closeness",
        tuple(
            (
                f"measure == '{m}'",
                {"figure": Sql(col), "ordered": m == "emd-ordered", "hier": m == "emd-hierarchical"},
            )
            for m, col in T_COLUMN.items()
        ),
    ),
    Test(
        "sqlanon_max_risk",
        ("quasi_identifiers", "max", "kind"),
        "dbt/max_risk",
        tuple((f"kind == '{k}'", {"kind": k}) for k in ("prosecutor", "average")),
    ),
    Test(
        "sqlanon_delta_disclosure",
        ("quasi_identifiers", "sensitive", "delta", "reference"),
        "dbt/likeness",
        ((None, {"measure": "delta-disclosure"}),),
    ),
    Test(
        "sqlanon_beta_likeness",
        ("quasi_identifiers", "sensitive", "beta", "kind", "reference"),
        "dbt/likeness",
        tuple((f"kind == '{k}'", {"measure": f"beta-{k}"}) for k in ("basic", "enhanced")),
    ),
)

#: The tests that compare each class with the distribution p(w) of a reference relation.
_REFERENCED = ("sqlanon_t_closeness", "sqlanon_delta_disclosure", "sqlanon_beta_likeness")


def _freq(source: str, qis: bool, sensitive: bool, with_cid: bool = True, dialect: str = "") -> Sql:
    """freq/base with placeholders; Spark's ranks its sensitive values over their distinct values
    (freq/base.spark.sql.j2), keeping cid's window (a loop over the QIs cannot name the first)."""
    q = [ident(_QI)] if qis else []
    s = [ident("__sqlanon_s__")] if sensitive else []
    text = render(
        "freq/base",
        CANONICAL,
        source=Relation(source),
        q_exprs=q,
        q_aliases=[ident(_QA)] if qis else [],
        s_exprs=s,
        s_aliases=[Sql("s_0")] if sensitive else [],
        sid_aliases=[Sql("sid_0")] if sensitive else [],
        sort_keys=[ident("__sqlanon_sort__")] if sensitive else [],
        group_exprs=q + s,
        with_cid=with_cid,
        distinct_ranks=dialect == "spark",
        grouped_cte=Sql("sqlanon_grouped" if qis else "sqlanon_ref_grouped"),  # one statement holds both
    )
    return Sql(text)


def _context(test: Test, variant: dict[str, Any], dialect: str = "") -> dict[str, Any]:
    sensitive = test.name in ("sqlanon_l_diversity", *_REFERENCED)
    freq = Relation("sqlanon_freq")
    ctx: dict[str, Any] = {
        "freq_sql": _freq("__sqlanon_model__", True, sensitive, dialect=dialect),
        "classes_sql": Sql(render("freq/classes", CANONICAL, freq=freq, q_aliases=[ident(_QA)])),
        "freq": freq,
        "q_aliases": [ident(_QA)],
        "q_names": [ident(_QI)],
        "p": Sql("a0"),
        "s_alias": Sql("s_0"),
        "sid_alias": Sql("sid_0"),
        "l_rank": LRank(_L_RANK),  # tail=False (t, likeness) never reads it; grassberger per variant
        "eps": lit(EPS),
        "grassberger": False,
        **{name.strip("_").removeprefix("sqlanon_"): ident(name) for name in SCALARS},
    }
    if test.name in _REFERENCED:
        ctx["ref_freq_sql"] = _freq("__sqlanon_reference__", False, True, with_cid=False, dialect=dialect)
    ctx.update(variant)
    return ctx


def _quoted(name: str, dialect: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect)


def _list_item(node: exp.Expression) -> exp.Expression:
    """The item of a SELECT list, GROUP BY, ORDER BY or PARTITION BY that holds ``node``."""
    item = node
    while item.parent is not None:
        parent = item.parent
        if isinstance(parent, exp.Select | exp.Group | exp.Order | exp.Window) and isinstance(
            parent.args.get(item.arg_key), list
        ):
            return item
        item = parent
    raise SqlanonError(f"dbt macros: the quasi-identifier placeholder is outside any list in {node.sql()}")


def jinja_sql(template: str, dialect: str, **context: Any) -> str:
    """Render ``template`` with placeholders, generate it for ``dialect`` and turn the placeholders
    into dbt Jinja (see the module docstring)."""
    tree = parse_one_statement(render(template, CANONICAL, **context), "select")
    g_args = grassberger.lift(tree)  # G(x) is a call of one shared macro, not its table again
    tree = dialect_tree(tree, dialect)
    loops: list[str] = []
    for node in list(tree.find_all(exp.Identifier)):
        if node.name not in (_QI, _QA) or node.root() is not tree:
            continue  # not a placeholder, or inside an item already replaced
        item = _list_item(node)
        body = item.sql(dialect=dialect)
        body = body.replace(_quoted(_QI, dialect), QI_JINJA).replace(_quoted(_QA, dialect), QA_JINJA)
        item.replace(exp.column(exp.to_identifier(_LOOP.format(len(loops)), quoted=True)))
        loops.append(LOOP_OPEN + body + LOOP_CLOSE)
    text = tree.sql(dialect=dialect, pretty=True)
    if re.search(r"\{[{%#]", text):
        raise SqlanonError(f"dbt macros: {template} generates text dbt would read as Jinja")
    for i, body in enumerate(loops):
        q = _quoted(_LOOP.format(i), dialect)
        # T-SQL names every column of a derived table (x AS x); the loop's items keep their names.
        text = text.replace(f"{q} AS {q}", q).replace(q, body)
    for name, jinja in SCALARS.items():
        text = text.replace(_quoted(name, dialect), jinja)
    text = grassberger.calls(text.replace(str(_L_RANK), "{{ sqlanon_l_rank }}"), g_args, dialect)
    if "__sqlanon_" in text:
        raise SqlanonError(f"dbt macros: a placeholder of {template} survived: {text[:200]}")
    return text


def macro(test: Test, adapter: str, body: str | None = None) -> str:
    """The ``<adapter>__test_<name>`` macro: one SELECT per variant, chosen by Jinja (``body``, if
    given, is :func:`macro_body`'s for that adapter, already generated)."""
    head = f"{{% macro {adapter}__test_{test.name}(model, {', '.join(test.args)}) %}}\n"
    return head + (macro_body(test, adapter) if body is None else body) + "{% endmacro %}\n"


def macro_body(test: Test, adapter: str) -> str:
    """The text between the ``<adapter>__test_<name>`` macro's tags."""
    dialect = ADAPTERS[adapter]
    head = PREAMBLE.get(test.name, "")
    if len(test.variants) == 1:
        body = jinja_sql(test.template, dialect, **_context(test, test.variants[0][1], dialect)) + "\n"
    else:
        parts = []
        for i, (cond, variant) in enumerate(test.variants):
            parts.append(f"{{% {'if' if i == 0 else 'elif'} {cond} %}}\n")
            parts.append(jinja_sql(test.template, dialect, **_context(test, variant, dialect)) + "\n")
        body = "".join(parts) + "{% endif %}\n"
    return head + body


#: Jinja set at the top of a test's macros: what its placeholders stand for (the recursive l's
#: rank is the policy's l for kind recursive, else 2, as assess has it; the value order of a
#: sensitive attribute ranks the values of freq/base's s_0).
PREAMBLE: dict[str, str] = {
    "sqlanon_l_diversity": (
        "{% set sqlanon_l_rank = l if kind == 'recursive' else 2 %}\n"
        "{% set sqlanon_sort_key = adapter.dispatch('sqlanon_order_key', 'sqlanon')('s_0', none) %}\n"
    ),
    "sqlanon_t_closeness": (
        "{% set sqlanon_reference = reference if reference is not none else model %}\n"
        "{% set sqlanon_sort_key = adapter.dispatch('sqlanon_order_key', 'sqlanon')('s_0', order) %}\n"
        "{% set sqlanon_hier_rows = adapter.dispatch('sqlanon_hier_rows', 'sqlanon')(hierarchy) %}\n"
    ),
}
#: Delta-disclosure and beta-likeness: p(w) from the reference, the values numbered in their own order.
for _name in _REFERENCED[1:]:
    PREAMBLE[_name] = (
        "{% set sqlanon_reference = reference if reference is not none else model %}\n"
        "{% set sqlanon_sort_key = adapter.dispatch('sqlanon_order_key', 'sqlanon')('s_0', none) %}\n"
    )


HEADER = (
    "{# Generated by `python -m sqlanon.dbt.macros` from sqlanon's templates (templates/dbt/*.sql.j2,\n"
    "   which build on the SQL sqlanon's assess, search and release run); do not edit by hand:\n"
    "   tests/test_dbt.py fails when this file differs from a fresh generation. #}\n"
)


def generate() -> str:
    """The text of ``dbt_package/macros/sqlanon_sql.sql``: every test for ``default`` and for each
    adapter whose SQL differs from default's (the others dispatch to ``default__``)."""
    out = [HEADER]
    for test in TESTS:
        bodies = dispatch.needed({adapter: macro_body(test, adapter) for adapter in ADAPTERS})
        for adapter, body in bodies.items():
            out.append("\n" + macro(test, adapter, body))
    return "".join(out) + grassberger.macros(ADAPTERS)


def package_dir() -> Path:
    """The dbt package: ``dbt_package/`` of a checkout, ``sqlanon/dbt_package`` in a wheel."""
    here = Path(__file__).resolve().parent.parent
    shipped = here / "dbt_package"
    return shipped if shipped.is_dir() else here.parent / "dbt_package"


GENERATED = "macros/sqlanon_sql.sql"


if __name__ == "__main__":  # pragma: no cover - the maintainers' regeneration command
    path = package_dir() / GENERATED
    path.write_text(generate(), encoding="utf-8")
    sys.stderr.write(f"wrote {path}\n")
