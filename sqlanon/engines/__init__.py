"""Engines: one live connection per command and the sqlglot dialect of its database.

``base`` holds the connection (:class:`Backend`), its statements and its temporary tables;
``catalog`` resolves relations to their catalogue identity and reads dependencies and grants.
``duckdb`` and ``postgres`` subclass it with each engine's bulk path (and PostgreSQL's search path);
``spark`` runs the same SQL on a SparkSession behind the same :class:`Backend` interface (it
registers its URLs in :data:`sqlanon.engines.base.OTHER_ENGINES`).
"""

from sqlanon.engines import duckdb, postgres  # noqa: F401 - each registers its Backend in BACKENDS
from sqlanon.engines.base import OTHER_ENGINES, Backend, Column, connect, normalise_url, redact, session
from sqlanon.engines.spark import connect_spark, is_spark_url

OTHER_ENGINES.append((is_spark_url, connect_spark))

__all__ = ["Backend", "Column", "connect", "normalise_url", "redact", "session"]
