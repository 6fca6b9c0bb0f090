"""Sample and population uniqueness: ARX's ``RiskModelSampleUniqueness`` and
``RiskModelPopulationUniqueness`` (the Pitman, Zayatz and SNB estimators and Dankar et al.'s rule).

Every figure is a function of the frequency-of-frequencies of the released classes (how many
classes hold 1, 2, ... records: ``assess``'s class-size histogram, one GROUP BY in the database), so
the estimators run here, in pure Python, on that small vector.

Sources (as ARX 3.9.2 cites and implements them, ``org.deidentifier.arx.risk``):

* Pitman (1996), *Some developments of the Blackwell-MacQueen urn scheme*: the two-parameter
  (theta, alpha) Poisson-Dirichlet model; theta and alpha by maximum likelihood on the sample's
  partition; population uniques ``Gamma(theta + 1) / Gamma(theta + alpha) * N^alpha``.
* Zayatz (1991), *Estimation of the percent of unique population elements on a microdata file
  using the sample*: the share of sample uniques that are population uniques, from the
  hypergeometric chance that a class of the population is drawn once.
* Chen and Keller-McNulty (1998), *Estimation of identification disclosure risk in microdata*
  (the slide negative binomial, SNB): its two moment equations in (alpha, beta) matched to the
  sample's classes of size 1 and 2; population uniques ``K beta^alpha``.
* Dankar, El Emam, Neisa and Roffey (2012), *Estimating the re-identification risk of clinical
  data sets*: Pitman where the sampling fraction is at most 10 %, else the lower of Zayatz and
  SNB (Zayatz where SNB has no estimate).

The module sits beside :mod:`sqlanon.perturbation`: the policy parses its keys with it, and
:mod:`sqlanon.measure.assessment` computes the figures with it; it imports neither.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from sqlanon.errors import PolicyError

UNIQUENESS_KINDS = ("sample_uniqueness", "population_uniqueness")
MODELS = ("dankar", "pitman", "zayatz", "snb")
#: Newton iterations per start; ARX's default solver runs up to 1000 per try.
_ITERATIONS = 200
#: ARX's default start values when the first start fails (ARXSolverConfiguration: a 4 x 4 grid).
_GRID = [(0.33 * i, 0.33 * j) for i in range(4) for j in range(4)]

Vec = tuple[float, float]


class UniquenessBound(float):
    """A ``privacy.risk`` bound (a float, as the other risk bounds are) that also carries the
    population model a population-uniqueness estimate needs: ``model`` and either ``population``
    (its size) or ``sampling_fraction`` (ARX's ``ARXPopulationModel``)."""

    model: str = "dankar"
    population: int | None = None
    sampling_fraction: float | None = None

    def population_size(self, sample_rows: int) -> float:
        """The population size N: as given, or the sample's size over the sampling fraction
        (rounded, as ``ARXPopulationModel.create(sampleSize, samplingFraction)`` does)."""
        if self.population is not None:
            return float(self.population)
        assert self.sampling_fraction is not None
        return float(round(sample_rows / self.sampling_fraction))


def _fail(key: str, msg: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {msg}")


def _fraction(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < float(v) <= 1:
        raise _fail(key, f"expected a number in (0, 1], got {v!r}")
    return float(v)


def parse_uniqueness(risk_raw: Mapping[str, Any]) -> dict[str, float]:
    """The uniqueness bounds among the ``privacy.risk`` keys (:func:`parse_bound` each)."""
    return {name: parse_bound(name, risk_raw[name]) for name in UNIQUENESS_KINDS if name in risk_raw}


def parse_bound(name: str, raw: Any) -> float:
    """``privacy.risk.sample_uniqueness: B`` (a share of records, 0 < B <= 1) or
    ``privacy.risk.population_uniqueness: {bound: B, model: dankar|pitman|zayatz|snb,
    population: N | sampling_fraction: F}``; a bad value is one PolicyError naming the key."""
    key = f"privacy.risk.{name}"
    if name == "sample_uniqueness":
        return _fraction(key, raw)
    if not isinstance(raw, Mapping):
        raise _fail(key, "expected a mapping {bound, model, population or sampling_fraction}")
    unknown = sorted(str(k) for k in raw if k not in ("bound", "model", "population", "sampling_fraction"))
    if unknown:
        raise _fail(f"{key}.{unknown[0]}", "unknown key")
    if "bound" not in raw:
        raise _fail(f"{key}.bound", "missing")
    out = UniquenessBound(_fraction(f"{key}.bound", raw["bound"]))
    out.model = str(raw.get("model", "dankar"))
    if out.model not in MODELS:
        raise _fail(f"{key}.model", f"expected one of {', '.join(MODELS)}, got {out.model!r}")
    if ("population" in raw) == ("sampling_fraction" in raw):
        raise _fail(key, "give exactly one of population (its size) and sampling_fraction")
    if "population" in raw:
        p = raw["population"]
        if isinstance(p, bool) or not isinstance(p, int) or p < 1:
            raise _fail(f"{key}.population", f"expected a positive whole number, got {p!r}")
        out.population = p
    else:
        out.sampling_fraction = _fraction(f"{key}.sampling_fraction", raw["sampling_fraction"])
    return out


# --------------------------------------------------------------------------------------------------
# Special functions (math has lgamma but no polygamma)
# --------------------------------------------------------------------------------------------------


def digamma(x: float) -> float:
    """psi(x): recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series
    (Abramowitz and Stegun 6.3.18); reflection for x < 0. NaN at the poles (0, -1, ...).

    >>> round(digamma(1.0), 12)  # -Euler's constant
    -0.577215664902
    """
    if x <= 0 and x == math.floor(x):
        return math.nan
    if x < 0:
        return digamma(1 - x) - math.pi / math.tan(math.pi * x)
    acc = 0.0
    while x < 10:
        acc -= 1 / x
        x += 1
    f = 1 / (x * x)
    series = f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f / 132))))
    return acc + math.log(x) - 0.5 / x - series


