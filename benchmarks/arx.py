"""ARX (Prasser et al.; arx-deidentifier/arx 3.9.2, Apache-2.0) on the same rows as sqlanon, in
the same run: its optimal search (Flash) for k-anonymity over the nine Adult QIs with the ARX
hierarchies and ARX's precision metric, at each suppression limit. ``../shared/peers/arx/`` holds
the jar, its libraries and ``ArxBench.java`` (a driver that prints one JSON line per run; see its
header). Skipped with a note where Java, the jar or the driver is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from benchmarks.common import ADULT_DIR, COLUMNS, ROOT, K, human, q

ARX_DIR = Path(os.environ.get("SQLANON_ARX_DIR", ROOT.parent / "shared" / "peers" / "arx"))


def arx_missing() -> str | None:
    """Why ARX cannot run here, or None."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} not found (ARX needs Java 17)"
    if not (ARX_DIR / "ArxBench.java").is_file() or not list(ARX_DIR.glob("arx-*.jar")):
        return f"ARX jar or ArxBench.java not found in {ARX_DIR}"
    return None


def compile_driver(workdir: Path) -> Path:
    out = workdir / "arxbench"
    if not (out / "ArxBench.class").is_file():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-cp", f"{ARX_DIR}/*", "-d", str(out), str(ARX_DIR / "ArxBench.java")],
            check=True,
            capture_output=True,
            text=True,
        )
    return out


def export_csv(db_path: Path, csv_path: Path) -> None:
    """The benchmark table as ARX reads it: ';'-separated with a header (DuckDB COPY)."""
    import duckdb

    con = duckdb.connect(str(db_path), read_only=True)
    try:
        cols = ", ".join(q(c) for c in COLUMNS)
        target = str(csv_path).replace("'", "''")
        con.execute(f"COPY (SELECT {cols} FROM main.adult) TO '{target}' (DELIMITER ';', HEADER)")
    finally:
        con.close()


def run_arx(
    db_path: Path, n: int, suppressions: list[float], reps: int, heap_gb: int, timeout: float, workdir: Path
) -> dict[str, Any]:
    """ARX at each suppression limit: {"supp0": {...ArxBench's JSON line..., "status": "ok"}, ...}."""
    why = arx_missing()
    if why:
        return {"status": f"skipped: {why}"}
    classes = compile_driver(workdir)
    csv_path = workdir / f"adult_{n}.csv"
    export_csv(db_path, csv_path)
    out: dict[str, Any] = {"status": "ok"}
    try:
        for s in suppressions:
            key = f"supp{round(s * 100)}"
            print(f"  ARX k={K} at {human(n)} rows, {s:.0%} suppression ...", flush=True)
            cmd = [
                "java",
                f"-Xmx{heap_gb}g",
                "-cp",
                f"{classes}{os.pathsep}{ARX_DIR}/*",
                "ArxBench",
                str(csv_path),
                str(ADULT_DIR),
                str(K),
                str(s),
                str(max(1, reps + 1)),  # the first run is ArxBench's warm-up
            ]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                out[key] = {"status": f"skipped: timeout ({timeout:g} s)"}
                continue
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
                out[key] = {"status": f"error (exit {proc.returncode}): {tail[0][:300]}"}
                continue
            out[key] = {**json.loads(lines[-1]), "status": "ok"}
            print(
                f"    ARX: {out[key].get('anonymize_s')} s, "
                f"{out[key].get('checked_transformations')} nodes checked",
                flush=True,
            )
    finally:
        csv_path.unlink(missing_ok=True)
    return out
