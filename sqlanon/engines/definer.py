"""A PostgreSQL view that a reader who may only SELECT it can query safely (issue 32).

A plain view is inlined into the reader's query: the reader's predicates run below the release's
suppression (a cheap function that records its arguments saw every row; a cast that fails on a
hidden row printed it in the error), EXPLAIN ANALYZE counts the source's rows, and the
definition, world-readable in ``pg_views``, lists the raw values of a map hierarchy.
``security_barrier`` stops none of the last three (PostgreSQL docs, *Rules and Privileges*).

So the published view reads ``SELECT ... FROM <schema>.sqlanon_fn_<tag>()``: a ``SECURITY
DEFINER`` PL/pgSQL function (never inlined: the reader's query sees only the rows it returns)
with ``SET search_path = pg_catalog, pg_temp``, whose body runs ``RETURN QUERY EXECUTE`` on the
release's query text. The text is stored in ``sqlanon_rel_<tag>``, a table with no rows of the
release that only its owner can read; it is also the function's row type, so the function
depends on it in ``pg_depend`` and ``--replace`` finds both from the old view by dependency
(:func:`sqlanon.engines.catalog.companions`). ``pg_proc.prosrc`` and ``pg_get_viewdef`` hold
names only. EXECUTE is revoked from PUBLIC and granted with the view's SELECT: PostgreSQL checks
a function's EXECUTE as the reader even inside a view. The function also fixes every setting a
reader could use to print, re-parse or change the release (:data:`FIXED`, :data:`INHERITED`),
hides the query text from its errors, and serves only a session user who may still read a view
that calls it (:meth:`Definer.body`); ``sqlanon cleanup`` removes it once its view is gone.

Why this module sends text that :func:`sqlanon.sql.compile.to_sql` did not generate: sqlglot
(30.x) cannot represent a PL/pgSQL function (it falls back to a raw Command, prints SECURITY
DEFINER as MySQL's ``SQL SECURITY DEFINER``, and upper-cases quoted function names) and has no
REVOKE kind. The statements here are fixed text around identifiers quoted by sqlglot and
sqlanon's own hex names; no value of the policy or the data enters them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from sqlanon.engines.base import Backend
from sqlanon.engines.catalog import OWN_COMPANION, orphans
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql

_OWN = OWN_COMPANION
#: A template rendered through the compile path: (name, statement kind, context) -> SQL text.
Render = Callable[[str, str, dict[str, object]], str]

#: Settings the function fixes for its own run, whatever the reader set (issue 32). A reader's
#: ``client_min_messages = log`` with ``debug_print_parse`` sent them the parse tree of the stored
#: query, constants and all; ``standard_conforming_strings = off`` re-read a label's backslash as
#: an escape, and the syntax error printed the query. Not pinned: the SUSET settings (``log_*``,
#: ``lc_messages``), which a reader cannot change and a non-superuser owner could not pin.
FIXED = (
    ("search_path", "pg_catalog, pg_temp"),
    ("client_min_messages", "error"),
    ("debug_print_parse", "off"),
    ("debug_print_rewritten", "off"),
    ("debug_print_plan", "off"),
    ("trace_sort", "off"),
    ("standard_conforming_strings", "on"),
    ("backslash_quote", "safe_encoding"),
    ("escape_string_warning", "off"),
    ("transform_null_equals", "off"),
    ("array_nulls", "on"),
    ("quote_all_identifiers", "off"),
    ("gin_fuzzy_search_limit", "0"),
)
#: Settings that change the value or text of what the release computes (a timestamptz cast to
#: text for a month: TimeZone and DateStyle; how literals in the stored query parse: DateStyle,
#: IntervalStyle, TimeZone and its abbreviations; float and bytea text; money and to_char's
#: locale; XML; row security). The function keeps the publishing session's values: the ones the
#: release was verified under, and the ones a table published from that session holds. A reader
#: sweeping TimeZone moved rows across month ends and learnt their times to the hour.
INHERITED = (
    "TimeZone",
    "DateStyle",
    "IntervalStyle",
    "timezone_abbreviations",
    "extra_float_digits",
    "bytea_output",
    "lc_monetary",
    "lc_numeric",
    "lc_time",
    "xmlbinary",
    "xmloption",
    "default_text_search_config",
    "row_security",
)


def _q(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("postgres")


def _qual(rel: Relation) -> str:
    if rel.schema is None:
        raise SqlanonError(f"internal: {rel.name!r} must be schema-qualified")
    return f"{_q(rel.schema)}.{_q(rel.name)}"


def _fn(rel: Relation) -> str:
    if not _OWN.match(rel.name):
        raise SqlanonError(f"internal: {rel.name!r} is not a name sqlanon gives its functions")
    return f"{_qual(rel)}()"


def _lit(value: str) -> str:
    return exp.Literal.string(value).sql("postgres")


def _ddl(be: Backend, what: str, sql: str) -> None:
    try:
        be._run(sql)
    except Exception as e:  # noqa: BLE001 - any driver error becomes one line
        raise be._fail("statement", what, e) from e


@dataclass(frozen=True)
class Definer:
    """The function and row-type table behind one published view, named from one tag."""

    function: Relation
    table: Relation
    qcol: str  # the row type's column that holds the query text

    @classmethod
    def named(cls, schema: str, tag: str, qcol: str) -> Definer:
        return cls(Relation(f"sqlanon_fn_{tag}", schema), Relation(f"sqlanon_rel_{tag}", schema), qcol)

    def call(self) -> Sql:
        """The call a view's FROM reads (the own name unquoted: sqlglot upper-cases a quoted
        function name, and PostgreSQL folds the unquoted one back to sqlanon's lower-case name)."""
        _fn(self.function)
        return Sql(f"{_q(str(self.function.schema))}.{self.function.name}()")

    def create(self, be: Backend, ctx: dict[str, object]) -> None:
        """Row type, stored query and function, in the caller's transaction. No IF NOT EXISTS: a
        name taken by anyone else fails the publish instead of being reused."""
        for what, sql in self.statements(be._sql, self.settings(be), ctx):
            _ddl(be, what, sql)

    def statements(
        self, render: Render, settings: list[str], ctx: dict[str, object]
    ) -> list[tuple[str, str]]:
        """(what, SQL) of what :meth:`create` runs, in order; ``sqlanon compile`` prints the same
        (:func:`sqlanon.publish.compile_release`). ``render(template, kind, context)`` is the
        compile path (the backend's, or :func:`~sqlanon.sql.compile.to_sql` for PostgreSQL);
        ``settings`` the function's SET clauses (:meth:`settings`)."""
        table = {"target": self.table, "qcol": self.qcol}
        query = render("publish/release_rows", "select", {"qcol": self.qcol, **ctx})
        tag = f"$sqlanon_{self.function.name[-12:]}$"
        body = self.body()
        if tag in body:
            raise SqlanonError("internal: the function body holds its own quote tag")
        return [
            ("publish/create_rowtype", render("publish/create_rowtype", "create", {**table, **ctx})),
            ("publish/store_query", render("publish/store_query", "insert", {**table, "query": query})),
            (
                "publish/definer_function",
                f"CREATE FUNCTION {_fn(self.function)} RETURNS SETOF {_qual(self.table)} LANGUAGE plpgsql "
                f"SECURITY DEFINER {' '.join(settings)} AS {tag}{body}{tag}",
            ),
            ("publish/revoke_function", f"REVOKE ALL ON FUNCTION {_fn(self.function)} FROM PUBLIC"),
        ]

    @staticmethod
    def settings(be: Backend | None) -> list[str]:
        """:data:`FIXED`, and :data:`INHERITED` at this session's values, as SET clauses; without a
        session (printed SQL), ``FROM CURRENT``: the values of the session that runs it, as PostgreSQL
        records them when the function is created (*CREATE FUNCTION*)."""
        out = [f"SET {_q(n)} = {'pg_catalog, pg_temp' if n == 'search_path' else _lit(v)}" for n, v in FIXED]
        if be is None:
            return out + [f"SET {_q(n)} FROM CURRENT" for n in INHERITED]
        values = be.query("catalog/settings", names=list(INHERITED))[0]
        return out + [f"SET {_q(n)} = {_lit(str(v))}" for n, v in zip(INHERITED, values, strict=True)]

    def body(self) -> str:
        """First the access check (finding 7: EXECUTE outlived a revoked SELECT on the view, and
        the view itself): rows only for a session user who may SELECT a view whose rule calls
        this very function, looked up in ``pg_depend`` at every call, so revoking the view's
        SELECT or dropping the view ends access. Then the release's query, where any error is
        raised again as one generic message with its SQLSTATE only: PostgreSQL's own message,
        QUERY line and CONTEXT of a failing dynamic query quote the stored query text."""
        me = _lit(_fn(self.function))
        col = _q(self.qcol)
        return (
            "BEGIN "
            "IF NOT EXISTS (SELECT FROM pg_catalog.pg_depend AS d "
            "JOIN pg_catalog.pg_rewrite AS r ON r.oid = d.objid "
            "WHERE d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
            "AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass "
            f"AND d.refobjid = {me}::pg_catalog.regprocedure "
            "AND pg_catalog.has_table_privilege(SESSION_USER, r.ev_class, 'SELECT')) THEN "
            "RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'permission denied for this sqlanon "
            "release: no view that publishes it may be read by ' || pg_catalog.quote_ident(SESSION_USER); "
            "END IF; "
            "BEGIN "
            f"RETURN QUERY EXECUTE (SELECT t.{col} FROM {_qual(self.table)} AS t WHERE t.{col} IS NOT NULL); "
            "EXCEPTION WHEN OTHERS THEN "
            "RAISE EXCEPTION USING ERRCODE = SQLSTATE, "
            "MESSAGE = 'sqlanon release failed (SQLSTATE ' || SQLSTATE || '); "
            "its owner can run it to see why'; "
            "END; "
            "END"
        )

    def grant(self, be: Backend, grantee: str) -> None:
        """EXECUTE for a reader of the view ('' is PUBLIC)."""
        who = _q(grantee) if grantee else "PUBLIC"
        _ddl(be, "publish/grant_function", f"GRANT EXECUTE ON FUNCTION {_fn(self.function)} TO {who}")


def drop(be: Backend, function: Relation, table: Relation) -> None:
    """Drop a replaced view's function and row type (found by dependency; RESTRICT: anything else
    that reads them fails the publish, and the transaction rolls back)."""
    _ddl(be, "publish/drop_function", f"DROP FUNCTION {_fn(function)}")
    if not _OWN.match(table.name):
        raise SqlanonError(f"internal: {table.name!r} is not a name sqlanon gives its tables")
    _ddl(be, "publish/drop_rowtype", f"DROP TABLE {_qual(table)}")


def cleanup(be: Backend, *, remove: bool = False) -> list[str]:
    """``sqlanon cleanup`` for published views dropped by hand: their function and row type
    (:func:`sqlanon.engines.catalog.orphans`), which refuse every caller but stay until removed;
    with ``remove``, both of each pair in one transaction. Returns what was found."""
    found = []
    for c in orphans(be):
        if remove:
            try:
                drop(be, c.function, c.table)
                be.commit()
            except BaseException:
                be.rollback()
                raise
        found.append(f"function {c.function}() and table {c.table} (their view is gone)")
    return found