def trigamma(x: float) -> float:
    """psi'(x) for x > 0: recurrence psi'(x) = psi'(x + 1) + 1/x^2 up to x >= 10, then the
    asymptotic series (A&S 6.4.12). NaN for x <= 0 (never needed: every argument is > 0).

    >>> round(trigamma(1.0), 12)  # pi^2 / 6
    1.644934066848
    """
    if x <= 0:
        return math.nan
    acc = 0.0
    while x < 10:
        acc += 1 / (x * x)
        x += 1
    f = 1 / (x * x)
    series = (
        1 + f * (1 / 6 - f * (1 / 30 - f * (1 / 42 - f * (1 / 30 - f * (5 / 66 - f * 691 / 2730)))))
    ) / x
    return acc + 0.5 * f + series


def _newton(
    fun: Callable[[Vec], tuple[Vec, tuple[float, float, float, float]]],
    start: Vec,
    ok: Callable[[Vec], bool] | None = None,
    accept: Callable[[Vec], bool] | None = None,
) -> Vec:
    """A root of the 2-D system ``fun`` (values and Jacobian [[a, b], [c, d]]) by Newton's method
    from ``start``, then from ARX's start grid; NaNs where none converges. ``ok`` rejects an
    iterate (ARX's constraints), which abandons that start; ``accept`` rejects a root outside the
    model's parameter space, and the next start is tried."""
    for x in [start, *_GRID]:
        try:
            for _ in range(_ITERATIONS):
                (f1, f2), (a, b, c, d) = fun(x)
                if not (math.isfinite(f1) and math.isfinite(f2)):
                    break
                det = a * d - b * c
                if det == 0 or not math.isfinite(det):
                    break
                step = ((d * f1 - b * f2) / det, (a * f2 - c * f1) / det)
                x = (x[0] - step[0], x[1] - step[1])
                if not all(map(math.isfinite, x)) or (ok is not None and not ok(x)):
                    break
                if abs(step[0]) <= 1e-13 * max(1.0, abs(x[0])) and abs(step[1]) <= 1e-13 * max(
                    1.0, abs(x[1])
                ):
                    (g1, g2), _ = fun(x)
                    if abs(g1) <= 1e-6 and abs(g2) <= 1e-6 and (accept is None or accept(x)):
                        return x  # ARX's accuracy, on the objective
                    break
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):  # TypeError: a complex power
            continue
    return (math.nan, math.nan)


