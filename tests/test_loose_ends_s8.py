"""Issue 33's loose ends (session 8): numbers the local copy cannot hold exactly, and the file
pyspark writes for Mondrian's (row, partition) pairs.

PostgreSQL's ``numeric`` (any number of digits) crosses to the local walk's DuckDB as a DOUBLE
(sqlanon/lattice/localdb.py ``_cast``), where 2^53 and 2^53 + 1 are one value. The walk reads
the copied values where the metrics' tables are built from them (templates/metrics/coded.sql.j2):
before the fix the local walk with ``ncp`` stopped with "internal: the metrics' level codes differ
from the search's" where the in-database walk chose its node; with an interval boundary between
two such values the local labels would differ too. Now such a search stays in the warehouse
under ``auto`` and ``search.where: local`` is refused in one line (as Mondrian's rounds were).
The expected nodes are worked out by hand in each test.

Mondrian's local rounds on Spark send their pairs back with ``createDataFrame`` of an Arrow table
(sqlanon/lattice/mondrian_local.py ``upload_pairs``), which classic pyspark writes to a file in its
temporary folder under ``spark.local.dir`` for the JVM to read. The file holds integers only
(frequency-table row numbers and partition ids: with the warehouse's session-temporary numbered
table they would tell which class each combination of values went to); checked here that it
is gone when the upload returns, readable by its owner only, in a folder other users cannot enter.
"""

from __future__ import annotations

import os
import stat
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sqlanon import api
from tests.conftest import TestDB
from tests.helpers import cli, write_policy

TWO53 = 2**53


def _load(db: TestDB, kind: str) -> None:
    """Six rows: a = 2^53, 2^53 + 1 (one double), then 2^53 + 4 and 2^53 + 8 twice each; b, two
    values alternating."""
    vals = [TWO53, TWO53 + 1, TWO53 + 4, TWO53 + 4, TWO53 + 8, TWO53 + 8]
    rows = [[i, Decimal(v) if kind == "NUMERIC" else float(v), "xy"[i % 2]] for i, v in enumerate(vals)]
    db.load("nx", ["id", "a", "b"], rows, ["BIGINT", kind, "VARCHAR"])


def _policy(where: str, target: str, metric: str, hierarchy: Any = None) -> dict:
    a: dict = {"role": "quasi"}
    if hierarchy is not None:
        a["hierarchy"] = hierarchy
    return {
        "source": "main.nx",
        "target": f"main.{target}",
        "columns": {"id": "insensitive", "a": a, "b": "quasi"},
        "privacy": {"k": 2, "suppression": 0.5},
        "search": {"algorithm": "flash", "metric": metric, "where": where},
        "publish": {"as": "table"},
    }


#: (hierarchy of a, the optimum by hand). k = 2 with up to 3 records suppressed; ncp averages
#: each record's cells (a suppressed record's count 1 each). Without a hierarchy: {a: 0, b: 1}
#: suppresses 2^53 and 2^53 + 1 ((2 * 2 + 4 * 1) / 12 = 0.67), {a: 1, b: 0} holds as it is
#: (6 / 12 = 0.5). An interval cut at 2^53 + 1: {a: 1, b: 0} suppresses 2^53 alone and leaves
#: [2^53 + 1, 2^53 + 8] spanning 7/8 of a's range ((5 * 7/8 + 2) / 12 = 0.53); {a: 2, b: 0}: 0.5.
HIERARCHIES = {
    "suppression_only": (None, {"a": 1, "b": 0}),
    "interval_between_one_double": ({"interval": {"cuts": [TWO53 + 1]}}, {"a": 2, "b": 0}),
}


@pytest.mark.parametrize("case", sorted(HIERARCHIES))
def test_numeric_walk_stays_in_the_warehouse(db: TestDB, tmp_path: Path, case: str) -> None:
    if db.kind != "postgres":
        pytest.skip("PostgreSQL's numeric")
    _load(db, "NUMERIC")
    hier, node = HIERARCHIES[case]
    inside = api.anonymise(_policy("database", "nx_db", "ncp", hier), db.url, replace=True).to_dict()
    assert inside["node"] == node and inside["optimum"]["value"] == pytest.approx(0.5)
    auto = api.anonymise(_policy("auto", "nx_auto", "ncp", hier), db.url, replace=True).to_dict()
    assert auto["search_location"] == "database" and auto["rows_transferred"] == 0
    assert auto["node"] == inside["node"] and auto["suppressed_records"] == inside["suppressed_records"]
    code, out, err = cli(
        "anonymise", str(write_policy(tmp_path, _policy("local", "nx_local", "ncp", hier))), "--db", db.url
    )
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0
    assert "column a is PostgreSQL numeric" in err and "search.where: database" in err
    assert not db.sql("SELECT 1 FROM information_schema.tables WHERE table_name = 'nx_local'")


def test_a_double_column_still_walks_locally(db: TestDB) -> None:
    """Only a type the copy casts to DOUBLE without being one stays in the warehouse: a double
    precision column is held as it is, and ``auto`` walks locally (the same node)."""
    if db.kind != "postgres":
        pytest.skip("PostgreSQL's numeric")
    _load(db, "DOUBLE PRECISION")
    inside = api.anonymise(_policy("database", "nx_db", "ncp"), db.url, replace=True).to_dict()
    auto = api.anonymise(_policy("auto", "nx_auto", "ncp"), db.url, replace=True).to_dict()
    assert auto["search_location"] == "local" and auto["node"] == inside["node"]


@pytest.mark.spark
def test_spark_pairs_file_is_private_and_removed_at_once(spark_session: Any, monkeypatch: Any) -> None:
    """The upload's temporary file (pyspark's ``SparkContext._serialize_to_jvm``, seen as the JVM
    reads it): mode 0600, an ancestor folder closed to others (Spark makes ``spark-<uuid>`` 0700),
    and removed when the upload returns; the pairs arrive intact."""
    if spark_session is None:
        pytest.skip("Spark unavailable on this machine (see the NOTE in tests/conftest.py)")
    import pyarrow as pa

    from sqlanon.engines.spark import connect_spark
    from sqlanon.lattice.mondrian_local import upload_pairs

    sc = spark_session.sparkContext
    seen: list[dict[str, Any]] = []
    send = sc._serialize_to_jvm

    def spy(data: Any, ser: Any, reader_func: Any, server_func: Any) -> Any:
        def reader(name: str) -> Any:
            folders = [os.path.dirname(name), os.path.dirname(os.path.dirname(name))]
            seen.append({"name": name, "mode": stat.S_IMODE(os.stat(name).st_mode), "folders": folders})
            return reader_func(name)

        out = send(data, ser, reader, server_func)
        seen[-1]["left"] = os.path.exists(seen[-1]["name"])
        return out

    monkeypatch.setattr(sc, "_serialize_to_jvm", spy)
    be = connect_spark("spark")
    try:
        rids = list(range(100))
        rel = upload_pairs(be, pa.table({"rid": rids, "pid": [r % 7 for r in rids]}))
        got = spark_session.sql(f"SELECT count(*), sum(pid) FROM {rel.name}").collect()[0]
        assert tuple(got) == (100, sum(r % 7 for r in rids))
    finally:
        be.close()
    if not seen:
        pytest.skip("this pyspark sends Arrow rows without a file (I/O encryption, or Spark Connect)")
    (f,) = seen
    assert f["mode"] == 0o600 and not f["left"], f
    closed = [d for d in f["folders"] if stat.S_IMODE(os.stat(d).st_mode) & 0o077 == 0]
    assert closed, f"no folder on the path is closed to other users: {f}"
