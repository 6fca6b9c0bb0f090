"""Merging result files and printing the tables of times, ratios and targets."""

from __future__ import annotations

from typing import Any

from benchmarks.common import TARGET_ASSESS_X_FLOOR, TARGET_PEER_SPEEDUP, TARGET_RSS_MB, TARGET_SEARCH_X_FLOOR
from benchmarks.goals import goal_lines, goals_33

# --------------------------------------------------------------------------------------------------
# Report: Markdown tables from one or more result files
# --------------------------------------------------------------------------------------------------


def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}" if x >= 0.1 else f"{x:.3f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _x(r: float | None) -> str:
    return "–" if r is None else (f"{r:.0f}x" if r >= 100 else f"{r:.1f}x")


MEASUREMENTS = ("floor", "assess", "anonymise_supp0", "anonymise_supp5", "mondrian")


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine runs: per (engine, size), each measurement comes from the latest run that has it and
    keeps that run's floor (``_floor``) for its ratio; the peak RSS is the largest of the runs."""
    merged: dict[str, Any] = {"sqlanon": {}, "peers": {}, "runs": []}
    for r in sorted(results, key=lambda r: r.get("started_utc", "")):
        merged["runs"].append(r)
        for engine, sizes in r.get("sqlanon", {}).items():
            for size, entry in sizes.items():
                slot = merged["sqlanon"].setdefault(engine, {})
                if "floor" not in entry:
                    slot.setdefault(size, dict(entry))
                    continue
                cur = slot.get(size) if "floor" in slot.get(size, {}) else {}
                out = {**cur, **{k: v for k, v in entry.items() if k not in MEASUREMENTS}}
                for key in MEASUREMENTS:
                    if key in entry:
                        out[key] = {
                            **entry[key],
                            "_floor": entry["floor"]["seconds"],
                            "_run": r["started_utc"],
                        }
                out["rss_peak_mb"] = max(cur.get("rss_peak_mb", 0), entry.get("rss_peak_mb", 0))
                slot[size] = out
        for size, peers in r.get("peers", {}).items():
            merged["peers"].setdefault(size, {}).update(peers)
        for size, arx in r.get("arx", {}).items():
            merged.setdefault("arx", {}).setdefault(size, {}).update(arx)
    return merged


def _duckdb_by_size(m: dict[str, Any]) -> dict[str, Any]:
    """The plain DuckDB run of each size, else a memory-limited one (``duckdb[memory_limit=...]``)."""
    duck: dict[str, Any] = {}
    for label in sorted(m["sqlanon"], key=lambda lb: lb != "duckdb"):
        if label.startswith("duckdb"):
            for size, entry in m["sqlanon"][label].items():
                duck.setdefault(size, entry)
    return duck


def targets_17(m: dict[str, Any]) -> list[str]:
    """Issue 17's targets: beside ARX (same rows, same run) no slower and no more nodes checked;
    at 1e7 rows on DuckDB the search at most 3x the floor without suppression and 6x with 5 %,
    publishing at most 1.5x, all within a DuckDB ``memory_limit`` (the run's engine label)."""
    out = ["Targets (issue 17):"]
    duck = _duckdb_by_size(m)
    for size in sorted(m.get("arx", {}), key=_size_key):
        for supp in ("supp0", "supp5"):
            x = m["arx"][size].get(supp, {})
            s = duck.get(size, {}).get(f"anonymise_{supp}", {})
            if x.get("status") != "ok" or "search_seconds" not in s:
                continue
            t_ok = s["search_seconds"] <= x["anonymize_s"]
            n_ok = s["nodes_checked"] <= x["checked_transformations"]
            ours, theirs = _fmt(s["search_seconds"]), _fmt(x["anonymize_s"])
            out.append(
                f"- {size} rows, {supp}: search {ours} s <= ARX {theirs} s: "
                f"{'met' if t_ok else 'MISSED'}; nodes {s['nodes_checked']} <= ARX "
                f"{x['checked_transformations']}: {'met' if n_ok else 'MISSED'}"
            )
    for label, sizes in sorted(m["sqlanon"].items()):
        e = sizes.get("1e7", {})
        if not label.startswith("duckdb") or "floor" not in e:
            continue
        fl = e["floor"]["seconds"]
        for supp, limit in (("supp0", 3.0), ("supp5", 6.0)):
            a = e.get(f"anonymise_{supp}", {})
            r = _ratio(a.get("search_seconds"), a.get("_floor", fl))
            verdict = _verdict(r, r is not None and r <= limit)
            out.append(f"- 1e7 rows ({label}), search {supp} <= {limit:g}x floor: {verdict}")
            r = _ratio(a.get("publish_seconds"), a.get("_floor", fl))
            verdict = _verdict(r, r is not None and r <= 1.5)
            out.append(f"- 1e7 rows ({label}), publish {supp} <= 1.5x floor: {verdict}")
        bounded = "memory_limit" in label and e.get("status") == "ok"
        out.append(
            f"- 1e7 rows ({label}) within a DuckDB memory_limit: {'met' if bounded else 'not measured'} "
            f"(peak RSS of the process {e.get('rss_peak_mb', 0):.0f} MB)"
        )
    if len(out) == 1:
        out.append("- not measured in these results (ARX beside sqlanon, or 1e7 rows on DuckDB)")
    return out


def arx_rows(m: dict[str, Any]) -> list[str]:
    """ARX's Flash beside sqlanon's complete search (DuckDB) on the same rows, same run: time and
    nodes checked at each suppression limit."""
    if not m.get("arx"):
        return []
    lines = [
        "| rows | ARX 0 % s | sqlanon 0 % s | ARX 5 % s | sqlanon 5 % s "
        "| nodes checked ARX / sqlanon 0 % | nodes checked ARX / sqlanon 5 % |",
        "| ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    duck = _duckdb_by_size(m)
    for size in sorted(m["arx"], key=_size_key):
        a, e = m["arx"][size], duck.get(size, {})
        cells = [size]
        checks = []
        for supp in ("supp0", "supp5"):
            x, s = a.get(supp, {}), e.get(f"anonymise_{supp}", {})
            cells.append(
                _fmt(x.get("anonymize_s"))
                if x.get("status") == "ok"
                else x.get("status", a.get("status", "–"))
            )
            cells.append(_fmt(s.get("search_seconds")))
            checks.append(f"{x.get('checked_transformations', '–')} / {s.get('nodes_checked', '–')}")
        lines.append("| " + " | ".join(str(c) for c in cells + checks) + " |")
    return lines


def profile_rows(m: dict[str, Any]) -> list[str]:
    """Where the time of anonymise goes, per engine, size and suppression limit."""

    # A node check is search/evaluate or, for class sizes only, search/evaluate_sets (or
    # search/evaluate_keys on DuckDB): all count.
    def _keys(key: str) -> list[str]:
        return [key, key + "_sets", key + "_keys"] if key.endswith("search/evaluate") else [key]

    def prof(a: dict[str, Any], key: str) -> float:
        return sum(float(a.get("profile", {}).get(k, {}).get("seconds", 0.0)) for k in _keys(key))

    def calls(a: dict[str, Any], key: str) -> int:
        return sum(int(a.get("profile", {}).get(k, {}).get("calls", 0)) for k in _keys(key))

    lines = [
        "| engine | rows | supp | base scan s | coded table s | lattice evaluation s (queries; of which SQL "
        "generation s) | choose s (queries) | publish: verify s | total s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for engine in _engines(m):
        for size in sorted(m["sqlanon"].get(engine, {}), key=_size_key):
            e = m["sqlanon"][engine][size]
            for supp in ("supp0", "supp5"):
                a = e.get(f"anonymise_{supp}")
                if not a or "phases" not in a:
                    continue
                ev = "run_search | query:search/evaluate"
                ch = "choose | query:search/evaluate"
                gen = _fmt(prof(a, "run_search | compile:search/evaluate"))
                lines.append(
                    f"| {engine} | {size} | {supp[4:]} % | {_fmt(prof(a, 'prepare | temp:freq/base'))} "
                    f"| {_fmt(prof(a, 'prepare | temp:search/coded'))} "
                    f"| {_fmt(prof(a, ev))} ({calls(a, ev)}; {gen}) "
                    f"| {_fmt(prof(a, ch))} ({calls(a, ch)}) | {_fmt(a['phases'].get('verify'))} "
                    f"| {_fmt(a.get('seconds'))} |"
                )
    return lines


def _engines(m: dict[str, Any]) -> list[str]:
    """duckdb, postgres, then any memory-limited DuckDB runs."""
    order = {"duckdb": 0, "postgres": 1, "spark": 2}
    return sorted(m["sqlanon"], key=lambda e: (order.get(e, 2), e))


def _size_key(s: str) -> float:
    return float(s)


def render(results: list[dict[str, Any]]) -> str:
    m = merge(results)
    lines = []
    lines.append(
        "| engine | rows | floor s | assess s (x floor) | search 0 % s (x floor) | search 5 % s (x floor) "
        "| publish 0 % s (x floor) | anonymise 0 % / 5 % s | nodes checked 0 % / 5 % | peak RSS MB "
        "| Python heap MB |"
    )
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for engine in _engines(m):
        for size in sorted(m["sqlanon"].get(engine, {}), key=_size_key):
            e = m["sqlanon"][engine][size]
            if "floor" not in e:
                lines.append(f"| {engine} | {size} | {e.get('status')} | | | | | | | | |")
                continue
            fl = e["floor"]["seconds"]
            a0, a5 = e.get("anonymise_supp0", {}), e.get("anonymise_supp5", {})
            cells = [engine, size, _fmt(fl)]
            a_s = e.get("assess", {}).get("seconds")
            cells.append(f"{_fmt(a_s)} ({_x(_ratio(a_s, e.get('assess', {}).get('_floor', fl)))})")
            for a in (a0, a5):
                s = a.get("search_seconds")
                cells.append(f"{_fmt(s)} ({_x(_ratio(s, a.get('_floor', fl)))})")
            p = a0.get("publish_seconds")
            cells.append(f"{_fmt(p)} ({_x(_ratio(p, a0.get('_floor', fl)))})")
            cells.append(f"{_fmt(a0.get('seconds'))} / {_fmt(a5.get('seconds'))}")
            cells.append(f"{a0.get('nodes_checked', '–')} / {a5.get('nodes_checked', '–')}")
            cells.append(f"{e.get('rss_peak_mb', 0):.0f}")
            heap = e.get("python_heap_peak_mb") or {}
            cells.append(f"{max(heap.values()):.0f}" if heap else "–")
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    lines.append("| engine | rows | Mondrian k=5 s (x floor) | partitions | rounds | NCP |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for engine in _engines(m):
        for size in sorted(m["sqlanon"].get(engine, {}), key=_size_key):
            e = m["sqlanon"][engine][size]
            mo = e.get("mondrian")
            if not mo or "floor" not in e:
                continue
            r = _ratio(mo.get("seconds"), mo.get("_floor", e["floor"]["seconds"]))
            lines.append(
                f"| {engine} | {size} | {_fmt(mo.get('seconds'))} ({_x(r)}) | {mo.get('partitions')} "
                f"| {mo.get('rounds')} | {_fmt(mo.get('ncp'), 4)} |"
            )
    lines.append("")
    lines.append(
        "| rows | pycanon k / l / t s | pycanon k+l+t / sqlanon assess | anjana k=5 0 % s "
        "| anjana / sqlanon anonymise 0 % | anjana k=5 5 % s | anjana / sqlanon anonymise 5 % |"
    )
    lines.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    duck = m["sqlanon"].get("duckdb", {})
    for size in sorted(m["peers"], key=_size_key):
        p = m["peers"][size]
        e = duck.get(size, {})

        def sec(name: str, p: dict = p) -> float | None:
            return p.get(name, {}).get("seconds") if p.get(name, {}).get("status") == "ok" else None

        def shown(name: str, p: dict = p) -> str:
            s = sec(name)
            return _fmt(s) if s is not None else p.get(name, {}).get("status", "–")

        klt = [sec(f"pycanon.{c}") for c in "klt"]
        total = sum(klt) if all(x is not None for x in klt) else None  # type: ignore[misc]
        assess_s = e.get("assess", {}).get("seconds")
        a0 = e.get("anonymise_supp0", {}).get("seconds")
        a5 = e.get("anonymise_supp5", {}).get("seconds")
        lines.append(
            f"| {size} | {' / '.join(shown(f'pycanon.{c}') for c in 'klt')} | {_x(_ratio(total, assess_s))} "
            f"| {shown('anjana.k5.supp0')} | {_x(_ratio(sec('anjana.k5.supp0'), a0))} "
            f"| {shown('anjana.k5.supp5')} | {_x(_ratio(sec('anjana.k5.supp5'), a5))} |"
        )
    lines.append("")
    if m.get("arx"):
        lines.extend(arx_rows(m))
        lines.append("")
    lines.extend(profile_rows(m))
    lines.append("")
    lines.extend(targets(m))
    lines.append("")
    lines.extend(targets_17(m))
    lines.append("")
    lines.extend(goal_lines(goals_33(m["sqlanon"])))
    return "\n".join(lines)


def _verdict(r: float | None, ok: bool) -> str:
    if r is None:
        return "not measured"
    return f"{'met' if ok else 'MISSED'} ({_x(r)})"


def targets(m: dict[str, Any]) -> list[str]:
    out = ["Targets (issue 5), DuckDB:"]
    duck = m["sqlanon"].get("duckdb", {})
    sizes = [s for s in sorted(duck, key=_size_key) if "floor" in duck[s]]
    if not sizes:
        return out + ["- no DuckDB measurements"]
    big = sizes[-1]
    e = duck[big]
    fl = e["floor"]["seconds"]
    for supp in ("supp0", "supp5"):
        a = e.get(f"anonymise_{supp}", {})
        r = _ratio(a.get("search_seconds"), a.get("_floor", fl))
        out.append(
            f"- optimal search ({supp}) at {big} rows <= {TARGET_SEARCH_X_FLOOR:g}x floor: "
            + _verdict(r, r is not None and r <= TARGET_SEARCH_X_FLOOR)
        )
    r = _ratio(e.get("assess", {}).get("seconds"), e.get("assess", {}).get("_floor", fl))
    out.append(
        f"- assess at {big} rows <= {TARGET_ASSESS_X_FLOOR:g}x floor: "
        + _verdict(r, r is not None and r <= TARGET_ASSESS_X_FLOOR)
    )
    rss = e.get("rss_peak_mb")
    out.append(
        f"- peak RSS at {big} rows < {TARGET_RSS_MB:g} MB: "
        + ("not measured" if rss is None else f"{'met' if rss < TARGET_RSS_MB else 'MISSED'} ({rss:.0f} MB)")
    )
    p = m["peers"].get("1e6")
    e6 = duck.get("1e6")
    if p and e6 and "assess" in e6:
        secs = [p.get(f"pycanon.{c}", {}).get("seconds") for c in "klt"]
        ok = all(p.get(f"pycanon.{c}", {}).get("status") == "ok" for c in "klt")
        r = _ratio(sum(secs), e6["assess"]["seconds"]) if ok else None  # type: ignore[arg-type]
        out.append(
            f"- at 1e6 rows, pycanon's k+l+t / sqlanon assess >= {TARGET_PEER_SPEEDUP:g}x: "
            + _verdict(r, r is not None and r >= TARGET_PEER_SPEEDUP)
        )
        for supp in ("supp0", "supp5"):
            a = p.get(f"anjana.k5.{supp}", {})
            r = _ratio(a.get("seconds"), e6.get(f"anonymise_{supp}", {}).get("seconds"))
            out.append(
                f"- at 1e6 rows, anjana k=5 ({supp}) / sqlanon anonymise >= {TARGET_PEER_SPEEDUP:g}x: "
                + _verdict(r, r is not None and r >= TARGET_PEER_SPEEDUP)
            )
    else:
        out.append("- peer targets at 1e6 rows: not measured in these results")
    return out