# --------------------------------------------------------------------------------------------------
# The estimators (population uniques, a count; divide by N for the share)
# --------------------------------------------------------------------------------------------------


def _stats(hist: Mapping[int, int]) -> tuple[float, float, float, float]:
    """(n records, u classes, c1 classes of size 1, c2 classes of size 2)."""
    n = float(sum(s * c for s, c in hist.items()))
    return n, float(sum(hist.values())), float(hist.get(1, 0)), float(hist.get(2, 0))


def pitman(hist: Mapping[int, int], big_n: float) -> float:
    """Population uniques under Pitman's model: (theta, alpha) solve the likelihood equations
    (Pitman 1996; Hoshino 2001, *Applying Pitman's sampling formula to microdata disclosure risk
    assessment*, eq. 6), in closed form with digamma and trigamma:

    sum_{i<u} 1/(theta + i alpha) = sum_{i<n} 1/(theta + i),
    sum_{i<u} i/(theta + i alpha) = sum_j c_j sum_{l<j} 1/(l - alpha);

    started from ARX's moment guess; uniques = Gamma(theta + 1) / Gamma(theta + alpha) N^alpha."""
    n, u, c1, c2 = _stats(hist)
    c2 = c2 or 1.0  # ARX: overestimate when no class has two records
    c = c1 * (c1 - 1) / c2
    t0 = (n * u * c - c1 * (n - 1) * (2 * u + c)) / (2 * c1 * u + c1 * c - n * c)
    a0 = (t0 * (c1 - n) + (n - 1) * c1) / (n * u)
    sizes = [(s, cnt) for s, cnt in hist.items() if s != 1]

    def fun(x: Vec) -> tuple[Vec, tuple[float, float, float, float]]:
        t, a = x
        r = t / a
        s0 = (digamma(r + u) - digamma(r + 1)) / a  # sum_{i<u} 1/(t + i a)
        q0 = (trigamma(r + 1) - trigamma(r + u)) / (a * a)  # sum_{i<u} 1/(t + i a)^2
        s1 = ((u - 1) - t * s0) / a  # sum i/(t + i a)
        q1 = (s0 - t * q0) / a  # sum i/(t + i a)^2
        q2 = ((u - 1) - 2 * t * s0 + t * t * q0) / (a * a)  # sum i^2/(t + i a)^2
        o2 = digamma(n + t) - digamma(t + 1)
        d2 = trigamma(t + 1) - trigamma(n + t)
        p1, p2 = digamma(1 - a), trigamma(1 - a)
        o4 = sum(cnt * (digamma(s - a) - p1) for s, cnt in sizes)
        d4 = sum(cnt * (p2 - trigamma(s - a)) for s, cnt in sizes)
        return (s0 - o2, s1 - o4), (d2 - q0, -q1, -q1, -q2 - d4)

    def fun_sums(x: Vec) -> tuple[Vec, tuple[float, float, float, float]]:
        # The same sums term by term: ARX's fallback where the closed form has no value (alpha < 0
        # puts trigamma at a negative argument). O(n + u) per step.
        t, a = x
        w = [1 / (t + i * a) for i in range(1, int(u))]
        s0, q0 = sum(w), sum(v * v for v in w)
        s1 = sum(i * v for i, v in enumerate(w, 1))
        q1 = sum(i * v * v for i, v in enumerate(w, 1))
        q2 = sum(i * i * v * v for i, v in enumerate(w, 1))
        o2 = sum(1 / (t + i) for i in range(1, int(n)))
        d2 = sum(1 / (t + i) ** 2 for i in range(1, int(n)))
        o4 = sum(cnt * sum(1 / (j - a) for j in range(1, s)) for s, cnt in sizes)
        d4 = sum(cnt * sum(1 / (j - a) ** 2 for j in range(1, s)) for s, cnt in sizes)
        return (s0 - o2, s1 - o4), (d2 - q0, -q1, -q1, -q2 - d4)

    t, a = _newton(fun, (t0, a0), ok=lambda x: x[0] >= 0)
    if math.isnan(t) or math.isnan(a):
        t, a = _newton(fun_sums, (t0, a0), ok=lambda x: x[0] >= 0)
    if math.isnan(t) or math.isnan(a) or a == 0:
        return math.nan
    try:
        v = math.exp(math.lgamma(t + 1) - math.lgamma(t + a) + a * math.log(big_n))
    except (ValueError, OverflowError):
        return math.nan
    return v if 0 <= v <= big_n else math.nan


