"""Example labels of a node, so people read ``Postcode=2 (476**)`` rather than a bare level
number (issue 16), taken from the release and nothing else (issue 32, finding 6).

An example must never show what the release hides: a class it suppressed, a level finer than
the chosen one, or a value (level 0). So every example comes from one class of the release
itself, after suppression: its largest class, ties broken by its labels (the same class on
every run and every engine; one unordered ``LIMIT 1`` row of the source gave a suppressed
outlier's ``9999*`` and changed between runs). Levels coarser than the chosen one are that
class's own labels at those levels (a coarser label covers a kept class, so it names no hidden
record); the top level is ``*``. ``templates/examples/labels.sql.j2`` reads that class, from a
published or session-temporary release, or from the release's own SQL (``publish/_release``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlanon.engines import Backend
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.builders import as_text
from sqlanon.sql.compile import Sql, ident
from sqlanon.transform.hierarchy import STAR, Hierarchy
from sqlanon.transform.release import release_context

#: {QI: {level: label}} of one class of a release (:func:`release_labels`).
Labels = Mapping[str, Mapping[int, str]]


def node_examples(
    hierarchies: Sequence[Hierarchy],
    node: Mapping[str, int],
    seen: Mapping[str, Any] | None = None,
    labels: Labels | None = None,
) -> dict[str, str | None]:
    """{QI: an example label of its level in ``node``}: ``*`` at the top; else the label of one
    class of that node's release, ``seen`` (QI -> label, a class a command measured anyway) or
    ``labels`` (:func:`release_labels`); never a value (level 0 gives None)."""
    heights = {h.column: h.height for h in hierarchies}
    out: dict[str, str | None] = {}
    for q, level in node.items():
        lvl = int(level)
        label: Any = None
        if lvl <= 0:
            label = None  # the value itself: never printed
        elif q in heights and lvl >= heights[q]:
            label = STAR
        else:
            label = (seen or {}).get(q)
            if label is None:
                label = (labels or {}).get(q, {}).get(lvl)
        out[q] = None if label is None else str(label)
    return out


def release_labels(
    be: Backend,
    policy: Policy,
    hierarchies: Sequence[Hierarchy],
    node: Mapping[str, int],
    *,
    release: Relation | None = None,
    coarser: bool = False,
) -> dict[str, dict[int, str]]:
    """{QI: {level: label}}: the labels of the release's largest class (ties: the smallest
    labels) at the chosen level of each QI and, with ``coarser``, at every level above it, ``*``
    at the top. Level 0 (a value) and perturbed QIs have none. ``release``: a relation holding
    the release (published, or session-temporary); without it the release's own SQL is read.
    The source is read only to label that kept class at coarser levels."""
    perturbed = {c.name for c in policy.perturbed}
    hs = [h for h in hierarchies if h.column in node and h.column not in perturbed]
    out: dict[str, dict[int, str]] = {h.column: {h.height: STAR} for h in hs}
    grouped = [h for h in hs if int(node[h.column]) < h.height]
    if not grouped:
        return out
    qis, wider = [], []
    for i, h in enumerate(grouped):
        lvl = int(node[h.column])
        col, src = ident(h.column), Sql(f"s.{ident(h.column)}")
        alias = ident(f"l_{i}")
        qis.append({"col": col, "alias": alias, "label": as_text(h.sql(lvl, src))})
        for up in range(lvl + 1, h.height) if coarser else ():
            wider.append((h.column, up, h.sql(up, src)))
    mask = policy.privacy.suppression_mode == "mask"
    ctx: dict[str, Any] = {}
    if release is None:
        names = [c.name for c in policy.quasi] + [c.name for c in policy.sensitive]
        levels = tuple(int(node.get(h.column, 0)) for h in hierarchies)
        ctx = release_context(policy, list(hierarchies), levels, names)
    rows = be.query(
        "examples/labels",
        **ctx,
        release=release,
        src=policy.source,
        qis=qis,
        masked=mask,
        wider=[{"expr": e, "alias": ident(f"c_{j}")} for j, (_, _, e) in enumerate(wider)],
    )
    if not rows:
        return out
    row = rows[0]
    for h, v in zip(grouped, row[: len(grouped)], strict=True):
        lvl = int(node[h.column])
        if lvl > 0 and v is not None:
            out[h.column][lvl] = str(v)
    for (q, up, _), v in zip(wider, row[len(grouped) :], strict=True):
        if v is not None:
            out[q][up] = str(v)
    return out
