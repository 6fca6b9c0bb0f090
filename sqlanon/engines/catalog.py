"""Relations by their catalogue identity, never by their spelling.

``main.people``, ``people`` and ``memory.main.People`` can name one DuckDB table; comparing the text
let a target that was another spelling of the source replace the source (issue 15). Here every
relation the policy names is resolved, before anything runs, to the identity the engine itself
would bind: (database, schema, name) as the catalogue stores them, plus the engine's object id.
Name rules follow each engine: DuckDB compares identifiers case-insensitively (quoted or not) and
reads ``a.b`` as schema ``a`` of the current database, else database ``a``'s default schema;
PostgreSQL compares quoted identifiers exactly, resolves an unqualified name along the search path
(``current_schemas(true)``), and truncates identifiers to 63 bytes, so a longer name is refused
rather than silently bound to another relation.

Dependencies matter as much as identity: replacing a relation that the source (a view) reads would
change the source, and replacing a relation another view reads changes (DuckDB) or breaks
(PostgreSQL) that view. PostgreSQL records view dependencies in ``pg_depend``; DuckDB records none,
so its view definitions are parsed with sqlglot and their table references resolved the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from sqlanon.engines.base import Backend
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation

#: PostgreSQL's NAMEDATALEN - 1: longer identifiers are truncated by the server.
PG_MAX_IDENT_BYTES = 63
#: The smallest identifier limit among the engines sqlanon generates SQL for (PostgreSQL's);
#: sqlanon's own names (staging, swap) stay well under it.
MAX_IDENT_BYTES = 63


@dataclass(frozen=True)
class RelId:
    """A relation as the catalogue knows it."""

    db: str
    schema: str
    name: str
    kind: str  # 'table' | 'view'
    oid: str
    case_insensitive: bool = False
    temporary: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        parts = (self.db, self.schema, self.name)
        return tuple(p.lower() for p in parts) if self.case_insensitive else parts  # type: ignore[return-value]

    def relation(self) -> Relation:
        return Relation(self.name, schema=self.schema, catalog=self.db)

    def __str__(self) -> str:
        return f"{self.db}.{self.schema}.{self.name}"

    def same(self, other: RelId | None) -> bool:
        return other is not None and self.key == other.key


#: Engines whose catalogue compares identifiers case-insensitively (Spark: with its default
#: ``spark.sql.caseSensitive=false``). Both also parse their view definitions here.
CASE_INSENSITIVE = ("duckdb", "spark")
#: The schema an unqualified name of a view definition falls back to.
DEFAULT_SCHEMA = {"duckdb": "main", "spark": "default"}


def _norm(dialect: str, s: str | None) -> str | None:
    if s is None:
        return None
    return s.lower() if dialect in CASE_INSENSITIVE else s


def check_length(be: Backend, rel: Relation, what: str) -> None:
    """Refuse a name PostgreSQL would truncate (it would bind or create another relation)."""
    if be.dialect != "postgres":
        return
    for part in (rel.catalog, rel.schema, rel.name):
        if part is not None and len(part.encode("utf-8")) > PG_MAX_IDENT_BYTES:
            raise SqlanonError(
                f"{what}: the name {part!r} is {len(part.encode('utf-8'))} bytes; PostgreSQL truncates "
                f"identifiers to {PG_MAX_IDENT_BYTES} bytes, so it would name another relation"
            )


def _current(be: Backend) -> tuple[str, str, list[str]]:
    db, sch = be.query("catalog/current")[0]
    if be.search_path is not None:  # PostgreSQL: the user's path, not sqlanon's fixed one
        sp = be.search_path
        return str(db), str(sp.home or sch), list(sp.schemas) or [str(sp.home or sch)]
    path = be.query("catalog/search_path")[0][0]
    schemas = [str(s) for s in (path or [])] or [str(sch)]
    return str(db), str(sch), schemas


def home_schema(be: Backend) -> str | None:
    """Where an unqualified CREATE of the user's would go (PostgreSQL: the current schema of the
    user's own path; None elsewhere, where sqlanon's names stay as the user wrote them)."""
    return be.search_path.home if be.search_path is not None else None


def identify(be: Backend, rel: Relation, what: str) -> RelId | None:
    """The catalogue identity ``rel`` binds to on ``be`` (None when nothing by that name exists)."""
    check_length(be, rel, what)
    ci = be.dialect in CASE_INSENSITIVE
    rows = be.query("catalog/named", name=rel.name, schema=rel.schema, catalog=rel.catalog)
    found = [
        RelId(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), ci, bool(int(r[5] or 0))) for r in rows
    ]
    if not found:
        return None
    db, sch, path = _current(be)
    n = lambda s: _norm(be.dialect, s)  # noqa: E731
    if rel.catalog is not None and be.dialect == "postgres" and rel.catalog != db:
        raise SqlanonError(
            f"{what}: {str(rel)!r} names database {rel.catalog!r}, but the connection is to {db!r}"
        )

    def pick(dbname: str | None, schema: str) -> RelId | None:
        for f in found:
            if (dbname is None or n(f.db) == n(dbname)) and n(f.schema) == n(schema):
                return f
        return None

    if rel.schema is not None and rel.catalog is not None:
        return pick(rel.catalog, rel.schema)
    if rel.schema is not None:
        if be.dialect == "duckdb":
            # DuckDB: schema of the current database first, else a database's default schema.
            return pick(db, rel.schema) or pick(rel.schema, "main")
        return pick(db, rel.schema)
    if be.dialect in CASE_INSENSITIVE:
        temp = [f for f in found if f.temporary]
        if temp:
            return temp[0]
    for schema in path:
        hit = pick(db if be.dialect == "duckdb" else None, schema)
        if hit is not None:
            return hit
    return None


def schema_exists(be: Backend, rel: Relation) -> bool:
    if rel.schema is None:
        return True
    rows = be.query(
        "catalog/schema",
        schema=rel.schema,
        catalog=rel.catalog,
        case_insensitive=be.dialect in CASE_INSENSITIVE,
    )
    return bool(rows and int(rows[0][0]) > 0)


# -- dependencies --------------------------------------------------------------------------------


def _duck_views(be: Backend) -> list[tuple[RelId, set[tuple[str, str, str]]]]:
    """Each DuckDB (or Spark) view with the identities (lower-case keys) of the relations it reads."""
    db, _sch, _path = _current(be)
    home = DEFAULT_SCHEMA[be.dialect]
    views = []
    for vdb, vsch, vname, sql in be.query("catalog/views"):
        vid = RelId(str(vdb), str(vsch), str(vname), "view", "", True)
        refs: set[tuple[str, str, str]] = set()
        try:
            tree = sqlglot.parse_one(str(sql), read=be.dialect)
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
            tree = None
        if tree is None:
            # Unreadable definition: assume it may read anything of that name (safe side).
            views.append((vid, {("*", "*", "*")}))
            continue
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for t in tree.find_all(exp.Table):
            if not t.name or (not t.db and t.name.lower() in ctes):
                continue
            if t.catalog:
                refs.add((t.catalog.lower(), t.db.lower(), t.name.lower()))
            elif t.db:
                refs.add((str(vdb).lower(), t.db.lower(), t.name.lower()))
                refs.add((t.db.lower(), home, t.name.lower()))
            else:
                # Views bind unqualified names in their own schema, then the session's.
                refs.add((str(vdb).lower(), str(vsch).lower(), t.name.lower()))
                refs.add((db.lower(), home, t.name.lower()))
        views.append((vid, refs))
    return views


def _matches(refs: set[tuple[str, str, str]], rid: RelId) -> bool:
    return ("*", "*", "*") in refs or tuple(p.lower() for p in (rid.db, rid.schema, rid.name)) in refs


def reads(be: Backend, rid: RelId) -> list[RelId]:
    """Every relation ``rid`` reads, directly or through views (``rid`` itself included)."""
    if be.dialect == "postgres":
        oids = {str(r[0]) for r in be.query("catalog/depends_on", oid=int(rid.oid))}
        out = [rid]
        for oid in oids - {rid.oid}:
            out.append(RelId("", "", "", "", oid))
        return out
    if be.dialect not in CASE_INSENSITIVE or rid.kind != "view":
        return [rid]
    views = {v.key: refs for v, refs in _duck_views(be)}
    seen = {rid.key}
    stack = [rid.key]
    out = [rid]
    while stack:
        key = stack.pop()
        for ref in views.get(key, set()):
            if ref == ("*", "*", "*") or ref in seen:
                continue
            seen.add(ref)
            out.append(RelId(ref[0], ref[1], ref[2], "?", "", True))
            stack.append(ref)
    return out


def reads_relation(be: Backend, reader: RelId, rid: RelId) -> bool:
    """Whether ``reader`` reads ``rid`` (directly or through views)."""
    for r in reads(be, reader):
        if be.dialect == "postgres":
            if r.oid == rid.oid:
                return True
        elif r.same(rid):
            return True
    return False


def dependent_views(be: Backend, rid: RelId) -> list[str]:
    """The views that read ``rid`` directly (replacing it would change or break them)."""
    if be.dialect == "postgres":
        return [f"{s}.{n}" for s, n in be.query("catalog/dependents", oid=int(rid.oid))]
    if be.dialect not in CASE_INSENSITIVE:
        return []
    return [f"{v.schema}.{v.name}" for v, refs in _duck_views(be) if not v.same(rid) and _matches(refs, rid)]


def grants(be: Backend, rid: RelId) -> list[tuple[str, str, bool]]:
    """(grantee or '' for PUBLIC, privilege, grantable) on ``rid`` (PostgreSQL; none elsewhere)."""
    if be.dialect != "postgres":
        return []
    return [(str(g), str(p), bool(int(w))) for g, p, w in be.query("catalog/grants", oid=int(rid.oid))]


#: Staging names: this version's (``sqlanon_stage_<12 hex>``, ``sqlanon_old_<12 hex>``, which a
#: transactional publish never leaves behind) and earlier versions' (``<target>__sqlanon_<8 hex>``,
#: ``<target>__sqlanon_old_<8 hex>``, left by runs killed between build and swap).
STAGING = re.compile(r"^(sqlanon_(stage|old)_[0-9a-f]{12}|.+__sqlanon_(old_)?[0-9a-f]{8})$")


def leftovers(be: Backend) -> list[RelId]:
    """Staging relations of interrupted runs (found by name; see :data:`STAGING`)."""
    out = []
    for db, sch, name, kind in be.query("catalog/leftovers", duckdb=be.dialect == "duckdb"):
        if STAGING.match(str(name)):
            k = "view" if "VIEW" in str(kind).upper() else "table"
            out.append(RelId(str(db), str(sch), str(name), k, "", be.dialect in CASE_INSENSITIVE))
    return out


# -- readers (PostgreSQL) ------------------------------------------------------------------------


def missing_roles(be: Backend, names: list[str]) -> list[str]:
    """The roles of ``publish.grant`` that do not exist (``PUBLIC`` is every role)."""
    wanted = [n for n in names if n.upper() != "PUBLIC"]
    if not wanted:
        return []
    found = {str(r[0]) for r in be.query("catalog/roles", names=wanted)}
    return [n for n in wanted if n not in found]


#: The view options --replace carries over (the others belong to tables, or to views that can be
#: updated through, which a release is not).
VIEW_OPTIONS = ("security_barrier", "security_invoker")


def view_options(be: Backend, rid: RelId) -> list[tuple[str, str]]:
    """(option, value) of ``rid``'s reloptions that a replacement view keeps (PostgreSQL)."""
    if be.dialect != "postgres" or rid.kind != "view":
        return []
    out = []
    for (opt,) in be.query("catalog/view_options", oid=int(rid.oid)):
        name, _, val = str(opt).partition("=")
        if name in VIEW_OPTIONS:
            out.append((name, val))
    return out


