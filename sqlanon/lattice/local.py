"""Count once in the warehouse, walk locally (issue 33; the policy key ``search.where``,
:mod:`sqlanon.search_where`).

After :func:`~sqlanon.lattice.plan.prepare` has scanned the source once into the base frequency
table and coded it, every statement of the lattice walk reads only those two small tables (and the
rollups it keeps of them): :class:`~sqlanon.lattice.evaluator.Evaluator` the coded table (the
sensitive domains of t-closeness, entropy l and likeness read the frequency table's ``sid`` and
``cnt``), the metrics' tables (:func:`sqlanon.metrics.scoring.tables`, for the bounds of the
per-record metrics) the frequency table's values. On PostgreSQL a statement costs ~10-50 ms and
on Spark ~0.3-1 s whatever its size, so a walk of ~100 statements costs several scans there.

:func:`local_plan` copies the coded table over the driver's bulk path (PostgreSQL ``COPY ... TO
STDOUT``, CSV parsed by pyarrow in C; Spark ``DataFrame.toArrow``; DuckDB Arrow) into an embedded
DuckDB under the same name, and yields a :class:`~sqlanon.lattice.plan.Plan` whose backend is that
DuckDB: the same templates walk the lattice there. The frequency table is copied only if a
statement of the walk reads it (:class:`LocalBackend`). Publishing and verification then run in
the warehouse with the original plan.

The copied tables are personal data (aggregates of the source), so the local DuckDB is
``:memory:`` with ``temp_directory=''`` (DuckDB cannot offload a block to disk: past its
``memory_limit``, 80 % of RAM by default, a statement fails with DuckDB's out-of-memory error
instead of spilling) and ``enable_external_access=false`` (no statement can read or write a
file), nothing of it is printed or logged, and it is closed when the search ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Callable, Iterator
from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend, Column
from sqlanon.errors import SqlanonError
from sqlanon.lattice.plan import INT_CODES_BELOW, Plan
from sqlanon.relation import Relation
from sqlanon.search_where import LOCAL_ENGINES, LOCAL_MAX_ROWS
from sqlanon.sql.compile import Sql, ident

#: Arrow record batches read from a PostgreSQL COPY stream (bytes per CSV block).
CSV_BLOCK = 1 << 22


def location(plan: Plan, where: str | None = None) -> str:
    """Where the search walks: ``database`` or ``local`` (``where``: the CLI's ``--search-in``,
    else the policy's ``search.where``; ``auto``, see :mod:`sqlanon.search_where`)."""
    where = where or plan.policy.search.where
    if where != "auto":
        if where == "local":
            _require_arrow()
        return where
    if plan.be.dialect not in LOCAL_ENGINES or plan.base_rows > LOCAL_MAX_ROWS:
        return "database"
    try:
        _require_arrow()
    except SqlanonError:
        return "database"
    return "local"


def _require_arrow() -> Any:
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


@contextlib.contextmanager
def local_plan(plan: Plan, *, lazy_coded: bool = False) -> Iterator[Plan]:
    """The plan on an in-memory DuckDB holding a copy of the coded table (see the module
    docstring); ``plan.be.moved`` of the yielded plan counts the rows copied so far.
    ``lazy_coded``: the coded table too is copied only if a statement reads it (Mondrian works on
    the frequency table, :mod:`sqlanon.lattice.mondrian_local`)."""
    _require_arrow()
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
        src = plan.policy.source
        local.known[src] = plan.be.require_columns(src, "source")
        code_type = "int32" if plan.n_rows < INT_CODES_BELOW else "int64"
        coded_cols = [(a, code_type) for a in plan.code_alias.values()]
        coded_cols += [(a, "int64") for a in [*plan.base.sid_aliases, ident("cnt")]]
        if lazy_coded:
            local.pending[plan.coded.name] = lambda: copy_table(plan.be, local, plan.coded, coded_cols)
        else:
            local.moved = copy_table(plan.be, local, plan.coded, coded_cols)
        freq = plan.base.freq
        freq_cols = freq_columns(plan, local)
        local.pending[freq.name] = lambda: copy_table(plan.be, local, freq, freq_cols)
        yield dataclasses.replace(plan, be=local)
    finally:
        local.close()


def freq_columns(plan: Plan, local: LocalBackend) -> list[tuple[Sql, str]]:
    """The base frequency table's columns as :func:`copy_table` takes them: each quasi-identifier
    and sensitive value in the source's type, the sensitive ids and the count as int64."""
    types = {c.name: c.type for c in local.known[plan.policy.source]}
    base = plan.base
    cols = [(a, types[n]) for a, n in zip(base.q_aliases, base.qi_names, strict=True)]
    cols += [(a, types[n]) for a, n in zip(base.s_aliases, base.s_names, strict=True)]
    return cols + [(a, "int64") for a in [*base.sid_aliases, ident("cnt")]]


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
    pa = _require_arrow()
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
    """A readable file over psycopg's COPY chunks, for pyarrow's CSV reader."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self._chunks, self._buf = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buf = bytes(chunk)
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n
