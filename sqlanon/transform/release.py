"""The release of a node as SQL: identifiers dropped, masked or hashed, quasi-identifiers
generalised, and the records of every violating class removed, checked inside the statement so a
view enforces the policy at read time (``templates/publish/_release.sql.j2``)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from sqlanon.engines.definer import Definer
from sqlanon.errors import SqlanonError
from sqlanon.measure.assessment import EPS, _l_rank, _sort_key, checked_sensitive, requirement_checks
from sqlanon.measure.presence import release_filter
from sqlanon.measure.tcloseness_hier import hier_context
from sqlanon.policy import ColumnSpec, Policy
from sqlanon.relation import Relation
from sqlanon.sql import secrets
from sqlanon.sql.builders import as_text, hash_text
from sqlanon.sql.compile import CANONICAL, Sql, ident, to_sql
from sqlanon.transform.hierarchy import Hierarchy
from sqlanon.transform.perturb import context as perturb_context

Node = tuple[int | None, ...]


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
    policy: Policy,
    hierarchies: list[Hierarchy],
    node: Node,
    source_columns: list[str] | None = None,
    perturb: dict[str, Any] | None = None,
    partition: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Template context for ``publish/_release``: output columns, class expressions, checks.
    With ``partition`` (:func:`sqlanon.transform.partition.partition_context`) the QIs are their
    Mondrian partition's labels and the classes are the partitions.

    With perturbation the release reads the perturbed rows (``perturb``: the context of
    ``templates/_macros/perturb.sql.j2``, built from the source's typed columns; without it, from
    the declared ones) instead of the source; a perturbed quasi-identifier is published as
    perturbed, not generalised, and splits no class."""
    if policy.perturbed and perturb is None:
        perturb = perturb_context(policy, None)
    by_name = {h.column: (h, lvl) for h, lvl in zip(hierarchies, node, strict=True)}
    mask = policy.privacy.suppression_mode == "mask"
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
        elif spec.perturb is not None:
            expr = col  # the perturbed value (the release reads the perturbed rows)
        elif spec.role == "quasi" and partition is not None:
            expr = partition["label_cols"][name]
        elif spec.role == "quasi":
            h, lvl = by_name[name]
            expr = h.sql(int(lvl or 0), col)
            if expr != "'*'":  # a fully suppressed column splits no class (and engines refuse
                class_exprs.append(expr)  # a constant in a window ORDER BY)
        else:
            expr = col
        masked = Sql(f"r.{col}")
        if mask and spec.role == "quasi" and spec.perturb is None:
            expr, masked = as_text(expr), Sql("'*'")  # one type for the kept and the masked rows
        out_cols.append({"alias": col, "expr": expr, "masked": masked})
    internal = internal_prefix(list(order) + [c.name for c in policy.columns])
    attrs, alias = [], {}
    for i, s, ordered in checked_sensitive(policy):
        alias[s] = f"a{i}"
        attrs.append(
            {
                "p": Sql(f"a{i}"),
                "pm": Sql(f"a{i}_m"),
                "sid_alias": ident(f"{internal}sid_{i}"),
                "sort_key": _sort_key(policy, s, ident(s)),
                "l_rank": _l_rank(policy, s),
                "ordered": ordered,
                "likeness": any(r.attribute == s for r in policy.privacy.likeness),
                **hier_context(policy, s, ident(s)),  # emd-hierarchical, over the release's rows
            }
        )
    checks = requirement_checks(policy, alias)
    any_check = exp.or_(*[c for _, c in checks]) if checks else exp.false()
    n_alias = f"{internal}n"
    return {
        # Without sensitive attributes to check and without masking, a class needs only its size:
        # a window count partitioned by the class (hashed, no sort of every row) replaces the
        # DENSE_RANK class id, its GROUP BY and the join back (issue 17: 1e6 rows, 4x faster).
        "count_only": not attrs and not mask,
        "n_alias": ident(n_alias),
        "count_check": Sql(_count_check(any_check, n_alias, "r").sql(CANONICAL)),
        # The same check over the size column of a frequency table (freq/base's class_check):
        # the release measured from its source in one pass (sqlanon/measure/release.py).
        "class_check": Sql(_count_check(any_check, n_alias, "g").sql(CANONICAL)),
        "source": policy.source,
        "pt": perturb,
        "mp": partition,
        "mask": mask,
        "out_cols": out_cols,
        "class_exprs": [partition["pid"]] if partition is not None else class_exprs,
        "cid_alias": ident(f"{internal}cid"),
        "attrs": attrs,
        "any_check": Sql(any_check.sql(CANONICAL)),
        # k-map, delta-presence, the profitability games: their failing classes removed too, as
        # ARX suppresses them (sqlanon/measure/presence.py, _macros/population_filter.sql.j2).
        "popf": None if partition is not None else release_filter(policy, _node_exprs(by_name), EPS),
    }


