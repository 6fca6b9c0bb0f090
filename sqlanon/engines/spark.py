"""Spark: the same :class:`~sqlanon.engines.base.Backend` interface over a ``SparkSession``.

Every statement is still produced by :func:`sqlanon.sql.compile.to_sql` for sqlglot's ``spark``
dialect and run with ``SparkSession.sql``; only three things differ from a SQLAlchemy engine:

- **Catalogue.** Spark has no ``information_schema``: the ``catalog/*`` questions (which relation
  a name binds to, its columns, the current namespace, whether a schema exists, the views and
  their definitions, leftover staging relations) are answered from Spark's own catalogue
  (``spark.catalog``, ``DESCRIBE TABLE EXTENDED``), in the rows the catalogue templates return on
  the other engines, so :mod:`sqlanon.engines.catalog` resolves identities the same way. Spark's
  session catalogue is case-insensitive (``spark.sql.caseSensitive`` is off by default). Files are
  relations in Spark's own syntax (``parquet.`/data/adult.parquet```).
- **Temporary tables** are session-scoped temporary views over a result computed once and kept by
  Spark (``localCheckpoint``), dropped at the end.
- **No transactions.** :meth:`SparkBackend.atomic` keeps a compensation log instead: each
  ``publish/create_*`` it runs is dropped, and each ``publish/rename_*`` renamed back, in reverse
  order, when the block is left without a commit (an error, a failed verification, an interrupt).
  A kill (SIGKILL, a lost driver) cannot run the log: the relations then keep sqlanon's staging
  names, which ``sqlanon cleanup`` lists and drops. The README (*Publishing*, *Spark*) says what
  is and is not guaranteed.

URLs: ``spark`` (a local session, ``local[*]``), ``spark://HOST:7077`` (a standalone cluster),
``sc://HOST:15002`` (Spark Connect); Spark settings in the query
(``spark?spark.sql.shuffle.partitions=8``). A session already running in this process (a notebook,
the test suite) is reused and left running; one started here is stopped on close.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from sqlglot import exp

from sqlanon import interrupt
from sqlanon.engines.base import Backend, Column, redact
from sqlanon.engines.bulk import LoadColumn, spark_frame
from sqlanon.engines.spark_memory import computed
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql import secrets

#: Spark's file data sources, readable as ``format.`path```.
FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "avro", "text", "binaryfile", "delta"})

EXTRA_HINT = "pip install 'sqlanon[spark]'"

#: Seconds to wait for a Spark Connect server's port to answer. pyspark's client retries an
#: unreachable server for over ten minutes (its ``DefaultPolicy``: 15 retries, backoff to 60 s)
#: and does not stop on SIGINT or SIGTERM meanwhile; a CLI says so in one line instead.
CONNECT_PROBE_S = 10.0


#: Session settings for the coded table's statement (templates/search/coded.spark.sql.j2) where
#: Spark's plan broadcasts every dictionary: its only shuffles are then the dictionaries' own (a
#: DISTINCT per QI, tiny), and the frequency table is read map-side. Adaptive execution runs each
#: shuffle stage as a job of its own and one partition is all a dictionary needs: the nine Adult
#: QIs at 1e5 rows, 28 jobs with Spark's defaults against 10 so, 8.9-11.8 s against 6.6-13 s
#: interleaved on the loaded 2-core machine (4.2 s at load 8; issue 33, benchmarks/results/NOTES.md).
#: Where a dictionary is not broadcast by the static plan (no size estimate: a large source), the
#: session's own settings stay, so that adaptive execution can still broadcast it at run time.
BROADCAST_SETTINGS = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
#: Physical join operators that are not a hash join against a broadcast table.
SHUFFLED_JOINS = ("SortMergeJoin", "ShuffledHashJoin", "CartesianProduct", "NestedLoopJoin")


def is_spark_url(url: str) -> bool:
    return url == "spark" or url.startswith(("spark?", "spark://", "sc://"))


def _quoted(*parts: str | None) -> str:
    """A multipart identifier in Spark's quoting (backticks, doubled inside), via sqlglot."""
    names = [p for p in parts if p is not None]
    rel = Relation(names[-1], names[-2] if len(names) > 1 else None, names[-3] if len(names) > 2 else None)
    return rel.table().sql("spark")


