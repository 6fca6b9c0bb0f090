"""The one path every query takes: template -> render -> parse -> guard -> generate.

Templates live in ``templates/`` (shipped inside the wheel as ``sqlanon/templates``) and are written
in DuckDB's dialect, the canonical one. They only ever receive identifiers and literals that sqlglot
rendered (the ``ident``, ``lit`` and ``rel`` filters, and the builders in :mod:`sqlanon.sql.builders`);
a plain Python string reaching ``{{ ... }}`` raises, so a raw name can never be spliced into SQL.
After rendering, the text is parsed by sqlglot in the canonical dialect, checked to be exactly one
statement of the expected kind, and generated for the target dialect. :func:`to_sql` is the only
place SQL text is produced for a database. A statement whose context holds holes
(:class:`~sqlanon.sql.shapes.Hole`) is parsed and checked as its shape, once per dialect, and bound
from it (:mod:`sqlanon.sql.shapes` says what keeps the bound text to the shape's structure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache, lru_cache
from pathlib import Path

import jinja2
import sqlglot
from markupsafe import Markup
from sqlglot import exp

from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql import builders
from sqlanon.sql.base import CANONICAL, Sql, ident, lit
from sqlanon.sql.shapes import STATE, Hole, Render, Splice, at, bind, placeholder, signature, split, text_of

__all__ = ["CANONICAL", "Hole", "Sql", "ident", "lit", "to_sql", "render", "find_template"]


#: Dialect parent chain for template lookup: a dialect without its own sibling falls back to its
#: parent, and finally to the generic template.
DIALECT_PARENTS: dict[str, str] = {
    "redshift": "postgres",
    "materialize": "postgres",
    "risingwave": "postgres",
    "databricks": "spark",
    "spark2": "spark",
    "fabric": "tsql",
}


def _templates_dir() -> Path:
    here = Path(__file__).resolve().parent.parent
    shipped = here / "templates"
    if shipped.is_dir():
        return shipped
    return here.parent / "templates"


TEMPLATES_DIR = _templates_dir()


def _placeholder(item: Hole | Splice) -> Markup:
    state = STATE.get()
    if state is None or state.items is None:  # the whole tree is rendered: values in place
        if isinstance(item, Hole):
            return Markup(text_of(item, CANONICAL))
        lookup = CANONICAL if state is None else state.dialect
        texts = []
        for ctx in item.items:
            text = render(item.template, lookup, **ctx)
            parse_one_statement(text, "branch")
            texts.append(text)
        return Markup(" UNION ALL ".join(texts))
    state.items.append(item)
    return Markup(placeholder(len(state.items) - 1, isinstance(item, Splice)))


def _finalize(value: object) -> object:
    # Autoescape is on so that macro output (Markup) passes, while a plain str raises here.
    if isinstance(value, Markup):
        return value
    if isinstance(value, Hole):
        return _placeholder(value)
    if isinstance(value, bool):
        return Markup("TRUE" if value else "FALSE")
    if isinstance(value, Sql | int | float):
        return Markup(str(value))
    if isinstance(value, exp.Expression):
        return Markup(value.sql(CANONICAL))
    raise SqlanonError(f"template received a raw value {value!r}; pass it through the ident/lit/rel filters")


def _filter_ident(value: object) -> Sql | Markup:
    if isinstance(value, Hole):
        if value.kind != "str":
            raise SqlanonError(f"ident filter expects an identifier, got {value!r}")
        return _placeholder(value)
    return ident(str(value))


def _filter_rel(value: object) -> Sql | Markup:
    if isinstance(value, Hole):
        if value.kind != "Relation":
            raise SqlanonError(f"rel filter expects a Relation, got {value!r}")
        return _placeholder(value)
    if isinstance(value, Relation):
        return Sql(value.table().sql(CANONICAL))
    raise SqlanonError(f"rel filter expects a Relation, got {value!r}")


def _filter_idents(values: Iterable[object]) -> Sql:
    values = list(values)
    if any(isinstance(v, Hole) for v in values):
        raise SqlanonError("idents filter takes names, not holes")
    return Sql(", ".join(ident(str(v)) for v in values))


def _filter_sqljoin(values: Iterable[Sql], sep: str = ", ") -> Sql:
    values = list(values)
    for v in values:
        if not isinstance(v, Sql):
            raise SqlanonError(f"sqljoin expects sqlglot-rendered SQL, got {v!r}")
    return Sql(sep.join(values))


def _filter_union_all(items: Iterable[Mapping[str, object]], template: str) -> Markup:
    """``{{ branches|union_all("search/_branch") }}``: the SELECTs of ``template``, one per
    context, joined by UNION ALL. Each is compiled as a statement of its own, so a branch's shape
    is parsed once however many statements and branches share it (:func:`to_sql`)."""
    items = list(items)
    if not items:
        raise SqlanonError(f"internal: union_all of no {template!r} branches")
    return _placeholder(Splice(template, items))


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(
        ident=_filter_ident,
        lit=lit,
        rel=_filter_rel,
        idents=_filter_idents,
        sqljoin=_filter_sqljoin,
        union_all=_filter_union_all,
    )
    env.globals.update(builders.TEMPLATE_GLOBALS)
    return env


def candidate_paths(name: str, dialect: str) -> list[str]:
    """Template files tried for ``name`` on ``dialect``, most specific first.

    >>> candidate_paths("assess/classes", "redshift")
    ['assess/classes.redshift.sql.j2', 'assess/classes.postgres.sql.j2', 'assess/classes.sql.j2']
    """
    chain: list[str] = []
    d: str | None = dialect
    while d and d not in chain:
        chain.append(d)
        d = DIALECT_PARENTS.get(d)
    return [f"{name}.{d}.sql.j2" for d in chain] + [f"{name}.sql.j2"]


@cache
def find_template(name: str, dialect: str) -> str:
    # Cached: the templates ship with the package, and a search renders hundreds of statements
    # (each lookup stats up to three files).
    tried = candidate_paths(name, dialect)
    for path in tried:
        if (TEMPLATES_DIR / path).is_file():
            return path
    raise SqlanonError(f"no template {name!r} for dialect {dialect!r}; tried: {', '.join(tried)}")


def render(name: str, dialect: str = CANONICAL, /, **context: object) -> str:
    """Render a template to canonical-dialect text (not yet parsed)."""
    path = find_template(name, dialect)
    return _env().get_template(path).render(**context)


_KINDS: dict[str, tuple[type[exp.Expression], ...]] = {
    "select": (exp.Select, exp.Union, exp.Intersect, exp.Except),
    "create": (exp.Create,),
    "drop": (exp.Drop,),
    "insert": (exp.Insert,),
    "alter": (exp.Alter,),
    "grant": (exp.Grant,),
    "branch": (exp.Select,),  # one branch of a union_all: a plain SELECT
}


def parse_one_statement(text: str, kind: str, *, read: str = CANONICAL) -> exp.Expression:
    """Parse ``text`` and insist it is exactly one statement of ``kind``.

    >>> parse_one_statement("SELECT 1; DROP TABLE t", "select")
    Traceback (most recent call last):
    ...
    sqlanon.errors.SqlanonError: rendered SQL holds 2 statements, expected one select
    """
    try:
        statements = [s for s in sqlglot.parse(text, read=read) if s is not None]
    except sqlglot.errors.ParseError as e:
        first = str(e).splitlines()[0]
        raise SqlanonError(f"rendered SQL does not parse: {first}") from None
    if len(statements) != 1:
        raise SqlanonError(f"rendered SQL holds {len(statements)} statements, expected one {kind}")
    stmt = statements[0]
    if not isinstance(stmt, _KINDS[kind]):
        raise SqlanonError(f"rendered SQL is a {stmt.key}, expected {kind}")
    if kind == "branch" and any(stmt.args.get(a) for a in ("with_", "order", "limit", "offset", "fetch")):
        raise SqlanonError("a union_all branch must be a plain SELECT (no WITH, ORDER BY or LIMIT)")
    if kind == "create":
        inner = stmt.expression
        if inner is not None and not isinstance(inner, _KINDS["select"]):
            raise SqlanonError(f"CREATE ... AS must wrap a SELECT, got {inner.key}")
    return stmt


def _tsql_window_nulls(tree: exp.Expression) -> exp.Expression:
    """T-SQL has no NULLS FIRST/LAST and sqlglot cannot emulate it inside a window. Every window
    ORDER BY in our templates is over non-NULL keys (counts, dense ranks) or only numbers classes,
    so T-SQL's own default NULL order is equivalent there."""
    for window in tree.find_all(exp.Window):
        for ordered in window.find_all(exp.Ordered):
            ordered.set("nulls_first", not ordered.args.get("desc"))
    return tree