@dataclass(frozen=True)
class Companion:
    """The definer function a view published by sqlanon reads through, and its row-type table."""

    function: Relation
    fn_oid: str
    table: Relation
    tab_oid: str


def companions(be: Backend, rid: RelId) -> list[Companion]:
    """What the view ``rid`` reads through (catalog/companions: by pg_depend, never by name)."""
    if be.dialect != "postgres" or rid.kind != "view":
        return []
    rows = be.query("catalog/companions", oid=int(rid.oid))
    return [  # and named as sqlanon names them: a user's own definer function is never dropped
        Companion(Relation(str(fn), str(fs)), str(fo), Relation(str(tn), str(ts)), str(to))
        for fs, fn, fo, ts, tn, to in rows
        if OWN_COMPANION.match(str(fn)) and OWN_COMPANION.match(str(tn))
    ]


def orphans(be: Backend) -> list[Companion]:
    """Function and row-type pairs of published views that are gone (PostgreSQL; none elsewhere).

    Found by the catalogue (catalog/orphans: no view's rule, nor anything else, depends on the
    function) and by sqlanon's own names, one tag for both in one schema: never by a name alone,
    so a user's function spelt like sqlanon's is left alone."""
    if be.dialect != "postgres":
        return []
    out = []
    for fs, fn, fo, ts, tn, to in be.query("catalog/orphans"):
        fn, tn = str(fn), str(tn)
        if OWN_COMPANION.match(fn) and tn == "sqlanon_rel_" + fn[-12:] and str(fs) == str(ts):
            out.append(Companion(Relation(fn, str(fs)), str(fo), Relation(tn, str(ts)), str(to)))
    return out


#: The names sqlanon gives a published view's function and row-type table (engines/definer.py).
OWN_COMPANION = re.compile(r"^sqlanon_(fn|rel)_[0-9a-f]{12}$")