def _hyper_one(big_n: float, size: int, n: float) -> float:
    """P(X = 1) for X hypergeometric: n draws from N items of which ``size`` are marked:
    size * C(N - size, n - 1) / C(N, n) = size n / (N - size + 1) prod_{i<size-1} (N - n - i)/(N - i),
    as a product of ratios (exact to a few ulps; log-gamma differences lose digits at large N)."""
    if size > big_n or n > big_n:
        return 0.0
    p = size * n / (big_n - size + 1)
    for i in range(size - 1):
        p *= max(big_n - n - i, 0.0) / (big_n - i)
        if p == 0:
            break
    return p


def zayatz(hist: Mapping[int, int], big_n: float) -> float:
    """Population uniques by Zayatz (1991) as ARX computes them: the chance that a sample unique
    is a population unique, P(1 | 1) = (c1/u) P_1 / sum_j (c_j/u) P_j with P_j the hypergeometric
    chance of drawing exactly one record of a class of size j, times c1 / f (f = n / N)."""
    n, u, c1, _ = _stats(hist)
    denom = sum(cnt / u * _hyper_one(big_n, s, n) for s, cnt in hist.items())
    if denom == 0:
        return math.nan
    return c1 * ((c1 / u) * _hyper_one(big_n, 1, n) / denom) / (n / big_n)


def _snb_classes(hist: Mapping[int, int], f: float) -> float:
    """K, the estimated number of non-empty population classes, as ARX's SNB estimates it
    (``ModelSNB.estimateNonEmptyEquivalenceClasses``, kept term for term, including its
    ``- 1`` per class size)."""
    _, u, c1, _ = _stats(hist)
    v1 = v2 = v3 = v4 = 0.0
    for s, cnt in hist.items():
        w = (1 - f) ** s * cnt
        v1 += s * f * f * (1 - f * f) ** (s - 1) * cnt
        v2 += w * (1 + f) ** s - 1
        v3 += w
        v4 += s * f * (1 - f) ** (s - 1) * cnt
    return u + c1 * (v1 / v2) * (v3 / v4) ** 2


def snb(hist: Mapping[int, int], big_n: float) -> float:
    """Population uniques under the slide negative binomial (Chen and Keller-McNulty 1998): alpha
    and beta solve E[c1] = c1 and E[c2] = c2, with g = (1 - f)(1 - beta):

    K f (beta / (1 - g))^alpha (alpha g / (1 - g) + 1) = c1,
    K alpha beta^alpha f^2 (1 - beta) / 2 (1 - g)^(alpha + 2) (2 - (1 - alpha) g) = c2

    (the equations as ARX's ``ModelSNB`` writes them), from (1, 1) then ARX's start grid;
    uniques = K beta^alpha. The
    Jacobian is a central difference (Newton converges the same; the root is what matters)."""
    n, _, c1, c2 = _stats(hist)
    f = n / big_n
    k = _snb_classes(hist, f)

    def eqs(a: float, b: float) -> Vec:
        g = (1 - f) * (1 - b)
        e1 = k * f * (b / (1 - g)) ** a * (a * g / (1 - g) + 1) - c1
        e2 = k * a * b**a * f * f * (1 - b) / 2 * (1 - g) ** (a + 2) * (2 - (1 - a) * g) - c2
        return e1, e2

    def fun(x: Vec) -> tuple[Vec, tuple[float, float, float, float]]:
        a, b = x
        ha, hb = 1e-7 * max(1.0, abs(a)), 1e-7 * max(1.0, abs(b))
        pa, ma, pb, mb = eqs(a + ha, b), eqs(a - ha, b), eqs(a, b + hb), eqs(a, b - hb)
        jac = ((pa[0] - ma[0]) / (2 * ha), (pb[0] - mb[0]) / (2 * hb))
        jac2 = ((pa[1] - ma[1]) / (2 * ha), (pb[1] - mb[1]) / (2 * hb))
        return eqs(a, b), (jac[0], jac[1], jac2[0], jac2[1])

    # A negative binomial needs alpha > 0 and 0 < beta <= 1: a root outside (alpha < 0, beta > 1
    # solves the equations on Adult's first 3,000 rows with N = 10,000) is no estimate; ARX's
    # solver does not reach it and reports none either.
    a, b = _newton(fun, (1.0, 1.0), accept=lambda x: x[0] > 0 and 0 < x[1] <= 1)
    try:
        v = k * b**a
    except (ValueError, OverflowError, ZeroDivisionError):
        return math.nan
    return v if isinstance(v, float) and math.isfinite(v) else math.nan


