"""From a table to a first policy: ``sqlanon init`` profiles the table in one SQL scan and writes a
commented starting policy; ``sqlanon hierarchy`` writes an ARX-format hierarchy file covering every
value of a column, its labels computed by the same SQL the release uses (issue 16).

The suggestions are heuristics for a person to review, as ARX's and sdcMicro's wizards are, made
as a careful analyst would (issue 34): quasi-identifiers are the demographics an outsider can know
(by name: age, sex, race, marital status, education, ZIP, birth date, region, occupation...); a
person's money and health are sensitive; measures, constant columns and columns of unknown meaning
are insensitive; HIPAA Safe Harbor identifiers (:mod:`sqlanon.hipaa`) are dropped, a ZIP code kept
to 3 digits and a date to its year; values unique to a row are identifiers. The file says why per
column, and the size of the lattice the search will span (kept under :data:`MAX_LATTICE`).
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

from sqlanon import hipaa
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


#: Words of a column name that say it is a demographic attribute an outsider can know (Sweeney's
#: ZIP, birth date and sex; the census's age, race, marital status, education, occupation...).
DEMOGRAPHIC = frozenset(
    "age agegroup sex gender race ethnicity ethnic marital maritl married marriage education educ edu "
    "degree schooling birth born yob region occupation occup job jobclass workclass profession employment "
    "nationality citizenship country native language state province".split()
)
#: Parts of a name (inside a word) that say the same: ``maritalstatus``, ``native_country``.
DEMOGRAPHIC_PARTS = ("marital", "maritl", "educat", "occupat", "ethnic", "gender", "national", "birth")
#: A person's money: what an analyst protects (sensitive), not what an outsider knows. Parts of a
#: word, so ``logwage`` and ``salary-class`` count (a log of a wage is as private as the wage).
MONEY_PARTS = ("wage", "salar", "income", "earning", "payroll", "compensation", "bonus", "wealth")
#: Other attributes to protect: health, beliefs, union membership (GDPR's special categories).
PRIVATE = frozenset(
    "health diagnosis diagnoses disease condition illness treatment medication drug hiv religion "
    "union disability pregnancy pregnant smoker icd".split()
)
#: Measures: neither known from outside nor singled out by themselves (insensitive, to review).
MEASURE = frozenset(
    "price cost amount score total balance revenue sales spend spending fee fees charge charges "
    "expense expenses value rate ratio sum mean avg count".split()
)
#: Above this many lattice nodes the least useful text QIs are left out (Flash stays quick and a
#: release keeps detail; issue 34: an 80,000-node start on CPS1985 blanked every number).
MAX_LATTICE = 5000
#: The end of the note on a column of unknown meaning (a fallback QI when no demographic is found).
UNKNOWN = ", not a known demographic: mark it quasi if an outsider can know it"


def _plural(n: int, word: str, many: str | None = None) -> str:
    """``1 category``, ``3 categories``.

    >>> _plural(1, "category", "categories"), _plural(3, "category", "categories")
    ('1 category', '3 categories')
    """
    return f"{n} {word if n == 1 else many or word + 's'}"


def _kind_of_name(name: str) -> str | None:
    """``money``, ``private``, ``demographic``, ``measure`` or None, from the name's words."""
    ws = hipaa.words(name)
    if any(part in w for w in ws for part in MONEY_PARTS):
        return "money"
    if PRIVATE & set(ws):
        return "private"
    if DEMOGRAPHIC & set(ws) or any(part in w for w in ws for part in DEMOGRAPHIC_PARTS):
        return "demographic"
    if MEASURE & set(ws) or any(w.startswith("log") and len(w) > 3 for w in ws):
        return "measure"
    return None


def _continuous(p: ColumnProfile) -> bool:
    """A number with decimals and many distinct values: a measurement, not a category."""
    c = p.column
    decimals = not c.integral or "." in (p.lo or "") or "." in (p.hi or "")
    return c.numeric and decimals and p.distinct > CATEGORICAL_MAX // 5


