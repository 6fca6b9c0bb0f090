"""Issue 33's goals, each beside its measured figure and a verdict (met / MISSED / not measured).

The goals (issue 33, "The goal"), per engine and size present in the results:

- ``search``: the default search (Flash, k = 5, nine QIs), at 0 % and 5 % suppression, at most
  2x one GROUP BY scan of the table on the same engine (the floor of the same run);
- ``optimum``: the same node as DuckDB's search at that size (where DuckDB ran);
- ``publish``: publishing plus re-verification at most one scan more (1x the floor), on PostgreSQL
  and Spark;
- ``mondrian``: Mondrian (k = 5, nine QIs) at most 10x the floor, with DuckDB's partitions;
- ``memory``: at 1e8 rows, a bounded engine (DuckDB under a ``memory_limit``) that completed, with
  its peak resident size.

The issue states the time goals at 1e6 and 1e7 rows (and 1e8 for DuckDB's search, Spark and
Mondrian);
other sizes are shown with the same limits for the trend. The figures are the benchmark worker's
(sqlanon_runner.py: warm, median of the repetitions, the floor timed in the same process); the
whole-process comparison on PostgreSQL is benchmarks/local_walk.py. Nothing is asserted.
"""

from __future__ import annotations

from typing import Any

#: At most this many times the floor (issue 33).
SEARCH_X_FLOOR = 2.0
PUBLISH_X_FLOOR = 1.0
MONDRIAN_X_FLOOR = 10.0
#: The engine names as the lines print them.
SHOWN = {"duckdb": "DuckDB", "postgres": "PostgreSQL", "spark": "Spark"}


def _shown(label: str) -> str:
    base, _, rest = label.partition("[")
    return SHOWN.get(base, base) + (f"[{rest}" if rest else "")


def _s(x: float) -> str:
    return f"{x:.3g} s" if x < 100 else f"{x:,.0f} s"


def _goal(
    engine: str, size: str, goal: str, what: str, seconds: float | None, floor: float, limit: float
) -> dict[str, Any]:
    """One time goal: ``seconds`` against ``limit`` times ``floor``."""
    row: dict[str, Any] = {"engine": engine, "rows": size, "goal": goal, "limit_x_floor": limit}
    if seconds is None or not floor:
        row.update(verdict="not measured", text=f"{_shown(engine)} {size} {what} (goal <= {limit:g}x)")
        row["text"] += ": not measured"
        return row
    ratio = seconds / floor
    verdict = "met" if ratio <= limit else "MISSED"
    if engine.startswith("duckdb") and (
        goal.startswith("publish") or (goal.startswith("search") and float(size) < 1e8)
    ):
        # The issue sets the search and publish goals for PostgreSQL and Spark; for DuckDB it asks
        # to keep the 1e8 search's lead (1.4x a scan) and Mondrian's 10x. DuckDB's other figures are
        # shown beside those goals, not judged: re-verifying a release that suppresses records reads
        # it through its window of class sizes, so at the bottom node it is a scan and more.
        verdict = "reference"
    row.update(seconds=round(seconds, 4), floor_seconds=round(floor, 4), x_floor=round(ratio, 2))
    row["verdict"] = verdict
    bound = (
        f"goal <= {limit:g}x" if verdict != "reference" else f"PostgreSQL's and Spark's goal <= {limit:g}x"
    )
    row["text"] = (
        f"{_shown(engine)} {size} {what} {_s(seconds)} = {ratio:.1f}x scan {_s(floor)} ({bound}): {verdict}"
    )
    return row


def _same(engine: str, size: str, goal: str, what: str, ours: Any, duck: Any) -> dict[str, Any]:
    """One agreement goal: ``ours`` equal to DuckDB's ``duck``."""
    if ours is None or duck is None:
        verdict = "not measured"
    else:
        verdict = "met" if ours == duck else "MISSED"
    text = f"{_shown(engine)} {size} {what} {ours} (DuckDB: {duck}): {verdict}"
    return {
        "engine": engine,
        "rows": size,
        "goal": goal,
        "measured": ours,
        "duckdb": duck,
        "verdict": verdict,
        "text": text,
    }


