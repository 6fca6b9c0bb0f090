"""A re-verified release's per-class statistics of one sensitive attribute: the figures it SHOWS
from the release alone, the VERDICT against the source's distribution where a requirement needs it.

Everything shown about a release is computed from the release, never from source rows it dropped
(README: "Never leak what the release hides"). The table-wide distribution p(w) of the source
counts the records the release suppressed: figures over it (distinct values, H(W), l_max, mutual
information, t distances, likeness) differ between two sources that differ only in suppressed
records and publish the same rows, so a reader of the figures learns about the dropped records
(e.g. that a fourth diagnosis exists only among them). So the shown statistics take p(w) from the
release itself, and only the checks of a t-closeness or likeness requirement on the attribute
measure against the source (as the search decided, and as ARX verifies): a second pass over the
release's small grouped table, never over the source.
"""

from __future__ import annotations

from typing import Any

from sqlanon.engines import Backend
from sqlanon.measure.tcloseness_hier import freq_hier_context
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql


def needs_reference(policy: Policy, name: str) -> bool:
    """Whether a requirement's verdict on ``name`` compares with p(w): t-closeness and the
    likeness models (l-diversity and every other check are per class, the same either way)."""
    privacy = policy.privacy
    return any(r.attribute == name for r in privacy.t) or any(r.attribute == name for r in privacy.likeness)


def class_table(
    be: Backend, policy: Policy, ft: Any, i: int, l_rank: Any, ref: Any, ctx: dict[str, Any]
) -> tuple[Relation, bool]:
    """The per-class statistics of ``ft``'s ``i``-th sensitive attribute
    (``templates/assess/sensitive_classes.sql.j2``), against ``ref``'s distribution named by
    ``ctx`` (``ref`` None: the relation's own), and whether emd-hierarchical is measured: the one
    statement the report's distributions and a re-verified release's figures both read."""
    hier = freq_hier_context(be, policy, ft.s_names[i], ref or ft)
    rel = be.create_temp(
        "sens",
        "assess/sensitive_classes",
        freq=ft.freq,
        p=Sql(f"a{i}"),
        s_alias=ft.s_aliases[i],
        sid_alias=ft.sid_aliases[i],
        l_rank=l_rank,
        **ctx,
        **hier,
    )
    return rel, bool(hier["hier"])


def sensitive_tables(
    be: Backend,
    policy: Policy,
    ft: Any,
    i: int,
    l_rank: Any,
    reference: Any,
    ref_ctx: dict[str, Any],
) -> tuple[Relation, Relation, bool]:
    """(shown, checked, hier) for the ``i``-th sensitive attribute of ``ft`` (the measured
    relation's :class:`~sqlanon.measure.assessment.FrequencyTables`): ``shown`` over the relation's
    own distribution, the table every figure is read from; ``checked`` the one the requirement
    checks join (``shown`` itself unless ``reference``, the source's tables of a re-verified
    release with ``ref_ctx`` naming them, is needed by :func:`needs_reference`); ``hier``: whether
    emd-hierarchical is measured."""
    shown, hier = class_table(be, policy, ft, i, l_rank, None, {"ref_freq": None})
    if reference is None or not needs_reference(policy, ft.s_names[i]):
        return shown, shown, hier
    checked, _ = class_table(be, policy, ft, i, l_rank, reference, ref_ctx)
    return shown, checked, hier
