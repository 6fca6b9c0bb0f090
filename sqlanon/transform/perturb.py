"""Perturbation (seed 000 sections 2.2.1-2.2.2, seed 003): the policy's ``perturb:`` columns as
SQL, and what it does to them, measured in SQL.

The SQL is one chain of CTEs (``templates/_macros/perturb.sql.j2``) that the release reads instead
of the source. Every random number is an HMAC-SHA-256 of (column, draw, row key) under the secret
perturbation key (:func:`sqlanon.sql.builders.keyed_uniform`), never ``random()`` (noise that
changed at each computation could be averaged away) and never a seed a reader could see: without
the key nobody can recompute a record's noise or test a guessed original against it. The search
runs on the same rows, materialised once
(``templates/perturb/rows.sql.j2``), with the perturbed quasi-identifiers taken out of the lattice
(they are not generalised, issue 10): k, l, t and the risks are those of the release.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from sqlglot import exp

from sqlanon.engines import Backend, Column
from sqlanon.errors import SqlanonError
from sqlanon.perturbation import NUMERIC_METHODS
from sqlanon.policy import Policy
from sqlanon.relation import Relation
from sqlanon.sql.builders import keyed_uniform
from sqlanon.sql.compile import CANONICAL, Sql, ident, lit

#: Bins of the binned-distribution estimators: equal width over the original's [min, max].
BINS = 10
#: The largest magnitude a double holds every whole number up to (2^53): beyond it noise smaller
#: than the spacing of doubles vanishes and k-noise's gaps round to 0, so those methods refuse it.
EXACT = 2**53


def _prefix(names: list[str]) -> str:
    """A prefix no source column starts with (case-insensitively), for the chain's own names."""
    prefix = "__sqlanon_p_"
    lowered = [c.lower() for c in names]
    while any(c.startswith(prefix) for c in lowered):
        prefix = "_" + prefix
    return prefix


def _text(e: exp.Expression) -> exp.Expression:
    return exp.cast(e, exp.DataType.build("text"))


def _escaped(e: exp.Expression) -> exp.Expression:
    """The text with ``~`` doubled and ``|`` written ``~!``: no value then contains the separator,
    so two different rows never give the same row text (``('x|vy', 'z')`` and ``('x', 'y|vz')``
    would both read ``vx|vy|vz``, and the counter would tell them apart in no fixed order). No
    backslash: dialects disagree on what one means in a string literal."""
    doubled = exp.Anonymous(
        this="REPLACE", expressions=[e, exp.Literal.string("~"), exp.Literal.string("~~")]
    )
    return exp.Anonymous(
        this="REPLACE", expressions=[doubled, exp.Literal.string("|"), exp.Literal.string("~!")]
    )


def _row_text(policy: Policy) -> Sql:
    """The whole row as text (every declared column, NULL told apart from any value, the
    separator escaped): the default row key, with a duplicate counter appended (identical rows are
    told apart by their number)."""
    parts: list[exp.Expression] = []
    for c in policy.columns:
        col = exp.column(exp.to_identifier(c.name, quoted=True), table="s")
        marked = exp.DPipe(this=exp.Literal.string("v"), expression=_escaped(_text(col)))
        parts.append(
            exp.Case(
                ifs=[
                    exp.If(this=exp.Is(this=col.copy(), expression=exp.Null()), true=exp.Literal.string("n"))
                ]
            ).else_(marked)
        )
    out = parts[0]
    for p in parts[1:]:
        out = exp.DPipe(this=exp.DPipe(this=out, expression=exp.Literal.string("|")), expression=p)
    return Sql(out.sql(CANONICAL))


