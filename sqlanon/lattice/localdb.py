"""The local walk's in-memory DuckDB and the bulk copy into it (issue 33; the walk itself:
:mod:`sqlanon.lattice.local`).

A module below :mod:`sqlanon.lattice.plan`, which codes the frequency table here where the walk
will be local on PostgreSQL (:func:`stage_coded`). The copied tables are personal data
(aggregates of the source): the DuckDB is ``:memory:`` with ``temp_directory=''`` (DuckDB cannot
offload a block to disk: past its ``memory_limit``, 80 % of RAM by default, a statement fails with
DuckDB's out-of-memory error instead of spilling) and ``enable_external_access=false`` (no
statement can read or write a file), nothing of it is printed or logged, and it is closed when the
search ends (a staged one that no walk takes: when the warehouse's session object goes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend, Column
from sqlanon.errors import SqlanonError
from sqlanon.measure.assessment import FrequencyTables
from sqlanon.relation import Relation
from sqlanon.search_where import LOCAL_MAX_ROWS
from sqlanon.sql.compile import Sql, find_template, ident

#: Arrow record batches read from a PostgreSQL COPY stream (bytes per CSV block).
CSV_BLOCK = 1 << 22


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
class LocalBackend(Backend):
    """The in-memory DuckDB of a local walk. A warehouse table it has not copied yet (``pending``:
    name -> copy) is copied before the first statement whose text names it; the source's columns
    are answered from the warehouse's (``known``), for the metrics that read their types."""

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


def open_local(be: Backend, src: Relation) -> LocalBackend:
    """A fresh in-memory DuckDB that cannot spill nor touch a file (the module docstring),
    answering the source's columns from the warehouse's."""
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
        local.known[src] = be.require_columns(src, "source")
    except BaseException:
        local.close()
        raise
    return local


def freq_cols(local: LocalBackend, src: Relation, base: FrequencyTables) -> list[tuple[Sql, str]]:
    """The base frequency table's columns with their types: the values as the source has them."""
    types = {c.name: c.type for c in local.known[src]}
    cols = [(a, types[n]) for a, n in zip(base.q_aliases, base.qi_names, strict=True)]
    cols += [(a, types[n]) for a, n in zip(base.s_aliases, base.s_names, strict=True)]
    return cols + [(a, "int64") for a in [*base.sid_aliases, ident("cnt")]]


#: Per engine where :func:`stage_coded` codes the frequency table locally, the source types whose
#: values DuckDB holds and compares exactly as that engine does (a hierarchy's labels are computed
#: from them locally); any other quasi-identifier type (numeric, dates, char(n)'s padding, an enum's
#: order, floating point) keeps the coding in the warehouse. Spark: its coded table cost ten jobs
#: and a copy of its codes (1e6 rows, local[2]: prepare 8.1-9.0 s against a 1.7 s scan).
EXACT_TYPES = {
    "postgres": frozenset({"text", "character varying", "integer", "smallint", "bigint"}),
    "spark": frozenset({"string", "int", "integer", "smallint", "tinyint", "bigint"}),
}
STAGE_ENGINES = frozenset(EXACT_TYPES)
#: ... and only from this many source records: below, coding in the warehouse costs little, and
#: the local DuckDB would cost a program that prepares a plan but never walks it (``evaluate``,
#: ``--levels``) a copy of the frequency table for nothing.
STAGE_MIN_ROWS = 100_000
#: Local DuckDBs of :func:`stage_coded` by the coded table's name, until :func:`take_staged`.
_STAGED: dict[str, tuple[LocalBackend, int]] = {}  # ... and the id of the warehouse's Backend


