"""One example label per quasi-identifier of a node, so people read ``Postcode=2 (476**)`` rather
than a bare level number (issue 16).

The labels come first from what is already at hand: a class of the release the command measured
anyway (its labels are the node's own), else the policy itself (a map's or file's first row, an
interval cut's first label, '*' at the top). Masks, interval widths and dates have no label
without a value: for them :func:`sample_labels` asks the database for the labels of one row (one
``LIMIT 1`` query per such quasi-identifier, ``templates/examples/labels.sql.j2``), never the
value itself (level 0 has no example).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlanon.engines import Backend
from sqlanon.relation import Relation
from sqlanon.sql.compile import ident
from sqlanon.transform.hierarchy import STAR, Hierarchy, IntervalHierarchy, MappingHierarchy, cut_labels

#: {QI: {level: label}} read from the data by :func:`sample_labels`.
Sampled = Mapping[str, Mapping[int, str]]


def example_label(h: Hierarchy, level: int) -> str | None:
    """A label of ``level`` known from the policy alone (None: none without the data)."""
    if level >= h.height:
        return STAR
    if level <= 0:
        return None
    if isinstance(h, MappingHierarchy):
        first = next(iter(h.table.values()), None) or h.null_labels
        return first[level - 1] if first else None
    if isinstance(h, IntervalHierarchy) and h.cuts is not None:
        names = h.labels[level - 1] if h.labels else cut_labels(h.cuts[level - 1])
        return names[0]
    return None


def node_examples(
    hierarchies: Sequence[Hierarchy],
    node: Mapping[str, int],
    seen: Mapping[str, Any] | None = None,
    sampled: Sampled | None = None,
) -> dict[str, str | None]:
    """{QI: an example label of its level in ``node``}: ``seen`` (one class of that node's release,
    QI -> label) first, then the policy's own labels, then those ``sampled`` from the data."""
    by_name = {h.column: h for h in hierarchies}
    out: dict[str, str | None] = {}
    for q, level in node.items():
        label = (seen or {}).get(q)
        if label is None and q in by_name:
            label = example_label(by_name[q], int(level))
        if label is None:
            label = (sampled or {}).get(q, {}).get(int(level))
        out[q] = None if label is None else str(label)
    return out


def unlabelled(
    hierarchies: Sequence[Hierarchy],
    nodes: Iterable[Mapping[str, int] | None],
    seen: Mapping[str, Any] | None = None,
) -> dict[str, set[int]]:
    """{QI: levels} of ``nodes`` that neither ``seen`` nor the policy labels (and that have a
    label to sample: above the value, below '*')."""
    by_name = {h.column: h for h in hierarchies}
    out: dict[str, set[int]] = {}
    for node in nodes:
        for q, level in (node or {}).items():
            h = by_name.get(q)
            if h is None or (seen or {}).get(q) is not None or example_label(h, int(level)) is not None:
                continue
            if 0 < int(level) < h.height:
                out.setdefault(q, set()).add(int(level))
    return out


def sample_labels(
    be: Backend, source: Relation, hierarchies: Sequence[Hierarchy], wanted: Mapping[str, Iterable[int]]
) -> dict[str, dict[int, str]]:
    """{QI: {level: label}}: the ``wanted`` levels' labels of one row of ``source`` whose value is
    not NULL (one ``LIMIT 1`` query per quasi-identifier; none found: left out)."""
    by_name = {h.column: h for h in hierarchies}
    out: dict[str, dict[int, str]] = {}
    for q, levels in wanted.items():
        h = by_name.get(q)
        if h is None:
            continue
        wanted_levels = sorted({lvl for lvl in levels if 0 < lvl < h.height})
        if not wanted_levels:
            continue
        col = ident(q)
        rows = be.query(
            "examples/labels",
            source=source,
            col=col,
            exprs=[h.sql(lvl, col) for lvl in wanted_levels],
            aliases=[ident(f"l_{i}") for i in range(len(wanted_levels))],
        )
        if rows:
            got = {lvl: str(v) for lvl, v in zip(wanted_levels, rows[0], strict=True) if v is not None}
            if got:
                out[q] = got
    return out
