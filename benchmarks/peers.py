"""The peers on the same rows: pycanon's k, l, t checks and anjana's k-anonymity, each in a
subprocess with a time and a memory limit."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    ADULT_DIR,
    ASSESS_QIS,
    ROOT,
    SEARCH_QIS,
    SENSITIVE,
    K,
    _median,
    human,
    rss_peak_mb,
)

# --------------------------------------------------------------------------------------------------
# Peers: pycanon's checks and anjana's k-anonymity, each call in its own subprocess
# --------------------------------------------------------------------------------------------------

PEERS = ["pycanon.k", "pycanon.l", "pycanon.t", "anjana.k5.supp0", "anjana.k5.supp5"]


def anjana_hierarchies(qis: list[str]) -> dict[str, dict]:
    """anjana's hierarchy format: per QI, {level: column of the ARX file} (as in its documentation)."""
    import pandas as pd

    return {c: dict(pd.read_csv(ADULT_DIR / f"adult_hierarchy_{c}.csv", sep=";", header=None)) for c in qis}


def _vsize_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def peer_child(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    peer = spec["peer"]
    out: dict[str, Any] = {"peer": peer, "pid": os.getpid()}
    try:
        import duckdb

        t0 = time.perf_counter()
        con = duckdb.connect(spec["path"], read_only=True)
        df = con.execute("SELECT * FROM main.adult").df().reset_index(drop=True)
        con.close()
        out["load_seconds"] = time.perf_counter() - t0
        out["frame_mb"] = df.memory_usage(deep=True).sum() / 2**20
        # Memory guard: at most mem_gb more address space than the loaded frame already uses.
        limit = _vsize_bytes() + int(float(spec["mem_gb"]) * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if peer.startswith("pycanon."):
            from pycanon import anonymity

            fn = {
                "pycanon.k": lambda: anonymity.k_anonymity(df, ASSESS_QIS),
                "pycanon.l": lambda: anonymity.l_diversity(df, ASSESS_QIS, [SENSITIVE]),
                "pycanon.t": lambda: anonymity.t_closeness(df, ASSESS_QIS, [SENSITIVE]),
            }[peer]
            t1 = time.perf_counter()
            value = fn()
            out["seconds"] = time.perf_counter() - t1
            out["value"] = float(value)
        else:
            import io
            from contextlib import redirect_stdout

            from anjana.anonymity import k_anonymity
            from anjana.anonymity.utils import utils as anjana_utils

            supp = 5 if peer.endswith("supp5") else 0
            hier = anjana_hierarchies(SEARCH_QIS)
            buf = io.StringIO()
            with redirect_stdout(buf):
                t1 = time.perf_counter()
                anon = k_anonymity(df, [], SEARCH_QIS, K, supp, hier)
                out["seconds"] = time.perf_counter() - t1
                if len(anon):
                    levels = anjana_utils.get_transformation(anon, SEARCH_QIS, anjana_hierarchies(SEARCH_QIS))
                    out["node"] = dict(zip(SEARCH_QIS, [int(x) for x in levels], strict=True))
            out["suppressed_records"] = int(len(df) - len(anon))
            out["stdout"] = buf.getvalue()[-300:]
        out["status"] = "ok"
    except MemoryError:
        out["status"] = f"skipped: memory (over {spec['mem_gb']} GB)"
    out["rss_peak_mb"] = round(rss_peak_mb(), 1)
    Path(spec["out"]).write_text(json.dumps(out, indent=2, default=str))


def run_subprocess(
    kind: str, spec: dict[str, Any], workdir: Path, timeout: float, tag: str
) -> tuple[dict[str, Any] | None, str]:
    """Run ``python -m benchmarks.run --KIND spec`` with a time limit: (result, status)."""
    spec_path = workdir / f"{tag}.spec.json"
    out_path = workdir / f"{tag}.out.json"
    out_path.unlink(missing_ok=True)
    spec = {**spec, "out": str(out_path)}
    spec_path.write_text(json.dumps(spec))
    cmd = [sys.executable, "-m", "benchmarks.run", f"--{kind}", str(spec_path)]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        partial = json.loads(out_path.read_text()) if out_path.exists() else None
        return partial, f"skipped: timeout ({timeout:g} s)"
    err = (proc.stderr or "").strip()
    if out_path.exists():
        res = json.loads(out_path.read_text())
        status = res.get("status", "ok")
        if proc.returncode != 0:  # a worker that failed after saving some measurements
            last = err.splitlines()[-1] if err else "no output"
            status = f"error (exit {proc.returncode}) after {status} results: {last[:300]}"
        return res, status
    if "MemoryError" in err or proc.returncode in (-9, 137):
        return None, "skipped: memory"
    return None, f"error (exit {proc.returncode}): {err.splitlines()[-1] if err else 'no output'}"


def agreement(peers: dict[str, Any], duck: dict[str, Any]) -> dict[str, Any]:
    """pycanon's k, l, t beside sqlanon's assess on the same table (they should agree)."""
    a = duck.get("assess")
    if not a:
        return {}
    out: dict[str, Any] = {}
    for peer, mine in (("pycanon.k", "k"), ("pycanon.l", "l_distinct"), ("pycanon.t", "t_emd_equal")):
        p = peers.get(peer, {})
        if p.get("status") == "ok" and mine in a:
            out[peer] = {
                "pycanon": p["value"],
                "sqlanon": a[mine],
                "agree": abs(float(p["value"]) - float(a[mine])) <= 1e-9 * max(1.0, abs(float(a[mine]))),
            }
    return out


def run_peers(path: Path, n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for peer in args.peer_list:
        times, loads, last = [], [], None
        status = "ok"
        for rep in range(args.peer_reps):
            print(f"  peer {peer} at {human(n)} rows (rep {rep + 1}) ...", flush=True)
            spec = {"peer": peer, "path": str(path), "mem_gb": args.peer_mem_gb}
            res, status = run_subprocess("peer-call", spec, workdir, args.peer_timeout, f"peer-{peer}-{n}")
            if res is None or status != "ok":
                break
            times.append(res["seconds"])
            loads.append(res["load_seconds"])
            last = res
        entry: dict[str, Any] = {"status": status}
        if times:
            entry.update(
                {
                    "seconds": _median(times),
                    "times": [round(t, 3) for t in times],
                    "load_seconds": _median(loads),
                    "rss_peak_mb": last.get("rss_peak_mb") if last else None,
                }
            )
            for key in ("value", "node", "suppressed_records", "frame_mb"):
                if last and key in last:
                    entry[key] = last[key]
        out[peer] = entry
        shown = f"{entry['seconds']:.2f} s" if times else status
        print(f"    {peer}: {shown}", flush=True)
    return out
