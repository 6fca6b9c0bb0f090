"""Issue 33: the search in the warehouse against the local walk, as whole processes.

``python -m benchmarks.local_walk --rows 1e6 [--reps 3] [--supp 0,5]`` (from the repository root):
builds the Adult-like table of benchmarks/data.py (``recombine``) in a throwaway PostgreSQL cluster
(as benchmarks/run.py does), then times, each as a fresh process and interleaved rep by rep:

- ``floor``: one GROUP BY scan of the nine QIs (benchmarks/common.py ``FLOOR_SQL``) in a Python
  process that imports psycopg and connects;
- ``search[where]``: ``sqlanon anonymise POLICY --dry-run --json --search-in WHERE`` (prepare,
  Flash, choose; the default search: k = 5, the nine QIs with ARX's hierarchies, precision), for
  ``database`` and ``local``, at each suppression limit;
- ``publish[where]``: the same without ``--dry-run``, publishing a view with ``--replace`` (the
  search, then create, verify and swap: publishing costs this minus the search).

Each floor and search run also records its CPU seconds: the process's (user + system, with
DuckDB's threads) and the cluster's backends' over the run (``cpu_s_process_server``).

Medians go to benchmarks/results/<UTC time>_local-walk_rows-<n>_postgres.json with every rep's
time, the node each walk chose (they must agree) and the rows the local walk copied. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ADULT_DIR, FLOOR_SQL, RESULTS, SEARCH_QIS, K, human
from benchmarks.data import build_postgres
from benchmarks.run import machine_info, parse_rows, start_postgres, stop_postgres

#: Issue 33's goal: the search at most this many times one scan, on the same engine.
GOAL_X_FLOOR = 2.0


def _policy(supp: float) -> dict[str, Any]:
    return {
        "source": "main.adult",
        "target": "main.adult_anon",
        "columns": {
            c: {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}}
            for c in SEARCH_QIS
        },
        "privacy": {"k": K, "suppression": supp},
        "search": {"algorithm": "flash", "metric": "precision"},
    }


#: CPU seconds of each timed process and of the PostgreSQL cluster's backends during it (the
#: machine is shared: wall times swing with its load, CPU far less), by label.
CPU: dict[str, list[tuple[float, float]]] = {}


def _server_cpu(cluster: Any) -> float:
    """CPU seconds of the cluster's postmaster and every process it has reaped: the backends, and
    any autovacuum worker that ran meanwhile (Linux /proc)."""
    pid = int((Path(cluster.datadir) / "postmaster.pid").read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _timed(cmd: list[str], cluster: Any = None, label: str = "") -> tuple[float, str]:
    r0, s0 = resource.getrusage(resource.RUSAGE_CHILDREN), _server_cpu(cluster) if cluster else 0.0
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({res.returncode}): {res.stderr.strip()[-500:]}")
    if label:
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        mine = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        server = _server_cpu(cluster) - s0 if cluster else 0.0
        CPU.setdefault(label, []).append((round(mine, 2), round(server, 2)))
    return took, res.stdout


def _age_range() -> tuple[int, int]:
    ages = []
    with (ADULT_DIR / "adult.csv").open(encoding="utf-8") as f:
        next(f)
        for line in f:
            ages.append(int(line.split(";")[1]))
    return min(ages), max(ages)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e6")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--supp", default="0,5", help="suppression limits in percent")
    ap.add_argument("--no-publish", action="store_true", help="time the search only")
    ap.add_argument("--where", default="database,local", help="the walk's locations, comma-separated")
    args = ap.parse_args()
    sqlanon = str(Path(sys.executable).with_name("sqlanon"))
    supps = [float(s) / 100 for s in args.supp.split(",")]
    started = dt.datetime.now(dt.UTC)
    out: dict[str, Any] = {
        "issue": 33,
        "command": "python -m benchmarks.local_walk " + " ".join(sys.argv[1:]),
        "started_utc": started.isoformat(timespec="seconds"),
        "machine": machine_info(),
        "loadavg_start": list(os.getloadavg()),
        "what": "whole processes; median of --reps, interleaved; see benchmarks/local_walk.py",
        "floor_sql": FLOOR_SQL,
        "goal_x_floor": GOAL_X_FLOOR,
        "sizes": {},
    }
    cluster, why = start_postgres()
    if cluster is None:
        raise SystemExit(why)
    work = Path(tempfile.mkdtemp(prefix="sqlanon-local-walk-"))
    try:
        lo, hi = _age_range()
        for n in parse_rows(args.rows):
            key = human(n)
            db = f"bench_lw_{n}"
            built = build_postgres(cluster, db, n, lo, hi, "recombine")
            url, conninfo = cluster.url(db), cluster.conninfo(db)
            print(f"== {key} rows: built in {built['seconds']:.1f} s", flush=True)
            floor_cmd = [
                sys.executable,
                "-c",
                f"import psycopg\nwith psycopg.connect({conninfo!r}) as c:\n"
                f"    c.execute({FLOOR_SQL!r}).fetchall()",
            ]
            runs: dict[str, list[float]] = {"floor": []}
            seen: dict[str, Any] = {}
            for rep in range(args.reps):
                runs["floor"].append(_timed(floor_cmd, cluster, "floor")[0])
                for supp in supps:
                    path = work / f"policy_{round(supp * 100)}.json"
                    path.write_text(json.dumps(_policy(supp)))
                    for where in args.where.split(","):
                        label = f"supp{round(supp * 100)}:{where}"
                        base = [sqlanon, "anonymise", str(path), "--db", url, "--json", "--search-in", where]
                        took, text = _timed([*base, "--dry-run"], cluster, f"search[{label}]")
                        res = json.loads(text)
                        runs.setdefault(f"search[{label}]", []).append(took)
                        seen[label] = {
                            "node": res["node"],
                            "nodes_checked": res["nodes_checked"],
                            "queries": res["queries"],
                            "search_location": res["search_location"],
                            "rows_transferred": res["rows_transferred"],
                        }
                        if not args.no_publish:
                            took, _ = _timed([*base, "--replace"])
                            runs.setdefault(f"publish[{label}]", []).append(took)
                print(
                    f"  rep {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in runs.items()), flush=True
                )
            floor = statistics.median(runs["floor"])
            med = {k: statistics.median(v) for k, v in runs.items()}
            out["sizes"][key] = {
                "data": built,
                "seconds": {k: [round(x, 3) for x in v] for k, v in runs.items()},
                "cpu_s_process_server": {k: CPU.pop(k) for k in list(CPU)},
                "median_s": {k: round(v, 3) for k, v in med.items()},
                "x_floor": {k: round(v / floor, 2) for k, v in med.items()},
                "walks": seen,
                "same_node": all(
                    seen[f"supp{round(s * 100)}:database"]["node"]
                    == seen[f"supp{round(s * 100)}:local"]["node"]
                    for s in supps
                )
                if "database" in args.where and "local" in args.where
                else None,
            }
            print(f"  medians (x floor {floor:.2f} s):", flush=True)
            for k, v in med.items():
                goal = f" goal <= {GOAL_X_FLOOR}x" if k.startswith("search") else ""
                print(f"    {k:28s} {v:7.2f} s  {v / floor:5.2f}x{goal}", flush=True)
    finally:
        stop_postgres(cluster)
    out["loadavg_end"] = list(os.getloadavg())
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(exist_ok=True)
    dest = RESULTS / f"{stamp}_local-walk_rows-{'-'.join(out['sizes'])}_postgres.json"
    dest.write_text(json.dumps(out, indent=2, default=str))
    print(f"wrote {dest}", flush=True)


if __name__ == "__main__":
    main()
