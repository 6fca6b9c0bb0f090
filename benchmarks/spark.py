"""Spark local: the benchmark of benchmarks/run.py (floor, assess, search, publish) on a local
SparkSession (issue 12).

``python -m benchmarks.spark --rows 1e6 [--master local[2]] [--reps 1]`` (from the repository root):
builds the same Adult-like table in DuckDB (benchmarks/data.py), writes it to Parquet with DuckDB,
loads it into a Spark managed table ``main.adult``, and runs the sqlanon worker of
benchmarks/sqlanon_runner.py in this process on ``--db spark`` (the session started here is the
one sqlanon binds to). The result JSON goes to benchmarks/results/. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchmarks.sqlanon_runner as runner
from benchmarks.common import RESULTS, human
from benchmarks.goals import goal_lines, goals_33
from benchmarks.peers import run_subprocess
from benchmarks.run import machine_info, parse_rows
from benchmarks.sqlanon_runner import worker_main


def count_jobs(spark: Any) -> None:
    """Add to each measurement of the worker (``runner.repeat``) the Spark jobs and SQL executions
    one run of it issued (issue 33: Spark's cost is per statement and per job, ~0.3-1 s each on
    the 2-core machine), counted by Spark's status tracker and SQL status store; the untimed
    warm-up run is counted with the others."""
    real = runner.repeat
    store = spark._jsparkSession.sharedState().statusStore()
    tracker = spark.sparkContext.statusTracker()

    def repeat(*args: Any, **kwargs: Any) -> dict[str, Any]:
        jobs, execs = len(tracker.getJobIdsForGroup()), store.executionsCount()
        out = real(*args, **kwargs)
        runs = out.get("reps", 1) + (1 if out.get("first_seconds") is not None else 0)
        out["spark_jobs"] = round((len(tracker.getJobIdsForGroup()) - jobs) / runs, 1)
        out["spark_sql_executions"] = round((store.executionsCount() - execs) / runs, 1)
        return out

    runner.repeat = repeat


def _build_child(work: Path, duck: Path, n: int) -> dict[str, Any]:
    """The DuckDB table of benchmarks/data.py, built in a child process: this process's peak RSS
    is then sqlanon's and pyspark's own (a child's does not count), not DuckDB's while generating."""
    built, status = run_subprocess(
        "build", {"path": str(duck), "rows": n, "generator": "recombine"}, work, 7200, f"build-{n}"
    )
    if built is None or status != "ok":
        raise SystemExit(f"building the {human(n)}-row table failed: {status}")
    built.pop("status", None)
    return built


def _to_parquet(duck: Path, parquet: Path) -> None:
    """DuckDB writes the table to Parquet, in a child process (as :func:`_build_child`)."""
    code = (
        "import duckdb, sys\n"
        'path = sys.argv[2].replace("\'", "\'\'")\n'
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "con.execute(f\"COPY main.adult TO '{path}' (FORMAT parquet)\")\n"
    )
    subprocess.run([sys.executable, "-c", code, str(duck), str(parquet)], check=True)


def _jvm_peak_mb(spark: Any) -> float | None:
    """The driver JVM's peak resident memory (VmHWM; local mode runs the executors in it), read
    from /proc: the Python process's own ``ru_maxrss`` never counts a live child."""
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except Exception:  # noqa: BLE001 - not Linux, or the gateway is gone: not measured
        return None
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e6")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", default="8")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--supp", default="0", help="suppression levels in percent, comma-separated")
    ap.add_argument("--mondrian", action=argparse.BooleanOptionalAction, default=False, help="time Mondrian")
    ap.add_argument("--assess", action=argparse.BooleanOptionalAction, default=True, help="time assess")
    ap.add_argument(
        "--warmup", action=argparse.BooleanOptionalAction, default=True, help="one untimed run first"
    )
    ap.add_argument("--duckdb", help="a DuckDB file with main.adult already built (benchmarks.run passes it)")
    ap.add_argument("--out", help="the result file (default: benchmarks/results/<time>_rows-<n>_spark.json)")
    ap.add_argument(
        "--parquet",
        help="a folder that keeps each size's Parquet file between runs (built there once, by a child "
        "process); main.adult is then an external table over it instead of a copy",
    )
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix="sqlanon-spark-bench-"))
    started = dt.datetime.now(dt.UTC)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("sqlanon-bench")
        .config("spark.sql.shuffle.partitions", args.shuffle_partitions)
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    count_jobs(spark)
    out: dict = {
        "issue": 12,
        "command": "python -m benchmarks.spark " + " ".join(sys.argv[1:]),
        "started_utc": started.isoformat(timespec="seconds"),
        "machine": machine_info(),
        "spark": {
            "version": spark.version,
            "master": args.master,
            "shuffle_partitions": args.shuffle_partitions,
            "driver_memory": args.driver_memory,
        },
        "loadavg_start": list(os.getloadavg()),
        "runs": {},
    }
    try:
        for n in parse_rows(args.rows):
            kept = Path(args.parquet) / f"adult_{n}" if args.parquet else None
            parquet = (kept / "part-0.parquet") if kept else work / f"adult_{n}.parquet"
            if kept is not None and parquet.exists():
                data: dict[str, Any] = {"parquet": str(parquet), "reused": True}
            else:
                duck = Path(args.duckdb) if args.duckdb else work / f"adult_{n}.duckdb"
                data = {"duckdb": args.duckdb} if args.duckdb else _build_child(work, duck, n)
                parquet.parent.mkdir(parents=True, exist_ok=True)
                _to_parquet(duck, parquet)
            t0 = time.perf_counter()
            spark.sql("CREATE DATABASE IF NOT EXISTS main")
            spark.sql("DROP TABLE IF EXISTS main.adult")
            if kept is not None:  # an external table over the kept file: no copy
                spark.sql(f"CREATE TABLE main.adult USING parquet LOCATION '{kept}'")
            else:
                spark.sql(f"CREATE TABLE main.adult USING parquet AS SELECT * FROM parquet.`{parquet}`")
            load_s = time.perf_counter() - t0
            spec = {
                "engine": "spark",
                "url": "spark",
                "rows": n,
                "reps": args.reps,
                "rep_budget": 1e9,
                "suppressions": [float(x) / 100 for x in args.supp.split(",") if x.strip()],
                "mondrian": args.mondrian,
                "assess": args.assess,
                "warmup": args.warmup,
                "heap": False,
                "out": str(work / f"worker_{n}.json"),
            }
            (work / "spec.json").write_text(json.dumps(spec))
            failed = None
            try:
                worker_main(str(work / "spec.json"))
            except Exception as e:  # noqa: BLE001 - keep what was measured before the failure
                failed = f"error after partial results: {str(e).splitlines()[0][:300]}"
            res = json.loads(Path(spec["out"]).read_text()) if Path(spec["out"]).exists() else {}
            if failed:
                res["status"] = failed
            res["data"] = data
            res["spark_load_seconds"] = load_s
            res["jvm_rss_peak_mb"] = _jvm_peak_mb(spark)
            res["driver_memory"] = args.driver_memory
            out["runs"][human(n)] = res
            # The shape benchmarks.report reads (engine -> size -> entry), and issue 33's goals.
            out["sqlanon"] = {"spark": out["runs"]}
            out["goals_33"] = goals_33(out["sqlanon"])
            shown = {k: res.get(k) for k in ("floor", "assess", "anonymise_supp0")}
            for key, m in res.items():
                if isinstance(m, dict) and "spark_jobs" in m:
                    jobs, execs = m["spark_jobs"], m["spark_sql_executions"]
                    print(f"{key}: {jobs} Spark jobs, {execs} SQL executions a run")
            print(json.dumps(shown, default=str)[:3000])
            print("\n".join(goal_lines([g for g in out["goals_33"] if g["rows"] == human(n)])), flush=True)
    finally:
        out["loadavg_end"] = list(os.getloadavg())
        stamp = started.strftime("%Y%m%dT%H%M%SZ")
        path = (
            Path(args.out) if args.out else RESULTS / f"{stamp}_rows-{args.rows.replace(',', '-')}_spark.json"
        )
        path.write_text(json.dumps(out, indent=2, default=str))
        print("wrote", path)
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
