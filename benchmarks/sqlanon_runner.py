"""Timing sqlanon in a worker process: the floor, assess, the optimal search at each
suppression, publishing; per-template profile and peak memory."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import (
    ADULT_DIR,
    ASSESS_QIS,
    FLOOR_SQL,
    SEARCH_QIS,
    SENSITIVE,
    SUPPRESSIONS,
    K,
    _median,
    rss_peak_mb,
    ru_maxrss_mb,
)

# --------------------------------------------------------------------------------------------------
# The sqlanon worker: one fresh process per (engine, size)
# --------------------------------------------------------------------------------------------------


def hierarchy(col: str) -> dict[str, str]:
    return {"file": f"adult_hierarchy_{col}.csv"}


def assess_policy() -> dict[str, Any]:
    cols: dict[str, Any] = {c: {"role": "quasi"} for c in ASSESS_QIS}
    cols[SENSITIVE] = {"role": "sensitive"}
    return {
        "source": "main.adult",
        "columns": cols,
        "privacy": {
            "k": K,
            "l": {SENSITIVE: {"kind": "distinct", "l": 2}},
            "t": {SENSITIVE: {"measure": "emd-equal", "t": 0.5}},
            "suppression": 0.05,
            "risk": {"prosecutor": 0.2, "average": 0.05},
        },
    }


def search_policy(suppression: float) -> dict[str, Any]:
    return {
        "source": "main.adult",
        "target": "main.adult_anon",
        "columns": {c: {"role": "quasi", "hierarchy": hierarchy(c)} for c in SEARCH_QIS},
        "privacy": {"k": K, "suppression": suppression},
        "search": {"algorithm": "flash", "metric": "precision"},
    }


class Profiler:
    """Times sqlanon's SQL statements (by template) and the phases of ``anonymise``, by wrapping
    ``Backend`` methods and module functions in this process only (no source file is changed).

    Phases: ``prepare`` (base frequency table, coverage check, coded table), ``run_search`` (lattice
    evaluation), ``choose`` (scoring the candidates), ``_publish`` (create the view, ``verify`` it by
    measuring it again, swap). Statements are recorded under the innermost phase."""

    #: ``walk`` holds run_search and choose and, where the walk is local, the copy of the coded
    #: table to the local DuckDB between them: the search's figure is prepare + walk.
    PHASES = ("prepare", "walk", "run_search", "choose", "_publish", "verify")
    #: The function of sqlanon.publish timed as a phase, where its name differs (the lattice search
    #: is ``search``: run_search with Flash's pruning by the metric).
    PHASE_FUNCTIONS = {"run_search": "search"}

    def __init__(self) -> None:
        self.stack: list[str] = ["-"]
        self.depth = 0
        self.events: dict[tuple[str, str], list[float]] = {}
        self.phases: dict[str, float] = {}
        self.installed: list[str] = []

    def reset(self, top: str) -> None:
        self.stack = [top]
        self.depth = 0
        self.events = {}
        self.phases = {}

    def _add(self, label: str, seconds: float) -> None:
        ev = self.events.setdefault((self.stack[-1], label), [0.0, 0])
        ev[0] += seconds
        ev[1] += 1

    def install(self) -> None:
        import sqlanon.engines.base as eng
        import sqlanon.metrics.optimum as opt
        import sqlanon.publish as pub

        prof = self

        # The engines' own overrides too (Spark's create_temp, each engine's bulk path), which a
        # wrapper on Backend alone never sees.
        import sqlanon.engines.duckdb
        import sqlanon.engines.postgres
        import sqlanon.engines.spark
        import sqlanon.lattice.localdb  # noqa: F401 - the local walk's LocalBackend

        def classes(cls: type) -> list[type]:
            return [cls] + [c for sub in cls.__subclasses__() for c in classes(sub)]

        def wrap_backend(method: str, prefix: str, by: Callable[[tuple, dict], str]) -> None:
            for cls in classes(eng.Backend):
                orig = cls.__dict__.get(method)
                if orig is None:
                    continue

                def wrapper(self_: Any, *args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
                    outer = prof.depth == 0
                    prof.depth += 1
                    t0 = time.perf_counter()
                    try:
                        return _orig(self_, *args, **kwargs)
                    finally:
                        prof.depth -= 1
                        if outer:
                            prof._add(f"{prefix}:{by(args, kwargs)}", time.perf_counter() - t0)

                setattr(cls, method, wrapper)
                prof.installed.append(f"{cls.__name__}.{method}")

        wrap_backend("query", "query", lambda a, k: str(a[0]) if a else "?")
        wrap_backend("execute", "exec", lambda a, k: str(a[0]) if a else "?")
        wrap_backend("create_temp", "temp", lambda a, k: str(a[1]) if len(a) > 1 else str(k.get("template")))
        # Bulk copies between engines (issue 33's local walk and measurement): by relation where named.
        wrap_backend("load", "load", lambda a, k: "rows")
        wrap_backend("read_arrow", "arrow", lambda a, k: "rows")

        orig_to_sql = getattr(eng, "to_sql", None)
        if orig_to_sql is not None:

            def to_sql(name: str, /, *args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return orig_to_sql(name, *args, **kwargs)
                finally:
                    prof._add(f"compile:{name}", time.perf_counter() - t0)

            eng.to_sql = to_sql
            prof.installed.append("engine.to_sql")

        for name in self.PHASES:
            attr = self.PHASE_FUNCTIONS.get(name, name)
            # The search and the choice are called by sqlanon.metrics.optimum.walk (issue 33: in
            # the database or on the local copy), the other phases by sqlanon.publish.
            for mod, shown in ((pub, "publish"), (opt, "optimum")):
                orig = getattr(mod, attr, None)
                if orig is None:
                    continue
                setattr(mod, attr, self._phase(name, orig))
                prof.installed.append(f"{shown}.{attr}")
                break

    def _phase(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.stack.append(name)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0
                self.stack.pop()

        return wrapper


def summarise_profile(events_per_rep: list[dict[tuple[str, str], list[float]]]) -> dict[str, Any]:
    """Mean seconds and counts per (phase, statement) over the repetitions, largest first."""
    reps = len(events_per_rep)
    acc: dict[tuple[str, str], list[float]] = {}
    for ev in events_per_rep:
        for key, (sec, cnt) in ev.items():
            a = acc.setdefault(key, [0.0, 0.0])
            a[0] += sec
            a[1] += cnt
    rows = sorted(acc.items(), key=lambda kv: -kv[1][0])
    return {
        f"{phase} | {label}": {"seconds": round(sec / reps, 4), "calls": round(cnt / reps, 1)}
        for (phase, label), (sec, cnt) in rows
    }


def repeat(
    prof: Profiler,
    top: str,
    fn: Callable[[], dict[str, Any]],
    reps: int,
    budget: float,
    warmup: bool = True,
) -> dict[str, Any]:
    """Run ``fn`` up to ``reps`` times; stop early when another repetition would exceed ``budget``
    seconds of this measurement. Returns the median wall time, per-phase medians and the profile.

    With ``warmup`` one untimed run comes first (its wall time is ``first_seconds``), as ArxBench
    runs ARX once before timing it: the first run in a process also pays for compiling templates
    and importing what it uses, which no later run does."""
    runs: list[dict[str, Any]] = []
    events = []
    first: float | None = None
    if warmup:
        prof.reset(top)
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
    start = time.perf_counter()
    info: dict[str, Any] = {}
    while len(runs) < reps:
        prof.reset(top)
        t0 = time.perf_counter()
        info = fn()
        wall = time.perf_counter() - t0
        runs.append({"seconds": wall, "phases": dict(prof.phases)})
        events.append(prof.events)
        spent = time.perf_counter() - start
        if spent + statistics.median(r["seconds"] for r in runs) > budget:
            break
    phases = {p: _median([r["phases"].get(p, 0.0) for r in runs]) for p in prof.PHASES}
    search = [r["phases"].get("prepare", 0.0) + r["phases"].get("walk", 0.0) for r in runs]
    out = {
        "seconds": _median([r["seconds"] for r in runs]),
        "times": [round(r["seconds"], 4) for r in runs],
        "reps": len(runs),
        "first_seconds": None if first is None else round(first, 4),
        "rss_peak_mb_after": round(rss_peak_mb(), 1),
        **info,
    }
    if any(r["phases"] for r in runs):
        out["phases"] = {p: round(v, 4) for p, v in phases.items() if v}
        out["search_seconds"] = _median(search)
        out["search_times"] = [round(s, 4) for s in search]
        out["publish_seconds"] = phases.get("_publish")
    out["profile"] = summarise_profile(events)
    return out


def worker_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    # Imported here so that the baseline resident size is sqlanon's own.
    from sqlanon.engines import session
    from sqlanon.measure.assessment import assess
    from sqlanon.policy import parse_policy
    from sqlanon.publish import anonymise

    prof = Profiler()
    prof.install()
    reps, budget = int(spec["reps"]), float(spec["rep_budget"])
    warm = bool(spec.get("warmup", True))
    engine, url = spec["engine"], spec["url"]
    res: dict[str, Any] = {
        "engine": engine,
        "rows": spec["rows"],
        "pid": os.getpid(),
        "loadavg_start": list(os.getloadavg()),
        "rss_peak_mb_start": round(rss_peak_mb(), 1),
        "profiler_hooks": prof.installed,
    }

    def save_partial() -> None:
        # After each measurement, so that a worker stopped by --worker-timeout leaves what it measured.
        res["rss_peak_mb"] = round(rss_peak_mb(), 1)
        res["ru_maxrss_mb"] = round(ru_maxrss_mb(), 1)
        Path(spec["out"]).write_text(json.dumps({**res, "status": "partial"}, indent=2, default=str))

    # (a) the floor: one scan grouped by the nine QIs, on a plain driver connection, after one
    # untimed run that warms the caches (every measurement below runs on warm caches too).
    if engine == "duckdb":
        import duckdb

        # The same DuckDB settings as sqlanon's URL (a memory_limit, when given, bounds the floor too).
        config = dict(spec.get("duckdb_config") or {})
        if spec.get("memory_limit"):
            config["memory_limit"] = spec["memory_limit"]
        con = duckdb.connect(spec["path"], config=config)
        res["duckdb_settings"] = dict(
            zip(
                ("threads", "memory_limit"),
                con.execute("SELECT current_setting('threads'), current_setting('memory_limit')").fetchone(),
                strict=True,
            )
        )
        close = con.close
        run_floor: Callable[[], Any] = lambda: con.execute(FLOOR_SQL).fetchall()  # noqa: E731
    elif engine == "spark":
        # The session that benchmarks/spark.py started in this process (sqlanon reuses it); the
        # floor is the same GROUP BY, transpiled to Spark SQL by sqlglot.
        import sqlglot
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        floor_sql = sqlglot.transpile(FLOOR_SQL, read="duckdb", write="spark")[0]
        close = lambda: None  # noqa: E731
        run_floor = lambda: [tuple(r) for r in spark.sql(floor_sql).collect()]  # noqa: E731
    else:
        import psycopg

        con = psycopg.connect(spec["conninfo"], autocommit=True)
        close = con.close
        run_floor = lambda: con.execute(FLOOR_SQL).fetchall()  # noqa: E731
    floor_rows = run_floor()
    times = []
    for _ in range(max(reps, 1)):
        t0 = time.perf_counter()
        floor_rows = run_floor()
        times.append(time.perf_counter() - t0)
    close()
    res["floor"] = {
        "seconds": _median(times),
        "times": [round(t, 4) for t in times],
        "reps": len(times),
        "classes": int(floor_rows[0][0]),
        "rows": int(floor_rows[0][1]),
        "rss_peak_mb_after": round(rss_peak_mb(), 1),
    }
    save_partial()

    # (b) assess with k, l, t and risks: eight QIs, occupation sensitive.
    pol_a = parse_policy(assess_policy(), base_dir=ADULT_DIR)

    def do_assess() -> dict[str, Any]:
        with session(url) as be:
            a = assess(be, pol_a)
        return {
            "k": a["k"],
            "classes": a["classes"],
            "l_distinct": a["l_diversity"][SENSITIVE]["distinct"],
            "t_emd_equal": a["t_closeness"][SENSITIVE]["emd_equal"],
            "satisfied": a["satisfied"],
        }

    if spec.get("assess", True):
        res["assess"] = repeat(prof, "assess", do_assess, reps, budget, warm)
        save_partial()

    # (c) + (d): the complete optimal search and the publishing of the view, as one anonymise call
    # whose phases are timed separately (see Profiler).
    for supp in spec.get("suppressions", SUPPRESSIONS):
        pol_s = parse_policy(search_policy(supp), base_dir=ADULT_DIR)

        def do_anonymise(pol: Any = pol_s) -> dict[str, Any]:
            with session(url) as be:
                out = anonymise(be, pol, replace=True)
            return {
                "node": out["node"],
                "optimum": out.get("optimum"),
                "suppressed_records": out.get("suppressed_records"),
                "nodes_total": out.get("nodes_total"),
                "nodes_checked": out.get("nodes_checked"),
                "queries": out.get("queries"),
                "minimal_nodes": len(out.get("minimal_nodes") or []),
                "published_rows": (out.get("published") or {}).get("rows"),
            }

        key = f"anonymise_supp{round(supp * 100)}"
        res[key] = repeat(prof, "anonymise", do_anonymise, reps, budget, warm)
        save_partial()

    # (e) Mondrian (issue 11): the partitioning alone (prepare + rounds), k = 5 on the nine QIs.
    if spec.get("mondrian", True):
        from sqlanon.lattice import prepare
        from sqlanon.lattice.mondrian_local import run_mondrian

        pol_m = parse_policy(search_policy(0.0), base_dir=ADULT_DIR)

        def do_mondrian() -> dict[str, Any]:
            # Where search.where says (auto: the rounds on a local copy on PostgreSQL and Spark);
            # prepared as `anonymise` prepares Mondrian (no coded table: sqlanon/publish.py).
            with session(url) as be:
                m, where = run_mondrian(prepare(be, pol_m, coded=False))
            return {"partitions": m.partitions, "rounds": m.rounds, "ncp": m.metrics["ncp"], **where}

        res["mondrian"] = repeat(prof, "mondrian", do_mondrian, reps, budget, warm)
        save_partial()

    res["rss_peak_mb"] = round(rss_peak_mb(), 1)
    res["ru_maxrss_mb"] = round(ru_maxrss_mb(), 1)
    res["loadavg_end"] = list(os.getloadavg())

    # Untimed, after the timed runs: the peak of Python's own heap (tracemalloc sees Python objects
    # only, not the memory DuckDB's engine allocates inside this process), to show that no rows are
    # materialised in Python.
    if spec.get("heap", True):
        import tracemalloc

        heap: dict[str, float] = {}
        tracemalloc.start()
        do_assess()
        heap["assess"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.reset_peak()
        pol0 = parse_policy(search_policy(0.0), base_dir=ADULT_DIR)
        with session(url) as be:
            anonymise(be, pol0, replace=True)
        heap["anonymise_supp0"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
        res["python_heap_peak_mb"] = heap
    res["status"] = "ok"
    Path(spec["out"]).write_text(json.dumps(res, indent=2, default=str))
