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

from sqlanon.engines import Backend
from sqlanon.engines.catalog import (
    RelId,
    check_length,
    companions,
    dependent_views,
    grants,
    home_schema,
    identify,
    leftovers,
    missing_roles,
    reads_relation,
    schema_exists,
    view_options,
)
from sqlanon.engines.definer import Definer
from sqlanon.engines.definer import drop as drop_definer
from sqlanon.errors import SqlanonError
from sqlanon.lattice import (
    Evaluator,
    Levels,
    Node,
    Plan,
    Progress,
    build_hierarchies,
    node_map,
    parse_levels,
    prepare,
)
from sqlanon.lattice.mondrian import mondrian_release
from sqlanon.lattice.mondrian_local import run_mondrian
from sqlanon.metrics import score, value
from sqlanon.metrics.evaluate import mondrian_metrics
from sqlanon.metrics.optimum import walk
from sqlanon.metrics.safepub_search import safepub_release
from sqlanon.metrics.verify import shown as release_shown
from sqlanon.metrics.verify import verify
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.safepub import refuse_mondrian
from sqlanon.sql.compile import Sql, ident
from sqlanon.transform.perturb import Perturbed, materialise, search_policy, shown
from sqlanon.transform.release import check_hash_release, internal_prefix, release_context, release_sql
from sqlanon.transform.safepub import materialise_sample


def _drop(be: Backend, rel: Relation, kind: str) -> None:
    be.execute(f"ddl/drop_{kind}", kind="drop", target=rel)


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
    refuse_mondrian(policy.privacy.dp, algorithm or policy.search.algorithm)  # SafePub: a lattice node
    pre = preflight(be, policy, None if dry_run else target, replace)
    pert = materialise_sample(be, policy) if policy.privacy.dp else materialise(be, policy)  # SafePub: keyed
    # --levels: nothing staged for a walk; Mondrian reads no coded table
    plan = prepare(
        be, pert.policy, walk=levels is None, coded=(algorithm or policy.search.algorithm) != "mondrian"
    )
    metric = metric or policy.search.metric
    out: dict[str, Any] = {}
    if policy.privacy.dp is not None and levels is None:  # SafePub: the sample, its search (issue 35)
        policy, levels, out["differential_privacy"] = safepub_release(be, policy, pert.policy, plan)
    if (algorithm or policy.search.algorithm) == "mondrian":
        if levels is not None:
            raise SqlanonError("--levels: a Mondrian release has no levels; drop --levels or the algorithm")
        return _anonymise_mondrian(be, policy, plan, pert, out, kind, target, replace, dry_run, pre, progress)
    if levels is None:
        result, node, best, where = walk(plan, algorithm or policy.search.algorithm, metric, progress)
        out.update(
            {
                **where,
                "algorithm": result.algorithm,
                "minimal_nodes": [node_map(plan, n) for n in result.minimal],
                "nodes_total": result.nodes_total,
                "nodes_checked": result.nodes_checked,
                "nodes_pruned": result.pruned,
                "search_scope": result.scope,
                "queries": result.queries,
            }
        )
        res = result.results.get(node)
    else:
        node = levels
        res = Evaluator(plan).evaluate([node])[node]
        if not res.ok(plan.allowed):
            raise SqlanonError(
                f"--levels: node {node_map(plan, node)} needs {res.bad_records} records suppressed, "
                f"more than the {plan.allowed} the policy allows"
            )
        best = {"metric": metric, "value": value(score(plan, [node], metric, {node: res})[0][1], metric)}
        out.update(
            {
                "algorithm": "safepub" if policy.privacy.dp else "given",
                "minimal_nodes": [],
                "nodes_total": plan.nodes_total(),
                "nodes_checked": 1,
            }
        )
    if res is None:
        res = Evaluator(plan).evaluate([node])[node]
    out.update(
        {
            "node": node_map(plan, node),
            "wiped_qis": wiped(plan, node),
            "optimum": best,
            "suppressed_records": res.bad_records,
            "rows": plan.n_rows,
            "target": str(target) if target else None,
            "publish_as": kind,
            "notes": notes(be.dialect, kind),
        }
    )
    if policy.privacy.dp is not None:
        hide_sample_counts(out)
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    excluded = [c for c in src_cols if c not in {s.name for s in policy.columns}]
    out["excluded_columns"] = excluded
    if pert.measured is not None:
        out["perturbation"] = shown(pert.measured, res.bad_records)
    if dry_run:  # what publishing runs, as `sqlanon compile` prints it (a definer on PostgreSQL)
        out["sql"] = release_sql(
            policy,
            plan.hierarchies,
            node,
            be.dialect,
            printed_target(policy, be, kind),
            kind,
            src_cols,
            pert.ctx,
            definer=True,
        )
        out["published"] = None
        return out
    assert target is not None
    out["leftovers"] = [str(r) for r in leftovers(be)]
    published = _publish(
        be, policy, plan, node, target, kind, replace, src_cols, res.bad_records, pre, pert.ctx
    )
    out["published"] = release_shown(published, out)  # verified_in: the operator's, at the top level
    if policy.privacy.dp is not None:
        hide_sample_counts(out["published"], published=True)
        if isinstance(out.get("verified_in"), dict) and "rows_transferred" in out["verified_in"]:
            out["verified_in"]["rows_transferred"] = None  # the sample's distinct QI rows, copied
    return out


