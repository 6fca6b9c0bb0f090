"""``sqlanon anonymise`` and ``sqlanon compile``: choose a node, publish the release atomically.

Publishing never touches the source. The release is built under a temporary name in the target's
schema, measured again (``assess`` on the new relation: every requirement must hold for every class,
and no more records may be missing than the suppression limit allows), and only then swapped in
under the target name in one transaction. A failure at any step drops the new relation and leaves
the old target as it was. An existing target is replaced only when asked (``--replace``).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from sqlglot import exp

from sqlanon.assess import _l_rank, _sort_key, assess, requirement_checks
from sqlanon.engines import Backend
from sqlanon.engines.catalog import (
    RelId,
    check_length,
    dependent_views,
    grants,
    identify,
    leftovers,
    reads_relation,
    schema_exists,
)
from sqlanon.errors import SqlanonError
from sqlanon.hierarchy import Hierarchy
from sqlanon.policy import ColumnSpec, Policy
from sqlanon.relation import Relation
from sqlanon.search import Node, Plan, Progress, build_hierarchies, node_map, prepare, run_search
from sqlanon.sql.compile import CANONICAL, Sql, ident, to_sql


def internal_prefix(columns: list[str]) -> str:
    """A prefix for sqlanon's own column aliases that no column of the source starts with
    (compared case-insensitively, as DuckDB does), so an internal name can never collide.

    >>> internal_prefix(["Age", "__sqlanon_cid"])
    '___sqlanon_'
    """
    prefix = "__sqlanon_"
    lowered = [c.lower() for c in columns]
    while any(c.startswith(prefix) for c in lowered):
        prefix = "_" + prefix
    return prefix


def release_context(
    policy: Policy, hierarchies: list[Hierarchy], node: Node, source_columns: list[str] | None = None
) -> dict[str, Any]:
    """Template context for ``publish/_release``: output columns, class expressions, checks."""
    by_name = {h.column: (h, lvl) for h, lvl in zip(hierarchies, node, strict=True)}
    order = source_columns or [c.name for c in policy.columns]
    specs = {c.name: c for c in policy.columns}
    out_cols, class_exprs = [], []
    for name in order:
        spec: ColumnSpec | None = specs.get(name)
        if spec is None:
            continue  # undeclared columns are not published
        col = ident(name)
        if spec.role == "identifier":
            if spec.action == "drop":
                continue
            expr = Sql("'*'") if spec.action == "mask" else _hash(col)
        elif spec.role == "quasi":
            h, lvl = by_name[name]
            expr = h.sql(int(lvl or 0), col)
            if expr != "'*'":  # a fully suppressed column splits no class (and engines refuse
                class_exprs.append(expr)  # a constant in a window ORDER BY)
        else:
            expr = col
        out_cols.append({"alias": col, "expr": expr})
    internal = internal_prefix(list(order) + [c.name for c in policy.columns])
    sens = [c.name for c in policy.sensitive]
    used = {r.attribute for r in policy.privacy.l} | {r.attribute for r in policy.privacy.t}
    ordered = {r.attribute for r in policy.privacy.t if r.measure == "emd-ordered"}
    attrs, alias = [], {}
    for i, s in enumerate(sens):
        if s not in used:
            continue
        alias[s] = f"a{i}"
        attrs.append(
            {
                "p": Sql(f"a{i}"),
                "sid_alias": ident(f"{internal}sid_{i}"),
                "sort_key": _sort_key(policy, s, ident(s)),
                "l_rank": _l_rank(policy, s),
                "ordered": s in ordered,
            }
        )
    checks = requirement_checks(policy, alias)
    any_check = exp.or_(*[c for _, c in checks]) if checks else exp.false()
    return {
        "source": policy.source,
        "out_cols": out_cols,
        "class_exprs": class_exprs,
        "cid_alias": ident(f"{internal}cid"),
        "attrs": attrs,
        "any_check": Sql(any_check.sql(CANONICAL)),
    }


def _hash(col: Sql) -> Sql:
    from sqlanon.sql.builders import hash_text

    return hash_text(col)


def release_sql(
    policy: Policy,
    hierarchies: list[Hierarchy],
    node: Node,
    dialect: str,
    target: Relation,
    kind: str = "view",
    source_columns: list[str] | None = None,
) -> str:
    ctx = release_context(policy, hierarchies, node, source_columns)
    return to_sql(f"publish/create_{kind}", dialect, kind="create", target=target, **ctx)


# ---------------------------------------------------------------------------------------------------


def relation_kind(be: Backend, rel: Relation) -> str | None:
    rows = be.query("catalog/relation_kind", name=rel.name, schema=rel.schema, catalog=rel.catalog)
    if not rows:
        return None
    return "view" if "VIEW" in str(rows[0][0]).upper() else "table"


def _drop(be: Backend, rel: Relation, kind: str) -> None:
    be.execute(f"ddl/drop_{kind}", kind="drop", target=rel)


def choose(plan: Plan, result: Any, metric: str) -> tuple[Node, dict[str, Any]]:
    """The optimum by ``metric`` (:func:`choose_among`); with a table-wide risk bound (average,
    marketer, journalist), the best-ranked satisfying node whose release also meets it.

    The lattice search decides per class; table-wide risks are properties of a whole release, so
    each candidate, best first, is materialised (a temporary table) and measured like a published
    release until one passes. Exact: every satisfying node is a candidate, and the first to pass
    in rank order is the optimum among those that meet every requirement.
    """
    node, info = choose_among(plan, result, metric)
    if not global_bounds(plan.policy):
        return node, info
    tried: set[Node] = set()
    src_cols = [c.name for c in plan.be.require_columns(plan.policy.source, "source")]
    while True:
        ctx = release_context(plan.policy, plan.hierarchies, node, src_cols)
        rel = plan.be.create_temp("release", "publish/_release", **ctx)
        _result, bad, missing = release_check(plan.be, plan.policy, plan, rel, node)
        if not bad and missing <= plan.allowed:
            info["risk_checked"] = len(tried) + 1
            return node, info
        tried.add(node)
        try:
            node, info = choose_among(plan, result, metric, exclude=tried)
        except SqlanonError:
            raise SqlanonError(
                f"no generalisation meets the table-wide risk bounds ({', '.join(bad)} fails at every one "
                f"of the {len(tried)} satisfying node(s)); relax privacy.risk"
            ) from None


def choose_among(
    plan: Plan, result: Any, metric: str, exclude: set[Node] | None = None
) -> tuple[Node, dict[str, Any]]:
    """The optimum by ``metric`` among the candidates the metric allows (see sqlanon.metrics).

    Branch and bound where the metric has a lower bound on a node's rank that needs no node query
    (:func:`sqlanon.metrics.rank_lower_bound`): the candidates are scored in order of (bound,
    height, node), in chunks of 1, 2, 4, ... up to CHOOSE_CHUNK nodes per :func:`score` call, and
    scoring stops at the first candidate whose bound exceeds the best rank so far (plus a relative
    1e-12 for rounding). Every later candidate's bound is at least as high, so none can beat or tie
    the best; a candidate whose bound equals it is still scored, so the result is the one scoring
    every candidate gives: the least (rank, height, node). Other metrics score every candidate.
    ``scored`` in the returned dict counts the candidates scored, ``candidates`` all of them.
    """
    from sqlanon.metrics import BOUND_EPS, CHOOSE_CHUNK, candidates_for, rank_lower_bound, score, value

    cands = candidates_for(plan, result, metric)
    if exclude is not None:
        # Table-wide risk bounds are not decided per node by the search: every satisfying node
        # is a candidate, not only the minimal ones.
        cands = sorted(n for n in result.satisfying if n not in exclude)
    if not cands:
        raise SqlanonError(
            "no generalisation satisfies the policy within the suppression limit "
            f"({plan.allowed} records); raise privacy.suppression or relax the requirements"
        )

    def key(nv: tuple[Node, float]) -> tuple:
        return (nv[1], sum(nv[0]), nv[0])

    bounds = [rank_lower_bound(plan, nd, metric) for nd in cands]
    if any(b is None for b in bounds):
        scored = score(plan, cands, metric, result.results)
        best = min(scored, key=key)
        n_scored = len(scored)
    else:
        order = sorted(zip(bounds, cands, strict=True), key=lambda bn: (bn[0], sum(bn[1]), bn[1]))
        best = None
        n_scored = i = 0
        size = 1  # chunk sizes 1, 2, 4, ... CHOOSE_CHUNK: few wasted scores when the first is best
        while i < len(order):
            limit = float("inf") if best is None else best[1] + BOUND_EPS * max(1.0, abs(best[1]))
            chunk = []
            while i < len(order) and len(chunk) < size and order[i][0] <= limit:
                chunk.append(order[i][1])
                i += 1
            if not chunk:
                break  # the next bound, and every later one, exceeds the best rank
            for nv in score(plan, chunk, metric, result.results):
                if best is None or key(nv) < key(best):
                    best = nv
            n_scored += len(chunk)
            size = min(2 * size, CHOOSE_CHUNK)
        assert best is not None
    return best[0], {
        "metric": metric,
        "value": value(best[1], metric),
        "scored": n_scored,
        "candidates": len(cands),
    }


def anonymise(
    be: Backend,
    policy: Policy,
    *,
    replace: bool = False,
    dry_run: bool = False,
    levels: Node | None = None,
    metric: str | None = None,
    algorithm: str | None = None,
    publish_as: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Search (unless ``levels`` is given), then publish the release (unless ``dry_run``)."""
    kind = publish_as or policy.publish_as
    target = policy.target
    if target is None and not dry_run:
        raise SqlanonError("target: the policy names no target relation to publish (or use --dry-run)")
    check_hash_release(policy, kind)
    pre = preflight(be, policy, None if dry_run else target, replace)
    plan = prepare(be, policy)
    metric = metric or policy.search.metric
    out: dict[str, Any] = {}
    if levels is None:
        result = run_search(plan, algorithm or policy.search.algorithm, progress)
        node, best = choose(plan, result, metric)
        out.update(
            {
                "algorithm": result.algorithm,
                "minimal_nodes": [node_map(plan, n) for n in result.minimal],
                "nodes_total": result.nodes_total,
                "nodes_checked": result.nodes_checked,
                "queries": result.queries,
            }
        )
        res = result.results.get(node)
    else:
        node = levels
        from sqlanon.search import Evaluator

        res = Evaluator(plan).evaluate([node])[node]
        if not res.ok(plan.allowed):
            raise SqlanonError(
                f"--levels: node {node_map(plan, node)} needs {res.bad_records} records suppressed, "
                f"more than the {plan.allowed} the policy allows"
            )
        from sqlanon.metrics import score, value

        best = {"metric": metric, "value": value(score(plan, [node], metric, {node: res})[0][1], metric)}
        out.update(
            {"algorithm": "given", "minimal_nodes": [], "nodes_total": plan.nodes_total(), "nodes_checked": 1}
        )
    if res is None:
        from sqlanon.search import Evaluator

        res = Evaluator(plan).evaluate([node])[node]
    out.update(
        {
            "node": node_map(plan, node),
            "optimum": best,
            "suppressed_records": res.bad_records,
            "rows": plan.n_rows,
            "target": str(target) if target else None,
            "publish_as": kind,
        }
    )
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    excluded = [c for c in src_cols if c not in {s.name for s in policy.columns}]
    out["excluded_columns"] = excluded
    sql = release_sql(
        policy, plan.hierarchies, node, be.dialect, target or Relation("release"), kind, src_cols
    )
    if dry_run:
        out["sql"] = sql
        out["published"] = None
        return out
    assert target is not None
    out["leftovers"] = [str(r) for r in leftovers(be)]
    out["published"] = _publish(be, policy, plan, node, target, kind, replace, src_cols, res.bad_records, pre)
    return out