def context(policy: Policy, src_cols: list[Column] | None) -> dict[str, Any]:
    """The macro's context: one stage per perturbed column, and the output columns (every source
    column, perturbed ones replaced; then each perturbed column's original and auxiliary value).
    Without the source's columns (``compile`` without a database) the declared ones stand in and
    types are not checked."""
    check_suppression(policy)
    checked = src_cols is not None
    if src_cols is None:
        src_cols = [Column(c.name, "") for c in policy.columns]
    types = {c.name: c for c in src_cols}
    p = _prefix([c.name for c in src_cols])
    key_name = f"{p}key"
    key = ident(key_name)
    cols = []
    for i, spec in enumerate(policy.perturbed):
        pert = spec.perturb
        assert pert is not None
        col = types.get(spec.name)
        if col is None:
            raise SqlanonError(f"columns.{spec.name}: no such column in {str(policy.source)!r}")
        if checked and (pert.method in NUMERIC_METHODS or pert.width is not None) and not col.numeric:
            raise SqlanonError(
                f"columns.{spec.name}.perturb: {pert.method} needs a numeric column; "
                f"{spec.name} is {col.type}"
            )

        def u(draw: str, name: str = spec.name) -> Sql:
            # HMAC(K, "<length>:<column>|<draw>|<row key>"): the length keeps two columns' texts
            # apart ("a|b" then draw "c" against "a" then "b|c"); K is the secret perturbation key.
            keycol = exp.column(exp.to_identifier(key_name, quoted=True), table="t")
            text = exp.DPipe(this=exp.Literal.string(f"{len(name)}:{name}|{draw}|"), expression=keycol)
            return keyed_uniform(text.sql(CANONICAL))

        n = lambda s, i=i: ident(f"{p}{s}{i}")  # noqa: E731 - names of this stage
        c: dict[str, Any] = {
            "method": pert.method,
            "x": ident(spec.name),
            "y": n("y"),
            "aux": n("aux"),
            "stage": n("s"),
            "n1": n("a"),
            "n2": n("b"),
            "pos": n("pos"),
            "h": n("h"),  # the helper value of a stage (delta, the minimum, the count, the block)
            "u1": u("a"),
            "u2": u("b"),
            "k": lit(pert.k or 0),
            "k_minus_1": lit((pert.k or 1) - 1),
            "retain": lit(float(pert.retain)),
            "p": lit(float(pert.p or 0)),
            "width": lit(float(pert.width)) if pert.width is not None else None,
            "start": lit(float(pert.start)) if pert.start is not None else Sql(f"b.{n('h')}"),
        }
        if pert.method == "noise":
            c["noise"] = _noise(pert.distribution, float(pert.scale or 0), u("a"), u("b"))
        c["step"] = step = rounding(pert, col if checked else None)
        if step is not None and pert.method == "noise" and pert.distribution == "uniform":
            if float(pert.scale or 0) <= step / 2:
                raise SqlanonError(
                    f"columns.{spec.name}.perturb: rounding to a multiple of {step:g}"
                    f"{' (an integer column is published as whole numbers)' if pert.round is None else ''} "
                    f"would cancel uniform noise of scale {pert.scale:g}: every value would come back "
                    f"unchanged; use a scale above {step / 2:g}"
                )
        c["published"] = _rounded(c["y"], step, bool(col is not None and checked and col.integral))
        cols.append(c)
    out_cols = []
    perturbed = {c.name: cols[i] for i, c in enumerate(policy.perturbed)}
    for col in src_cols:
        name = ident(col.name)
        out_cols.append(
            {"expr": perturbed[col.name]["published"] if col.name in perturbed else name, "alias": name}
        )
    for i, spec in enumerate(policy.perturbed):
        out_cols.append({"expr": ident(spec.name), "alias": ident(f"{p}x{i}")})
        out_cols.append({"expr": cols[i]["aux"], "alias": cols[i]["aux"]})
    out_cols.append({"expr": key, "alias": key})  # checked by perturb/keys; never published
    dedup = policy.key is None
    rowtext = ident(f"{p}rowtext")
    dup = f"ROW_NUMBER() OVER (PARTITION BY t.{rowtext} ORDER BY t.{rowtext})"  # T-SQL needs the ORDER BY
    return {
        "source": policy.source,
        "base": ident(f"{p}base"),
        "out": ident(f"{p}perturbed"),
        "key": key,
        "rowtext": ident(f"{p}rowtext"),
        "dedup": dedup,
        "row_text": _row_text(policy) if dedup else None,
        "key_expr": (
            Sql(f"t.{rowtext} || '#' || CAST({dup} AS TEXT)")
            if dedup
            else Sql(_text(exp.column(exp.to_identifier(policy.key, quoted=True), table="t")).sql(CANONICAL))
        ),
        "cols": cols,
        "out_cols": out_cols,
        "orig": [ident(f"{p}x{i}") for i in range(len(cols))],
    }


#: Methods whose published value of a record depends on other records' values (swapped in, drawn
#: from the column, averaged, or the noise's scale taken from the data's gaps).
CROSS_RECORD = ("swap", "pram", "k-pram", "microaggregate", "k-noise")