def hide_sample_counts(result: dict[str, Any], published: bool = False) -> None:
    """A SafePub release's figures of its sample, blanked (None): the sample's size (the search's
    ``rows``, the published measurement's ``allowed_records``), the records suppressed from it (its
    size less the published rows) and the metric of the chosen node over it. The guarantee covers
    the published rows, not the sample they were drawn from (task A, session 8: ``anonymise``
    printed ``suppressed records: 21 of 1544``). A published measurement keeps its own rows."""
    result["suppressed_records"] = None
    if published:
        result["suppression"]["allowed_records"] = None
        return
    result["rows"] = None
    if isinstance(result.get("optimum"), dict):
        result["optimum"]["value"] = None


@dataclasses.dataclass(frozen=True)
class Preflight:
    """What was checked about the target before the search (so that nothing fails after it)."""

    source: RelId
    target: RelId | None = None  # the existing target, if any
    grants: tuple[tuple[str, str, bool], ...] = ()
    options: tuple[tuple[str, str], ...] = ()  # the existing view's options (security_barrier, ...)


def wiped(plan: Plan, node: Node) -> list[str]:
    """The QIs the node generalises to '*' (their hierarchy's top: the release keeps nothing of
    them), for the output to name with the alternatives (issue 34)."""
    return [
        h.column
        for h, lvl in zip(plan.hierarchies, node, strict=True)
        if h.sql(int(lvl or 0), ident(h.column)) == "'*'"
    ]


def notes(dialect: str, kind: str) -> list[str]:
    """What the published form cannot hide (issue 32), for the output to say beside the result."""
    out = []
    if kind == "view":
        out.append(
            "a view is a new release at every read: rows added to the source later change what it "
            "returns (and show when they came); publish a table (--as table) for a fixed snapshot"
        )
    if dialect == "duckdb":
        out.append(
            "a DuckDB file has no access control: whoever can open it reads the source and everything "
            "else in it, not only the release; give readers a copy holding the release alone"
        )
    if dialect == "spark":
        out.append(
            "Spark has no access control of its own here: whoever can reach the session, the warehouse "
            "directory or the files reads the source too; give readers a copy holding the release alone"
        )
    if dialect == "postgres":
        out.append(
            "PostgreSQL: any role that can connect still sees the source's name, column names and size "
            "statistics (pg_class, pg_attribute, pg_stat_user_tables); grant readers the release only "
            "(publish.grant), never the source"
        )
    return out


def _check_grant(be: Backend, policy: Policy) -> None:
    """publish.grant names roles of this database (refused before the search, not after it)."""
    if not policy.publish_grant:
        return
    bad = [r for r in policy.publish_grant if not isinstance(r, str) or not r]
    if bad:
        raise SqlanonError(f"publish.grant: expected a list of role names, got {bad[0]!r}")
    if be.dialect != "postgres":
        raise SqlanonError(
            f"publish.grant: {be.dialect} has no roles to grant a release to (PostgreSQL only)"
        )
    missing = missing_roles(be, list(policy.publish_grant))
    if missing:
        raise SqlanonError(f"publish.grant: no role {missing[0]!r} on this database; create it first")


