"""The rows a classifier sees: the source keyed and split in SQL, and a release materialised with
the split carried along (session-temporary tables, dropped when the session ends).

The split follows seed 002 section 5.1 (90/10 train/test): a row is in the test set when
u < 0.1, u = ``uniform('sqlanon-split|' || key)`` (the first 32 bits of an MD5,
:func:`sqlanon.sql.builders.uniform`), so the same rows are test rows on every engine and in every
release (a release only removes rows). The key is the policy's ``key`` column, else the whole
declared row with its number among identical rows, exactly the perturbation's row key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend, Column
from sqlanon.lattice import Plan
from sqlanon.policy import Policy, Privacy
from sqlanon.relation import Relation
from sqlanon.sql.builders import uniform
from sqlanon.sql.compile import CANONICAL, Sql, ident
from sqlanon.transform.perturb import _row_text, _text
from sqlanon.transform.release import internal_prefix, release_context

#: The share of rows in the test set (seed 002 section 5.1: 90/10).
TEST_SHARE = 0.1
SPLIT_SALT = "sqlanon-split|"
SAMPLE_SALT = "sqlanon-sample|"


@dataclass(frozen=True)
class Keyed:
    """The keyed source: a temporary table of the source's rows with key, u and v."""

    rel: Relation
    columns: list[Column]
    key: Sql
    u: Sql
    v: Sql
    prefix: str


def keyed_source(be: Backend, policy: Policy) -> Keyed:
    """Copy the source into a session-temporary table with each row's key, u (split) and v
    (sample order), computed in SQL (``templates/utility/keyed.sql.j2``)."""
    cols = be.require_columns(policy.source, "source")
    p = internal_prefix([c.name for c in cols] + [c.name for c in policy.columns]) + "ml_"
    key, rowtext = ident(f"{p}key"), ident(f"{p}rowtext")
    dedup = policy.key is None
    if dedup:
        dup = f"ROW_NUMBER() OVER (PARTITION BY t.{rowtext} ORDER BY t.{rowtext})"
        key_expr = Sql(f"t.{rowtext} || '#' || CAST({dup} AS TEXT)")
    else:
        col = exp.column(exp.to_identifier(policy.key, quoted=True), table="t")
        key_expr = Sql(_text(col).sql(CANONICAL))
    u, v = ident(f"{p}u"), ident(f"{p}v")
    rel = be.create_temp(
        "mlkey",
        "utility/keyed",
        source=policy.source,
        rt=ident(f"{p}rt"),
        kt=ident(f"{p}kt"),
        dedup=dedup,
        row_text=_row_text(policy) if dedup else None,
        rowtext=rowtext,
        key=key,
        key_expr=key_expr,
        u=u,
        v=v,
        u_expr=uniform(f"'{SPLIT_SALT}' || t.{key}"),
        v_expr=uniform(f"'{SAMPLE_SALT}' || t.{key}"),
    )
    return Keyed(rel, be.require_columns(rel, "source"), key, u, v, p)


def no_requirements(policy: Policy) -> Policy:
    """The policy with no requirement: its release at the bottom node is the original data."""
    return dataclasses.replace(policy, privacy=Privacy(suppression=policy.privacy.suppression))


def release_rows(
    be: Backend,
    policy: Policy,
    plan: Plan,
    keyed: Keyed,
    node: tuple[int, ...] | None,
    partition: dict[str, Any] | None = None,
    numeric_qis: list[str] | tuple[str, ...] = (),
) -> Relation:
    """The release of ``node`` (or of a Mondrian ``partition``) over the keyed source, as a
    session-temporary table: the columns it publishes, suppression applied by the release's own
    SQL (``templates/publish/_release.sql.j2``), plus the key, u, v and, for each numeric
    quasi-identifier, its original value (``<prefix>x_<i>``, for the interval bounds)."""
    pol = dataclasses.replace(policy, source=keyed.rel)
    names = [c.name for c in keyed.columns]
    ctx = release_context(
        pol, plan.hierarchies, node or tuple(0 for _ in plan.heights), names, None, partition
    )
    extra = [keyed.key, keyed.u, keyed.v]
    for i, q in enumerate(numeric_qis):
        ctx["out_cols"].append({"alias": ident(f"{keyed.prefix}x_{i}"), "expr": ident(q), "masked": None})
    for col in extra:
        ctx["out_cols"].append({"alias": col, "expr": col, "masked": Sql(f"r.{col}")})
    for c in ctx["out_cols"]:
        if c["masked"] is None:
            c["masked"] = Sql(f"r.{c['alias']}")
    return be.create_temp("mlrel", "publish/_release", **ctx)
