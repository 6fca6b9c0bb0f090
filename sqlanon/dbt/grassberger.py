"""Grassberger's G(x) in the dbt package: its table written once, not once per use and adapter.

``_macros/sensitive.sql.j2``'s ``grassberger_g`` inlines ARX's 51-entry table of G as a CASE at each
use (two per Grassberger l-diversity statement). Generated into every adapter's test macro that was
ten copies, 43 KB of the 286 KB ``sqlanon_sql.sql``. Here the dbt package gets instead:

- ``default__sqlanon_grassberger_table()``: the table, once, read from the template's own CASE
  (so the template stays the one source of the numbers);
- ``<adapter>__sqlanon_grassberger_g(x)``: G(x) for one dialect, generated from the same template
  with the table's arms turned into a Jinja loop over that macro (none where it would be
  ``default__``'s text: :mod:`sqlanon.dbt.dispatch`);
- in the test macros, every G(x) the template wrote becomes
  ``{{ adapter.dispatch('sqlanon_grassberger_g', 'sqlanon')('x') }}`` (:func:`lift`, :func:`calls`).
"""

from __future__ import annotations

from functools import cache

from sqlglot import exp

from sqlanon.dbt import dispatch
from sqlanon.errors import SqlanonError
from sqlanon.sql.base import CANONICAL, Sql
from sqlanon.sql.compile import _env, dialect_tree, parse_one_statement

_X = "__sqlanon_gx__"  # G's argument in the adapter macro
_KEY = "__sqlanon_gk__"  # the table arm's even number
_VAL = "__sqlanon_gv__"  # the table arm's value
_CALL = "__sqlanon_g{}__"  # the i-th G of a test macro's statement
_LIMIT = 100  # G is tabulated for x <= 100 (ARX's EntropyEstimator)

TABLE_MACRO = "sqlanon_grassberger_table"
G_MACRO = "sqlanon_grassberger_g"


def _q(name: str, dialect: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect)


@cache
def _g(x_sql: str) -> exp.Paren:
    """The canonical tree of the template's G(x), ``x_sql`` canonical SQL."""
    text = _env().from_string(
        '{% from "_macros/sensitive.sql.j2" import grassberger_g %}'
        "SELECT {% call grassberger_g() %}{{ x }}{% endcall %} AS g"
    )
    tree = parse_one_statement(text.render(x=Sql(x_sql)), "select")
    g = tree.selects[0].this
    assert isinstance(g, exp.Paren)
    return g


def _arms(g: exp.Paren) -> list[exp.If]:
    """The table's arms: ``WHEN 2i THEN CAST(G_i AS DOUBLE)`` of the CASE for x <= 100."""
    return list(g.this.args["ifs"][0].args["true"].args["ifs"])


def table() -> list[float]:
    """The values of G at 0, 2, ..., 100, as the template writes them."""
    arms = _arms(_g(_q(_X, CANONICAL)))
    if [a.this.sql() for a in arms] != [str(2 * i) for i in range(len(arms))]:
        raise SqlanonError("dbt macros: grassberger_g's table is no longer keyed by 0, 2, 4, ...")
    return [float(a.args["true"].this.sql(CANONICAL)) for a in arms]


def lift(tree: exp.Expression) -> list[exp.Expression]:
    """Replace each G(x) of ``tree`` (canonical, in place) by a placeholder column; the arguments."""
    args: list[exp.Expression] = []
    for node in list(tree.find_all(exp.Paren)):
        case = node.this
        if not isinstance(case, exp.Case) or not case.args.get("ifs"):
            continue
        cond = case.args["ifs"][0].this
        if not (isinstance(cond, exp.LTE) and cond.expression == exp.Literal.number(_LIMIT)):
            continue
        x = cond.this
        if node != _g(x.sql(CANONICAL)):
            continue  # a CASE on x <= 100 that is not G
        node.replace(exp.column(exp.to_identifier(_CALL.format(len(args)), quoted=True)))
        args.append(x.copy())
    return args


def calls(text: str, args: list[exp.Expression], dialect: str) -> str:
    """``text`` with :func:`lift`'s placeholders as calls of the adapter's G macro."""
    for i, x in enumerate(args):
        arg = dialect_tree(x.copy(), dialect).sql(dialect=dialect)
        if "'" in arg or "\\" in arg:
            raise SqlanonError(f"dbt macros: G's argument {arg} cannot be a Jinja string")
        call = f"{{{{ adapter.dispatch('{G_MACRO}', 'sqlanon')('{arg}') }}}}"
        text = text.replace(_q(_CALL.format(i), dialect), call)
    return text


def macros(adapters: dict[str, str]) -> str:
    """The table macro and each adapter's G macro (``adapters``: adapter -> sqlglot dialect)."""
    values = ", ".join(repr(v) for v in table())
    out = [
        "\n{#- Grassberger's G at 0, 2, ..., 100 (ARX 3.9.2's EntropyEstimator; "
        "templates/_macros/sensitive.sql.j2). -#}\n"
        f"{{% macro default__{TABLE_MACRO}() %}}{{{{ return([{values}]) }}}}{{% endmacro %}}\n"
    ]
    bodies = {adapter: g_body(dialect) for adapter, dialect in adapters.items()}
    for adapter, text in dispatch.needed(bodies).items():
        out.append(f"\n{{% macro {adapter}__{G_MACRO}(x) %}}{text}{{% endmacro %}}\n")
    return "".join(out)


def g_body(dialect: str) -> str:
    """The body of the G macro for ``dialect``: the template's G(x), its table a loop."""
    g = _g(_q(_X, CANONICAL)).copy()
    inner = g.this.args["ifs"][0].args["true"]
    arm = inner.args["ifs"][0]
    arm.set("this", exp.column(exp.to_identifier(_KEY, quoted=True)))
    arm.args["true"].set("this", exp.column(exp.to_identifier(_VAL, quoted=True)))
    inner.set("ifs", [arm])
    text = dialect_tree(g, dialect).sql(dialect=dialect)
    key, val = _q(_KEY, dialect), _q(_VAL, dialect)
    start = text.index(f" WHEN {key} THEN ")
    end = text.index(" END", text.index(val))
    loop = f"{{% for g in adapter.dispatch('{TABLE_MACRO}', 'sqlanon')() %}}"
    text = text[:start] + loop + text[start:end] + "{% endfor %}" + text[end:]
    text = text.replace(key, "{{ 2 * loop.index0 }}").replace(val, "{{ g }}")
    text = text.replace(_q(_X, dialect), "{{ x }}")
    return text