def preflight(be: Backend, policy: Policy, target: Relation | None, replace: bool) -> Preflight:
    """Resolve source, population and target by catalogue identity and refuse, before searching,
    every target that would modify a source or lose data: the source itself (in any spelling), the
    population, a relation the source or population reads (through views), an existing target
    without ``--replace``, one that other views read, a missing schema, a name the engine would
    truncate, and a role of publish.grant that does not exist."""
    _check_grant(be, policy)
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
    return Preflight(src, tid, tuple(grants(be, tid)), tuple(view_options(be, tid)))


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
    perturb: dict[str, Any] | None = None,
    partition: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build, verify and swap in ONE transaction (DuckDB and PostgreSQL have transactional DDL).

    Any failure, interrupt or kill before the commit rolls everything back: no staging relation
    can be left behind, and the only relation dropped is the old target, inside the swap. The
    staging and swap names are sqlanon's own short names (``sqlanon_stage_<hex>``), never derived
    from the target's, so no engine truncates them onto an existing relation; the CREATE has no
    IF NOT EXISTS, so a name taken by anyone else fails instead of being reused or dropped.
    """
    tag = uuid.uuid4().hex[:12]
    # In the existing target's own schema (an unqualified target may sit anywhere on the search
    # path), so that the swap renames within one schema.
    home = target
    if pre.target is not None:
        catalog = pre.target.db if be.dialect == "duckdb" else target.catalog
        home = Relation(target.name, pre.target.schema, catalog)
    elif target.schema is None and home_schema(be) is not None:  # PostgreSQL: the user's own path
        home = Relation(target.name, home_schema(be))
    staging = home.with_name(f"sqlanon_stage_{tag}")
    old = home.with_name(f"sqlanon_old_{tag}")
    ctx = release_context(policy, plan.hierarchies, node, src_cols, perturb, partition)
    # PostgreSQL: a view a SELECT-only reader can query safely (sqlanon/engines/definer.py).
    definer = None
    if kind == "view" and be.dialect == "postgres":
        qcol = internal_prefix(src_cols + [c.name for c in policy.columns]) + "query"
        definer = Definer.named(str(staging.schema), tag, qcol)
    readers = [("" if r.upper() == "PUBLIC" else r, "SELECT", False) for r in policy.publish_grant]
    with be.atomic() as commit:
        if definer is None:
            be.execute(f"publish/create_{kind}", kind="create", target=staging, **ctx)
        else:
            definer.create(be, ctx)
            be.execute(
                "publish/create_definer_view", kind="create", target=staging, call=definer.call(), **ctx
            )
        for option, setting in pre.options if kind == "view" else ():
            be.execute("publish/view_option", kind="alter", target=staging, option=Sql(option), value=setting)
        for grantee, privilege, grantable in [*pre.grants, *readers]:
            be.execute(
                "publish/grant",
                kind="grant",
                target=staging,
                grantee=grantee,
                privilege=_privilege(privilege),
                grantable=grantable,
            )
            if definer is not None and privilege.upper() == "SELECT":
                definer.grant(be, grantee)  # PostgreSQL checks EXECUTE as the reader, even in a view
        published = verify(
            plan, staging, node if partition is None else None, ctx if kind == "view" else None
        )
        # The swap: readers see the old target or the new one, never neither.
        existing = identify(be, target, "target")
        gone = []
        if existing is not None:
            if not replace:
                raise SqlanonError(f"target: {str(target)!r} appeared meanwhile; pass --replace")
            if pre.target is None or not existing.same(pre.target) or existing.oid != pre.target.oid:
                raise SqlanonError(f"target: {str(target)!r} changed during the run; nothing published")
            gone = companions(be, existing)  # the old view's function and row type, by dependency
            be.execute(f"publish/rename_{existing.kind}", kind="alter", source=target, new_name=old.name)
        be.execute(f"publish/rename_{kind}", kind="alter", source=staging, new_name=target.name)
        if existing is not None:
            _drop(be, old, existing.kind)
        for c in gone:
            drop_definer(be, c.function, c.table)
        commit(str(target))
    published["source"] = str(target)
    return published


_PRIVILEGES = {"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"}


def _privilege(name: str) -> Sql:
    if name.upper() not in _PRIVILEGES:
        raise SqlanonError(f"target: cannot carry over the privilege {name!r} of the old target")
    return Sql(name.upper())


def _anonymise_mondrian(
    be: Backend,
    policy: Policy,
    plan: Plan,
    pert: Perturbed,
    out: dict[str, Any],
    kind: str,
    target: Relation | None,
    replace: bool,
    dry_run: bool,
    pre: Preflight,
    progress: Progress | None,
) -> dict[str, Any]:
    """Mondrian instead of a lattice search: partition, then publish the local recoding exactly as
    a node's release (one transaction, measured again)."""
    # A published table finds each record's partition through a map of the working table (any
    # number of partitions); a view and the printed SQL carry the cut tree (TREE_LIMIT).
    materialised = kind == "table" and not dry_run
    found, where = run_mondrian(plan, table=materialised)  # its rounds where search.where says
    src, ctx = mondrian_release(plan, policy, found, table=materialised)
    res = src[0]
    top = tuple(0 for _ in plan.heights)
    out.update(
        {
            **where,
            "algorithm": "mondrian",
            "node": {},
            "minimal_nodes": [],
            "nodes_total": 0,
            "nodes_checked": 0,
            "queries": res.queries,
            "rounds": res.rounds,
            "partitions": res.partitions,
            "optimum": {"metric": "ncp", "value": res.metrics["ncp"]},
            "mondrian": res.metrics,
            "metrics": mondrian_metrics(plan, res),
            "suppressed_records": 0,
            "rows": plan.n_rows,
            "target": str(target) if target else None,
            "publish_as": kind,
            "notes": notes(be.dialect, kind),
        }
    )
    if pert.measured is not None:
        out["perturbation"] = pert.measured
    src_cols = src[1]
    out["excluded_columns"] = [c for c in src_cols if c not in {s.name for s in policy.columns}]
    out["sql"] = (
        None
        if materialised
        else release_sql(
            policy,
            plan.hierarchies,
            top,
            be.dialect,
            printed_target(policy, be, kind),
            kind,
            src_cols,
            pert.ctx,
            ctx,
            definer=True,
        )
    )
    if dry_run:
        out["published"] = None
        return out
    assert target is not None
    out["sql"] = None
    out["leftovers"] = [str(r) for r in leftovers(be)]
    published = _publish(be, policy, plan, top, target, kind, replace, src_cols, 0, pre, pert.ctx, ctx)
    out["published"] = release_shown(published, out)
    return out


