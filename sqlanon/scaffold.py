"""From a table to a first policy: ``sqlanon init`` profiles the table in one SQL scan and writes a
commented starting policy; ``sqlanon hierarchy`` writes an ARX-format hierarchy file covering every
value of a column, its labels computed by the same SQL the release uses (issue 16).

The suggestions are heuristics for a person to review, as ARX's and sdcMicro's wizards are: a column
whose values are (nearly) all distinct is a likely direct identifier; numbers get intervals sized
from their range, dates months and years, fixed-width codes masking from the right, short
categorical text no hierarchy (value or ``*``); everything else is left insensitive, and the
sensitive attributes are the user's call.
"""

from __future__ import annotations

import csv
import io
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sqlanon.engines import Backend, Column
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql.builders import as_text
from sqlanon.sql.compile import Sql, ident
from sqlanon.transform.build import ARX_NULL, build_hierarchy
from sqlanon.transform.hierarchy import STAR

#: A column whose distinct values are at least this share of its non-NULL values is unique enough
#: to single a person out by itself: a likely identifier.
NEAR_UNIQUE = 0.95
#: At most this many distinct values: a categorical quasi-identifier candidate.
CATEGORICAL_MAX = 100
#: Interval widths are chosen from these (times powers of ten), so that levels nest.
NICE = (1, 2, 5)


@dataclass(frozen=True)
class ColumnProfile:
    """One column's profile: distinct and non-NULL values, and its range (numbers, dates) or its
    shortest and longest text."""

    column: Column
    distinct: int
    non_null: int
    lo: str | None
    hi: str | None


def profile_table(be: Backend, rel: Relation) -> tuple[int, list[ColumnProfile]]:
    """Rows and per-column profile of ``rel`` (one scan; nothing but aggregates leaves the database)."""
    cols = be.require_columns(rel, "--table")
    ctx = []
    for i, c in enumerate(cols):
        col = ident(c.name)
        ranged = c.numeric or c.temporal
        ctx.append(
            {
                "col": col,
                "lo": as_text(f"MIN({col})") if ranged else Sql(f"MIN(LENGTH({as_text(col)}))"),
                "hi": as_text(f"MAX({col})") if ranged else Sql(f"MAX(LENGTH({as_text(col)}))"),
                "alias_d": ident(f"d_{i}"),
                "alias_nn": ident(f"nn_{i}"),
                "alias_lo": ident(f"lo_{i}"),
                "alias_hi": ident(f"hi_{i}"),
            }
        )
    row = be.query("scaffold/profile", source=rel, cols=ctx)[0]
    n = int(row[0] or 0)
    out = []
    for i, c in enumerate(cols):
        d, nn, lo, hi = row[1 + 4 * i : 5 + 4 * i]
        lo_s, hi_s = (None if v is None else str(v) for v in (lo, hi))
        out.append(ColumnProfile(c, int(d or 0), int(nn or 0), lo_s, hi_s))
    return n, out


def nice_width(lo: float, hi: float, bands: int = 10) -> float:
    """A round width (1, 2 or 5 times a power of ten) giving about ``bands`` intervals.

    >>> nice_width(17, 90), nice_width(0, 1)
    (10, 0.1)
    """
    raw = max((hi - lo) / bands, 1e-9)
    exp10 = 10 ** math.floor(math.log10(raw))
    for m in NICE + (10,):
        if m * exp10 >= raw:
            w = m * exp10
            return int(w) if float(w).is_integer() else round(w, 12)
    return raw  # pragma: no cover - the loop always returns


def suggest(p: ColumnProfile, rows: int) -> tuple[str, dict[str, Any] | None, str]:
    """(role, hierarchy or None, why) for one column."""
    c = p.column
    if p.non_null == 0:
        return "insensitive", None, "all NULL"
    unique_share = p.distinct / p.non_null
    if rows > 1 and unique_share >= NEAR_UNIQUE and not (c.numeric and "." in (p.lo or "")):
        return "identifier", None, f"{p.distinct} distinct values in {p.non_null} rows: it singles people out"
    if c.temporal:
        return "quasi", {"date": ["month", "year"]}, "a date: months, then years"
    if c.numeric and p.lo is not None and p.hi is not None:
        lo, hi = float(p.lo), float(p.hi)
        w: float = nice_width(lo, hi)
        if "INT" in c.type.upper():
            w = max(1, int(w))  # whole numbers: whole bands
        start = math.floor(lo / w) * w
        start = int(start) if float(start).is_integer() else start
        widths = [w, w * 2, w * 4]
        return (
            "quasi",
            {"interval": {"widths": widths, "start": start}},
            f"numbers from {p.lo} to {p.hi}: bands of {', '.join(map(str, widths))}",
        )
    if p.lo is not None and p.lo == p.hi and p.distinct > CATEGORICAL_MAX:
        length = int(p.lo)
        return (
            "quasi",
            {"mask": "right", "levels": max(1, length - 1)},
            f"a code of {length} characters: masked",
        )
    if p.distinct <= CATEGORICAL_MAX:
        return "quasi", None, f"{p.distinct} categories: the value or '*' (write a map to group them)"
    return (
        "insensitive",
        None,
        f"{p.distinct} distinct texts: review (free text is rarely a quasi-identifier)",
    )


