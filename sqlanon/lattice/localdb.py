"""The local walk's in-memory DuckDB and the bulk copy into it (issue 33; the walk itself:
:mod:`sqlanon.lattice.local`).

A module below :mod:`sqlanon.lattice.plan`, which codes the frequency table here where the walk
will be local on PostgreSQL (:func:`stage_coded`). The copied tables are personal data
(aggregates of the source): the DuckDB is ``:memory:`` with ``temp_directory=''`` (DuckDB cannot
offload a block to disk: past its ``memory_limit``, 80 % of RAM by default, a statement fails with
DuckDB's out-of-memory error instead of spilling) and ``enable_external_access=false`` (no
statement can read or write a file), nothing of it is printed or logged, and it is closed when the
search ends (a staged one that no walk takes: when the warehouse's session closes,
``Backend.staged``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from sqlanon import interrupt
from sqlanon.engines import Backend, Column
from sqlanon.engines.bulk import select_list
from sqlanon.engines.duckdb import DuckDBBackend
from sqlanon.errors import SqlanonError
from sqlanon.measure.assessment import FrequencyTables
from sqlanon.relation import Relation
from sqlanon.search_where import LOCAL_MAX_ROWS
from sqlanon.sql.compile import Sql, find_template, ident


def require_arrow() -> Any:
    try:
        import pyarrow
        import pyarrow.csv  # noqa: F401 - the PostgreSQL path's parser
    except ImportError:
        raise SqlanonError(
            "search.where: the local walk needs pyarrow (pip install pyarrow); or search in the database "
            "(search.where: database, --search-in database)"
        ) from None
    return pyarrow


@dataclasses.dataclass
class LocalBackend(DuckDBBackend):
    """The in-memory DuckDB of a local walk. A warehouse table it has not copied yet (``pending``:
    name -> copy) is copied before the first statement whose text names it; the source's columns
    are answered from the warehouse's (``known``), for the metrics that read their types."""

    driver_text = False  # its errors never quote DuckDB's message (a copied value): Backend._fail
    pending: dict[str, Callable[[], int]] = dataclasses.field(default_factory=dict)
    known: dict[Relation, list[Column]] = dataclasses.field(default_factory=dict)
    moved: int = 0

    def _sql(self, name: str, kind: str, context: dict[str, object]) -> str:
        sql = super()._sql(name, kind, context)
        for rel_name in [n for n in self.pending if n in sql]:
            self.moved += self.pending.pop(rel_name)()
        return sql

    def columns(self, rel: Relation) -> list[Column]:
        if rel in self.known:
            return list(self.known[rel])
        return super().columns(rel)


def open_local(be: Backend, src: Relation, columns: list[Column] | None = None) -> LocalBackend:
    """A fresh in-memory DuckDB that cannot spill nor touch a file (the module docstring),
    answering the source's columns from the warehouse's (``columns``: already read, for a caller
    whose connection is busy with a COPY)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import StaticPool

    engine = create_engine("duckdb:///:memory:", poolclass=StaticPool)
    local = LocalBackend(dialect="duckdb", url="duckdb:///:memory: (the local walk)", _engine=engine)
    try:
        local._conn = engine.connect()
        # Order matters: external access cannot be switched off before the settings it guards.
        for setting in ("SET temp_directory = ''", "SET enable_external_access = false"):
            local._conn.execute(text(setting))
        local.commit()
        local.known[src] = columns if columns is not None else be.require_columns(src, "source")
    except BaseException:
        local.close()
        raise
    return local


def freq_cols(local: LocalBackend, src: Relation, base: FrequencyTables) -> list[tuple[Sql, str]]:
    """The base frequency table's columns with their types: the values as the source has them."""
    return source_freq_cols(local.known[src], base)


def source_freq_cols(known: list[Column], base: FrequencyTables) -> list[tuple[Sql, str]]:
    """:func:`freq_cols` from the source's columns ``known``."""
    types = {c.name: c.type for c in known}
    cols = [(a, types[n]) for a, n in zip(base.q_aliases, base.qi_names, strict=True)]
    cols += [(a, types[n]) for a, n in zip(base.s_aliases, base.s_names, strict=True)]
    return cols + [(a, "int64") for a in [*base.sid_aliases, ident("cnt")]]