def _tsql_greatest_least(tree: exp.Expression) -> exp.Expression:
    """GREATEST and LEAST exist in T-SQL only from SQL Server 2022 (16.x); the oldest version the
    output supports is SQL Server 2017 (README), so they become CASE expressions with the
    canonical dialect's NULL rule (NULL when an argument is NULL unless the call ignores NULLs)."""
    for node in reversed(list(tree.find_all(exp.Greatest, exp.Least, bfs=False))):
        args = [node.this, *node.expressions]
        better = exp.GTE if isinstance(node, exp.Greatest) else exp.LTE
        result: exp.Expression = args[0].copy()
        for b in args[1:]:
            keep = exp.or_(
                exp.Is(this=b.copy(), expression=exp.Null()), better(this=result.copy(), expression=b.copy())
            )
            result = exp.Case(ifs=[exp.If(this=keep, true=result)], default=b.copy())
        if not node.args.get("ignore_nulls"):
            anynull = exp.or_(*(exp.Is(this=a.copy(), expression=exp.Null()) for a in args))
            result = exp.Case(ifs=[exp.If(this=anynull, true=exp.Null())], default=result)
        node.replace(result)
    return tree


def _spark_double_literals(tree: exp.Expression) -> exp.Expression:
    """A number with a point is DECIMAL in both DuckDB and Spark, but DuckDB divides and averages
    DECIMAL in DOUBLE while Spark keeps DECIMAL with 6 decimal places (``AVG(... 1.0 ...)`` gave
    0.00418 for 126/30162, ``(hi - lo) / 6.0`` 0.833333). On Spark such literals are made DOUBLE,
    so every expression computes in DOUBLE as it does in the canonical dialect."""
    for number in list(tree.find_all(exp.Literal)):
        if number.is_number and any(c in number.this for c in ".eE"):
            number.replace(exp.cast(number.copy(), exp.DataType.build("double")))
    return tree