def _valid(v: float) -> bool:
    return not math.isnan(v) and v != 0


def dankar(hist: Mapping[int, int], big_n: float, fallback: bool = True) -> tuple[float, str]:
    """(uniques, model) by Dankar et al.'s rule (ARX ``getNumUniqueTuplesDankar``): f <= 0.1:
    Pitman, else Zayatz where Pitman has no estimate (only with ``fallback``, as ARX's risk
    analysis does; its ``PopulationUniqueness`` criterion passes False); f > 0.1: the lower of
    Zayatz and SNB, Zayatz where SNB has none."""
    n, _, c1, _ = _stats(hist)
    if c1 == 0:
        return 0.0, "dankar"
    if n / big_n <= 0.1:
        p = pitman(hist, big_n)
        if _valid(p):
            return p, "pitman"
        return (zayatz(hist, big_n), "zayatz") if fallback else (math.nan, "pitman")
    s, z = snb(hist, big_n), zayatz(hist, big_n)
    if _valid(s) and not z < s:
        return s, "snb"
    return z, "zayatz"


ESTIMATORS: dict[str, Callable[[Mapping[int, int], float], float]] = {
    "pitman": pitman,
    "zayatz": zayatz,
    "snb": snb,
    "dankar": lambda h, big_n: dankar(h, big_n)[0],
}


def uniqueness_risk(hist: Mapping[int, int], risk: Mapping[str, float]) -> dict[str, Any]:
    """The ``risk`` figures of a relation from its class-size histogram ``hist`` (size -> classes):
    ``sample_uniqueness`` (records in classes of one / records, ARX's
    ``getFractionOfUniqueRecords``), and, where the policy bounds it (its ``UniquenessBound``
    names the population), ``population_uniqueness`` (estimated population uniques / N, ARX's
    ``getFractionOfUniqueTuples``; None where the model has no estimate, so the bound fails as
    ARX's ``PopulationUniqueness`` criterion fails it) and ``population_model`` (the estimator,
    the one Dankar's rule chose for ``dankar``, which as in ARX's criterion has no Zayatz fallback
    where Pitman fails)."""
    n, _, c1, _ = _stats(hist)
    out: dict[str, Any] = {"sample_uniqueness": c1 / n if n else 0.0}
    bound = risk.get("population_uniqueness")
    if not isinstance(bound, UniquenessBound):
        return out
    if n == 0:  # everything suppressed: nothing to re-identify (ARX: fulfilled)
        return {
            **out,
            "population_uniqueness": 0.0,
            "population_model": bound.model,
            "population_uniqueness_ok": True,
        }
    big_n = bound.population_size(int(n))
    if big_n < n:
        raise PolicyError(
            f"policy key 'privacy.risk.population_uniqueness.population': {big_n:g} is smaller than the "
            f"{int(n)} records measured; the population contains the sample"
        )
    if bound.model == "dankar":
        uniques, model = dankar(hist, big_n, fallback=False)
    else:
        uniques, model = (ESTIMATORS[bound.model](hist, big_n) if c1 else 0.0), bound.model
    # No estimate (ARX's 0 or NaN) where the sample has uniques is no evidence: None, which fails
    # the bound as ARX's PopulationUniqueness criterion fails it; no sample unique is 0.
    share = uniques / big_n if _valid(uniques) else (0.0 if c1 == 0 else None)
    return {**out, "population_uniqueness": share, "population_model": model}
