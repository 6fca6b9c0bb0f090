"""Building the Adult-like table of N rows inside DuckDB and PostgreSQL (see README, *Data*)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    ADULT_DIR,
    ADULT_ROWS,
    COLUMNS,
    FINGERPRINT_SQL,
    H1,
    H2,
    H3,
    QI_LIST,
    SECOND_ROW,
    K,
    q,
)

# --------------------------------------------------------------------------------------------------
# Data: an Adult-like table of N rows, generated inside the database
# --------------------------------------------------------------------------------------------------


def age_bounds(duck_con: Any) -> tuple[int, int]:
    """The data's age range, checked to be covered by the ARX age hierarchy (so jitter stays in it)."""
    lo, hi = duck_con.execute("SELECT MIN(age), MAX(age) FROM main.adult_base").fetchone()
    covered = set()
    with (ADULT_DIR / "adult_hierarchy_age.csv").open(encoding="utf-8") as f:
        for line in f:
            head = line.strip().split(";")[0]
            if head.isdigit():
                covered.add(int(head))
    missing = [a for a in range(lo, hi + 1) if a not in covered]
    if missing:
        raise SystemExit(f"the age hierarchy does not cover ages {missing[:5]}; cannot jitter ages")
    return int(lo), int(hi)


def generate_sql(generator: str, n: int, base_rows: int, lo: int, hi: int, rows_from: str, i: str) -> str:
    """CREATE TABLE main.adult: n rows made from main.adult_base by ``generator`` (see GENERATORS)."""
    if n == ADULT_ROWS == base_rows:  # `--rows adult`: the file itself, in its order
        cols = ", ".join(q(c) for c in COLUMNS)
        return f"CREATE TABLE main.adult AS SELECT {cols} FROM main.adult_base ORDER BY rid"
    h1, h2, h3 = H1.format(i=i), H2.format(i=i), H3.format(i=i)
    jitter = "s.h3 % 3 - 1" if generator == "recombine" else "s.h2 % 3 - 1"
    shifted = f"b.age + {jitter}"
    age = f"CASE WHEN {shifted} BETWEEN {lo} AND {hi} THEN {shifted} ELSE b.age END AS age"
    second = generator == "recombine"
    cols = ", ".join(
        age if c == "age" else (f"c.{q(c)}" if second and c in SECOND_ROW else f"b.{q(c)}") for c in COLUMNS
    )
    join_c = f" JOIN main.adult_base AS c ON c.rid = s.h2 % {base_rows}" if second else ""
    return (
        f"CREATE TABLE main.adult AS WITH s AS "
        f"(SELECT {i} AS i, {h1} AS h1, {h2} AS h2, {h3} AS h3 FROM {rows_from}) "
        f"SELECT {cols} FROM s JOIN main.adult_base AS b ON b.rid = s.h1 % {base_rows}{join_c} ORDER BY s.i"
    )


def load_base(con: Any) -> int:
    """Adult's rows as ``main.adult_base`` (with ``rid``, their file order) in a DuckDB connection;
    their number. The generator (:func:`generate_sql`) recombines them."""
    types = ", ".join(f"'{c}': '{'INTEGER' if c == 'age' else 'VARCHAR'}'" for c in COLUMNS)
    csv = str(ADULT_DIR / "adult.csv").replace("'", "''")
    con.execute(
        f"CREATE TABLE main.adult_raw AS SELECT * FROM read_csv('{csv}', delim=';', header=true, "
        f"columns={{{types}}})"
    )
    # rowid of a freshly created table is its insertion (= file) order.
    con.execute("CREATE TABLE main.adult_base AS SELECT rowid AS rid, * FROM main.adult_raw")
    con.execute("DROP TABLE main.adult_raw")
    return int(con.execute("SELECT COUNT(*) FROM main.adult_base").fetchone()[0])


def build_duckdb(path: Path, n: int, generator: str) -> dict[str, Any]:
    import duckdb

    if path.exists():
        path.unlink()
    t0 = time.perf_counter()
    con = duckdb.connect(str(path))
    try:
        base_rows = load_base(con)
        lo, hi = age_bounds(con)
        con.execute(generate_sql(generator, n, base_rows, lo, hi, f"range({n})", "range"))
        con.execute("CHECKPOINT")
        fp = [int(x) for x in con.execute(FINGERPRINT_SQL).fetchone()]
        classes, small = con.execute(
            f"SELECT COUNT(*), SUM(CASE WHEN n < {K} THEN n ELSE 0 END) FROM "
            f"(SELECT {QI_LIST}, COUNT(*) AS n FROM main.adult GROUP BY {QI_LIST}) AS g"
        ).fetchone()
    finally:
        con.close()
    return {
        "seconds": time.perf_counter() - t0,
        "base_rows": int(base_rows),
        "age_range": [lo, hi],
        "fingerprint": fp,
        "classes_9_qis": int(classes),
        f"share_of_records_in_classes_below_k{K}": round(int(small) / n, 4),
        "file_mb": path.stat().st_size / 2**20,
    }


def build_child(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    res = build_duckdb(Path(spec["path"]), int(spec["rows"]), spec["generator"])
    Path(spec["out"]).write_text(json.dumps({**res, "status": "ok"}))


def build_postgres(cluster: Any, dbname: str, n: int, lo: int, hi: int, generator: str) -> dict[str, Any]:
    import psycopg

    t0 = time.perf_counter()
    with psycopg.connect(cluster.conninfo(), autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {dbname}")
        con.execute(f"CREATE DATABASE {dbname}")
    with psycopg.connect(cluster.conninfo(dbname), autocommit=True) as con:
        con.execute("CREATE SCHEMA main")
        coldefs = ", ".join(f"{q(c)} {'integer' if c == 'age' else 'text'}" for c in COLUMNS)
        con.execute(
            f"CREATE TABLE main.adult_base ({coldefs}, "
            f"rid bigint GENERATED ALWAYS AS IDENTITY (MINVALUE 0 START WITH 0))"
        )
        # The 30k base rows are streamed to COPY as bytes (CSV parsed by the server).
        with (
            con.cursor().copy(
                f"COPY main.adult_base ({QI_LIST}) FROM STDIN (FORMAT csv, DELIMITER ';', HEADER true)"
            ) as cp,
            (ADULT_DIR / "adult.csv").open("rb") as f,
        ):
            while chunk := f.read(1 << 20):
                cp.write(chunk)
        base_rows = con.execute("SELECT COUNT(*) FROM main.adult_base").fetchone()[0]
        series = f"generate_series(0::bigint, {n - 1}) AS g(i)"
        con.execute(generate_sql(generator, n, base_rows, lo, hi, series, "i"))
        con.execute("VACUUM ANALYZE main.adult")
        fp = [int(x) for x in con.execute(FINGERPRINT_SQL).fetchone()]
        version = con.execute("SHOW server_version").fetchone()[0]
    return {
        "seconds": time.perf_counter() - t0,
        "base_rows": int(base_rows),
        "fingerprint": fp,
        "server_version": version,
    }