def printed_target(policy: Policy, be: Backend | None, kind: str, dialect: str | None = None) -> Relation:
    """The relation printed SQL creates (``compile``, ``anonymise --dry-run``: one text): the
    policy's target, else ``<source>_anon``; a PostgreSQL view's schema-qualified, as publishing
    places it (the user's own schema), since its definer function and table are created beside it."""
    target = policy.target or policy.source.with_name(f"{policy.source.name}_anon")
    if (dialect or (be.dialect if be else None)) == "postgres" and kind == "view" and target.schema is None:
        # An existing target is replaced where it is (publish's swap), else created at home.
        found = identify(be, target, "target") if be is not None else None
        home = found.schema if found is not None else (home_schema(be) if be is not None else None)
        target = Relation(target.name, home or "public")
    return target


def compile_release(
    policy: Policy, dialect: str, levels_text: Levels | None, be: Backend | None, kind: str | None = None
) -> str:
    """CREATE VIEW (or TABLE) text for ``dialect``, at ``--levels`` or at the searched optimum."""
    kind = kind or policy.publish_as
    if policy.privacy.dp is not None:  # its sample and node are drawn when it is published
        raise SqlanonError("privacy.differential_privacy: SafePub's release is drawn by `sqlanon anonymise`")
    check_hash_release(policy, kind)
    target = printed_target(policy, be, kind, dialect)
    if levels_text is not None and be is None:
        hierarchies = build_hierarchies(search_policy(policy, policy.source) if policy.perturbed else policy)
        names = [h.column for h in hierarchies]
        node = parse_levels(levels_text, names, [h.height for h in hierarchies])
        return release_sql(policy, hierarchies, node, dialect, target, kind, definer=True)
    assert be is not None
    pert = materialise(be, policy)
    mondrian = levels_text is None and policy.search.algorithm == "mondrian"
    plan = prepare(be, pert.policy, walk=levels_text is None, coded=not mondrian)  # Mondrian: no coded table
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    if mondrian:
        (_res, names), part = mondrian_release(plan, policy, run_mondrian(plan)[0])
        top = tuple(0 for _ in plan.heights)
        return release_sql(
            policy, plan.hierarchies, top, dialect, target, kind, names, pert.ctx, part, definer=True
        )
    if levels_text is not None:
        node = parse_levels(levels_text, plan.qi_names, plan.heights)
    else:
        _result, node, _, _where = walk(plan, policy.search.algorithm, policy.search.metric)
    return release_sql(
        policy, plan.hierarchies, node, dialect, target, kind, src_cols, pert.ctx, definer=True
    )