@dataclass
class SparkBackend(Backend):
    """A :class:`Backend` on a SparkSession (see the module docstring)."""

    _spark: Any = None
    _owns: bool = False
    #: Inside :meth:`atomic`: how to undo each DDL statement run so far (None outside).
    _undo: list[Callable[[], None]] | None = None
    _views_cache: list[tuple] | None = field(default=None)
    #: Temporary relation name -> the checkpointed Dataset (JVM) whose blocks its view reads.
    _checkpoints: dict[str, Any] = field(default_factory=dict)

    # -- statements -------------------------------------------------------------------------
    def _run(self, sql: str) -> Any:
        self.log.append(sql)
        interrupt.check()
        return self._spark.sql(sql)

    def _fail(self, what: str, name: str, e: BaseException) -> SqlanonError:
        interrupt.check()
        return SqlanonError(f"{what} {name!r} failed on spark: {spark_error(e)}")

    def query(self, name: str, /, **context: object) -> list[tuple]:
        if name.startswith("catalog/"):
            try:
                return self._catalog(name, context)
            except SqlanonError:
                raise
            except Exception as e:  # noqa: BLE001 - any driver error becomes one line
                raise self._fail("query", name, e) from e
        sql = self._sql(name, "select", context)
        try:
            return [tuple(r) for r in self._run(sql).collect()]
        except Exception as e:  # noqa: BLE001
            raise self._fail("query", name, e) from e

    def execute(self, name: str, /, *, kind: str, **context: object) -> None:
        super().execute(name, kind=kind, **context)
        self._views_cache = None
        target = context.get("target")
        if kind == "drop" and isinstance(target, Relation) and target.schema is None:
            self._release(target.name)
        if self._undo is not None:
            self._record_undo(name, context)

    def _record_undo(self, name: str, context: dict[str, object]) -> None:
        if name.startswith("publish/create_"):
            target = context["target"]
            assert isinstance(target, Relation)
            kind = name.removeprefix("publish/create_")
            self._undo.append(
                lambda: super(SparkBackend, self).execute(  # type: ignore[union-attr]
                    f"ddl/drop_{kind}", kind="drop", target=target
                )
            )
        elif name.startswith("publish/rename_"):
            source, new = context["source"], context["new_name"]
            assert isinstance(source, Relation) and isinstance(new, str)
            self._undo.append(
                lambda: super(SparkBackend, self).execute(  # type: ignore[union-attr]
                    name, kind="alter", source=source.with_name(new), new_name=source.name
                )
            )

    def load(
        self,
        target: exp.Table,
        columns: Sequence[LoadColumn],
        rows: Any,
        *,
        replace: bool = False,
        temporary: bool = True,
    ) -> int:
        """A temporary view of rows built in driver memory, never in a statement's text
        (:func:`sqlanon.engines.bulk.spark_frame`: Python rows built in the JVM, so that no secret
        passes through pyspark's pickled temporary file)."""
        frame, n = spark_frame(self._spark, columns, rows)
        name = target.name  # Spark's temporary views have no schema
        # Replace: an earlier command in the same session (a notebook's) may have left one.
        (frame.createOrReplaceTempView if replace else frame.createTempView)(name)
        self.log.append(f"-- temporary view {name} (rows loaded from the driver)")
        return n

    @contextlib.contextmanager
    def read_arrow(self, sql: str, columns: Sequence[tuple[str, str]]) -> Iterator[Any]:
        import pyarrow as pa

        self.log.append(sql)
        table = self._spark.sql(sql).toArrow()
        yield pa.RecordBatchReader.from_batches(table.schema, table.to_batches())

    # -- catalogue ---------------------------------------------------------------------------
    def columns(self, rel: Relation) -> list[Column]:
        """The relation's columns from Spark's analysed schema (tables, views, temporary views,
        files); none when the name binds to nothing."""
        try:
            schema = self._spark.table(rel.table().sql("spark")).schema
        except Exception:  # noqa: BLE001 - AnalysisException: no such relation
            interrupt.check()
            return []
        return [Column(f.name, f.dataType.simpleString().upper()) for f in schema.fields]

    def _catalog(self, name: str, ctx: dict[str, object]) -> list[tuple]:
        cat = self._spark.catalog
        if name == "catalog/current":
            return [(cat.currentCatalog(), cat.currentDatabase())]
        if name == "catalog/search_path":
            return [([cat.currentDatabase()],)]
        if name == "catalog/named":
            return self._named(str(ctx["name"]), _opt(ctx.get("schema")), _opt(ctx.get("catalog")))
        if name == "catalog/schema":
            schema, catalog = _opt(ctx.get("schema")), _opt(ctx.get("catalog"))
            return [(int(self._database_exists(schema, catalog)),)]
        if name == "catalog/leftovers":
            return self._relations("*sqlanon*")
        if name == "catalog/views":
            return self._views()
        raise SqlanonError(f"catalog: {name!r} has no Spark catalogue equivalent")

    def _database_exists(self, schema: str | None, catalog: str | None) -> bool:
        if schema is None:
            return True
        try:
            return bool(self._spark.catalog.databaseExists(_quoted(catalog, schema)))
        except Exception:  # noqa: BLE001 - an unknown catalog
            interrupt.check()
            return False

    def _named(self, name: str, schema: str | None, catalog: str | None) -> list[tuple]:
        """(db, schema, name, kind, oid, is_temp) of the relation ``[catalog.][schema.]name`` binds
        to: Spark resolves an unqualified name to a temporary view first, then the current
        database. A file (``parquet.`path```) is a table of schema ``parquet``."""
        cat = self._spark.catalog
        try:
            t = cat.getTable(_quoted(catalog, schema, name))
        except Exception:  # noqa: BLE001 - not found
            interrupt.check()
            t = None
        if t is not None:
            kind = "view" if str(t.tableType).upper() in ("VIEW", "TEMPORARY") else "table"
            ns = list(t.namespace or [])
            db = t.catalog or cat.currentCatalog()
            return [(db, ns[-1] if ns else "", t.name, kind, "", int(t.isTemporary))]
        if (
            schema is not None
            and catalog is None
            and schema.lower() in FILE_FORMATS
            and not self._database_exists(schema, None)
            and self.columns(Relation(name, schema))
        ):
            return [(cat.currentCatalog(), schema, name, "table", "", 0)]
        return []

    def _relations(self, like: str = "*") -> list[tuple[str, str, str, str]]:
        """(catalog, database, name, VIEW|TABLE) of every persistent relation of the current
        catalogue whose name matches ``like`` (temporary views are the session's own): ``SHOW
        TABLES ... LIKE`` names them and only they are described. ``listTables`` described every
        relation of every database: 1-2.5 s of each ``anonymise`` looking for leftovers here."""
        out = []
        for d in self._spark.catalog.listDatabases():
            where = _quoted(d.catalog, d.name) if d.catalog else _quoted(d.name)
            for r in self._run(f"SHOW TABLES IN {where} LIKE '{like}'").collect():
                if not r["isTemporary"]:
                    for db, sch, rel, kind, _oid, _t in self._named(str(r["tableName"]), d.name, d.catalog):
                        out.append((db, sch, rel, kind.upper()))
        return out

    def _views(self) -> list[tuple]:
        """(catalog, database, view, definition) of every persistent view (Spark records no view
        dependencies; :mod:`sqlanon.engines.catalog` parses the definitions)."""
        if self._views_cache is not None:
            return self._views_cache
        rows = []
        for c, d, n, kind in self._relations():
            if kind != "VIEW":
                continue
            desc = self._run(f"DESCRIBE TABLE EXTENDED {_quoted(c, d, n)}").collect()
            text = next((r[1] for r in desc if str(r[0]).strip() == "View Text"), None)
            rows.append((c, d, n, text or ""))
        self._views_cache = rows
        return rows

    # -- temporary relations ------------------------------------------------------------------
    def create_temp(self, stem: str, template: str, **context: object) -> Relation:
        """The SELECT of ``template``, computed now and kept as a temporary view over its result
        (``localCheckpoint``: the rows are stored by the executors, memory then disk, and the
        view's plan no longer holds the plans it was computed from; a chain of views, such as
        Mondrian's rounds, would otherwise grow a plan that Spark re-analyses at every step)."""
        rel = self.temp_relation(stem)
        self.create_temp_as(rel, template, **context)
        return rel

    def create_temp_as(self, rel: Relation, template: str, **context: object) -> None:
        sql = self._sql(template, "select", context)
        try:
            frame = self._without_stats(rel.name, self._checkpoint(template, sql))
            frame.createTempView(rel.name)
        except Exception as e:  # noqa: BLE001
            raise self._fail("statement", template, e) from e
        self._temps.append(rel.name)

    def _checkpoint(self, template: str, sql: str) -> Any:
        """The statement's rows, computed now (``localCheckpoint``); the coded table under
        :data:`BROADCAST_SETTINGS` where its plan so made broadcasts every dictionary."""
        if template == "search/coded" and getattr(self._spark, "_jsparkSession", None) is not None:
            with self._settings(BROADCAST_SETTINGS):
                frame = self._run(sql)
                if broadcasts_only(frame):
                    return computed(frame)
            return computed(self._spark.sql(sql))  # planned anew, as the session says
        return computed(self._run(sql))

    @contextlib.contextmanager
    def _settings(self, settings: dict[str, str]) -> Iterator[None]:
        """The session's SQL settings ``settings`` for one statement, the previous values put back
        after it (a session shared with a notebook keeps its own)."""
        conf = self._spark.conf
        saved = {k: conf.get(k, None) for k in settings}
        for k, v in settings.items():
            conf.set(k, v)
        try:
            yield
        finally:
            for k, v in saved.items():
                with contextlib.suppress(Exception):
                    if v is None:
                        conf.unset(k)
                    else:
                        conf.set(k, v)

    def _without_stats(self, name: str, frame: Any) -> Any:
        """The checkpointed rows, as a new relation when the estimate they inherit is past any real
        size (issue 33). Spark's checkpoint keeps the estimated size of the plan that computed it,
        and without column statistics an inner join is estimated as the product of its inputs':
        each of Mondrian's rounds joins the working table with cuts derived from it, so the
        estimate's digits tripled every round (15 digits after round 1, 3,493 after round 5), and
        the optimizer's BigInt arithmetic on it took most of a round from about round 12 (2e4
        rows: 20-30 s, then 67 s, 171 s, ...) until the driver ran out of memory at 1e5 rows. An
        estimate above 2^63 bytes is replaced by Spark's default for an RDD (a relation over the
        same RDD, ``internalCreateDataFrame``), so none compounds; a smaller one is kept (Spark
        may broadcast a small table). The checkpoint is kept to release its blocks on drop.
        Spark Connect has no handle on the JVM here: its checkpoint is kept as it is."""
        jsession = getattr(self._spark, "_jsparkSession", None)
        if jsession is None:
            return frame
        jdf = frame._jdf
        self._checkpoints[name] = jdf
        try:  # py4j reads the estimate as a decimal string, refused past 4,300 digits
            small = int(jdf.queryExecution().optimizedPlan().stats().sizeInBytes()) < 2**63
        except ValueError:
            small = False
        if small:
            return frame
        from pyspark.sql import DataFrame

        rdd = jdf.queryExecution().toRdd()
        return DataFrame(jsession.internalCreateDataFrame(rdd, jdf.schema(), False), self._spark)

    def _release(self, name: str) -> None:
        """Free a dropped temporary relation's checkpointed blocks now: Spark frees them only
        when the driver's garbage collector reclaims the RDD (a full GC, or every 30 minutes),
        so a loop of rounds would otherwise hold every round's rows in executor memory or disk."""
        jdf = self._checkpoints.pop(name, None)
        if jdf is not None:
            with contextlib.suppress(Exception):
                jdf.queryExecution().analyzed().rdd().unpersist(False)

    def drop_temps(self) -> None:
        with interrupt.deferred():
            for name in reversed(self._temps):
                with contextlib.suppress(Exception):
                    self._spark.catalog.dropTempView(name)
                self._release(name)
        self._temps.clear()
        if self._secret_loaded:  # the pads do not outlive the command in a shared session
            with contextlib.suppress(Exception):
                self._spark.catalog.dropTempView(secrets.NAME)
            self._secret_loaded = False
        self._inlined.clear()
        self._inlined_columns.clear()

    # -- publishing without transactions ------------------------------------------------------
    @contextlib.contextmanager
    def atomic(self) -> Iterator[Callable[[str], None]]:
        """Spark has no transactional DDL: run the publish's statements as they come and undo
        them (compensate) in reverse order unless ``commit`` is reached. See the module docstring
        for what a kill leaves behind."""
        self._undo = []
        done = False

        def commit(label: str) -> None:
            nonlocal done
            with interrupt.deferred():
                interrupt.check()
                done = True
                interrupt.mark_published(label)

        try:
            yield commit
        finally:
            undo, self._undo = self._undo, None
            if not done:
                with interrupt.deferred():
                    for step in reversed(undo):
                        with contextlib.suppress(Exception):
                            step()
            self._views_cache = None

    def rollback(self) -> None:
        return None

    def commit(self) -> None:
        return None

    def close(self) -> None:
        try:
            self.close_staged()
            self.drop_temps()
        finally:
            if self._owns and self._spark is not None:
                with interrupt.deferred(), contextlib.suppress(Exception):
                    self._spark.stop()