def stage_coded(
    be: Backend,
    policy: Any,
    base: FrequencyTables,
    n_rows: int,
    coding: dict[str, Any],
    aliases: list[Sql],
    flags: bool,
) -> tuple[Relation, tuple] | None:
    """For :func:`sqlanon.lattice.plan.prepare` where the walk will be local on PostgreSQL or Spark:
    copy the base frequency table (its values) into the local DuckDB and build the coded table
    there with the same template (templates/search/coded.sql.j2), instead of building it in
    PostgreSQL and copying its codes; the coded table's relation and its summary row
    (templates/search/cardinalities.sql.j2), else None (the warehouse codes as before).

    Why: at 1e6 rows (276,373 frequency rows, nine QIs) PostgreSQL spent 0.75 s of CPU on the
    coded table and 0.2 s writing its CSV, Python 0.6-0.7 s reading it; the values' copy costs
    Python the same, PostgreSQL 0.15 s, and DuckDB codes them in 0.26 s of CPU on its threads.
    The warehouse builds its own coded table only if a statement there names it
    (``Backend.deferred``: the choice with a table-wide risk bound, publishing a node the walk
    did not count); its codes may number the labels differently, never group them differently.
    """
    if (
        be.dialect not in STAGE_ENGINES
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
    types = {c.name: c.type.strip().lower() for c in be.require_columns(src, "source")}
    if any(types.get(n) not in EXACT_TYPES[be.dialect] for n in base.qi_names):
        return None
    if policy.search.where == "auto" and n_rows > LOCAL_MAX_ROWS:  # else no more frequency rows
        if int(be.query("search/row_count", rel=base.freq)[0][0]) > LOCAL_MAX_ROWS:
            return None  # location() will search in the database
    for name in [n for n, (_, owner) in _STAGED.items() if owner == id(be)]:
        _discard(name)  # one per session: an earlier plan that was never walked copies its own
    local = open_local(be, src)
    coded = be.temp_relation("coded")
    try:
        local.moved = copy_table(be, local, base.freq, freq_cols(local, src, base))
        template = find_template("search/coded", local.dialect)
        ctx = {**coding, "one_scan": False}  # DuckDB scans each column's DISTINCT in parallel
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
    _STAGED[coded.name] = (local, id(be))
    be.on_close.append(lambda: _discard(coded.name))  # prepared but never walked: closed with the session
    weakref.finalize(be, _discard, coded.name)  # ... or when a session never closed is collected
    return coded, tuple(summary)


def _discard(name: str) -> None:
    staged = _STAGED.pop(name, None)
    if staged is not None:
        staged[0].close()


def copy_table(be: Backend, local: Backend, rel: Relation, cols: list[tuple[Sql, str]]) -> int:
    """Copy ``rel`` (its columns ``cols``: alias and type, an Arrow type name for the integers,
    else the warehouse's type name) from ``be`` into ``local`` under the same name; the rows
    copied. The rows pass as Arrow record batches, never as Python objects."""
    names = [str(a).strip('"') for a, _ in cols]
    types = [t for _, t in cols]
    select = ", ".join(_cast(n, t, be.dialect) for n, t in zip(names, types, strict=True))
    raw = local._conn.connection.driver_connection
    view = "sqlanon_local_arrow"
    target = rel.table().sql("duckdb")
    sql = be._sql("search/rows", "select", {"rel": rel, "cols": [a for a, _ in cols]})
    try:
        with _reader(be, sql, names, types) as reader:
            raw.register(view, reader)
            try:
                raw.execute(f"CREATE TABLE {target} AS SELECT {select} FROM {view}")
            finally:
                raw.unregister(view)
    except SqlanonError:
        raise
    except Exception as e:  # noqa: BLE001 - a driver or a cast error becomes one line
        # Never the driver's text: a cast error quotes the value it could not read (a raw QI value).
        kinds = ", ".join(f"{n} {t}" for n, t in zip(names, types, strict=True))
        raise SqlanonError(
            f"search.where: local: copying the search's table failed ({type(e).__name__} reading "
            f"columns {kinds}); set search.where: database to walk in the warehouse"
        ) from None
    local._temps.append(rel.name)
    return int(raw.execute(f"SELECT COUNT(*) FROM {target}").fetchall()[0][0])


@contextlib.contextmanager
def _reader(be: Backend, sql: str, names: list[str], types: list[str]) -> Iterator[Any]:
    """The rows of ``sql`` as Arrow record batches, streamed where the driver streams."""
    pa = require_arrow()
    if be.dialect == "postgres":
        with _postgres_reader(be, sql, names, types) as reader:
            yield reader
        return
    be.log.append(sql)
    if be.dialect == "spark":
        table = be._spark.sql(sql).toArrow()  # type: ignore[attr-defined]
    elif be.dialect == "duckdb":
        table = be._conn.connection.driver_connection.sql(sql).to_arrow_table()
    else:
        raise SqlanonError(f"search.where: local: cannot copy from {be.dialect}; search in the database")
    yield pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


def _cast(name: str, type_name: str, dialect: str) -> str:
    """The column as DuckDB should hold it: as it came where Arrow carries the type (Spark,
    DuckDB, the integers), else the warehouse's type in DuckDB's spelling (an unconstrained
    PostgreSQL numeric as DOUBLE: DuckDB's DECIMAL would default to a scale of 3; a type DuckDB
    lacks as text)."""
    col = exp.to_identifier(name, quoted=True).sql("duckdb")
    if dialect != "postgres" or type_name in ("int32", "int64"):
        return col
    return f"CAST({col} AS {_duckdb_type(type_name)}) AS {col}"


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


@contextlib.contextmanager
def _postgres_reader(be: Backend, sql: str, names: list[str], types: list[str]) -> Iterator[Any]:
    """A streaming Arrow reader over ``COPY (sql) TO STDOUT`` in CSV: pyarrow parses the bytes in
    C as they arrive (the integers as Arrow integers, every other column as text, cast by DuckDB).
    NULL is the empty unquoted field, an empty string the quoted one (PostgreSQL's CSV format)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    copy = f"COPY ({sql}) TO STDOUT (FORMAT csv)"
    be.log.append(copy)
    column_types = {
        n: (getattr(pa, t)() if t in ("int32", "int64") else pa.string())
        for n, t in zip(names, types, strict=True)
    }
    raw = be._conn.connection.driver_connection
    with raw.cursor() as cursor, cursor.copy(copy) as cp:
        yield pacsv.open_csv(
            io.BufferedReader(_CopyStream(iter(cp))),
            read_options=pacsv.ReadOptions(column_names=names, block_size=CSV_BLOCK),
            convert_options=pacsv.ConvertOptions(
                column_types=column_types,
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )


class _CopyStream(io.RawIOBase):
    """A readable file over psycopg's COPY chunks, for pyarrow's CSV reader.

    PostgreSQL sends one COPY message per row, so psycopg yields one small chunk per row (276,373
    at 1e6 rows): each :meth:`readinto` fills the caller's whole buffer from as many chunks as fit,
    rather than one chunk a call (the frequency table's copy at 1e6 rows: 0.65-0.72 -> 0.46-0.47 s
    of CPU, loaded 2-core machine)."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self._chunks, self._rest = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        out = memoryview(b).cast("B")
        want = len(out)
        pos = min(want, len(self._rest))
        out[:pos] = self._rest[:pos]
        self._rest = self._rest[pos:]
        while pos < want:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            n = len(chunk)
            if pos + n > want:
                cut = want - pos
                out[pos:] = chunk[:cut]
                self._rest = bytes(chunk[cut:])
                return want
            out[pos : pos + n] = chunk
            pos += n
        return pos


def take_staged(coded: Relation) -> LocalBackend | None:
    """The local DuckDB :func:`stage_coded` coded ``coded`` in, once (the caller closes it)."""
    staged = _STAGED.pop(coded.name, None)
    return None if staged is None else staged[0]