def check_suppression(policy: Policy) -> None:
    """Perturbation runs over every source record, before the search decides which records the
    release suppresses: a cross-record method would then carry a suppressed record's value onto a
    published row (a swapped-in income, a PRAM draw of a rare value, a group mean, k-noise's scale).
    So such a method is refused where the release may remove records (``suppression_mode: remove``
    with a suppression limit above 0); masked records keep their values in the release anyway."""
    priv = policy.privacy
    if priv.suppression <= 0 or priv.suppression_mode == "mask":
        return
    for spec in policy.perturbed:
        if spec.perturb is not None and spec.perturb.method in CROSS_RECORD:
            raise SqlanonError(
                f"columns.{spec.name}.perturb: {spec.perturb.method} moves values between records, so a "
                "record the release suppresses would show through published rows; use privacy.suppression: 0 "
                "or suppression_mode: mask with it (or noise, whose value stays with its record)"
            )


def shown(measured: dict[str, Any] | None, suppressed: int) -> dict[str, Any] | None:
    """The perturbation figures shown beside a release: computed over every source record, so where
    the release suppresses records only what does not depend on their values is shown."""
    if measured is None or not suppressed:
        return measured
    return {
        name: {
            "method": m["method"],
            "describe": m["describe"],
            "not_shown": f"the figures count every source record, including the {suppressed} the release "
            "suppresses",
        }
        for name, m in measured.items()
    }


def rounding(pert: Any, col: Column | None) -> float | None:
    """The step a computed value (noise, k-noise, microaggregation) is published at: the policy's
    ``round``, else 1 for an integer column (whole numbers stay whole: added to a whole number, noise
    of any finite resolution would otherwise tell which whole numbers fit the published value), else
    none (the double as computed)."""
    if pert.method not in NUMERIC_METHODS:
        return None
    if pert.round is not None:
        return float(pert.round)
    return 1.0 if col is not None and col.integral else None


def _rounded(y: Sql, step: float | None, integral: bool) -> Sql:
    """``y`` rounded half up to a multiple of ``step`` (FLOOR(y / step + 1/2) * step: engines round
    halves differently, FLOOR is the same everywhere); a step of 1/n divides by n, which gives the
    double nearest the decimal (25.97, not 25.970000000000002). An integer column with a whole step
    is published as BIGINT."""
    if step is None:
        return y
    inv = 1 / step
    if step < 1 and abs(inv - round(inv)) < 1e-9:
        out = f"FLOOR({y} * {lit(float(round(inv)))} + 0.5) / {lit(float(round(inv)))}"
    else:
        out = f"FLOOR({y} / {lit(step)} + 0.5) * {lit(step)}"
    if integral and float(step).is_integer():
        # NULL beyond 2^62 rather than an overflow error: such a column is refused by measure()
        # (a double holds whole numbers exactly only up to 2^53), which names it in one line.
        guarded = exp.maybe_parse(
            f"CASE WHEN ABS({out}) < 4611686018427387904.0 THEN {out} END", dialect=CANONICAL
        )
        return Sql(exp.cast(guarded, exp.DataType.build("bigint")).sql(CANONICAL))
    return Sql(out)


def _noise(distribution: str, scale: float, ua: Sql, ub: Sql) -> Sql:
    """The noise term: Unif[-a, a] as a (2u - 1); Laplace(b) by inversion,
    -b sign(u - 1/2) ln(1 - 2 |u - 1/2|); N(0, sigma^2) by Box-Muller, sigma sqrt(-2 ln u) cos(2 pi v)."""
    s = lit(scale)
    if distribution == "uniform":
        return Sql(f"{s} * (2 * {ua} - 1)")
    if distribution == "laplace":
        return Sql(f"-{s} * SIGN({ua} - 0.5) * LN(1 - 2 * ABS({ua} - 0.5))")
    return Sql(f"{s} * SQRT(-2 * LN({ua})) * COS(2 * PI() * {ub})")


def search_policy(policy: Policy, rows: Relation) -> Policy:
    """The policy the search runs: on the perturbed rows, perturbed QIs out of the lattice (as
    insensitive columns: published as perturbed, not generalised)."""
    cols = tuple(
        dataclasses.replace(c, role="insensitive", perturb=None, hierarchy=None, weight=1.0)
        if c.perturb is not None and c.role == "quasi"
        else dataclasses.replace(c, perturb=None)
        for c in policy.columns
    )
    if not any(c.role == "quasi" for c in cols):
        raise SqlanonError(
            "columns: every quasi-identifier is perturbed; keep at least one to generalise "
            "(or declare the perturbed ones insensitive)"
        )
    return dataclasses.replace(policy, source=rows, columns=cols, key=None)