#: Per engine where :func:`stage_coded` codes the frequency table locally, the source types whose
#: values DuckDB holds and compares exactly as that engine does (a hierarchy's labels are computed
#: from them locally); any other quasi-identifier type (numeric, dates, char(n)'s padding, an enum's
#: order, floating point) keeps the coding in the warehouse. Spark: its coded table cost ten jobs
#: and a copy of its codes (1e6 rows, local[2]: prepare 8.1-9.0 s against a 1.7 s scan).
#: No 8- or 16-bit integers: DuckDB keeps their type in arithmetic where the warehouse widens it
#: (an interval hierarchy's ``x - start`` overflows a TINYINT in DuckDB, not in Spark).
EXACT_TYPES = {
    "postgres": frozenset({"text", "character varying", "integer", "bigint"}),
    "spark": frozenset({"string", "int", "integer", "bigint"}),
}
STAGE_ENGINES = frozenset(EXACT_TYPES)
#: Types whose values a local measurement compares and groups exactly as the warehouse (values
#: only compared, never computed on: the labels are the warehouse's), for
#: :mod:`sqlanon.lattice.local_measure`. A collated Spark string shows as ``string collate ...``.
COMPARED_TYPES = {
    "postgres": EXACT_TYPES["postgres"] | {"smallint", "double precision", "real", "date", "boolean"},
    "spark": EXACT_TYPES["spark"] | {"smallint", "tinyint", "double", "float", "date", "boolean"},
}


def compared_exactly(be: Backend, src: Relation, names: list[str], types: dict[str, frozenset[str]]) -> bool:
    """Whether DuckDB compares and groups the values of ``src``'s columns ``names`` as ``be``
    does: each of a type in ``types[dialect]`` and, on PostgreSQL, of a deterministic collation
    (a case-insensitive one, or citext, would group 'flu' and 'FLU' together there and apart here)."""
    allowed = types.get(be.dialect)
    if allowed is None:
        return False
    cols = {c.name: c.type.strip().lower() for c in be.require_columns(src, "source")}
    if any(cols.get(n) not in allowed for n in names):
        return False
    if be.dialect == "postgres":
        loose = {str(r[0]) for r in be.query("catalog/collations", name=src.name, schema=src.schema)}
        return not loose & set(names)
    return True


#: ... and only from this many source records: below, coding in the warehouse costs little, and
#: the local DuckDB would cost a program that prepares a plan but never walks it (``evaluate``,
#: ``--levels``) a copy of the frequency table for nothing.
STAGE_MIN_ROWS = 100_000


def stage_coded(
    be: Backend,
    policy: Any,
    base: FrequencyTables,
    n_rows: int,
    coding: dict[str, Any],
    aliases: list[Sql],
    flags: bool,
    walk: bool = True,
    local: LocalBackend | None = None,
) -> tuple[Relation, tuple] | None:
    """For :func:`sqlanon.lattice.plan.prepare` where the walk will be local on PostgreSQL or Spark:
    copy the base frequency table (its values) into the local DuckDB and build the coded table
    there with the same template (templates/search/coded.sql.j2), instead of building it in
    PostgreSQL and copying its codes; the coded table's relation and its summary row
    (templates/search/cardinalities.sql.j2), else None (the warehouse codes as before). Only
    where a walk follows (``walk``): ``evaluate`` and ``--levels`` read the coded table in the
    warehouse, so a local copy would cost them the copy and the coding for nothing (~0.7 s of CPU
    at 1e6 rows). The staged DuckDB is the session's (``Backend.staged``, one at a time: an
    earlier plan that was never walked copies its own), closed with it.

    Why: at 1e6 rows (276,373 frequency rows, nine QIs) PostgreSQL spent 0.75 s of CPU on the
    coded table and 0.2 s writing its CSV, Python 0.6-0.7 s reading it; the values' copy costs
    Python the same, PostgreSQL 0.15 s, and DuckDB codes them in 0.26 s of CPU on its threads.
    The warehouse builds its own coded table only if a statement there names it
    (``Backend.deferred``: the choice with a table-wide risk bound, publishing a node the walk
    did not count); its codes may number the labels differently, never group them differently.
    ``local``: the DuckDB :class:`DirectCopy` already copied the frequency table into (the checks
    above passed before it did).
    """
    if local is not None:
        return _code_locally(be, local, coding, aliases, flags)
    if (
        not walk
        or be.dialect not in STAGE_ENGINES
        or n_rows < STAGE_MIN_ROWS
        or be.inline
        or policy.search.where == "database"
        or policy.search.algorithm == "mondrian"
    ):
        return None
    try:
        require_arrow()
    except SqlanonError:
        return None  # location() decides: auto searches in the database, local says what is missing
    src = policy.source
    if not compared_exactly(be, src, base.qi_names, EXACT_TYPES):
        return None
    if policy.search.where == "auto" and n_rows > LOCAL_MAX_ROWS:  # else no more frequency rows
        if int(be.query("search/row_count", rel=base.freq)[0][0]) > LOCAL_MAX_ROWS:
            return None  # location() will search in the database
    be.close_staged()  # one per session: an earlier plan that was never walked copies its own
    local = open_local(be, src)
    try:
        local.moved = copy_table(be, local, base.freq, freq_cols(local, src, base))
    except BaseException:
        local.close()
        raise
    return _code_locally(be, local, coding, aliases, flags)