def broadcasts_only(frame: Any) -> bool:
    """Whether the physical plan of a classic session's DataFrame (planned now, under the
    session's current settings) joins only by hashing against broadcast tables."""
    physical = str(frame._jdf.queryExecution().executedPlan().toString())
    return not any(join in physical for join in SHUFFLED_JOINS)


def spark_error(e: BaseException) -> str:
    """The first informative line of a Spark error (py4j puts "An error occurred while calling
    o39.sql." first and the Java exception, ``: org.apache...Exception: why``, after it)."""
    for line in str(e).strip().splitlines():
        line = line.strip().removeprefix(": ")
        if line and not line.startswith("An error occurred while calling"):
            return redact(line[:500])
    return type(e).__name__


def _opt(v: object) -> str | None:
    return None if v is None else str(v)


def connect_spark(url: str) -> SparkBackend:
    """Start (or reuse) a SparkSession for ``url`` (see the module docstring)."""
    shown = redact(url)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SqlanonError(f"--db {shown!r}: Spark needs pyspark; {EXTRA_HINT}") from None
    previous = signal.getsignal(signal.SIGINT)
    base, _, query = url.partition("?")
    settings = dict(parse_qsl(query, keep_blank_values=True))
    try:
        if base.startswith("sc://"):
            split = urlsplit(base)
            if not split.hostname:
                raise SqlanonError(f"--db: cannot use URL {shown!r}: Spark Connect needs sc://HOST[:PORT]")
            _probe_connect(split, shown)
            builder = SparkSession.builder.remote(base)
            owns = True
        else:
            active = SparkSession.getActiveSession()
            builder = SparkSession.builder.appName("sqlanon")
            if base.startswith("spark://"):
                builder = builder.master(base)
            elif "spark.master" not in settings:
                builder = builder.master("local[*]")
            # No web UI (each statement's plan and row counts, served on the host's address without a
            # login) unless the URL asks for one: spark?spark.ui.enabled=true.
            for key in ("spark.ui.showConsoleProgress", "spark.ui.enabled"):
                builder = builder.config(key, "false")
            owns = active is None
        for k, v in settings.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        if base.startswith("sc://") and not type(spark).__module__.startswith("pyspark.sql.connect"):
            # pyspark hands back the process's classic session when its Connect client cannot load
            # (no pyarrow or grpcio): never run an sc:// URL's work on another session.
            raise SqlanonError(
                f"--db: cannot start Spark Connect for {shown!r}: pyspark's Connect client did not load "
                "(pip install 'pyspark[connect]')"
            )
        if base.startswith("sc://"):
            # One round trip now: a refused token or a server that is not Spark Connect is said
            # here, not later as "relation not found" by a catalogue question that failed.
            try:
                _ = spark.version
            except Exception:
                with contextlib.suppress(Exception):
                    spark.stop()  # not left as the process's default session for the next try
                raise
        if not base.startswith("sc://") and owns:
            with contextlib.suppress(Exception):
                spark.sparkContext.setLogLevel("ERROR")
    except SqlanonError:
        raise
    except Exception as e:  # noqa: BLE001 - no Java, a cluster that does not answer, a bad setting
        interrupt.check()
        raise SqlanonError(f"--db: cannot start Spark for {shown!r}: {spark_error(e)}") from None
    _chain_interrupt(spark, previous)
    return SparkBackend(dialect="spark", url=shown, _spark=spark, _owns=owns)


def _probe_connect(split: Any, shown: str) -> None:
    """Refuse a Spark Connect server whose port does not accept a connection within
    :data:`CONNECT_PROBE_S` (see there why pyspark's own client is not left to find out)."""
    try:
        port = split.port or 15002  # Spark Connect's default port (spark.connect.grpc.binding.port)
        with socket.create_connection((split.hostname, port), timeout=CONNECT_PROBE_S):
            pass
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise SqlanonError(f"--db: cannot reach Spark Connect at {shown!r}: {redact(why)}") from None


def _chain_interrupt(spark: Any, previous: Any) -> None:
    """A SparkContext replaces the SIGINT handler with its own (cancel the jobs, raise
    KeyboardInterrupt), which would bypass sqlanon's (:mod:`sqlanon.interrupt`: record the signal,
    exit 130, nothing published). Put sqlanon's back, cancelling Spark's running jobs first."""
    if not callable(previous) or signal.getsignal(signal.SIGINT) is previous:
        return
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: Any) -> None:
        with contextlib.suppress(Exception):
            if type(spark).__module__.startswith("pyspark.sql.connect"):
                spark.interruptAll()
            else:
                spark.sparkContext.cancelAllJobs()
        previous(signum, frame)

    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, handler)