def _qi_hierarchy(p: ColumnProfile) -> tuple[dict[str, Any] | None, str]:
    """The starting hierarchy of a quasi-identifier, by its type, and why."""
    c = p.column
    if c.temporal:
        return {"date": ["year"]}, "a date: kept to the year (HIPAA Safe Harbor keeps years only)"
    if c.numeric and p.lo is not None and p.hi is not None:
        lo, hi = float(p.lo), float(p.hi)
        w: float = nice_width(lo, hi)
        if c.integral:
            w = max(1, int(w))  # whole numbers: whole bands
        start = math.floor(lo / w) * w
        start = int(start) if float(start).is_integer() else start
        widths = [x for x in (w, w * 2, w * 4) if _splits(x, start, lo, hi, c.integral)]
        if widths:
            bands = ", ".join(map(str, widths))
            return {
                "interval": {"widths": widths, "start": start}
            }, f"numbers from {p.lo} to {p.hi}: bands of {bands}"
        values = _plural(p.distinct, "value")
        return None, f"{values} from {p.lo} to {p.hi}: the value or '*' (no band groups them)"
    if p.lo is not None and p.lo == p.hi and p.distinct > CATEGORICAL_MAX:
        length = int(p.lo)
        return {"mask": "right", "levels": max(1, length - 1)}, f"a code of {length} characters: masked"
    cats = _plural(p.distinct, "category", "categories")
    return None, f"{cats}: the value or '*' (write a map to group them)"


def _splits(width: float, start: float, lo: float, hi: float, integral: bool) -> bool:
    """Whether bands of ``width`` from ``start`` are a level of their own: more than one band over
    [lo, hi] (one band is '*' again) and, for whole numbers, wider than 1 (a band of 1 holds one
    value). A 0/1 column got bands of 1, 2 and 4: five levels for two values (issue 34).

    >>> _splits(1, 0, 0, 1, True), _splits(2, 0, 0, 1, True), _splits(10, 10, 18, 80, True)
    (False, False, True)
    """
    if integral and width <= 1:
        return False
    return math.floor((hi - start) / width) > math.floor((lo - start) / width)


def _zip_hierarchy(p: ColumnProfile) -> tuple[dict[str, Any], str]:
    """A ZIP code's hierarchy, with the level that keeps 3 digits (Safe Harbor's most)."""
    if p.column.numeric:
        return (
            {"interval": {"widths": [100, 1000, 10000], "start": 0}},
            "level 1 (bands of 100) is the 3-digit area; publish at level 1 or above",
        )
    length = int(p.hi or 5)
    levels = max(1, length - 1)
    return (
        {"mask": "right", "levels": levels},
        f"a code of up to {length} characters, masked; level {max(1, length - 3)} keeps 3 digits: "
        "publish there or above",
    )


