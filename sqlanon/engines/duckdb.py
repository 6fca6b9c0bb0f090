"""DuckDB: the :class:`~sqlanon.engines.base.Backend` of a DuckDB database (a file, ``:memory:``,
and the local walk's in-memory copy, :mod:`sqlanon.lattice.localdb`), and its bulk path: Arrow
scanned in-process, Python rows as bound parameters."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlanon.engines.base import BACKENDS, Backend
from sqlanon.engines.bulk import LoadColumn, column_list, is_arrow, select_list
from sqlanon.errors import SqlanonError

#: The name an Arrow source is registered under for the one statement that reads it.
ARROW_VIEW = "sqlanon_load_arrow"


@dataclass
class DuckDBBackend(Backend):
    """A :class:`Backend` on DuckDB (see the module docstring)."""

    def load(
        self,
        target: exp.Table,
        columns: Sequence[LoadColumn],
        rows: Any,
        *,
        replace: bool = False,
        temporary: bool = True,
    ) -> int:
        """Arrow (a table, or a reader streamed batch by batch) is scanned by DuckDB itself
        (``register``), each column kept as Arrow types it or cast to its type; Python rows are
        bound parameters of one INSERT (a secret never enters a statement's text, and DuckDB, in
        this process, logs nothing)."""
        if replace and not (temporary and str(target.catalog or "") == "temp"):
            # Never lose data: only sqlanon's own temporary tables (the secret's) are replaced.
            raise SqlanonError(f"internal: load would replace {target.sql('duckdb')}, not a temp table")
        raw = self._conn.connection.driver_connection
        name = target.sql("duckdb")
        temp = "TEMPORARY " if temporary else ""
        if is_arrow(rows):
            raw.register(ARROW_VIEW, rows)
            try:
                create = f"CREATE {'OR REPLACE ' if replace else ''}{temp}TABLE {name}"
                sql = f"{create} AS SELECT {select_list(columns, 'duckdb')} FROM {ARROW_VIEW}"
                self.log.append(sql)
                raw.execute(sql)
            finally:
                raw.unregister(ARROW_VIEW)
            return int(raw.execute(f"SELECT COUNT(*) FROM {name}").fetchall()[0][0])
        statements = [f"DROP TABLE IF EXISTS {name}"] if replace else []
        statements.append(f"CREATE {temp}TABLE {name} ({column_list(columns, 'duckdb')})")
        for sql in statements:
            self.log.append(sql)
            self._conn.exec_driver_sql(sql)
        insert = f"INSERT INTO {name} VALUES ({', '.join('?' for _ in columns)})"
        rows = [list(r) for r in rows]
        for row in rows:
            self.log.append(insert)
            raw.execute(insert, row)
        return len(rows)

    @contextlib.contextmanager
    def read_arrow(self, sql: str, columns: Sequence[tuple[str, str]]) -> Iterator[Any]:
        import pyarrow as pa

        self.log.append(sql)
        table = self._conn.connection.driver_connection.sql(sql).to_arrow_table()
        yield pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


BACKENDS["duckdb"] = DuckDBBackend
