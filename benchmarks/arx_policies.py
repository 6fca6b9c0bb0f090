"""Nodes checked by ARX's Flash and sqlanon's on Adult for k, distinct l and t, with and without
suppression (issue 17: "at least as well for every policy").

    python -m benchmarks.arx_policies [--out benchmarks/results/arx_policies.json]

Both run Flash for the optimum by precision (ARX: ``Metric.createPrecisionMetric()``; sqlanon:
``search.scope: optimum``) on ../shared/data/adult/adult.csv with the ARX hierarchies; for l and t
occupation is sensitive and the other eight columns are QIs. ARX runs through
``benchmarks/ArxPolicies.java`` (compiled against ../shared/peers/arx), sqlanon on DuckDB in this
process. Prints one row per policy: checks, optimum (which must agree), and warm seconds (ARX: the
second of two runs in one JVM; sqlanon: after one untimed run). Skips ARX with a note where Java is
missing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.arx import ARX_DIR, arx_missing
from benchmarks.common import ADULT_DIR, ROOT
from benchmarks.data import build_duckdb
from benchmarks.sqlanon_runner import search_policy

#: (k, sensitive requirement): None, ("l", 3) distinct l, ("t", 0.2) equal-distance t.
POLICIES: list[tuple[int, tuple[str, float] | None]] = [
    (2, None),
    (5, None),
    (10, None),
    (1, ("l", 3)),
    (5, ("l", 3)),
    (1, ("t", 0.2)),
    (5, ("t", 0.2)),
]
SENSITIVE = "occupation"
DRIVER = ROOT / "benchmarks" / "ArxPolicies.java"


def describe(k: int, req: tuple[str, float] | None) -> str:
    parts = [f"k = {k}"] if k > 1 else []
    if req:
        parts.append(f"{'distinct l' if req[0] == 'l' else 't'} = {req[1]:g}")
    return " + ".join(parts)


def same_optimum(arx: dict[str, int] | None, ours: dict[str, Any]) -> str | None:
    """``node`` where both chose the same node; ``tie`` where ARX's node differs but has the same
    mean of level / height (precision's loss without suppression: a tie that the tools break
    differently, sqlanon by height then node order); else ``differs``."""
    if arx is None:
        return None
    if arx == ours["optimum"]:
        return "node"

    def loss(node: dict[str, int]) -> float:
        return sum(lvl / ours["heights"][c] for c, lvl in node.items() if ours["heights"][c])

    tie = ours["suppressed"] == 0 and abs(loss(arx) - loss(ours["optimum"])) < 1e-9
    return "tie" if tie else "differs"


def run_arx(classes: Path, k: int, req: tuple[str, float] | None, supp: float) -> dict[str, Any]:
    cmd = ["java", "-Xmx4g", "-cp", f"{classes}{os.pathsep}{ARX_DIR}/*", "ArxPolicies"]
    cmd += [str(ADULT_DIR / "adult.csv"), str(ADULT_DIR), str(supp), "2", str(k)]
    if req:
        cmd += [SENSITIVE, req[0], str(req[1])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])


def run_sqlanon(url: str, k: int, req: tuple[str, float] | None, supp: float) -> dict[str, Any]:
    from sqlanon.engines import session
    from sqlanon.lattice import node_map, prepare
    from sqlanon.metrics.optimum import choose, search
    from sqlanon.policy import parse_policy

    d = search_policy(supp)
    d["privacy"] = {"suppression": supp, **({"k": k} if k > 1 else {})}
    if req:
        d["columns"][SENSITIVE] = {"role": "sensitive"}
        if req[0] == "l":
            d["privacy"]["l"] = {SENSITIVE: {"kind": "distinct", "l": int(req[1])}}
        else:
            d["privacy"]["t"] = {SENSITIVE: {"measure": "emd-equal", "t": req[1]}}
    pol = parse_policy(d, base_dir=ADULT_DIR)
    out: dict[str, Any] = {}
    for _ in range(2):  # the first run warms the caches and compiles the templates
        with session(url) as be:
            t0 = time.perf_counter()
            plan = prepare(be, pol)
            res = search(plan, "flash", "precision")
            node, _info = choose(plan, res, "precision")
            out = {
                "checked": res.nodes_checked,
                "queries": res.queries,
                "seconds": round(time.perf_counter() - t0, 4),
                "optimum": node_map(plan, node),
                "heights": dict(zip(plan.qi_names, plan.heights, strict=True)),
                "suppressed": res.results[node].bad_records if node in res.results else None,
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    why = arx_missing()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = work / "adult.duckdb"
        build_duckdb(db, 30162, "recombine")
        classes = work / "classes"
        if not why:
            classes.mkdir()
            subprocess.run(
                ["javac", "-cp", f"{ARX_DIR}/*", "-d", str(classes), str(DRIVER)],
                check=True,
                capture_output=True,
            )
        for supp in (0.0, 0.05):
            for k, req in POLICIES:
                name = describe(k, req)
                row: dict[str, Any] = {"policy": name, "suppression": supp}
                row["sqlanon"] = run_sqlanon(f"duckdb:///{db}", k, req, supp)
                row["arx"] = {"status": f"skipped: {why}"} if why else run_arx(classes, k, req, supp)
                row["same_optimum"] = same_optimum(row["arx"].get("optimum"), row["sqlanon"])
                rows.append(row)
                print(
                    f"{name:26s} {supp:4.0%}  ARX {row['arx'].get('checked', '-'):>5} checks "
                    f"{row['arx'].get('warm_s', '-')} s | sqlanon {row['sqlanon']['checked']:>5} checks "
                    f"{row['sqlanon']['seconds']} s | same optimum: {row['same_optimum']}",
                    flush=True,
                )
    if args.out:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        args.out.write_text(json.dumps({"finished_utc": started, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
