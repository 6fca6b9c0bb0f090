"""One example label per quasi-identifier of a node, so people read ``Postcode=2 (476**)`` rather
than a bare level number (issue 16).

The labels come from what is already at hand, never from an extra query: a class of the release
the command measured anyway (its labels are the node's own), else the policy itself (a map's or
file's first row, an interval cut's first label, '*' at the top). Masks, interval widths and dates
have no label without a value, so their example is left out there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlanon.transform.hierarchy import STAR, Hierarchy, IntervalHierarchy, MappingHierarchy, cut_labels


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
    hierarchies: Sequence[Hierarchy], node: Mapping[str, int], seen: Mapping[str, Any] | None = None
) -> dict[str, str | None]:
    """{QI: an example label of its level in ``node``}: ``seen`` (one class of that node's release,
    QI -> label) first, then the policy's own labels."""
    by_name = {h.column: h for h in hierarchies}
    out: dict[str, str | None] = {}
    for q, level in node.items():
        label = (seen or {}).get(q)
        if label is None and q in by_name:
            label = example_label(by_name[q], int(level))
        out[q] = None if label is None else str(label)
    return out