def _code_locally(
    be: Backend, local: LocalBackend, coding: dict[str, Any], aliases: list[Sql], flags: bool
) -> tuple[Relation, tuple]:
    """Build the coded table in ``local`` from its copy of the frequency table, and register its
    build in the warehouse for a statement there that names it (:func:`stage_coded`)."""
    coded = be.temp_relation("coded")
    try:
        template = find_template("search/coded", local.dialect)
        # DuckDB scans each column's DISTINCT in parallel, and hash-joins NULL to its code (coded.sql.j2)
        ctx = {**coding, "one_scan": False, "null_safe": True}
        local.execute("ddl/create_temp", kind="create", _target=coded, _template=template, **ctx)
        local._temps.append(coded.name)
        summary = local.query("search/cardinalities", coded=coded, aliases=aliases, flags=flags)[0]
    except BaseException:
        local.close()
        raise

    def build_in_warehouse() -> None:
        template = find_template("search/coded", be.dialect)
        be.execute(
            "ddl/create_temp", kind="create", _target=coded, _template=template, **coding, one_scan=True
        )
        be._temps.append(coded.name)

    be.deferred[coded.name] = build_in_warehouse
    be.staged = (coded.name, local)  # prepared but never walked: closed with the session
    return coded, tuple(summary)


def copy_table(be: Backend, local: Backend, rel: Relation, cols: list[tuple[Sql, str]]) -> int:
    """Copy ``rel`` (its columns ``cols``: alias and type, an Arrow type name for the integers,
    else the warehouse's type name) from ``be`` into ``local`` under the same name; the rows
    copied. The rows pass as Arrow record batches over each engine's bulk path
    (``Backend.read_arrow``, then the local DuckDB's ``Backend.load``), never as Python objects."""
    require_arrow()  # the bulk paths' Arrow: said in one line where it is missing
    sql = be._sql("search/rows", "select", {"rel": rel, "cols": [a for a, _ in cols]})
    moved = copy_select(be, lambda: local, rel, sql, cols)
    assert moved is not None
    return moved