@dataclasses.dataclass(frozen=True)
class Preflight:
    """What was checked about the target before the search (so that nothing fails after it)."""

    source: RelId
    target: RelId | None = None  # the existing target, if any
    grants: tuple[tuple[str, str, bool], ...] = ()


def check_hash_release(policy: Policy, kind: str) -> None:
    """A keyed hash inside a view would put the key (its HMAC pads) in the view's definition,
    which readers can see; only a materialised table keeps it out of the release."""
    hashed = [c.name for c in policy.identifiers if c.action == "hash"]
    if hashed and kind == "view":
        raise SqlanonError(
            f"columns.{hashed[0]}.action: hash needs publishing as a table (--as table or publish.as: "
            "table); a view's definition would show the hash key to its readers"
        )


def preflight(be: Backend, policy: Policy, target: Relation | None, replace: bool) -> Preflight:
    """Resolve source, population and target by catalogue identity and refuse, before searching,
    every target that would modify a source or lose data: the source itself (in any spelling), the
    population, a relation the source or population reads (through views), an existing target
    without ``--replace``, one that other views read, a missing schema, a name the engine would
    truncate."""
    src = identify(be, policy.source, "source")
    if src is None:
        be.require_columns(policy.source, "source")  # the usual "not found" message
        raise SqlanonError(f"source: relation {str(policy.source)!r} not found")
    pop = identify(be, policy.population, "population") if policy.population is not None else None
    if policy.population is not None and pop is None:
        raise SqlanonError(f"population: relation {str(policy.population)!r} not found")
    if target is None:
        return Preflight(src)
    check_length(be, target, "target")
    if not schema_exists(be, target):
        raise SqlanonError(f"target: schema {target.schema!r} of {str(target)!r} does not exist")
    tid = identify(be, target, "target")
    if tid is None:
        return Preflight(src)
    shown = f"target: {str(target)!r}"
    for rid, role in ((src, "source"), (pop, "population")):
        if rid is None:
            continue
        if tid.same(rid) or (be.dialect == "postgres" and tid.oid == rid.oid):
            raise SqlanonError(
                f"{shown} is the {role} ({rid}); sqlanon never modifies the {role}; choose another target"
            )
        if reads_relation(be, rid, tid):
            raise SqlanonError(
                f"{shown} ({tid}) is read by the {role} {str(rid)!r}; replacing it would change the {role}"
            )
    if not replace:
        raise SqlanonError(f"{shown} already exists; pass --replace to replace it")
    views = dependent_views(be, tid)
    if views:
        raise SqlanonError(
            f"{shown} is read by the view(s) {', '.join(views[:5])}; replacing it would change or break "
            "them: repoint or drop them first"
        )
    return Preflight(src, tid, tuple(grants(be, tid)))