def suggest(
    p: ColumnProfile, rows: int, found: hipaa.Match | None = None
) -> tuple[str, dict[str, Any] | None, str]:
    """(role, hierarchy or None, why) for one column, as a careful analyst would guess it: QIs are
    what an outsider can know (demographics, by name), a person's money and health are sensitive,
    measures and columns of unknown meaning are insensitive, identifiers are removed (HIPAA Safe
    Harbor's kinds ``found`` by :mod:`sqlanon.hipaa`, or values unique to a row)."""
    c = p.column
    if p.non_null == 0:
        return "insensitive", None, "all NULL: it carries nothing"
    if rows > 1 and p.distinct == 1 and p.non_null == rows:
        return "insensitive", None, "one value in every row: it carries nothing, so it is published as is"
    if found is not None and found.treatment == hipaa.DROP:
        return "identifier", None, f"{found.label}, by {found.detail}: {found.advice}"
    if found is not None and found.treatment == hipaa.ZIP3:
        h, why = _zip_hierarchy(p)
        return "quasi", h, f"{found.label} (ZIP code), by {found.detail}: {why}"
    if found is not None and found.treatment == hipaa.YEAR and c.temporal:
        return "quasi", {"date": ["year"]}, f"{found.label}, by {found.detail}: {found.advice}"
    named = _kind_of_name(c.name)
    age90 = f"; {found.label}: {found.advice}" if found is not None and found.treatment == hipaa.AGE90 else ""
    if named == "money":
        return "sensitive", None, "a person's money (by its name): protect it; an outsider rarely knows it"
    if named == "private":
        return "sensitive", None, "health, beliefs or membership (by its name): protect it"
    if named == "demographic":
        h, why = _qi_hierarchy(p)
        return "quasi", h, f"a demographic attribute (by its name), which an outsider can know; {why}{age90}"
    unique_share = p.distinct / p.non_null
    if rows > 1 and unique_share >= NEAR_UNIQUE and not _continuous(p):
        return "identifier", None, f"{p.distinct} distinct values in {p.non_null} rows: it singles people out"
    if named == "measure" or _continuous(p):
        why = "by its name" if named == "measure" else f"continuous, {p.distinct} distinct values"
        return "insensitive", None, f"a measure ({why}): mark it sensitive if it is private"
    if c.numeric or c.temporal:
        what = f"numbers from {p.lo} to {p.hi}"
    elif p.distinct <= CATEGORICAL_MAX:
        what = _plural(p.distinct, "category", "categories")
    else:
        what = f"{p.distinct} distinct texts (free text is rarely a quasi-identifier)"
    return "insensitive", None, f"{what}{UNKNOWN}"


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


def _height(p: ColumnProfile, hierarchy: dict[str, Any] | None) -> int:
    """Levels of the column's hierarchy (raw value to '*'), as the search will build it."""
    c = p.column
    h = build_hierarchy(
        c.name, hierarchy, numeric=c.numeric, base_dir=Path("."), temporal=c.temporal, type_name=c.type
    )
    return h.height + 1


def _guess(be: Backend, rel: Relation, rows: int, profiles: list[ColumnProfile]) -> list[tuple[Any, ...]]:
    """(profile, role, hierarchy, why) per column; text QIs with the most categories are left out
    while the lattice would exceed :data:`MAX_LATTICE` nodes."""
    maxima = {p.column.name: _number(p.hi) for p in profiles if p.column.numeric}
    found = hipaa.detect(be, rel, [p.column for p in profiles], maxima)
    out = [[p, *suggest(p, rows, found.get(p.column.name))] for p in profiles]
    if not any(g[1] == "quasi" for g in out):
        _fallback(out)
    levels = {i: _height(g[0], g[2]) for i, g in enumerate(out) if g[1] == "quasi"}
    nodes = math.prod(levels.values())
    optional = sorted(
        (i for i in levels if out[i][2] is None and out[i][0].column.name not in found),
        key=lambda i: -out[i][0].distinct,
    )
    for i in optional:
        if nodes <= MAX_LATTICE:
            break
        nodes //= levels.pop(i)
        out[i][1:] = [
            "insensitive",
            None,
            f"{out[i][3]}; left out to keep the lattice under {MAX_LATTICE:,} nodes",
        ]
    return [tuple(g) for g in out]