def _yaml_value(v: Any) -> str:
    """Flow-style YAML of a value on one line, every string double-quoted by PyYAML's own emitter.

    The names come from the database, so they are hostile input: a line break in one must not end
    its line and add policy keys. PyYAML escapes every character it would read as a line break
    (``\\n``, ``\\r``, ``\\x85``, U+2028, U+2029) and every unprintable one in a double-quoted
    scalar; JSON would leave U+2028 raw. Numbers as PyYAML writes them (``1.0e-05``, which it reads
    back as a number, where JSON's ``1e-05`` is read as a string).

    >>> print(_yaml_value({"a\\nseed: 1": {"widths": [1e-05, 2]}}))
    {"a\\nseed: 1": {"widths": [1.0e-05, 2]}}
    """
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_yaml_value(str(k))}: {_yaml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    style = '"' if isinstance(v, str) else None
    text = yaml.safe_dump(v, default_style=style, allow_unicode=True, width=2**31 - 1)
    return text.removesuffix("\n...\n").removesuffix("\n")


#: Characters that end a line for YAML or for ``str.splitlines`` (controls, U+2028/9), those YAML
#: refuses in a stream (other controls, surrogates, non-characters), and invisible format
#: characters (a U+202E that reverses what the reader sees).
_UNSAFE_IN_COMMENT = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _comment(text: str) -> str:
    """``text`` as the body of one YAML comment: every unsafe character written as an escape, so a
    name cannot end the comment and add keys.

    >>> print(_comment("ENUM('y" + chr(10) + "seed: 1')" + chr(0x2028) + "key: 2"))
    ENUM('y\\x0aseed: 1')\\u2028key: 2
    """
    out = []
    for ch in text:
        if unicodedata.category(ch) in _UNSAFE_IN_COMMENT:
            code = ord(ch)
            out.append(
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
            )
        else:
            out.append(ch)
    return "".join(out)


def _source(rel: Relation) -> str:
    """The relation as the policy reads it back: its dotted text where that parses to the same
    parts, else the mapping form (a name holding a dot or a quote)."""
    try:
        if Relation.parse(str(rel)) == rel:
            return _yaml_value(str(rel))
    except SqlanonError:
        pass
    parts = {"catalog": rel.catalog, "schema": rel.schema, "name": rel.name}
    return _yaml_value({k: v for k, v in parts.items() if v is not None})


def init_policy(be: Backend, rel: Relation, k: int = 5) -> str:
    """A commented starting policy (YAML text) for ``rel``."""
    rows, profiles = profile_table(be, rel)
    if rows == 0:
        raise SqlanonError(f"--table: relation {str(rel)!r} is empty; nothing to profile")
    lines = [
        f"# Starting policy for {_comment(str(rel))}, written by `sqlanon init` from a profile of its "
        f"{rows} rows.",
        "# Review every role: sqlanon guessed from the data alone. Mark the attributes to protect",
        "# (diagnoses, salaries...) as `role: sensitive`; undeclared columns are not published.",
        f"source: {_source(rel)}",
        f"target: {_source(rel.with_name(rel.name + '_anon'))}",
        "columns:",
    ]
    for p in profiles:
        role, hierarchy, why = suggest(p, rows)
        spec: dict[str, Any] = {"role": role}
        if role == "identifier":
            spec["action"] = "drop"
        if hierarchy is not None:
            spec["hierarchy"] = hierarchy
        nulls = f"; {rows - p.non_null} NULL" if p.non_null < rows else ""
        note = _comment(f"{p.column.type}: {why}{nulls}")
        lines.append(f"  {_yaml_value(p.column.name)}: {_yaml_value(spec)}  # {note}")
    lines += [
        "privacy:",
        f"  k: {k}                 # every record shares its quasi-identifiers with at least k-1 others",
        "  suppression: 0.0     # share of records that may be removed instead of generalising more",
        "search: {algorithm: flash, metric: precision}",
        "",
    ]
    return "\n".join(lines)


def hierarchy_csv(be: Backend, rel: Relation, column: str, spec: dict[str, Any]) -> tuple[str, int]:
    """An ARX-format hierarchy (``value;level1;...;*``) covering every value of ``column``, and the
    count of NULL rows. NULL is the row ``NULL`` (ARX's spelling of a missing value, which the
    policy reads back as SQL NULL); a level whose SQL label of NULL is NULL (dates) is written '*'."""
    cols = {c.name: c for c in be.require_columns(rel, "--table")}
    if column not in cols:
        raise SqlanonError(f"--column: no column {column!r} in {str(rel)!r}")
    c = cols[column]
    h = build_hierarchy(
        column, spec, numeric=c.numeric, base_dir=Path("."), temporal=c.temporal, type_name=c.type
    )
    col = ident(column)
    exprs = [h.sql(level, col) for level in range(1, h.height)]
    aliases = [ident(f"l_{i}") for i in range(len(exprs))]
    rows = be.query("scaffold/levels", source=rel, col=col, exprs=exprs, aliases=aliases)
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=";", lineterminator="\n")
    seen: set[str] = set()
    for r in rows:
        value = ARX_NULL if r[0] is None else _text(r[0])
        if value in seen:  # the text 'NULL' already stands for NULL too (as in ARX)
            continue
        seen.add(value)
        writer.writerow([value, *(STAR if v is None else _text(v) for v in r[1:]), STAR])
    nulls = be.query("scaffold/nulls", source=rel, col=col)[0][0]
    return buf.getvalue(), int(nulls or 0)


def _text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
