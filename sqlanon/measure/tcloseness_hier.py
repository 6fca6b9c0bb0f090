"""t-closeness with hierarchical ground distance (Li, Li, Venkatasubramanian, ICDE 2007, section
4.2; ARX 3.9.2's ``HierarchicalDistanceTCloseness``): the labels of a sensitive attribute's own
hierarchy, as SQL, for ``templates/_macros/sensitive.sql.j2`` (macros ``hier_map`` and
``sensitive_stats(..., hier=True)``, where the per-class figure ``emd_hier`` is computed).

The hierarchy is the sensitive column's ``columns.<attr>.hierarchy``, in the two forms a
categorical hierarchy takes (``map`` and an ARX ``file``, as for a quasi-identifier). It is read
here rather than by :mod:`sqlanon.transform.build` because the measure layer (assess) sits below
transform (import-linter's layers); the parsing both share (the file read, the labels' checks, a
file's NULL row, the tree check) is :mod:`sqlanon.hierarchy_rows`'s. Values are compared as text,
as for a text quasi-identifier's map; NULL is covered by ``null: [...]`` or a file's ``NULL`` row.
Every level must be a function of the level below (a tree): the closed form in the macro telescopes
only over a tree, and ARX builds its tree from the same (level, label) nodes.

With one level above the values (H = 1: the values and '*') every two values are 1 apart and
emd_hier equals emd_equal; the macro's comment derives the general closed form. A value the
hierarchy does not list is refused before any figure (:func:`check_covered`), as ARX refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlglot import exp

from sqlanon.errors import PolicyError, SqlanonError
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
from sqlanon.policy import Policy
from sqlanon.sql.compile import CANONICAL, Sql, ident


@dataclass(frozen=True)
class SensitiveHierarchy:
    """value (as text) -> its labels at levels 1..H (the last is '*'); NULL's labels or None."""

    column: str
    table: dict[str, tuple[str, ...]]
    null_labels: tuple[str, ...] | None

    @property
    def height(self) -> int:
        return len(next(iter(self.table.values()), self.null_labels or (STAR,)))

    def label(self, level: int, x: Sql) -> Sql:
        """The level-``level`` label (1 <= level < height) of the value ``x``, NULL where the
        hierarchy does not cover it (:func:`check_covered` refuses those first).

        >>> h = SensitiveHierarchy("s", {"a": ("A", "*"), "b": ("A", "*")}, None)
        >>> h.label(1, Sql('"s"'))
        'CASE CAST("s" AS TEXT) WHEN \\'a\\' THEN \\'A\\' WHEN \\'b\\' THEN \\'A\\' END'
        """
        col = exp.maybe_parse(x, dialect=CANONICAL)
        case = exp.Case(
            this=exp.cast(col.copy(), exp.DataType.build("text")),
            ifs=[
                exp.If(this=exp.Literal.string(v), true=exp.Literal.string(labels[level - 1]))
                for v, labels in self.table.items()
            ],
        )
        if self.null_labels is not None:
            is_null = exp.Is(this=col.copy(), expression=exp.Null())
            null = exp.Literal.string(self.null_labels[level - 1])
            case = exp.Case(ifs=[exp.If(this=is_null, true=null)], default=case)
        return Sql(case.sql(CANONICAL))

    def levels(self, x: Sql) -> list[Sql]:
        """The label expressions of levels 1..H-1 (the macro ``hier_map``'s ``levels``)."""
        return [self.label(lvl, x) for lvl in range(1, self.height)]

    def uncovered(self, x: Sql) -> Sql:
        """A predicate true for a value the hierarchy does not list."""
        col = exp.maybe_parse(x, dialect=CANONICAL)
        listed = exp.In(
            this=exp.cast(col.copy(), exp.DataType.build("text")),
            expressions=[exp.Literal.string(v) for v in self.table] or [exp.Null()],
        )
        pred: exp.Expression = exp.Not(this=exp.Paren(this=listed))
        if self.null_labels is None:
            pred = exp.or_(exp.Is(this=col.copy(), expression=exp.Null()), pred)
        else:
            pred = exp.and_(exp.Not(this=exp.Is(this=col.copy(), expression=exp.Null())), pred)
        return Sql(pred.sql(CANONICAL))


def _rows(spec: dict, key: str, base_dir: Path) -> tuple[list[list[str]], list[str] | None]:
    forms = [k for k in ("file", "map") if k in spec]
    extra = [k for k in spec if k not in ("file", "map", "null")]
    if len(forms) != 1 or extra:
        raise PolicyError(f"policy key {key!r}: a sensitive attribute's hierarchy is a map or a file")
    null = spec.get("null")
    nulls = null if isinstance(null, list) else [null]
    null_row = None if null is None else [label_text(x, f"{key}.null", "a label of NULL") for x in nulls]
    if forms[0] == "file":
        rows = read_arx((base_dir / str(spec["file"])).resolve(), f"{key}.file")
        null_row = file_null_row(rows, null_row, key)
        return [r for r in rows if r[0] != ARX_NULL], null_row
    rows = []
    for v, *labels in map_rows(spec["map"], f"{key}.map"):
        if v is None:
            raise PolicyError(f"policy key '{key}.map': a null value cannot be a key; cover NULL with 'null'")
        value = label_text(v, f"{key}.map", f"value {v!r}")
        rows.append([value, *[label_text(x, f"{key}.map.{v}", f"a label of {v!r}") for x in labels]])
    return rows, null_row


