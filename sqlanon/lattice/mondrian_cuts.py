"""One Mondrian round's cuts into the cut tree (:mod:`sqlanon.lattice.mondrian`).

A round's cuts come back one row per child (``templates/mondrian/cuts.sql.j2``: partition,
dimension, median, its text, number of children, the child's key, the child's id less the next
id), in id order, so a cut's children are consecutive rows and consecutive ids. At 1e7 rows that
is 694,000 rows in 26 rounds (328,191 cuts). On DuckDB, where NumPy is installed, they are read as
arrays (``fetchnumpy``) and the tree takes one step per cut, its first row found by comparing
neighbours: reading and adding the 1e7 rounds' cuts, paired round by round in one process,
0.62-0.64 s as Python tuples walked row by row against 0.37-0.39 s so (the whole Mondrian
7.46 -> 7.16 s, A/B medians). Elsewhere, or without NumPy (an optional package), the rows are
read as tuples, walked one by one.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql.compile import Hole

#: Labels of the children of a cut along a hierarchy: (dim, level, code) -> label (None: NULL).
Labels = dict[tuple[int, int, int], str | None]


@dataclass
class Cut:
    """A partition's cut: on an axis (two children, ``v <= med`` first) or along a hierarchy (one
    child per label of level ``int(med)``, ``labels`` in child order; None for NULL)."""

    dim: int
    med: float  # v of the median (value or rank), or the level of the children's labels
    med_text: str | None  # the median value as text (NULL: None)
    children: list[int]
    labels: list[str | None] | None = None

    @property
    def left(self) -> int:
        return self.children[0]

    @property
    def right(self) -> int:
        return self.children[-1]


@functools.cache
def _numpy() -> Any:
    """NumPy, or None where it is not installed (sqlanon does not require it)."""
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None


def read_cuts(
    be: Backend, found: Relation, cuts: dict[int, Cut], next_id: int, hier: list[bool], labels: Labels
) -> tuple[int, int]:
    """Add the round's cuts (the table ``found``) to ``cuts``, the children numbered from
    ``next_id``; ``hier``: whether each dimension is cut along its hierarchy. The partitions cut
    and their children."""
    np = _numpy()
    if np is None or be.dialect != "duckdb":
        rows = be.query("mondrian/cuts", cuts=Hole(found))
        return _add_rows(cuts, rows, next_id, hier, labels), len(rows)
    sql = be._sql("mondrian/cuts", "select", {"cuts": Hole(found)})
    be.log.append(sql)
    try:
        got = be._conn.connection.driver_connection.sql(sql).fetchnumpy()
    except Exception as e:  # noqa: BLE001 - any driver error becomes one line, as Backend.query's
        raise be._fail("query", "mondrian/cuts", e) from be._cause(e)
    return _add_arrays(np, cuts, got, next_id, hier, labels)


def _add_arrays(
    np: Any, cuts: dict[int, Cut], got: dict[str, Any], next_id: int, hier: list[bool], labels: Labels
) -> tuple[int, int]:
    """:func:`read_cuts` from the columns as arrays: one step per cut."""
    pid = got["pid"]
    n = len(pid)
    if not n:
        return 0, 0
    starts = np.flatnonzero(np.concatenate(([True], pid[1:] != pid[:-1])))
    lengths = np.diff(np.append(starts, n))
    want = got["nch"][starts]
    wrong = np.flatnonzero(lengths != want)
    if wrong.size:
        i = int(wrong[0])
        _missing(int(pid[starts[i]]), int(lengths[i]), int(want[i]))
    keys: list[int] | None = None
    firsts = (got["kid"][starts] + next_id).tolist()
    for i, p, dim, med, text, first, size in zip(
        starts.tolist(),
        pid[starts].tolist(),
        got["dim"][starts].tolist(),
        got["med"][starts].astype(float).tolist(),
        got["med_text"][starts].tolist(),
        firsts,
        lengths.tolist(),
        strict=True,
    ):
        cut = cuts[p] = Cut(dim, med, text, list(range(first, first + size)))
        if hier[dim]:
            keys = got["k"].tolist() if keys is None else keys
            cut.labels = [labels[(dim, int(med), k)] for k in keys[i : i + size]]
    return len(firsts), n


def _add_rows(cuts: dict[int, Cut], rows: list[tuple], next_id: int, hier: list[bool], labels: Labels) -> int:
    """:func:`read_cuts` from the rows as tuples: one pass with the current cut at hand (no
    lookup of the tree per child)."""
    cut: Cut | None = None
    last, want, count = -1, 0, 0
    for pid, dim, med, med_text, nch, key, kid in rows:
        if pid != last:
            if cut is not None and len(cut.children) != want:
                _missing(last, len(cut.children), want)
            last, want, count = pid, int(nch), count + 1
            cut = cuts[int(pid)] = Cut(int(dim), float(med), med_text, [])
            if hier[cut.dim]:
                cut.labels = []
        assert cut is not None
        cut.children.append(next_id + int(kid))
        if cut.labels is not None:
            cut.labels.append(labels[(cut.dim, int(med), int(key))])
    if cut is not None and len(cut.children) != want:
        _missing(last, len(cut.children), want)
    return count


def _missing(pid: int, got: int, want: int) -> None:
    raise SqlanonError(f"internal: mondrian cut {pid} has {got} of its {want} children")
