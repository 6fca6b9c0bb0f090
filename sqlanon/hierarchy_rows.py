"""Reading a hierarchy's rows from a policy: an ARX file (``value;level1;...``) or the labels a map
gives, checked the same way wherever a hierarchy is read.

Two layers read hierarchies: :mod:`sqlanon.transform.build` (a quasi-identifier's, which it
generalises) and :mod:`sqlanon.measure.tcloseness_hier` (a sensitive attribute's, whose tree gives
t-closeness its ground distance). Import-linter's layers put measure below transform, so the
parsing both need lives here, beside neither: the bounded, strictly UTF-8 file read, the label
checks, a file's ``NULL`` row and the check that every level is a function of the level below.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sqlanon.errors import PolicyError

#: The top level's label: full suppression.
STAR = "*"
#: The value cell of an ARX hierarchy row that covers SQL NULL: ARX's own ``DataType.NULL_VALUE``.
ARX_NULL = "NULL"
#: Refuse hierarchy files larger than this, or with more rows (one SQL CASE branch per row).
MAX_HIERARCHY_BYTES = 200 * 1024 * 1024
MAX_HIERARCHY_ROWS = 1_000_000
#: Most levels above the value any hierarchy may have. Every level is a column of the coded table
#: and a step of the lattice, so 100,000 declared levels ran for minutes before anything was said.
MAX_HEIGHT = 64


def check_height(key: str, height: int) -> None:
    """Refuse a hierarchy with more than :data:`MAX_HEIGHT` levels above the value, before any
    work proportional to its levels."""
    if height > MAX_HEIGHT:
        raise PolicyError(
            f"policy key {key!r}: {height:,} levels above the value, more than the {MAX_HEIGHT} "
            "a hierarchy may have"
        )


def read_arx(path: Path, key: str) -> list[list[str]]:
    """Rows of an ARX hierarchy file (``value;level1;...;*``), bounded and strictly UTF-8.

    The read itself is bounded, not only the size ``stat`` reports: ``/dev/zero`` (or a file that
    grows) reports a small size and, having no newline, would be read as one endless line."""
    shown = f"policy key {key!r}: {str(path)!r}"
    too_big = f"more than the {MAX_HIERARCHY_BYTES:,} bytes a hierarchy file may have"
    try:
        size = path.stat().st_size
        if size > MAX_HIERARCHY_BYTES:
            raise PolicyError(f"{shown} is {size:,} bytes, {too_big}")
        with path.open("rb") as f:
            raw = f.read(MAX_HIERARCHY_BYTES + 1)
        if len(raw) > MAX_HIERARCHY_BYTES:
            raise PolicyError(f"{shown} is {too_big}")
        # newline="" as csv asks: \r, \n and \r\n end a row, and quoted fields keep theirs.
        text = io.StringIO(raw.decode("utf-8-sig"), newline="")
        del raw
        rows = []
        for r in csv.reader(text, delimiter=";"):
            if r and any(r):
                rows.append([c.strip() for c in r])
                if len(rows) > MAX_HIERARCHY_ROWS:
                    raise PolicyError(f"{shown} has more than {MAX_HIERARCHY_ROWS:,} rows")
    except OSError as e:
        raise PolicyError(f"policy key {key!r}: cannot read {str(path)!r}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise PolicyError(f"{shown} is not UTF-8 text (byte {e.start})") from None
    except csv.Error as e:
        raise PolicyError(f"{shown} is not a ';'-separated text file ({e})") from None
    if not rows:
        raise PolicyError(f"policy key {key!r}: {str(path)!r} is empty")
    return rows


def label_text(v: Any, key: str, what: str) -> str:
    """A label as text: refuse null (it would be published as the text 'None') and NUL bytes."""
    if v is None:
        raise PolicyError(f"policy key {key!r}: {what} is null; a label must be text")
    if isinstance(v, dict | list):
        raise PolicyError(f"policy key {key!r}: {what} must be text, got a {type(v).__name__}")
    text = str(v)
    if "\x00" in text:
        raise PolicyError(f"policy key {key!r}: {what} contains a NUL byte")
    return text


def map_rows(m: Any, key: str) -> list[list[Any]]:
    """``map: {value: [level1, ...]}`` as rows ``[value, level1, ...]`` (a single label may stand
    for its list); values and labels as written: each reader checks them for its column."""
    if not isinstance(m, dict) or not m:
        raise PolicyError(f"policy key '{key}': expected a mapping value -> [level1, ...]")
    return [[v, *(labels if isinstance(labels, list) else [labels])] for v, labels in m.items()]


def file_null_row(rows: Sequence[Sequence[Any]], null_row: list[Any] | None, key: str) -> list[Any] | None:
    """The labels of NULL: a file's ``NULL`` row (ARX reads that text as a missing value), else
    ``null_row`` (the policy's ``null:``); both at once is refused."""
    nulls = [r for r in rows if r and r[0] == ARX_NULL]
    if nulls and null_row is not None:
        raise PolicyError(f"policy key {key!r}: NULL is covered twice, by the file's NULL row and null")
    return list(nulls[0][1:]) if nulls else null_row


def check_tree(labels: Iterable[Sequence[str]], width: int, key: str) -> None:
    """Refuse labels (levels 1..width-1 of each value) where a label generalises to two labels at
    the level above: generalising would not be monotone, and hierarchical t-closeness's closed
    form telescopes only over a tree (ARX builds its tree from the same (level, label) nodes)."""
    rows = list(labels)
    for lvl in range(1, width - 1):
        up: dict[str, str] = {}
        for r in rows:
            a, b = r[lvl - 1], r[lvl]
            if up.setdefault(a, b) != b:
                raise PolicyError(
                    f"policy key {key!r}: label {a!r} at level {lvl} generalises to both "
                    f"{up[a]!r} and {b!r} at level {lvl + 1}"
                )