def copy_select(
    be: Backend,
    target: Callable[[], LocalBackend],
    rel: Relation,
    sql: str,
    cols: list[tuple[Sql, str]],
    cap: int | None = None,
    what: str | None = None,
    sums: list[Sql] | None = None,
) -> int | None:
    """The rows of ``be``'s SELECT ``sql`` (its columns ``cols``, as :func:`copy_table` takes
    them) into a table ``rel`` of the local DuckDB ``target()``, called once the statement is
    sent (the imports it waits on overlap the warehouse's work); the rows copied, or None (the
    table holds only part of them) where there were more than ``cap``. ``what``: the template of
    ``sql``, named with the server's own error where the warehouse refuses it (the search's scan:
    a missing privilege, a timeout), as any statement's failure is. ``sums``: the rows' counts
    (``cnt``) are summed by these columns as they arrive (:func:`sum_rows`), and ``rel`` holds
    the sums."""
    names = [str(a).strip('"') for a, _ in cols]
    types = [t for _, t in cols]
    loaded = [(n, _cast(t, be.dialect)) for n, t in zip(names, types, strict=True)]
    over: list[bool] = []
    try:
        with be.read_arrow(sql, list(zip(names, types, strict=True))) as reader:
            local = target()
            rows = reader if cap is None else _capped(reader, cap, over)
            if sums is None:
                moved = local.load(rel.table(), loaded, rows, temporary=False)
            else:
                moved = sum_rows(local, rel, loaded, rows, sums)
            if over:
                for _ in reader:  # the rest, unread, before the COPY ends (pyarrow reads ahead)
                    pass
    except SqlanonError:
        raise
    except Exception as e:  # noqa: BLE001 - a driver or a cast error becomes one line
        interrupt.check()  # a COPY cancelled by Ctrl-C (the search's scan, now): the interrupt
        if what is not None and getattr(e, "sqlstate", None):  # the server's error, not a value's cast
            raise be._fail("statement", what, e) from None
        # Never the driver's text: a cast error quotes the value it could not read (a raw QI value).
        kinds = ", ".join(f"{n} {t}" for n, t in zip(names, types, strict=True))
        raise SqlanonError(
            f"search.where: local: copying the search's table failed ({type(e).__name__} reading "
            f"columns {kinds}); set search.where: database to walk in the warehouse"
        ) from None
    local._temps.append(rel.name)
    return None if over else moved


def sum_rows(
    local: LocalBackend, rel: Relation, loaded: list[tuple[str, str | None]], rows: Any, group: list[Sql]
) -> int:
    """The Arrow stream ``rows`` (columns ``loaded``: name and the type to cast to, as
    ``Backend.load`` takes them) summed into the temporary table ``rel`` as it arrives: its
    counts ``cnt`` by the columns ``group``, with the template that builds the frequency table
    (templates/freq/base.sql.j2, weighted by ``cnt``); the rows read.

    Why: the search's scan in page ranges (:mod:`sqlanon.engines.pgparts`) counts a combination
    once per range that holds it, and the local DuckDB sums them. Loaded into a table first and
    summed after the copy (349,873 rows into 276,373 at 1e6 rows), the sums waited for the whole
    copy and the rows were written and read once more; summed from the stream, DuckDB groups each
    batch while PostgreSQL sends the next. The copy and the sums at 1e6 rows, interleaved on the
    shared 2-core machine (load ~4.4, five runs each): 1.56-2.28 -> 1.36-1.68 s (medians 1.73 ->
    1.48 s), 0.74-1.18 -> 0.59-0.65 s of the process's CPU, the same table."""
    import pyarrow as pa

    seen = [0]

    def counted() -> Any:
        for batch in rows:
            seen[0] += batch.num_rows
            yield batch

    stream = pa.RecordBatchReader.from_batches(rows.schema, counted())
    raw = local._conn.connection.driver_connection
    view = local.temp_relation("stream")
    name = view.table().sql("duckdb")
    raw.register(STREAM_ARROW, stream)
    try:
        view_sql = (
            f"CREATE TEMPORARY VIEW {name} AS SELECT {select_list(loaded, 'duckdb')} FROM {STREAM_ARROW}"
        )
        local.log.append(view_sql)
        raw.execute(view_sql)
        # Run on the driver: a failure here is the copy's (copy_select says so in one line).
        ctx = dict(
            _target=rel,
            _template=find_template("freq/base", local.dialect),
            source=view,
            q_exprs=group,
            q_aliases=group,
            s_exprs=[],
            s_aliases=[],
            sid_aliases=[],
            sort_keys=[],
            with_cid=False,
            group_exprs=group,
            ranks=False,
            weight=ident("cnt"),
        )
        sql = local._sql("ddl/create_temp", "create", ctx)
        local.log.append(sql)
        raw.execute(sql)
    finally:  # after a failed statement DuckDB refuses these too: the failure is what is raised
        with contextlib.suppress(Exception):
            raw.execute(f"DROP VIEW IF EXISTS {name}")
        with contextlib.suppress(Exception):
            raw.unregister(STREAM_ARROW)
    return seen[0]


#: The name :func:`sum_rows` gives the Arrow stream it reads (the connection's own, while it reads).
STREAM_ARROW = "sqlanon_stream_arrow"