def _publish(
    be: Backend,
    policy: Policy,
    plan: Plan,
    node: Node,
    target: Relation,
    kind: str,
    replace: bool,
    src_cols: list[str],
    suppressed: int,
    pre: Preflight,
) -> dict[str, Any]:
    """Build, verify and swap in ONE transaction (DuckDB and PostgreSQL have transactional DDL).

    Any failure, interrupt or kill before the commit rolls everything back: no staging relation
    can be left behind, and the only relation dropped is the old target, inside the swap. The
    staging and swap names are sqlanon's own short names (``sqlanon_stage_<hex>``), never derived
    from the target's, so no engine truncates them onto an existing relation; the CREATE has no
    IF NOT EXISTS, so a name taken by anyone else fails instead of being reused or dropped.
    """
    tag = uuid.uuid4().hex[:12]
    staging = target.with_name(f"sqlanon_stage_{tag}")
    old = target.with_name(f"sqlanon_old_{tag}")
    ctx = release_context(policy, plan.hierarchies, node, src_cols)
    with be.atomic() as commit:
        be.execute(f"publish/create_{kind}", kind="create", target=staging, **ctx)
        for grantee, privilege, grantable in pre.grants:
            be.execute(
                "publish/grant",
                kind="grant",
                target=staging,
                grantee=grantee,
                privilege=_privilege(privilege),
                grantable=grantable,
            )
        published = verify(be, policy, plan, staging, suppressed, node)
        # The swap: readers see the old target or the new one, never neither.
        existing = identify(be, target, "target")
        if existing is not None:
            if not replace:
                raise SqlanonError(f"target: {str(target)!r} appeared meanwhile; pass --replace")
            if pre.target is None or not existing.same(pre.target) or existing.oid != pre.target.oid:
                raise SqlanonError(f"target: {str(target)!r} changed during the run; nothing published")
            be.execute(f"publish/rename_{existing.kind}", kind="alter", source=target, new_name=old.name)
        be.execute(f"publish/rename_{kind}", kind="alter", source=staging, new_name=target.name)
        if existing is not None:
            _drop(be, old, existing.kind)
        commit(str(target))
    published["source"] = str(target)
    return published


