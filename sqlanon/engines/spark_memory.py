"""Spark's broadcast tables, freed as soon as the rows that needed them are computed (issue 33).

A statement that joins against a small table has Spark build that table as a hash relation in the
driver and broadcast it. The driver keeps each broadcast's value in its block manager, strongly
held, until the garbage collector reclaims the ``Broadcast`` object and Spark's context cleaner
then removes the blocks on its own thread: a loop of statements (Mondrian's rounds, each a
checkpoint joining the working table with its cuts) piles up broadcasts faster than that two-step
release returns them. Measured on Adult (tests/test_spark_mondrian_rounds.py, 3 GB driver, alone):
the driver's old generation peaked at 2.8 GB and 1.2-1.6 GB was still in use after a full GC at
the end of the rounds, with 58 broadcast clean-ups still queued (with this module: 2.0 GB and
0.5 GB). At 1.5 GB and 1 GB the test passes either way, the full GCs letting the cleaner catch up
(11 and 7 full GCs during the test without this, 3 with it); once, at 2 GB in a full CI run, it
failed with "Not enough memory to build and broadcast the table". A temporary relation is a
checkpoint (its rows are stored, the plan that computed them is not needed again), so its
broadcasts are destroyed right after it is computed.

What is left after the rounds is garbage on its way out, not held (session 8, Adult 30,162 rows,
k = 20, 13 rounds, local[2], 3 GB driver, the tests' settings; the idle session 61 MiB after a
full GC): at the rounds' end py4j still had ~24,000 JavaObjects that Python had dropped queued for
release (its FinalizerWorker thread tells the JVM, ~1-2 s), and Spark's context cleaner frees the
RDDs' and shuffles' state only after a GC has found their owners unreachable. With Python's own
GC switched off and nothing else run, one ``System.gc()`` a few seconds apart left 621, 384, then
91 MiB (and 91 MiB 10 s and 20 s later); ``jmap -histo:live`` at 384 MiB showed 300 MB of
``long[]`` (3,618 arrays) that the next GC freed. The 30 MiB above the idle session are the SQL
status store's 50 retained executions and the SQL parser's caches; closing the session changes
nothing further (90 MiB): no cached DataFrame, broadcast, stored RDD or Arrow batch is kept.
"""

from __future__ import annotations

import contextlib
from typing import Any

#: Physical plan nodes that wrap a plan without listing it among their children (adaptive
#: execution's root and its query stages), and the method that returns it.
_WRAPPED = {"AdaptiveSparkPlanExec": "executedPlan", "BroadcastQueryStageExec": "plan"}


def release_broadcasts(frame: Any) -> int:
    """Destroy the broadcasts of ``frame``'s executed plan (a classic session's DataFrame whose
    rows are already computed and kept); the number destroyed. A frame without a JVM handle
    (Spark Connect) is left alone: its server frees them."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return 0
    done = 0
    stack = [jdf.queryExecution().executedPlan()]
    while stack:
        node = stack.pop()
        kind = str(node.getClass().getSimpleName())
        if kind == "BroadcastExchangeExec":
            with contextlib.suppress(Exception):  # not computed, or already destroyed
                node.executeBroadcast().destroy()
                done += 1
        if kind in _WRAPPED:
            stack.append(getattr(node, _WRAPPED[kind])())
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return done


def computed(frame: Any) -> Any:
    """``frame``'s rows, computed now and kept (``localCheckpoint``), its broadcasts freed."""
    kept = frame.localCheckpoint(eager=True)
    release_broadcasts(frame)
    return kept