@dataclasses.dataclass(frozen=True)
class Perturbed:
    """The search's policy (on the perturbed rows), the rows, the macro's context and the
    measurements; for a policy without perturbation only ``policy`` is set (the original)."""

    policy: Policy
    rows: Relation | None = None
    ctx: dict[str, Any] | None = None
    measured: dict[str, Any] | None = None


def materialise(be: Backend, policy: Policy) -> Perturbed:
    """Materialise the perturbed rows (a temporary table), measure them, and derive the search's
    policy; a policy without perturbation comes back unchanged."""
    if not policy.perturbed:
        return Perturbed(policy)
    src_cols = be.require_columns(policy.source, "source")
    ctx = context(policy, src_cols)
    spol = search_policy(policy, policy.source)  # refuses before any work when no QI is left
    rows = be.create_temp("perturbed", "perturb/rows", pt=ctx)
    be.declare_columns(rows, _row_columns(policy, src_cols))  # read-only mode: a CTE
    _check_keys(be, policy, rows, ctx["key"])
    measured = measure(be, policy, rows, src_cols)
    return Perturbed(dataclasses.replace(spol, source=rows), rows, ctx, measured)


def _row_columns(policy: Policy, src_cols: list[Column]) -> list[Column]:
    """The columns of the perturbed rows as the search reads them: the source's, a perturbed
    column a double where the method computes one (noise, k-noise, microaggregation)."""
    specs = {c.name: c.perturb for c in policy.perturbed if c.perturb and c.perturb.method in NUMERIC_METHODS}
    out = []
    for c in src_cols:
        pert = specs.get(c.name)
        if pert is None:
            out.append(c)
            continue
        step = rounding(pert, c)
        whole = c.integral and step is not None and float(step).is_integer()
        out.append(Column(c.name, "BIGINT" if whole else "DOUBLE"))
    return out


def _check_keys(be: Backend, policy: Policy, rows: Relation, key: Sql) -> None:
    """Refuse a row key that is NULL or repeats (by its text, which is what is hashed)."""
    nulls, repeats = (int(v or 0) for v in be.query("perturb/keys", source=rows, key=key)[0])
    if not (nulls or repeats):
        return
    if policy.key is None:  # the whole row and a counter: unique by construction
        raise SqlanonError(f"key: the default row key repeats in {repeats} rows (please report this)")
    what = " and ".join(
        s
        for s in (f"NULL in {nulls} rows" if nulls else "", f"repeated in {repeats} rows" if repeats else "")
        if s
    )
    raise SqlanonError(
        f"key: {policy.key!r} is {what}; the row key must identify every row "
        "(or leave key out: the whole row is then the key)"
    )


# -- measuring -----------------------------------------------------------------------------------


