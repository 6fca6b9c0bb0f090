"""The lattice's shape: a node's neighbours, its height, the minimal nodes of a satisfying set,
and the conversions between nodes and the user's ``QI=LEVEL`` spelling. The searches in
:mod:`sqlanon.lattice.algorithms` walk the lattice through these alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

from sqlanon.errors import SqlanonError
from sqlanon.lattice.plan import Node, Plan


def predecessors(node: Node) -> list[Node]:
    return [
        node[:j] + (lvl - 1,) + node[j + 1 :] for j, lvl in enumerate(node) if lvl is not None and lvl > 0
    ]


def successors(node: Node, heights: Sequence[int]) -> list[Node]:
    return [
        node[:j] + (lvl + 1,) + node[j + 1 :]
        for j, lvl in enumerate(node)
        if lvl is not None and lvl < heights[j]
    ]


def height(node: Node) -> int:
    try:
        return sum(node)  # type: ignore[arg-type]  # a node of the full lattice: levels only
    except TypeError:  # a node of a subset lattice (Incognito): None outside the subset
        return sum(lvl for lvl in node if lvl is not None)


def all_nodes(heights: Sequence[int]) -> list[Node]:
    return sorted(itertools.product(*(range(h + 1) for h in heights)), key=lambda n: (sum(n), n))


def minimal(satisfying: set[Node], universe: Iterable[Node]) -> list[Node]:
    """Satisfying nodes with no satisfying node strictly below them (exact for any predicate).

    Where the satisfying set is closed upwards within the universe (every monotone search, and
    most non-monotone results), a satisfying node has a satisfying node strictly below it exactly
    when one of its direct predecessors satisfies (the chain between them stays satisfying). The
    closure and the minimal nodes are then read from the smaller of the satisfying set and its
    complement (a minimal node is the bottom or a successor of a failing node) instead of walking
    the whole lattice. Otherwise every node of the universe is walked bottom-up."""
    uni = universe if isinstance(universe, set | frozenset) else set(universe)
    sat = satisfying
    if len(sat) * 2 <= len(uni):
        closed = all(y in sat or y not in uni for n in sat for y in _ups(n))
        cands: Iterable[Node] = sat
    else:
        rest = uni - sat
        closed = not any(p in sat for x in rest for p in predecessors(x))
        cands = {y for x in rest for y in _ups(x) if y in sat}
        cands.update(n for n in sat if not any(lvl for lvl in n))  # the bottom (no predecessor)
    if closed:
        out = [n for n in cands if not any(p in sat for p in predecessors(n))]
    else:
        below: dict[Node, bool] = {}
        for node in sorted(uni, key=lambda n: (height(n), n)):
            below[node] = any(p in sat or below.get(p, False) for p in predecessors(node))
        out = [n for n in sat if not below[n]]
    return sorted(out, key=lambda n: (height(n), n))


def _ups(node: Node) -> list[Node]:
    """The node with one level raised, for each quasi-identifier in it (some may lie above the
    lattice: callers test membership)."""
    return [node[:j] + (lvl + 1,) + node[j + 1 :] for j, lvl in enumerate(node) if lvl is not None]


def project(node: Node, subset: tuple[int, ...]) -> Node:
    """The node restricted to a subset of quasi-identifiers (None elsewhere): Incognito's subset
    lattices (seed 002 section 4.2)."""
    return tuple(lvl if j in subset else None for j, lvl in enumerate(node))


def subset_of(node: Node) -> tuple[int, ...]:
    """The quasi-identifiers a subset-lattice node constrains."""
    return tuple(j for j, lvl in enumerate(node) if lvl is not None)


def node_map(plan: Plan, node: Node) -> dict[str, int]:
    return {name: int(lvl) for name, lvl in zip(plan.qi_names, node, strict=True) if lvl is not None}


#: A node as a user gives it: ``"QI=L,QI=L"`` on the command line, or a mapping from Python (the
#: only form for a QI whose name holds a comma).
Levels = str | Mapping[str, int]


def parse_levels(text: Levels, plan_names: Sequence[str], heights: Sequence[int]) -> Node:
    """``QI=L,QI=L`` (or ``{QI: L}``) -> a full node (unlisted quasi-identifiers stay at level 0).

    >>> parse_levels({"a,b": 1}, ["a,b", "c"], [2, 1])
    (1, 0)
    """
    levels = dict.fromkeys(plan_names, 0)
    if isinstance(text, Mapping):
        pairs = [(str(k), v, f"{k}={v}") for k, v in text.items()]
    else:
        pairs = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, val = part.rpartition("=")
            pairs.append((name if sep else "", val, part))
    for name, val, part in pairs:
        if name not in levels:
            raise SqlanonError(f"--levels: {part!r} does not name a quasi-identifier (QI=LEVEL)")
        if isinstance(val, bool) or isinstance(val, float) and not val.is_integer():
            raise SqlanonError(f"--levels: level {val!r} for {name!r} is not a whole number")
        try:
            lvl = int(val)
        except (TypeError, ValueError):
            raise SqlanonError(f"--levels: level {val!r} for {name!r} is not a whole number") from None
        h = heights[list(plan_names).index(name)]
        if not 0 <= lvl <= h:
            raise SqlanonError(f"--levels: {name!r} has levels 0..{h}, got {lvl}")
        levels[name] = lvl
    return tuple(levels[n] for n in plan_names)