#: AST passes per dialect, applied after the guard and before generation.
AST_PASSES: dict[str, list] = {
    "tsql": [_tsql_window_nulls, _tsql_greatest_least],
    "fabric": [_tsql_window_nulls, _tsql_greatest_least],
    "spark": [_spark_double_literals],
    "databricks": [_spark_double_literals],
}


def dialect_tree(tree: exp.Expression, dialect: str) -> exp.Expression:
    """The tree as :func:`generate` hands it to sqlglot: placeholders expanded for ``dialect`` and
    its AST passes applied (the dbt macros, :mod:`sqlanon.dbt.macros`, generate it piecewise)."""
    tree = builders.expand_placeholders(tree, dialect)
    for rewrite in AST_PASSES.get(dialect, []):
        tree = rewrite(tree.copy())
    return tree


def generate(tree: exp.Expression, dialect: str) -> str:
    """Generate SQL for ``dialect``; unsupported constructs raise instead of being silently dropped."""
    tree = dialect_tree(tree, dialect)
    # copy=False: the tree was parsed for this call alone (the default deep copy cost ~20 % of
    # the time of generating a search batch).
    return tree.sql(dialect=dialect, copy=False, unsupported_level=sqlglot.ErrorLevel.RAISE)


def to_sql(
    name: str,
    dialect: str,
    /,
    *,
    kind: str = "select",
    inline: Mapping[str, exp.Expression] | None = None,
    **context: object,
) -> str:
    """Render ``templates/<name>.sql.j2`` (or its dialect sibling) and generate it for ``dialect``.

    ``inline`` maps the names of would-be temporary tables to their SELECTs (read-only mode): each
    one the statement reads is attached to it as a CTE. This is the only function that produces
    SQL text bound for a database.
    """
    if inline:  # the whole tree is needed to attach the CTEs: holes render as their values
        text = _rendered(name, dialect, context, None)
        return generate(attach_ctes(parse_one_statement(text, kind), inline), dialect)
    key, paths = _statement_key(name, dialect, kind, context)
    hit = _STATEMENTS.get(key) if key is not None else None
    if hit is not None:  # a shape seen before: bound without a Jinja render
        return bind(hit[0], [at(context, p) for p in hit[1]], dialect)
    items: list[Hole | Splice] = []
    text = _rendered(name, dialect, context, items)
    if not items:
        return generate(parse_one_statement(text, kind), dialect)
    parts = _shape(text, kind, dialect, _kinds(items))
    if key is not None and all(isinstance(h, Hole) and id(h) in paths for h in items):
        if len(_STATEMENTS) >= 1024:
            _STATEMENTS.clear()
        _STATEMENTS[key] = (parts, [paths[id(h)] for h in items])

    def branches(site: Splice) -> str:
        return " UNION ALL ".join(_branch_sql(site.template, dialect, ctx) for ctx in site.items)

    return bind(parts, items, dialect, branches)