def measure(be: Backend, policy: Policy, rows: Relation, src_cols: list[Column]) -> dict[str, Any]:
    """Per perturbed column: seed 003's estimators (bias, MSE, RMSE of the values; MSE and RMSE of
    the binned distribution), a goodness-of-fit statistic (two-sample Kolmogorov-Smirnov for numbers,
    chi-square for categories), the mean and variance before and after, and the method's risk
    figure. Refuses a release a method cannot protect (fewer records than k)."""
    src = {c.name: c for c in src_cols}
    p = _prefix(list(src))
    out: dict[str, Any] = {}
    for i, spec in enumerate(policy.perturbed):
        pert = spec.perturb
        assert pert is not None
        ctx = {"source": rows, "x": ident(f"{p}x{i}"), "y": ident(spec.name), "aux": ident(f"{p}aux{i}")}
        numeric = src[spec.name].numeric
        row = be.query("perturb/summary", numeric=numeric, **ctx)[0]
        n, changed = int(row[0] or 0), row[1]
        mn, mx = (row[2], row[3]) if numeric else (None, None)
        if mn is not None and not (math.isfinite(float(mn)) and math.isfinite(float(mx))):
            raise SqlanonError(
                f"columns.{spec.name}.perturb: {spec.name} holds NaN or infinite values "
                f"(between {float(mn)} and {float(mx)}); filter or cast them in a view first"
            )
        if pert.method in NUMERIC_METHODS and mn is not None and max(abs(mn), abs(mx)) > EXACT:
            raise SqlanonError(
                f"columns.{spec.name}.perturb: {pert.method} computes in doubles, which hold whole "
                f"numbers exactly only up to 2^53; {spec.name} reaches {max(abs(mn), abs(mx))} "
                "(subtract an offset or rescale it in a view first)"
            )
        step = rounding(pert, src[spec.name])
        delta = _f(row[10]) if numeric and pert.method == "k-noise" else None
        if step is not None and delta is not None and n and delta <= step / 2:
            why = " (an integer column is published as whole numbers)" if pert.round is None else ""
            raise SqlanonError(
                f"columns.{spec.name}.perturb: k-noise's delta is {delta:g} here, and rounding to a multiple "
                f"of {step:g}{why} "
                "would cancel it: every value would come back unchanged; use a larger k (or a finer round)"
            )
        k = pert.k or 0
        if pert.method in ("k-noise", "microaggregate") or (pert.method == "k-pram" and pert.width is None):
            if n < k:
                raise SqlanonError(
                    f"columns.{spec.name}.perturb: {pert.method} needs at least k = {k} values, "
                    f"the column has {n}"
                )
        m: dict[str, Any] = {"method": pert.method, "describe": pert.describe(), "values": n}
        m["changed_share"] = _f(changed)
        if numeric:
            bias, mse, mean_x, mean_y, var_x, var_y = row[4:10]
            m.update(
                {
                    "bias": _f(bias),
                    "mse": _f(mse),
                    "rmse": math.sqrt(mse) if mse is not None else None,
                    "mean": {"original": _f(mean_x), "perturbed": _f(mean_y)},
                    "variance": {"original": _f(var_x), "perturbed": _f(var_y)},
                }
            )
            if n:
                lo, hi = float(mn), float(mx)
                if not hi > lo:  # one value, or values a double cannot tell apart (beyond 2^53)
                    hi = lo + max(1.0, abs(lo))
                ks, bins_mse = be.query("perturb/ks", bins=BINS, lo=lit(lo), hi=lit(hi), **ctx)[0]
                m["ks"] = {"statistic": _f(ks), "critical_5pct": 1.358 * math.sqrt(2 / n)}
                m["binned"] = {  # over the original's range, which is not shown: its ends are raw values
                    "bins": BINS,
                    "mse": _f(bins_mse),
                    "rmse": math.sqrt(bins_mse) if bins_mse is not None else None,
                }
        else:
            chi, cats, pmin, pmax = be.query("perturb/categories", **ctx)[0]
            m["chi_square"] = {"statistic": _f(chi), "df": max(int(cats or 0) - 1, 0)}
            if pert.method == "pram":
                r = pert.retain
                m["posterior"] = {
                    "rarest": r + (1 - r) * float(pmin or 0),
                    "max": r + (1 - r) * float(pmax or 0),
                }
        m["risk"] = _risk(be, pert, ctx, n, row, numeric)
        if pert.method in ("noise", "k-noise") and n and not changed:
            raise SqlanonError(
                f"columns.{spec.name}.perturb: {pert.describe()} changes no value of {spec.name} (too small "
                "for its values' precision or its rounding): nothing would be perturbed; use a larger scale"
            )
        out[spec.name] = m
    return out


def _risk(be: Backend, pert: Any, ctx: dict[str, Any], n: int, row: tuple, numeric: bool) -> dict[str, Any]:
    if pert.method == "k-noise":
        delta = _f(row[10]) if numeric else None
        if delta is None or not n:
            return {"delta": delta}
        lo_cnt, below_k, below_half = be.query(
            "perturb/neighbours", reach=lit(2 * float(delta)), k=lit(pert.k), half=lit(pert.k / 2), **ctx
        )[0]
        return {
            "delta": delta,
            "min_within_2delta": int(lo_cnt),
            "share_below_k": _f(below_k),
            "share_below_half_k": _f(below_half),
        }
    if pert.method in ("k-pram", "microaggregate"):
        gmin, gmax, groups = be.query("perturb/groups", **ctx)[0]
        return {"groups": int(groups or 0), "smallest_group": gmin, "largest_group": gmax}
    if pert.method == "swap":
        block = math.floor((pert.p or 0) * n / 100)
        return {"block": block, "max_rank_distance": max(block - 1, 0)}
    return {}


def _f(v: Any) -> float | None:
    return None if v is None else float(v)