def _capped(reader: Any, cap: int, over: list[bool]) -> Any:
    """``reader``'s batches until more than ``cap`` rows have come (then ``over`` is marked)."""
    import pyarrow as pa

    def batches() -> Any:
        n = 0
        for batch in reader:
            n += batch.num_rows
            if n > cap:
                over.append(True)
                return
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def _cast(type_name: str, dialect: str) -> str | None:
    """The type DuckDB should hold a column as: None (as it came) where Arrow carries the type
    (Spark, DuckDB, the integers), else the warehouse's type in DuckDB's spelling (an
    unconstrained PostgreSQL numeric as DOUBLE: DuckDB's DECIMAL would default to a scale of 3; a
    type DuckDB lacks as text).

    >>> _cast("int64", "postgres"), _cast("character varying", "postgres"), _cast("STRING", "spark")
    (None, 'TEXT', None)
    """
    if dialect != "postgres" or type_name in ("int32", "int64"):
        return None
    return _duckdb_type(type_name)


def held_inexactly(be: Backend, src: Relation, names: list[str]) -> Column | None:
    """The first of ``src``'s columns ``names`` whose values the local copy may not hold exactly:
    one :func:`_cast` holds as DOUBLE though the warehouse's type is no floating-point type
    (PostgreSQL's ``numeric``, any number of digits, where 1.0000000000000000001 and
    1.0000000000000000002, or 2^53 and 2^53 + 1, are one double). Derived from the cast the copy
    makes, so that the two cannot drift apart: a walk or Mondrian's rounds on such a copy could
    merge distinct values (the metrics' codes, an interval's side), so they stay in the warehouse."""
    cols = {c.name: c for c in be.require_columns(src, "source")}
    for name in names:
        col = cols.get(name)
        if col is not None and not col.floating and _cast(col.type.strip(), be.dialect) == "DOUBLE":
            return col
    return None


def inexact_column(be: Backend, policy: Any, qi_names: list[str], refuse: bool) -> bool:
    """Whether a quasi-identifier or sensitive attribute of ``policy`` is :func:`held_inexactly`
    (the search then stays in the warehouse: :func:`sqlanon.lattice.local.location`); with
    ``refuse`` (``search.where: local`` asked for) such a column is refused in one line instead.

    Why: a walk reads the copied values where the metrics' tables are built from them
    (templates/metrics/coded.sql.j2 ranks the values and labels each level): 2^53 and 2^53 + 1,
    one double, stopped ``ncp`` with "the metrics' level codes differ from the search's", and an
    interval's boundary between them would label them alike; Mondrian's rounds cut the values."""
    names = [*qi_names, *(c.name for c in policy.sensitive)]
    col = held_inexactly(be, policy.source, names)
    if col is not None and refuse:
        engine = {"postgres": "PostgreSQL"}.get(be.dialect, be.dialect)
        raise SqlanonError(
            f"search.where: local: column {col.name} is {engine} {col.type.strip().lower()}, which the "
            "local copy holds as DOUBLE (distinct values could merge: the search would group them as one); "
            "set search.where: database"
        )
    return col is not None


def _duckdb_type(pg_type: str) -> str:
    """PostgreSQL's information_schema type name in DuckDB's spelling.

    >>> _duckdb_type("character varying"), _duckdb_type("numeric"), _duckdb_type("USER-DEFINED")
    ('TEXT', 'DOUBLE', 'TEXT')
    """
    low = pg_type.strip().lower()
    if low == "numeric":
        return "DOUBLE"
    try:
        dt = exp.DataType.build(low, dialect="postgres")
    except Exception:  # noqa: BLE001 - USER-DEFINED (an enum), ARRAY, ...: compared as text
        return "TEXT"
    if dt.this in (exp.DataType.Type.USERDEFINED, exp.DataType.Type.UNKNOWN, exp.DataType.Type.ARRAY):
        return "TEXT"
    return dt.sql("duckdb")


def take_staged(be: Backend, coded: Relation) -> LocalBackend | None:
    """The local DuckDB :func:`stage_coded` coded ``coded`` in for the session ``be``, once (the
    caller closes it); None where this session staged another plan's, or none."""
    if be.staged is None or be.staged[0] != coded.name:
        return None
    local = be.staged[1]
    be.staged = None
    assert isinstance(local, LocalBackend)
    return local
