"""What the engines' bulk paths share (:meth:`sqlanon.engines.base.Backend.load` and
:meth:`~sqlanon.engines.base.Backend.read_arrow`, overridden per engine in
:mod:`sqlanon.engines.duckdb`, :mod:`sqlanon.engines.postgres` and :mod:`sqlanon.engines.spark`).

Three things cross an engine's bulk path: the secret relation's one row (:mod:`sqlanon.sql.secrets`),
the local walk's copies of the frequency and coded tables (:mod:`sqlanon.lattice.localdb`), and
Mondrian's partition pairs going back (:mod:`sqlanon.lattice.mondrian_local`). Each engine loads
rows one way, so that what keeps a secret out of a statement's text (a bound parameter, ``COPY FROM
STDIN``, rows built in the JVM) holds for everything it loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

#: A column to load: its name and its type, in a spelling every engine reads alike (VARCHAR,
#: BIGINT) or the target's own, or None where Arrow carries the type (an Arrow source only).
LoadColumn = tuple[str, str | None]


def is_arrow(rows: Any) -> bool:
    """Whether ``rows`` is an Arrow table or record-batch reader (else a sequence of Python rows).

    >>> is_arrow([("a", 1)])
    False
    """
    return hasattr(rows, "schema")


def column_list(columns: Sequence[LoadColumn], dialect: str) -> str:
    """``"name" TYPE, ...`` for a CREATE TABLE of ``dialect`` (every column needs its type).

    >>> column_list([("rid", "BIGINT"), ("a b", "VARCHAR")], "postgres")
    '"rid" BIGINT, "a b" VARCHAR'
    >>> column_list([("a b", "VARCHAR")], "duckdb")
    '"a b" TEXT'
    """
    out = []
    for name, type_name in columns:
        if type_name is None:
            raise ValueError(f"column {name!r}: a type is needed to create the table")
        dt = exp.DataType.build(type_name, dialect=dialect).sql(dialect)
        out.append(f"{exp.to_identifier(name, quoted=True).sql(dialect)} {dt}")
    return ", ".join(out)


def select_list(columns: Sequence[LoadColumn], dialect: str) -> str:
    """The columns of an Arrow scan as loaded: as Arrow has them, or cast to their type.

    >>> select_list([("rid", None), ("a", "DOUBLE")], "duckdb")
    '"rid", CAST("a" AS DOUBLE) AS "a"'
    """
    out = []
    for name, type_name in columns:
        col = exp.to_identifier(name, quoted=True).sql(dialect)
        out.append(col if type_name is None else f"CAST({col} AS {type_name}) AS {col}")
    return ", ".join(out)


def spark_frame(spark: Any, columns: Sequence[LoadColumn], rows: Any) -> tuple[Any, int]:
    """A Spark DataFrame of ``rows`` (Arrow, or Python rows of the simple types listed below), and
    its number of rows.

    Python rows are built in the JVM through py4j on a classic session: pyspark's
    ``createDataFrame`` of local data pickles them into a temporary file first (unless Spark's I/O
    encryption is on), which would put a secret on disk. Spark Connect sends them as Arrow over its
    channel (its UI abbreviates the plan's bytes); neither shows the rows. Arrow rows (integers
    only, today) go through ``createDataFrame``."""
    if is_arrow(rows):
        table = rows if hasattr(rows, "num_rows") else rows.read_all()
        return spark.createDataFrame(table), int(table.num_rows)
    from pyspark.sql import types as T

    kinds = {"VARCHAR": T.StringType, "TEXT": T.StringType, "BIGINT": T.LongType, "INTEGER": T.IntegerType}
    schema = T.StructType([T.StructField(n, kinds[str(t).upper()](), True) for n, t in columns])
    rows = [tuple(r) for r in rows]
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return spark.createDataFrame(rows, schema), len(rows)
    jvm = spark._jvm
    jrows = jvm.java.util.ArrayList()
    longs = [isinstance(f.dataType, T.LongType) for f in schema.fields]
    for row in rows:
        cells = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, len(row))
        for i, v in enumerate(row):  # py4j sends a small int as a java Integer
            cells[i] = jvm.java.lang.Long.valueOf(v) if longs[i] and v is not None else v
        jrows.add(jvm.org.apache.spark.sql.RowFactory.create(cells))
    jschema = jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json())
    from pyspark.sql import DataFrame

    return DataFrame(jsession.createDataFrame(jrows, jschema), spark), len(rows)
