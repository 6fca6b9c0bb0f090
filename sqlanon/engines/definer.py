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
a function's EXECUTE as the reader even inside a view.

Why this module sends text that :func:`sqlanon.sql.compile.to_sql` did not generate: sqlglot
(30.x) cannot represent a PL/pgSQL function (it falls back to a raw Command, prints SECURITY
DEFINER as MySQL's ``SQL SECURITY DEFINER``, and upper-cases quoted function names) and has no
REVOKE kind. The statements here are fixed text around identifiers quoted by sqlglot and
sqlanon's own hex names; no value of the policy or the data enters them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from sqlanon.engines.base import Backend
from sqlanon.engines.catalog import OWN_COMPANION
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql

_OWN = OWN_COMPANION


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
        be.execute("publish/create_rowtype", kind="create", target=self.table, qcol=self.qcol, **ctx)
        query = be._sql("publish/release_rows", "select", {"qcol": self.qcol, **ctx})
        be.execute("publish/store_query", kind="insert", target=self.table, qcol=self.qcol, query=query)
        tag = f"$sqlanon_{self.function.name[-12:]}$"
        body = (
            f"BEGIN RETURN QUERY EXECUTE (SELECT t.{_q(self.qcol)} FROM {_qual(self.table)} AS t "
            f"WHERE t.{_q(self.qcol)} IS NOT NULL); END"
        )
        if tag in body:
            raise SqlanonError("internal: the function body holds its own quote tag")
        _ddl(
            be,
            "publish/definer_function",
            f"CREATE FUNCTION {_fn(self.function)} RETURNS SETOF {_qual(self.table)} LANGUAGE plpgsql "
            f"SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS {tag}{body}{tag}",
        )
        _ddl(be, "publish/revoke_function", f"REVOKE ALL ON FUNCTION {_fn(self.function)} FROM PUBLIC")

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