def goals_33(sqlanon: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every goal of issue 33 that these results measure: ``sqlanon`` maps engine label -> size ->
    the worker's entry (``floor``, ``anonymise_supp0``/``5``, ``mondrian``, ``rss_peak_mb``)."""
    out: list[dict[str, Any]] = []
    order = {"duckdb": 0, "postgres": 1, "spark": 2}
    # DuckDB's figures per size (the plain run, else a memory-limited one) are the reference.
    ref: dict[str, Any] = {}
    for label in sorted(sqlanon, key=lambda lb: lb != "duckdb"):
        if label.startswith("duckdb"):
            for size, entry in sqlanon[label].items():
                ref.setdefault(size, entry)
    for engine in sorted(sqlanon, key=lambda e: (order.get(e.split("[")[0], 3), e)):
        for size in sorted(sqlanon[engine], key=float):
            e = sqlanon[engine][size]
            if "floor" not in e:
                out.append(
                    {
                        "engine": engine,
                        "rows": size,
                        "goal": "run",
                        "verdict": "not measured",
                        "text": f"{_shown(engine)} {size}: no measurement ({e.get('status')})",
                    }
                )
                continue
            floor = e["floor"]["seconds"]
            duck = ref.get(size, {}) if not engine.startswith("duckdb") else {}
            for supp in ("supp0", "supp5"):
                a = e.get(f"anonymise_{supp}", {})
                pct = f"{supp[4:]} %"
                fl = a.get("_floor", floor)
                out.append(
                    _goal(
                        engine,
                        size,
                        f"search_{supp}",
                        f"search {pct}",
                        a.get("search_seconds"),
                        fl,
                        SEARCH_X_FLOOR,
                    )
                )
                out.append(
                    _goal(
                        engine,
                        size,
                        f"publish_{supp}",
                        f"publish + verify {pct}",
                        a.get("publish_seconds"),
                        fl,
                        PUBLISH_X_FLOOR,
                    )
                )
                d = duck.get(f"anonymise_{supp}", {})
                if d:
                    out.append(
                        _same(
                            engine,
                            size,
                            f"optimum_{supp}",
                            f"optimum {pct}",
                            _node(a.get("node")),
                            _node(d.get("node")),
                        )
                    )
            mo = e.get("mondrian", {})
            if mo or e.get("status") != "ok":
                out.append(
                    _goal(
                        engine,
                        size,
                        "mondrian",
                        "Mondrian k=5",
                        mo.get("seconds"),
                        mo.get("_floor", floor),
                        MONDRIAN_X_FLOOR,
                    )
                )
                dm = duck.get("mondrian", {})
                if dm:
                    out.append(
                        _same(
                            engine,
                            size,
                            "mondrian_partitions",
                            "Mondrian partitions",
                            mo.get("partitions"),
                            dm.get("partitions"),
                        )
                    )
            if float(size) >= 1e8:
                # Bounded: DuckDB under a memory_limit. Spark's driver heap is set (local mode runs
                # the executors in the driver's JVM, whose peak RSS is read from /proc), but the
                # local DuckDB of the walk and of Mondrian's rounds has no limit (it may not spill:
                # personal data), so Spark's figures are shown, not judged.
                jvm, heap = e.get("jvm_rss_peak_mb"), e.get("driver_memory")
                bounded = e.get("status", "ok") == "ok" and "memory_limit" in engine
                shown = "met" if bounded else "not measured"
                if jvm is not None and e.get("status", "ok") == "ok":
                    shown = "measured (the local DuckDB has no limit)"
                rss = e.get("rss_peak_mb", 0)
                out.append(
                    {
                        "engine": engine,
                        "rows": size,
                        "goal": "bounded_memory",
                        "rss_peak_mb": rss,
                        "verdict": "met" if bounded else "not measured",
                        "text": f"{_shown(engine)} {size} in bounded memory: peak RSS {rss:.0f} MB"
                        + (f" (Python) + {jvm:.0f} MB (driver JVM)" if jvm is not None else "")
                        + f" under {engine.partition('[')[2].rstrip(']') or _heap(heap)}: "
                        f"{shown}",
                    }
                )
    return out


def _heap(heap: str | None) -> str:
    return f"spark.driver.memory={heap}" if heap else "no limit"


def _node(node: Any) -> Any:
    """A node as its levels in QI order, e.g. ``0,1,0,0,3,2,2,2,0`` (the JSON has a mapping)."""
    if isinstance(node, dict):
        return ",".join(str(v) for v in node.values())
    return ",".join(str(v) for v in node) if isinstance(node, list | tuple) else node


def goal_lines(goals: list[dict[str, Any]]) -> list[str]:
    """The printed block: one line per goal."""
    lines = ["Goals (issue 33; the worker's figures, same run, warm unless --no-warmup):"]
    lines += [f"- {g['text']}" for g in goals] or ["- not measured in these results"]
    return lines
