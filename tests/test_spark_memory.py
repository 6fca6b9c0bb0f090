"""Spark's driver frees a temporary relation's broadcast tables as soon as its rows are kept (issue 33).

A checkpointed statement that joins against a broadcast table left the table's hash relation in the
driver's block manager until the garbage collector and Spark's context cleaner got to it. Mondrian's
rounds (a checkpoint each) piled them up: alone, tests/test_spark_mondrian_rounds.py drove a 3 GB
driver's old generation to 2.8 GB, and at 2 GB it failed in CI with "Not enough memory to build and
broadcast the table". Here one temporary relation over a broadcast join is made through
:meth:`SparkBackend.create_temp`: its broadcasts are destroyed right after, while
this test still holds the plan (so no garbage collection could have freed them): they are
destroyed, and the relation's rows are intact.
"""

from __future__ import annotations

from typing import Any

import pytest

from sqlanon.engines.spark import connect_spark

pytestmark = pytest.mark.spark

#: A join Spark broadcasts (the hint; 100 rows against 1,000).
JOINED = (
    "SELECT /*+ BROADCAST(b) */ a.id, b.v FROM range(1000) a "
    "JOIN (SELECT id, id * 2 AS v FROM range(100)) b ON a.id = b.id"
)


def _broadcasts(plan: Any) -> list[Any]:
    """The broadcasts of an executed physical plan (py4j, walking its children)."""
    out, stack = [], [plan]
    while stack:
        node = stack.pop()
        if str(node.getClass().getSimpleName()) == "BroadcastExchangeExec":
            out.append(node.executeBroadcast())
        kids = node.children()
        stack.extend(kids.apply(i) for i in range(kids.size()))
    return out


def test_a_temporary_relation_keeps_no_broadcast_in_the_driver(spark_session: Any) -> None:
    if spark_session is None:
        pytest.skip("Spark unavailable on this machine (see the NOTE above)")
    spark = spark_session
    be = connect_spark("spark")
    frames: list[Any] = []
    run = be._run

    def recording(sql: str) -> Any:
        frames.append(run(sql))
        return frames[-1]

    be._run = recording  # type: ignore[method-assign]
    be._sql = lambda template, kind, context: JOINED  # type: ignore[method-assign]
    try:
        rel = be.create_temp("memory", "test/joined")
        plan = frames[-1]._jdf.queryExecution().executedPlan()
        broadcasts = _broadcasts(plan)
        assert broadcasts, f"the test's join was not broadcast: {plan.toString()[:300]}"
        # Destroyed: its blocks removed from the driver (and any executor) now, not at some GC.
        # (Not asked of SparkEnv's block manager: py4j's reflection on SparkEnv fails, it names
        # protobuf classes that pyspark's jars lack.)
        kept = [b.id() for b in broadcasts if b.isValid()]
        assert kept == [], f"broadcasts {kept} still held by the driver"
        assert spark.sql(f"SELECT count(*), sum(v) FROM {rel.name}").collect()[0][:] == (100, 9900)
    finally:
        be.close()