def _fallback(out: list[list[Any]]) -> None:
    """No demographic found, yet a policy needs a quasi-identifier to measure anything: the columns
    of unknown meaning become QIs (their values could be known), else the insensitive ones."""
    unknown = [g for g in out if g[1] == "insensitive" and g[3].endswith(UNKNOWN)]
    for g in unknown or [g for g in out if g[1] == "insensitive"][:1]:
        h, why = _qi_hierarchy(g[0])
        g[1:] = [
            "quasi",
            h,
            f"{why}; no demographic column was found, so taken as a quasi-identifier: review",
        ]


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def init_policy(be: Backend, rel: Relation, k: int = 5) -> str:
    """A commented starting policy (YAML text) for ``rel``: a comment per column says why its role
    was guessed, and the header gives the size of the lattice the search will span."""
    rows, profiles = profile_table(be, rel)
    if rows == 0:
        raise SqlanonError(f"--table: relation {str(rel)!r} is empty; nothing to profile")
    guesses = _guess(be, rel, rows, profiles)
    qis = [(p.column.name, _height(p, h)) for p, role, h, _ in guesses if role == "quasi"]
    nodes = math.prod(n for _, n in qis)
    shape = " x ".join(f"{_comment(name)} {n}" for name, n in qis) or "no quasi-identifier"
    lines = [
        f"# Starting policy for {_comment(str(rel))}, written by `sqlanon init` from a profile of its "
        f"{_plural(rows, 'row')}.",
        "# Review every role: sqlanon guessed from names and data. Quasi-identifiers are what an outsider",
        "# can know (demographics); a person's money and health are sensitive; measures and columns of",
        "# unknown meaning are insensitive; HIPAA Safe Harbor identifiers are dropped. Undeclared columns",
        "# are not published.",
        f"# The search spans {_plural(nodes, 'node')} ({shape} levels).",
        f"source: {_source(rel)}",
        f"target: {_source(rel.with_name(rel.name + '_anon'))}",
        "columns:",
    ]
    for p, role, hierarchy, why in guesses:
        spec: dict[str, Any] = {"role": role}
        if role == "identifier":
            spec["action"] = "drop"
        if hierarchy is not None:
            spec["hierarchy"] = hierarchy
        nulls = f"; {rows - p.non_null} NULL" if p.non_null < rows else ""
        note = _comment(f"{p.column.type}: {why}{nulls}")
        lines.append(f"  {_yaml_value(p.column.name)}: {_yaml_value(spec)}  # {note}")
    starred = [p.column.name for p, role, h, _ in guesses if role == "quasi" and h is None]
    return "\n".join(lines + _privacy_and_search(k, rows, starred))


#: Where the figures quoted in the policy ``init`` writes come from.
STUDY = 'docs/defaults.md, "Which defaults keep utility"'


def _privacy_and_search(k: int, rows: int, starred: list[str]) -> list[str]:
    """The policy's privacy and search keys, each default with the reason for it, from the defaults
    study of issue 34 (:data:`STUDY`: six public person-level tables, ``init``'s own policies).

    Suppression stays 0 and is only suggested: it removes whole records, those of the rarest
    combinations of QIs (often the people of small groups), so it is the user's call, shown with
    what it cost there and what it may remove here. Flash can only keep a QI whose hierarchy is
    just '*' (``starred``) or blank it whole; Mondrian keeps a value set per group instead, so it
    is named for those columns."""
    most = math.floor(0.05 * rows)
    out = [
        "privacy:",
        f"  k: {k}                 # every record shares its quasi-identifiers with at least k-1 others",
        "  # No record is removed unless you allow it: suppression drops the records of the rarest",
        "  # combinations (often people of small groups), which biases what the release counts.",
        f"  # Allowing 0.05 (here at most {most:,} of {_plural(rows, 'row')}) lets Flash generalise less:",
        "  # on six public tables it blanked fewer QIs on 5 of 6 (none left blank on 3) and NCP fell from",
        f"  # 0.25-0.70 to 0.003-0.49, removing 0.3-4.3 % of the rows ({STUDY}).",
        "  suppression: 0.0     # share of records that may be removed instead of generalising more",
        "search:",
        "  # flash: one generalisation level per QI for every row (global recoding), as ARX searches.",
        "  # ncp: the share of each QI's range or categories a record loses (Xu et al. 2006); in the same",
        "  # study never worse than precision, and the closest to ARX's default quality model (Loss).",
    ]
    if starred:
        names = _comment(", ".join(starred))
        out += [
            f"  # {names}: no hierarchy but '*', so Flash can only keep or blank each one whole (write a map",
            "  # to group the categories). Or change flash to mondrian, which publishes ranges and value",
            "  # sets per group of at least k records: it blanked no QI on the six tables, NCP 0.00-0.19.",
        ]
    return out + ["  algorithm: flash", "  metric: ncp", ""]


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
