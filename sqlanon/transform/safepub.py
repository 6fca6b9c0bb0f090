"""SafePub's random sample as a session-temporary table (issue 35 item 1; sqlanon.safepub).

The search and the release then read the sample instead of the source, so that everything after
the sampling (the generalisation chosen by the exponential mechanism, the suppression of classes
below k) is computed over the sampled records only, as the theorem requires. The sample is drawn in
the database (``templates/safepub/sample.sql.j2``) from the release's secret perturbation key.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from sqlanon.engines import Backend
from sqlanon.errors import SqlanonError
from sqlanon.policy import Policy
from sqlanon.sql import secrets
from sqlanon.sql.builders import keyed_uniform
from sqlanon.sql.compile import CANONICAL, Sql, ident, lit
from sqlanon.transform.perturb import Perturbed, _prefix, _row_text, _text


def sample_context(policy: Policy, src_cols: list[str]) -> dict[str, object]:
    """The template's context: the source's columns, the row key, and the keyed draw below beta."""
    dp = policy.privacy.dp
    assert dp is not None
    p = _prefix(src_cols)
    key, rowtext = ident(f"{p}key"), ident(f"{p}rowtext")
    dedup = policy.key is None
    if dedup:  # identical rows told apart by their number, as perturbation does
        dup = f"ROW_NUMBER() OVER (PARTITION BY t.{rowtext} ORDER BY t.{rowtext})"
        key_expr = Sql(f"t.{rowtext} || '#' || CAST({dup} AS TEXT)")
    else:
        col = exp.column(exp.to_identifier(policy.key, quoted=True), table="t")
        key_expr = Sql(_text(col).sql(CANONICAL))
    # "safepub|" keeps these draws apart from perturbation's, whose texts start "<length>:".
    u = keyed_uniform(f"'safepub|' || t.{key}")
    return {
        "source": policy.source,
        "cols": [Sql(f"t.{ident(c)}") for c in src_cols],
        "key": key,
        "key_expr": key_expr,
        "dedup": dedup,
        "rowtext": rowtext,
        "row_text": _row_text(policy) if dedup else None,
        "u": u,
        "beta": lit(float(dp.beta)),
    }


def materialise_sample(be: Backend, policy: Policy) -> Perturbed:
    """Draw the sample (a temporary table) and derive the policy that reads it; the key is read
    first, so a missing one fails before any work."""
    if policy.perturbed:
        name = policy.perturbed[0].name
        raise SqlanonError(
            f"columns.{name}.perturb: privacy.differential_privacy does not compose with perturbation "
            "(SafePub's guarantee covers sampling, generalisation and suppression only)"
        )
    secrets.read_key("perturb")
    src_cols = [c.name for c in be.require_columns(policy.source, "source")]
    rows = be.create_temp("safepub_sample", "safepub/sample", **sample_context(policy, src_cols))
    be.declare_columns(rows, be.require_columns(policy.source, "source"))  # read-only mode: a CTE
    return Perturbed(dataclasses.replace(policy, source=rows), rows)