#: A holed statement's shape by its context's signature, as :func:`_branch_sql` keeps a branch's:
#: a statement whose context has a signature seen before renders the same text (a template cannot
#: see a hole's value), so it is bound without a Jinja render (Mondrian's round statement: ~2 ms of
#: rendering a round, issue 33). Only statements with a hole at the top of their context are looked
#: up (a create_temp with holes has its target's); one with a union_all site is not kept.
_STATEMENTS: dict[tuple, tuple[tuple[str | int, ...], list[tuple]]] = {}


def _statement_key(
    name: str, dialect: str, kind: str, context: Mapping[str, object]
) -> tuple[tuple | None, dict[int, tuple]]:
    paths: dict[int, tuple] = {}
    if not any(isinstance(v, Hole) for v in context.values()):
        return None, paths
    try:
        return (name, dialect, kind, signature(context, (), paths)), paths
    except TypeError:  # a value without a signature, or a hole in two places: rendered each time
        return None, paths


def _rendered(name: str, dialect: str, context: Mapping[str, object], items: list | None) -> str:
    token = STATE.set(Render(dialect, items))
    try:
        return render(name, dialect, **context)
    finally:
        STATE.reset(token)


def _kinds(items: list[Hole | Splice]) -> tuple[str, ...]:
    return tuple("splice" if isinstance(it, Splice) else it.kind for it in items)


@lru_cache(maxsize=1024)
def _shape(text: str, kind: str, dialect: str, kinds: tuple[str, ...]) -> tuple[str | int, ...]:
    """A statement rendered with a placeholder per ``kinds``, parsed, guarded and generated once, and
    split at each placeholder (:func:`sqlanon.sql.shapes.split`). Generating a search batch cost
    ~2.5 ms, most of it the parse; a shape seen before costs a lookup and a join."""
    tree = parse_one_statement(text, kind)
    return split(tree, generate(tree.copy(), dialect), kinds, dialect)


#: A union_all branch's shape by its context's signature: (its parts, each placeholder's path in
#: the context, in rendering order).
_BRANCHES: dict[tuple, tuple[tuple[str | int, ...], list[tuple]]] = {}