_PRIVILEGES = {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"}


def _privilege(name: str) -> Sql:
    if name.upper() not in _PRIVILEGES:
        raise SqlanonError(f"target: cannot carry over the privilege {name!r} of the old target")
    return Sql(name.upper())


def release_check(
    be: Backend, policy: Policy, plan: Plan, rel: Relation, node: Node | None
) -> tuple[dict[str, Any], list[str], int]:
    """Measure a release relation ``rel``: (assess object, failing requirements, missing records).

    The population, when there is one, is generalised to the same ``node`` so that journalist and
    marketer risk compare like with like (seed 000 section 5: F_j counts the population records
    of the release's class j).
    """
    cols = [c for c in policy.columns if c.role != "identifier"]
    check_policy = dataclasses.replace(
        policy,
        source=rel,
        columns=tuple(cols),
        population=policy.population if node is not None else None,
        privacy=dataclasses.replace(policy.privacy, suppression=0.0),
    )
    pop_exprs = None
    if node is not None and policy.population is not None:
        pop_exprs = [h.sql(int(lvl), ident(h.column)) for h, lvl in zip(plan.hierarchies, node, strict=True)]
    result = assess(be, check_policy, reference=plan.base, population_exprs=pop_exprs)
    missing = plan.n_rows - result["rows"]
    bad = [req for req, ok in result["satisfied"].items() if not ok and req != "all"]
    if not bad and not result["satisfied"].get("all", True):
        bad = ["all"]
    return result, bad, missing


def global_bounds(policy: Policy) -> bool:
    """Whether the policy bounds a table-wide risk (average, marketer, journalist): these are
    checked on a node's release, after the lattice search (which decides per class)."""
    return any(kind != "prosecutor" for kind in policy.privacy.risk)


def verify(
    be: Backend, policy: Policy, plan: Plan, rel: Relation, suppressed: int, node: Node | None = None
) -> dict[str, Any]:
    """Measure the new relation: every requirement must hold in every class (suppression is already
    applied), and at most the allowed number of records may be missing."""
    result, bad, missing = release_check(be, policy, plan, rel, node)
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
    return result


def compile_release(
    policy: Policy, dialect: str, levels_text: str | None, be: Backend | None, kind: str | None = None
) -> str:
    """CREATE VIEW (or TABLE) text for ``dialect``, at ``--levels`` or at the searched optimum."""
    from sqlanon.search import parse_levels

    kind = kind or policy.publish_as
    target = policy.target or policy.source.with_name(f"{policy.source.name}_anon")
    if levels_text is not None and be is None:
        hierarchies = build_hierarchies(None, policy)
        names = [h.column for h in hierarchies]
        node = parse_levels(levels_text, names, [h.height for h in hierarchies])
        return release_sql(policy, hierarchies, node, dialect, target, kind)
    assert be is not None
    plan = prepare(be, policy)
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    if levels_text is not None:
        node = parse_levels(levels_text, plan.qi_names, plan.heights)
    else:
        result = run_search(plan, policy.search.algorithm)
        node, _ = choose(plan, result, policy.search.metric)
    return release_sql(policy, plan.hierarchies, node, dialect, target, kind, src_cols)
