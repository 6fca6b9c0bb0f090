"""Measuring a release relation against the policy, as publishing verifies it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlanon.engines import Backend
from sqlanon.measure.assessment import EPS, FrequencyTables, assess
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.compile import Sql


def release_check(
    be: Backend,
    policy: Policy,
    rel: Relation,
    *,
    reference: FrequencyTables,
    n_rows: int,
    population_exprs: list[Sql] | None,
    from_source: tuple[list[Sql], Sql, Sql] | None = None,
    local: Callable[[FrequencyTables], AbstractContextManager[Backend]] | None = None,
    create: Callable[..., Relation] | None = None,
) -> tuple[dict[str, Any], list[str], int]:
    """Measure a release relation ``rel``: (assess object, failing requirements, missing records).

    ``reference``: the source's frequency tables, for the verdicts of t-closeness and likeness
    (they compare with the source's distribution, as the search and ARX do); every figure returned
    is the release's own (:mod:`sqlanon.measure.release_stats`: nothing shown about a release is
    computed from records it suppressed). ``n_rows``: the source's records. The population, when
    there is one, is generalised by ``population_exprs`` (the release's node) so that journalist
    and marketer risk compare like with like (seed 000 section 5: F_j counts the population records
    of the release's class j); without them it is left out.

    ``from_source`` = (QI expressions, class check, size alias) measures a count-only release
    (one whose classes need only their size: no l or t, records removed) without reading it:
    ``rel`` is then the release's source, grouped by the release's QI expressions, and the
    classes that fail the release's own class-size check are left out, as the release's window
    count leaves them out. A GROUP BY of the view would pay for that window over every row (about
    twice a scan) and then group again; this is one GROUP BY of the source (issue 17: publishing
    near one scan). tests/test_publish_verify.py proves both measurements equal.

    ``local``: the checks run in a local DuckDB once the warehouse has grouped the release
    (:mod:`sqlanon.lattice.local_measure`). ``create``: builds the release's frequency table in
    place of ``be.create_temp`` (re-verification's hashed plan: :func:`sqlanon.metrics.verify.verify`).
    """
    cols = [c for c in policy.columns if c.role != "identifier"]
    check_policy = dataclasses.replace(
        policy,
        source=rel,
        columns=tuple(cols),
        population=policy.population if population_exprs is not None else None,
        privacy=dataclasses.replace(policy.privacy, suppression=0.0),
    )
    qi_exprs, check = None, None
    if from_source is not None:
        qi_exprs, check = from_source[0], (from_source[1], from_source[2])
    result = assess(
        be,
        check_policy,
        qi_exprs=qi_exprs,
        reference=reference,
        population_exprs=population_exprs,
        class_check=check,
        local=local,
        create=create,
    )
    # Measured with no suppression (every class of the release must hold), but the limit the
    # release was made under is the policy's: report that one, not 0.
    limit = policy.privacy.suppression
    result["suppression"].update(limit=limit, allowed_records=math.floor(limit * n_rows + EPS))
    missing = n_rows - result["rows"]
    bad = [req for req, ok in result["satisfied"].items() if not ok and req != "all"]
    if not bad and not result["satisfied"].get("all", True):
        bad = ["all"]
    return result, bad, missing


def without_classes(assessed: dict[str, Any]) -> dict[str, Any]:
    """``assessed`` without its most disclosive classes (``top_i1``, ``top_i2``), whose QI values
    are the source's: for figures shown beside a release (the report's *before*, ``evaluate``'s
    assessment before suppression), which must not name a class the release suppressed."""
    out = dict(assessed)
    if isinstance(out.get("information"), dict):
        out["information"] = {
            name: {k: v for k, v in info.items() if k not in ("top_i1", "top_i2")}
            for name, info in out["information"].items()
        }
    return out