def _node_exprs(by_name: dict[str, tuple[Hierarchy, int | None]]) -> dict[str, Sql]:
    return {name: h.sql(int(lvl or 0), ident(name)) for name, (h, lvl) in by_name.items()}


def _count_check(check: exp.Expression, n_alias: str, table: str) -> exp.Expression:
    """The requirement checks on a class's size ``c.n`` rewritten onto the column
    ``<table>.<n_alias>``: the window count of the count-only release (``r``), or the class
    size of a frequency table (``g``)."""

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.name == "n" and node.table == "c":
            return exp.column(n_alias, table, quoted=True)
        return node

    return check.copy().transform(swap)


def hash_key(env: Mapping[str, str] | None = None) -> bytes:
    """The key of ``action: hash``: ``SQLANON_HASH_KEY`` or the file ``SQLANON_HASH_KEY_FILE``
    (never the policy, which travels; :func:`sqlanon.sql.secrets.read_key`).

    A keyed hash (HMAC-SHA-256, RFC 2104) stops the attack that reversed an unkeyed MD5 column with
    one join: without the key nobody can compute the pseudonym of a guessed identifier. It does not
    stop whoever holds the key, and one value always gives one pseudonym under one key, so releases
    with the same key are linkable: pseudonymisation, not anonymisation. The message never shows the
    key, and no statement holds it (the SQL reads it from the session's secret relation).
    """
    return secrets.read_key("hash", env)


def _hash(col: Sql) -> Sql:
    hash_key()  # refused here, before any statement, when the key is missing or short
    return hash_text(col, "hash")


def release_sql(
    policy: Policy,
    hierarchies: list[Hierarchy],
    node: Node,
    dialect: str,
    target: Relation,
    kind: str = "view",
    source_columns: list[str] | None = None,
    perturb: dict[str, Any] | None = None,
    partition: dict[str, Any] | None = None,
    *,
    definer: bool = False,
) -> str:
    """The release's CREATE. With ``definer`` (``sqlanon compile``: what publishing runs), a
    PostgreSQL view as :func:`sqlanon.publish._publish` creates it, through a definer function
    (engines/definer.py): the row type, the stored query, the function and its REVOKE, then the
    view, joined by ``;``; ``target`` must then be schema-qualified."""
    ctx = release_context(policy, hierarchies, node, source_columns, perturb, partition)
    if definer and dialect == "postgres" and kind == "view":
        return _definer_script(policy, ctx, target, source_columns or [])
    return to_sql(f"publish/create_{kind}", dialect, kind="create", target=target, **ctx)


def _definer_script(policy: Policy, ctx: dict[str, Any], target: Relation, source_columns: list[str]) -> str:
    """The statements of a published PostgreSQL view, named from a hash of the release (the same
    text each time), the function's settings FROM CURRENT (the session that runs the script)."""

    def render(name: str, kind: str, context: dict[str, object]) -> str:
        return to_sql(name, "postgres", kind=kind, **context)

    qcol = internal_prefix([*source_columns, *[c.name for c in policy.columns]]) + "query"
    text = f"{target}\n{render('publish/release_rows', 'select', {'qcol': qcol, **ctx})}"
    fn = Definer.named(str(target.schema), hashlib.sha256(text.encode()).hexdigest()[:12], qcol)
    out = [sql for _, sql in fn.statements(render, Definer.settings(None), ctx)]
    view = render("publish/create_definer_view", "create", {"target": target, "call": fn.call(), **ctx})
    return ";\n".join([*out, view])


# ---------------------------------------------------------------------------------------------------


def check_hash_release(policy: Policy, kind: str) -> None:
    """A release that needs a secret (a hashed identifier, a perturbed column) is published as a
    table: its SQL reads the key from the session's secret relation, which a view cannot reach at
    read time, and a view whose definition held the key would give it to every reader (PostgreSQL
    shows view definitions to any role). The key is read here, so a missing one fails before any work."""
    hashed = [c.name for c in policy.identifiers if c.action == "hash"]
    if hashed:
        hash_key()
    if policy.perturbed or policy.privacy.dp is not None:  # SafePub's sample is keyed too
        secrets.read_key("perturb")
    if policy.privacy.dp is not None and kind == "view":  # a view would read the whole source
        raise SqlanonError(
            "privacy.differential_privacy: SafePub's release is a sample drawn once; publish it as a "
            "table (--as table or publish.as: table)"
        )
    names = policy.secret_columns
    if names and kind == "view":
        key, what = ("action", "action hash") if names[0] in hashed else ("perturb", "perturb")
        raise SqlanonError(
            f"columns.{names[0]}.{key}: {what} needs publishing "
            "as a table (--as table or publish.as: table); a view would need the secret key at every read, "
            "where its readers could reach it"
        )