def _build(column: str, spec: dict, base_dir: Path) -> SensitiveHierarchy:
    key = f"columns.{column}.hierarchy"
    rows, null_row = _rows(spec, key, base_dir)
    # One label above every value at the top level is the root, whatever its name: ARX's tree has
    # the height of the hierarchy's columns - 1 (DataManager.getTree), as the paper's. Only a
    # hierarchy without one root gets '*' above its top (an added '*' over a root of its own would
    # add a level and shrink every distance by H / (H + 1)).
    tops = {r[-1] for r in rows} | ({null_row[-1]} if null_row else set())
    rooted = len(tops) == 1 and all(len(r) > 1 for r in rows) and (null_row is None or len(null_row) > 0)
    star = rows if rooted else [r if r[-1] == STAR else [*r, STAR] for r in rows]
    null = (
        None
        if null_row is None
        else tuple(null_row if rooted or null_row[-1:] == [STAR] else [*null_row, STAR])
    )
    width = len(star[0]) if star else len(null or ()) + 1
    check_height(key, width - 1)
    table: dict[str, tuple[str, ...]] = {}
    for r in star:
        if len(r) != width:
            raise PolicyError(f"policy key {key!r}: value {r[0]!r} has {len(r)} levels, expected {width}")
        if r[0] in table:
            raise PolicyError(f"policy key {key!r}: value {r[0]!r} is listed twice")
        table[r[0]] = tuple(r[1:])
    if null is not None and len(null) + 1 != width:
        raise PolicyError(f"policy key {key!r}: NULL has {len(null) + 1} levels, expected {width}")
    check_tree([*table.values(), *([null] if null else [])], width, key)
    return SensitiveHierarchy(column=column, table=table, null_labels=null)


def hierarchy_of(policy: Policy, name: str) -> SensitiveHierarchy | None:
    """The hierarchy of sensitive attribute ``name`` when a t requirement measures it by
    emd-hierarchical, else None."""
    if not any(r.attribute == name and r.measure == "emd-hierarchical" for r in policy.privacy.t):
        return None
    spec = next(c.hierarchy for c in policy.columns if c.name == name) or {}
    return _build(name, spec, policy.base_dir)


def hier_context(policy: Policy, name: str, x: Sql) -> dict[str, Any]:
    """``hier`` (the height, 0 without the measure) and ``hier_levels`` (the label expressions of
    ``x``) for the templates."""
    h = hierarchy_of(policy, name)
    if h is None:
        return {"hier": 0, "hier_levels": []}
    return {"hier": h.height, "hier_levels": h.levels(x)}


def check_covered(be: Any, policy: Policy, name: str, rel: Any, x: Sql) -> None:
    """Refuse a value of ``x`` in ``rel`` the hierarchy does not list (ARX refuses it too): its
    labels would be NULL, outside the tree."""
    h = hierarchy_of(policy, name)
    if h is None:
        return
    bad = be.query("assess/hier_uncovered", rel=rel, x=x, pred=h.uncovered(ident("x")))
    if bad:
        raise SqlanonError(f"columns.{name}.hierarchy: does not cover value {bad[0][0]!r} of {name!r}")


def hier_figure(be: Any, stats: Any) -> float:
    """The largest per-class emd_hier of assess's per-class table (assess's t figure)."""
    return float(be.query("assess/hier_max", stats=stats)[0][0] or 0.0)


def freq_hier_context(be: Any, policy: Policy, name: str, ft: Any) -> dict[str, Any]:
    """:func:`hier_context` for assess (templates/assess/sensitive_classes.sql.j2), after the
    coverage check on ``ft``, the frequency tables whose values give p(w): the source's when a
    release is re-verified (the template's ``{{p}}_ref`` names their value ``s``), else the
    measured relation's."""
    if hierarchy_of(policy, name) is None:
        return {"hier": 0, "hier_levels": []}
    j = ft.s_names.index(name)
    check_covered(be, policy, name, ft.freq, ft.s_aliases[j])
    # hier_src, hier_sid: where the macro hier_map reads the labels (a caller whose own rows carry
    # the same value numbers but not the values: Mondrian's working table).
    return {**hier_context(policy, name, ft.s_aliases[j]), "hier_src": ft.freq, "hier_sid": ft.sid_aliases[j]}
