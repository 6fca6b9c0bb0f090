"""Re-verifying a published release (:func:`verify`, run by :mod:`sqlanon.publish` before the swap).

What it returns is what a release's reader may be shown (``anonymise``'s ``published``): every
figure is the release's own (:mod:`sqlanon.measure.release_stats`), and where and at what cost it
was measured (``verified_in``: its location is decided by the source's frequency rows, and the
rows that crossed include the source's distribution where a t or likeness check needs it) is for
the operator only: :func:`sqlanon.publish.anonymise` moves it to the output's top level.
"""

from __future__ import annotations

from typing import Any

from sqlanon.engines.pgparts import hashed_create
from sqlanon.errors import SqlanonError
from sqlanon.lattice import Node, Plan
from sqlanon.measure.release import release_check
from sqlanon.metrics.optimum import check_node_release, local_measure
from sqlanon.relation import Relation


def verify(plan: Plan, rel: Relation, node: Node | None, ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure the new relation: every requirement must hold in every class (suppression is already
    applied), and at most the allowed number of records may be missing.

    A table is read back. A view's release context ``ctx``, where its classes need only their size
    (:func:`~sqlanon.metrics.optimum.one_pass`), lets the view be measured from its source in one
    GROUP BY instead of reading it: the view is that same generalisation, with the same check on
    each class's size, so its classes are the source's grouped classes that pass the check; reading
    it would run its window over every row first (issue 17: publishing near one scan).

    On PostgreSQL the release's GROUP BY (its frequency table) is planned without sorts where a
    hash can do (:func:`~sqlanon.engines.pgparts.hashed_create`: at 1e7 rows it went from three
    external merge sorts, 41.7 s, to 9.1-9.5 s in memory; the same rows)."""
    local = local_measure(plan, rel)  # the checks in a local DuckDB once the warehouse has grouped
    be, pol = plan.be, plan.policy
    create = hashed_create(be)  # PostgreSQL: the release's GROUP BY hashed, not sorted
    if node is None:  # a Mondrian release: no node to generalise the population to
        result, bad, missing = release_check(
            be,
            pol,
            rel,
            reference=plan.base,
            n_rows=plan.n_rows,
            population_exprs=None,
            local=local,
            create=create,
        )
    else:
        result, bad, missing = check_node_release(plan, rel, node, ctx, local, create)
    if bad or missing > plan.allowed:
        why = (
            f"requirements failing: {', '.join(bad)}"
            if bad
            else (f"{missing} records missing, more than the {plan.allowed} allowed")
        )
        raise SqlanonError(
            f"publish: the new relation does not satisfy the policy ({why}); nothing published"
        )
    result["suppressed_records"] = missing
    moved = 0 if local is None else local.moved
    result["verified_in"] = {"location": "local" if local else "database", "rows_transferred": moved}
    return result


def shown(published: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``published`` as a release's reader may see it: ``verified_in`` (where the re-verification
    ran, and the rows that crossed, figures of the source) moves to the operator's ``out``."""
    out["verified_in"] = published.pop("verified_in", None)
    return published
