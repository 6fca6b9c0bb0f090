"""Spark for the behavioural tests: one local SparkSession per test run, a fresh ``main`` database
per test (or per module, for the Adult data).

The session is started once (``local[2]``, one shuffle partition, no UI) by the ``spark_session``
fixture of tests/conftest.py; ``--db spark`` inside the same process binds to it (sqlanon reuses a
running session and leaves it running). Where ``CI=true`` a Spark that cannot start (no pyspark,
no Java) fails the run; elsewhere the Spark tests are skipped with a note saying why.

Test data is loaded with Spark's DataFrame writer (bypassing sqlanon), and the tests' own SQL
(written in DuckDB's dialect, double-quoted identifiers) is transpiled to Spark SQL by sqlglot.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot

#: pyspark's type for each SQL type the tests declare.
SPARK_TYPES = {
    "BIGINT": "bigint",
    "INTEGER": "int",
    "INT": "int",
    "DOUBLE PRECISION": "double",
    "DOUBLE": "double",
    "VARCHAR": "string",
    "TEXT": "string",
    "DATE": "date",
}

#: The Spark tests' own databases (dropped, with everything in them, after each test).
TEST_DATABASES = ("main",)


def start_spark(warehouse: Path, **extra: str) -> Any:
    """The test run's SparkSession: small, quiet and local (about 20 s to start on 2 cores)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for k, v in extra.items():
        builder = builder.config(k, v)
    spark = (
        builder.master("local[2]")
        .appName("sqlanon-tests")
        # Small data on two shared cores: one shuffle partition, no adaptive re-planning and no
        # whole-stage code generation (compiling the generated Java dominated each 9-row query;
        # together these made an evaluate 3 times faster).
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_session_fixture(in_ci: bool) -> Iterator[Any]:
    """Body of the session fixture: the SparkSession, or None (with a note) when it cannot start."""
    warehouse = Path(tempfile.mkdtemp(prefix="sqlanon-spark-"))
    started = time.monotonic()
    try:
        spark = start_spark(warehouse)
    except Exception as e:  # noqa: BLE001 - no pyspark, no Java
        import pytest

        shutil.rmtree(warehouse, ignore_errors=True)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if in_ci:
            pytest.fail(f"CI=true and Spark cannot start: {first}", pytrace=False)
        print(f"\nNOTE: Spark unavailable on this machine ({first}); Spark tests skipped")
        yield None
        return
    print(f"\nSpark {spark.version} started in {time.monotonic() - started:.1f} s")
    yield spark
    spark.stop()
    shutil.rmtree(warehouse, ignore_errors=True)


def reset(spark: Any) -> None:
    """Drop the tests' databases and every temporary view and cached relation left behind."""
    for name in TEST_DATABASES:
        spark.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")
    for t in spark.catalog.listTables():
        if t.isTemporary:
            spark.catalog.dropTempView(t.name)
    spark.catalog.clearCache()


@dataclass
class SparkData:
    """The Spark side of a TestDB: load, run SQL, list relations (test verification only)."""

    spark: Any

    def load(
        self,
        full: str,
        schema: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        types: Sequence[str],
    ) -> None:
        from pyspark.sql.types import StructField, StructType, _parse_datatype_string

        self.spark.sql(f"CREATE DATABASE IF NOT EXISTS `{schema}`")
        fields = [
            StructField(c, _parse_datatype_string(SPARK_TYPES.get(t.upper(), t.lower())), True)
            for c, t in zip(columns, types, strict=True)
        ]
        target = self.spark_sql_name(full)
        self.spark.sql(f"DROP TABLE IF EXISTS {target}")
        frame = self.spark.createDataFrame([tuple(r) for r in rows], StructType(fields))
        frame.write.saveAsTable(target)

    @staticmethod
    def spark_sql_name(full: str) -> str:
        return sqlglot.exp.to_table(full, dialect="duckdb").sql("spark")

    def sql(self, text: str) -> list[tuple]:
        out: list[tuple] = []
        for stmt in sqlglot.transpile(text, read="duckdb", write="spark"):
            out = [tuple(r) for r in self.spark.sql(stmt).collect()]
        return out

    def relations(self) -> set[tuple[str, str]]:
        cat = self.spark.catalog
        return {
            (d.name, t.name)
            for d in cat.listDatabases()
            for t in cat.listTables(f"`{d.name}`")
            if not t.isTemporary
        }
