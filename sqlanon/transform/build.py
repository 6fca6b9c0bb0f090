"""Building a quasi-identifier's hierarchy from its policy mapping (``file``, ``map``, ``mask``,
``interval``, ``date``; see :mod:`sqlanon.transform.hierarchy` for the forms), validated so that a
mistake is one line naming the policy key before any query runs.

NULL is covered by a map's ``null: [level1, ...]`` or a file's ``NULL`` row (ARX's spelling);
without either, only the top level '*' covers it and the coverage check says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sqlanon.engines.base import INTEGRAL_TYPE
from sqlanon.errors import PolicyError
from sqlanon.hierarchy_rows import (
    ARX_NULL,
    STAR,
    check_height,
    check_tree,
    file_null_row,
    label_text,
    map_rows,
    read_arx,
)
from sqlanon.transform.hierarchy import (
    DATE_UNITS,
    MAX_MASK_LEVELS,
    DateHierarchy,
    Hierarchy,
    IntervalHierarchy,
    MappingHierarchy,
    MaskHierarchy,
    TopOnlyHierarchy,
)


def _mapping_from_rows(
    column: str,
    rows: list[list[Any]],
    key: str,
    numeric: bool,
    source: str,
    null_row: list[Any] | None = None,
    integral: bool = False,
) -> MappingHierarchy:
    """``null_row`` is the labels of NULL (``null:`` beside a map). In a file a row whose value is
    ``NULL`` covers NULL as in ARX, which reads that text as a missing value; in a text column it
    covers the text 'NULL' too, as ARX would (the two cannot be told apart in a file)."""
    if source != "map":
        null_row = file_null_row(rows, null_row, key)
        if numeric:  # a number column has no text 'NULL'
            rows = [r for r in rows if r[0] != ARX_NULL]
    width = len(rows[0]) if rows else len(null_row or []) + 1
    check_height(key, width - 1)
    for i, r in enumerate(rows):
        if len(r) != width:
            raise PolicyError(f"policy key {key!r}: row {i + 1} has {len(r)} levels, expected {width}")
    if null_row is not None and len(null_row) + 1 != width:
        raise PolicyError(f"policy key {key!r}: NULL has {len(null_row) + 1} levels, expected {width}")
    if width < 2:
        raise PolicyError(f"policy key {key!r}: a hierarchy needs at least the value and '*'")
    table: dict[Any, list[str]] = {}
    for r in rows:
        value: Any = r[0]
        if value is None:
            raise PolicyError(
                f"policy key {key!r}: a null value cannot be a key (a stray '~'?); cover NULL with "
                "'null: [label1, ...]' beside 'map' (docs/policy.md, Hierarchies)"
            )
        if isinstance(value, dict | list | bool):
            raise PolicyError(f"policy key {key!r}: value {value!r} must be a single text or number")
        if isinstance(value, str) and "\x00" in value:
            raise PolicyError(f"policy key {key!r}: value {value!r} contains a NUL byte")
        if numeric:
            try:
                value = float(value)
                value = int(value) if value.is_integer() else value
            except ValueError:
                raise PolicyError(
                    f"policy key {key!r}: value {r[0]!r} is not numeric but column {column!r} is"
                ) from None
        if value in table:
            raise PolicyError(f"policy key {key!r}: value {r[0]!r} is listed twice")
        table[value] = [
            label_text(x, key, f"the level-{i + 1} label of {r[0]!r}") for i, x in enumerate(r[1:])
        ]
    nulls = None
    if null_row is not None:
        nulls = [label_text(x, key, f"the level-{i + 1} label of NULL") for i, x in enumerate(null_row)]
    check_tree([*table.values(), *([nulls] if nulls else [])], width, key)
    return MappingHierarchy(
        column=column,
        levels=width,
        numeric=numeric,
        table=table,
        source=source,
        null_labels=nulls,
        integral=numeric and integral,
    )


def _null_labels(spec: dict, key: str) -> list[Any] | None:
    """The labels of NULL from ``null: [level1, ...]`` beside ``map`` or ``file`` ('*' appended)."""
    if "null" not in spec:
        return None
    labels = spec["null"]
    labels = labels if isinstance(labels, list) else [labels]
    if not labels:
        raise PolicyError(f"policy key '{key}.null': expected the labels of NULL, one per level")
    return labels if str(labels[-1]) == STAR else [*labels, STAR]


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def build_hierarchy(
    column: str,
    spec: dict | None,
    *,
    numeric: bool,
    base_dir: Path,
    temporal: bool | None = None,
    type_name: str | None = None,
) -> Hierarchy:
    """Build the hierarchy of one quasi-identifier from its policy mapping. ``temporal`` (known
    when a database is at hand) refuses a date hierarchy on a column that holds no dates."""
    key = f"columns.{column}.hierarchy"
    if not spec:
        return TopOnlyHierarchy(column=column, levels=2, numeric=numeric)
    forms = [k for k in ("file", "map", "mask", "interval", "date") if k in spec]
    if len(forms) != 1:
        raise PolicyError(f"policy key {key!r}: give exactly one of file, map, mask, interval, date")
    form = forms[0]
    allowed = {
        "file": {"file", "null"},
        "map": {"map", "null"},
        "mask": {"mask", "levels"},
        "interval": {"interval", "labels"},
        "date": {"date"},
    }[form]
    for k in spec:
        if k not in allowed:
            raise PolicyError(f"policy key '{key}.{k}': unknown for a {form} hierarchy")
    null_row = _null_labels(spec, key)
    # A column of an integer type (known only with a database at hand) holds whole numbers only.
    integral = bool(type_name and INTEGRAL_TYPE.match(type_name.strip()))
    if form == "file":
        path = (base_dir / str(spec["file"])).resolve()
        rows = read_arx(path, f"{key}.file")
        return _mapping_from_rows(
            column,
            rows,
            f"{key}.file",
            numeric,
            source=f"file {path.name}",
            null_row=null_row,
            integral=integral,
        )
    if form == "map":
        rows = [
            r if len(r) > 1 and str(r[-1]) == STAR else [*r, STAR]
            for r in map_rows(spec["map"], f"{key}.map")
        ]
        return _mapping_from_rows(
            column, rows, f"{key}.map", numeric, source="map", null_row=null_row, integral=integral
        )
    if form == "mask":
        if spec["mask"] != "right":
            raise PolicyError(f"policy key '{key}.mask': only 'right' is supported, got {spec['mask']!r}")
        n = spec.get("levels")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > MAX_MASK_LEVELS:
            raise PolicyError(
                f"policy key '{key}.levels': expected a whole number from 1 to {MAX_MASK_LEVELS}, got {n!r}"
            )
        return MaskHierarchy(column=column, levels=n + 1, numeric=numeric)
    if form == "interval":
        if not numeric:
            raise PolicyError(f"policy key '{key}.interval': column {column!r} is not numeric")
        iv = spec["interval"]
        if not isinstance(iv, dict):
            raise PolicyError(f"policy key '{key}.interval': expected a mapping with widths or cuts")
        if ("widths" in iv) == ("cuts" in iv):
            raise PolicyError(f"policy key '{key}.interval': give exactly one of widths, cuts")
        for k in iv:
            if k not in ("widths", "cuts", "start"):
                raise PolicyError(f"policy key '{key}.interval.{k}': unknown; allowed: widths, cuts, start")
        labels = spec.get("labels")
        if "widths" in iv:
            widths = iv["widths"]
            if not isinstance(widths, list) or not widths or not all(_finite(w) and w > 0 for w in widths):
                raise PolicyError(f"policy key '{key}.interval.widths': expected positive numbers")
            check_height(f"{key}.interval.widths", len(widths) + 1)
            for a, b in zip(widths, widths[1:], strict=False):
                if not math.isclose(b / a, round(b / a)) or b <= a:
                    raise PolicyError(
                        f"policy key '{key}.interval.widths': {b} is not a larger multiple of {a}; "
                        "levels must nest"
                    )
            start = iv.get("start", 0)
            if not _finite(start):
                raise PolicyError(f"policy key '{key}.interval.start': expected a number, got {start!r}")
            if labels:
                raise PolicyError(f"policy key '{key}.labels': labels apply to cuts only")
            return IntervalHierarchy(
                column=column,
                levels=len(widths) + 2,
                numeric=True,
                widths=[float(w) if not float(w).is_integer() else int(w) for w in widths],
                start=start,
            )
        cuts = iv["cuts"]
        if not isinstance(cuts, list) or not cuts:
            raise PolicyError(f"policy key '{key}.interval.cuts': expected a list of cut lists")
        if not any(isinstance(c, list) for c in cuts):
            cuts = [cuts]
        check_height(f"{key}.interval.cuts", len(cuts) + 1)
        prev: set | None = None
        for i, level_cuts in enumerate(cuts):
            if (
                not isinstance(level_cuts, list)
                or not level_cuts
                or not all(_finite(c) for c in level_cuts)
                or sorted(level_cuts) != level_cuts
                or len(set(level_cuts)) != len(level_cuts)
            ):
                raise PolicyError(
                    f"policy key '{key}.interval.cuts[{i}]': expected distinct numbers in ascending order, "
                    f"got {level_cuts!r}"
                )
            if prev is not None and not set(level_cuts) <= prev:
                raise PolicyError(
                    f"policy key '{key}.interval.cuts[{i}]': must be a subset of the level below; "
                    "levels must nest"
                )
            prev = set(level_cuts)
        if labels is not None:
            if isinstance(labels, list) and labels and not isinstance(labels[0], list):
                labels = [labels]
            if not isinstance(labels, list) or len(labels) != len(cuts):
                raise PolicyError(f"policy key '{key}.labels': expected one label list per cut level")
            for i, (lab, cut) in enumerate(zip(labels, cuts, strict=True)):
                if not isinstance(lab, list) or len(lab) != len(cut) + 1:
                    raise PolicyError(
                        f"policy key '{key}.labels[{i}]': {len(cut)} cuts need {len(cut) + 1} labels"
                    )
            labels = [
                [label_text(x, f"{key}.labels[{i}]", f"label {j + 1}") for j, x in enumerate(lab)]
                for i, lab in enumerate(labels)
            ]
        return IntervalHierarchy(column=column, levels=len(cuts) + 2, numeric=True, cuts=cuts, labels=labels)
    units = spec["date"]
    if temporal is False:
        raise PolicyError(
            f"policy key '{key}.date': column {column!r} is {type_name or 'not a date'}, not a date or "
            "timestamp; use an interval or map hierarchy"
        )
    if isinstance(units, str):
        units = [units]
    if not isinstance(units, list) or not units or any(u not in DATE_UNITS for u in units):
        raise PolicyError(f"policy key '{key}.date': expected units from {', '.join(DATE_UNITS)}")
    if [DATE_UNITS[u] for u in units] != sorted((DATE_UNITS[u] for u in units), reverse=True) or len(
        set(units)
    ) != len(units):
        raise PolicyError(f"policy key '{key}.date': units must go from fine to coarse, without repeats")
    return DateHierarchy(column=column, levels=len(units) + 2, numeric=False, units=units)