def _branch_sql(name: str, dialect: str, context: Mapping[str, object]) -> str:
    """A union_all branch's SQL: one plain SELECT, compiled as a shape of its own. A branch whose
    context has a signature seen before (:func:`sqlanon.sql.shapes.signature`) renders the same
    text, so it is bound without a Jinja render (~40 us a branch, most of what was left)."""
    paths: dict[int, tuple] = {}
    try:
        key: tuple | None = (name, dialect, signature(context, (), paths))
    except TypeError:
        key = None
    hit = _BRANCHES.get(key) if key is not None else None
    if hit is None:
        items: list[Hole | Splice] = []
        text = _rendered(name, dialect, context, items)
        holes = [h for h in items if isinstance(h, Hole)]
        if len(holes) != len(items):
            raise SqlanonError(f"internal: a union_all branch of {name!r} holds a union_all")
        parts = _shape(text, "branch", dialect, _kinds(holes))  # type: ignore[arg-type]
        if key is None or len(paths) != len(holes) or any(id(h) not in paths for h in holes):
            return bind(parts, holes, dialect)
        hit = _BRANCHES[key] = (parts, [paths[id(h)] for h in holes])
        if len(_BRANCHES) > 4096:
            _BRANCHES.clear()
    parts, order = hit
    return bind(parts, [at(context, p) for p in order], dialect)


def attach_ctes(tree: exp.Expression, inline: Mapping[str, exp.Expression]) -> exp.Expression:
    """Prepend ``WITH name AS (select)`` for every unqualified table of ``tree`` named in ``inline``.

    Each inlined SELECT is self-contained (its own inlined tables were attached when it was
    stored), and prepending keeps every reference after its definition, as PostgreSQL requires.

    >>> t = parse_one_statement("WITH a AS (SELECT x FROM t1) SELECT * FROM a", "select")
    >>> attach_ctes(t, {"t1": parse_one_statement("SELECT 1 AS x", "select")}).sql()
    'WITH "t1" AS (SELECT 1 AS x), a AS (SELECT x FROM t1) SELECT * FROM a'
    """
    names = sorted({t.name for t in tree.find_all(exp.Table) if not t.db and t.name in inline})
    if not names:
        return tree
    query = tree.expression if isinstance(tree, exp.Create) else tree
    if not isinstance(query, exp.Query):
        raise SqlanonError(f"cannot attach read-only CTEs to a {tree.key}")
    if not isinstance(query, exp.Select):
        query = exp.select("*").from_(query.subquery("sqlanon_q"))
        if isinstance(tree, exp.Create):
            tree.set("expression", query)
        else:
            tree = query
    ctes = [
        exp.CTE(this=inline[n].copy(), alias=exp.TableAlias(this=exp.to_identifier(n, quoted=True)))
        for n in names
    ]
    existing = query.args.get("with_")
    if existing is not None:
        existing.set("expressions", ctes + list(existing.expressions))
    else:
        query.set("with_", exp.With(expressions=ctes))
    return tree


def inline_select(path: str, inline: Mapping[str, exp.Expression], /, **context: object) -> exp.Expression:
    """The SELECT of template ``path`` (rendered and parsed, its own inlined tables attached), kept
    in place of a temporary table on a connection that may not create one."""
    tree = parse_one_statement(_env().get_template(path).render(**context), "select")
    return attach_ctes(tree, inline)


def template_names() -> list[str]:
    """Every generic template (without a dialect suffix), for golden snapshots."""
    names = []
    for p in sorted(TEMPLATES_DIR.rglob("*.sql.j2")):
        rel = p.relative_to(TEMPLATES_DIR).as_posix()[: -len(".sql.j2")]
        if "." in Path(rel).name:  # a dialect sibling such as x.tsql
            continue
        if any(part.startswith("_") for part in Path(rel).parts):
            continue  # partials and macros are covered through the templates that use them
        names.append(rel)
    return names


def sql_list(items: Sequence[exp.Expression | str]) -> list[Sql]:
    """Render a list of sqlglot expressions (or identifiers) for a template."""
    out = []
    for it in items:
        if isinstance(it, exp.Expression):
            out.append(Sql(it.sql(CANONICAL)))
        else:
            out.append(ident(it))
    return out


def is_constant(e: Sql) -> bool:
    """Whether ``e`` reads no column (a QI at its top level is the constant '*'): PostgreSQL
    refuses a constant in GROUP BY ("non-integer constant"), and grouping by one changes nothing.

    >>> is_constant(Sql("'*'")), is_constant(Sql('"age"'))
    (True, False)
    """
    return exp.maybe_parse(e, dialect=CANONICAL).find(exp.Column) is None
