"""The policy keys of delta-presence and k-map (issue 35, item 3), and ARX's k-map estimators.

Both compare each class of the release with the population it was drawn from (the policy's
``population:`` relation, which contains every source record), generalised the same way:

* delta-presence (Nergiz, Atzori, Clifton, SIGMOD 2007; ARX's ``criteria.DPresence``): for every
  class, ``dmin <= delta <= dmax`` with ``delta`` = (source records in the class) / (population
  records in the class), the probability that a population member of the class is in the source.
  ARX holds the population as its dataset and flags the source as the research subset
  (``DataSubset``): its ``count`` is our source count, its ``pcount`` our population count. A class
  of the population with no source record has delta = 0 (ARX: ``count == 0 ? 0``) and, when
  dmin > 0, fails in a way suppression cannot mend (ARX's HashGroupify: "tuples from the public
  table that have no matching candidates in the private table [...] cannot be suppressed");
* k-map (Sweeney's k-map as El Emam and ARX's ``criteria.KMap`` read it): every class of the
  release matches at least ``k`` population records (ARX: ``pcount >= k``);
* k-map estimated (ARX's ``KMap(k, significance, ARXPopulationModel, CellSizeEstimator)``): with
  only the population's size N known, ARX assumes Poisson class sizes (or zero-truncated Poisson)
  with mean ``lambda = (n / N) * k`` and derives the least class size k' for which a class of the
  sample matches fewer than k population records with probability at most the significance level;
  the criterion is then k'-anonymity (``count >= derivedK``). :func:`derive_k` ports ARX 3.9.2's
  ``calculateKPoisson`` and ``calculateKZeroPoisson`` line by line, so the k' here is ARX's.

Kept apart from :mod:`sqlanon.policy` (at its size limit), which stores what is parsed here in
:attr:`sqlanon.policy.Privacy.presence`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from sqlanon.errors import PolicyError, SqlanonError

#: The policy keys under ``privacy`` that this module reads.
PRESENCE_KEYS = ("delta_presence", "k_map")
ESTIMATORS = ("poisson", "zero-truncated-poisson")
KMAP_KEYS = ("k", "population_size", "significance", "estimator")
DEFAULT_SIGNIFICANCE = 0.01
#: ARX's bounds: ``KMap``'s k is a Java int, ``ARXPopulationModel``'s size a long. Beyond them a
#: literal overflows the database's integers or lambda overflows a double (a traceback, not exit 2).
MAX_K = 2**31 - 1
MAX_POPULATION = 2**63 - 1


@dataclass(frozen=True)
class DeltaPresence:
    dmin: float
    dmax: float

    @property
    def label(self) -> str:
        return f"delta_presence: {self.dmin:g} <= delta <= {self.dmax:g}"


@dataclass(frozen=True)
class KMap:
    k: int
    population_size: int | None = None  # the estimator form: N, no population relation read
    significance: float = DEFAULT_SIGNIFICANCE
    estimator: str | None = None  # poisson | zero-truncated-poisson; None: against the population
    #: The estimator form's derived k', set once the source's size is known (:func:`resolve`):
    #: {"n": source records, "k": k'}. Not part of equality (the same requirement either way).
    derived: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def estimated(self) -> bool:
        return self.estimator is not None

    @property
    def label(self) -> str:
        if not self.estimated:
            return f"k_map: >= {self.k} population records per class"
        dk = self.derived.get("k")
        shown = "?" if dk is None else str(dk)
        est = f"{self.estimator}, N = {self.population_size}"
        return f"k_map: k = {self.k} estimated as {shown}-anonymity ({est})"


@dataclass(frozen=True)
class Presence:
    delta: DeltaPresence | None = None
    kmap: KMap | None = None

    @property
    def needs_population(self) -> bool:
        """Whether a requirement reads the population relation (all but the estimated k-map)."""
        return self.delta is not None or (self.kmap is not None and not self.kmap.estimated)


def _fail(key: str, msg: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {msg}")


def _real(key: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(key, f"expected a finite number, got {value!r}")
    if not lo <= value <= hi:
        raise _fail(key, f"must be between {lo:g} and {hi:g}, got {value!r}")
    return float(value)


def _whole(key: str, value: Any, hi: int = MAX_K) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(key, f"expected a whole number, got {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise _fail(key, f"expected a whole number, got {value!r}")
    if value < 1:
        raise _fail(key, f"must be >= 1, got {value!r}")
    if value > hi:
        raise _fail(key, f"must be at most {hi}, got {value!r}")
    return int(value)


def parse_presence(privacy: dict, population: Any, algorithm: str) -> Presence | None:
    """``privacy.delta_presence: {min: DMIN, max: DMAX}`` and ``privacy.k_map: K`` (against the
    population relation) or ``{k: K, population_size: N, significance: S, estimator: E}``."""
    delta = kmap = None
    if privacy.get("delta_presence") is not None:
        raw = privacy["delta_presence"]
        key = "privacy.delta_presence"
        if not isinstance(raw, dict):
            raise _fail(key, f"expected a mapping {{min: DMIN, max: DMAX}}, got {raw!r}")
        for k in raw:
            if k not in ("min", "max"):
                raise _fail(f"{key}.{k}", "unknown key; allowed: min, max")
        dmin = _real(f"{key}.min", raw.get("min", 0.0), 0.0, 1.0)
        dmax = _real(f"{key}.max", raw.get("max", 1.0), 0.0, 1.0)
        if dmin > dmax:
            raise _fail(key, f"min ({dmin:g}) exceeds max ({dmax:g})")
        delta = DeltaPresence(dmin, dmax)
    if privacy.get("k_map") is not None:
        kmap = _parse_kmap(privacy["k_map"])
    if delta is None and kmap is None:
        return None
    out = Presence(delta, kmap)
    if out.needs_population:
        what = "privacy.delta_presence" if delta is not None else "privacy.k_map"
        if population is None:
            hint = "" if delta is not None else " (or give k_map a population_size for ARX's estimate)"
            raise _fail(what, f"needs a population relation (population: at the top level){hint}")
        if algorithm == "mondrian":
            raise _fail(what, "Mondrian's partitions are not a node the population can be generalised to")
    return out


def _parse_kmap(raw: Any) -> KMap:
    key = "privacy.k_map"
    if not isinstance(raw, dict):
        return KMap(_whole(key, raw))
    for k in raw:
        if k not in KMAP_KEYS:
            raise _fail(f"{key}.{k}", f"unknown key; allowed: {', '.join(KMAP_KEYS)}")
    if "k" not in raw:
        raise _fail(f"{key}.k", "missing")
    k = _whole(f"{key}.k", raw["k"])
    if "population_size" not in raw:
        for extra in ("significance", "estimator"):
            if extra in raw:
                raise _fail(f"{key}.{extra}", "applies to the estimate only: give population_size too")
        return KMap(k)
    size = _whole(f"{key}.population_size", raw["population_size"], MAX_POPULATION)
    sig = _real(f"{key}.significance", raw.get("significance", DEFAULT_SIGNIFICANCE), 0.0, 1.0)
    if sig == 0:  # no finite k' is certain; ARX's loop then stops where its sums round to 1.0
        raise _fail(f"{key}.significance", "must be > 0 (at 0 use k-anonymity with k itself)")
    est = raw.get("estimator", "poisson")
    if est not in ESTIMATORS:
        raise _fail(f"{key}.estimator", f"expected one of {', '.join(ESTIMATORS)}, got {est!r}")
    return KMap(k, size, sig, est)


# --- ARX's estimate --------------------------------------------------------------------------------


def _pmf(lam: float, x: int) -> float:
    return math.exp(x * math.log(lam) - lam - math.lgamma(x + 1))


def _skip(lam: float) -> int:
    """A count below which the Poisson(lam) CDF is under 1e-31, far below any threshold 1 - S (a
    double: >= 2^-53): by Chernoff, P(X <= lam - t) <= exp(-t^2 / (2 lam)), and t = 12 sqrt(lam)
    gives exp(-72). ARX's loop starts at 0 and passes these counts without stopping, adding
    terms that do not move its sum; starting here keeps its k' and bounds the loop by
    O(sqrt(lam)) steps instead of O(lam) (O(lam^2) with the cumulative sum recomputed)."""
    return max(0, math.floor(lam - 12.0 * math.sqrt(lam)) - 1)


def derive_k(k: int, significance: float, estimator: str, n: int, population_size: int) -> int:
    """ARX 3.9.2's derived k' (``KMap.initialize``): lambda = (n / N) k, then the estimator's
    least count, at most n and at most k.

    The loops are ARX's, with two shortcuts that cannot change the result: they start at
    :func:`_skip` and stop once the count has reached n (k' only grows with the count, and is at
    most n). Without them a large k (k = 20,000 with n = N = 1,000) ran for minutes.

    >>> derive_k(5, 0.01, "poisson", 1000, 10000), derive_k(100, 0.01, "zero-truncated-poisson", 1000, 10000)
    (5, 19)
    """
    lam = (n / population_size) * k
    threshold = 1.0 - significance
    start = _skip(lam) if threshold > 0 else 0  # at S = 1 ARX's loop never runs: k' = 1
    if estimator == "poisson":  # calculateKPoisson: value = cumulativeProbability(counter)
        counter, value = start, 0.0
        while value < threshold:
            value += _pmf(lam, counter)
            counter += 1
            if counter >= k or counter + 1 >= n:
                break
        derived = counter + 1
    else:  # calculateKZeroPoisson
        v2 = 1.0 - _pmf(lam, 0)
        counter, value = max(1, start), 0.0
        while value < threshold:
            value += _pmf(lam, counter) / v2
            counter += 1
            if counter >= k or counter >= n:
                break
        derived = counter
    return min(k, min(derived, n))


def resolve(policy: Any, n_rows: int) -> None:
    """Derive the estimated k-map's k' from the source's size ``n_rows`` at each measurement of
    the source (the search's :func:`~sqlanon.lattice.plan.prepare` or ``assess``; again where the
    same policy meets a source of another size: k' grows with it); a release measured later,
    smaller after suppression, keeps the source's k' as ARX does (it is never resolved)."""
    pres = getattr(policy.privacy, "presence", None)
    km = pres.kmap if pres is not None else None
    if km is None or not km.estimated or km.derived.get("n") == n_rows:
        return
    assert km.population_size is not None
    if km.population_size < n_rows:
        raise SqlanonError(
            f"policy key 'privacy.k_map.population_size': {km.population_size} is smaller than the "
            f"{n_rows} records of the source; the population contains the sample"
        )
    derived = derive_k(km.k, km.significance, km.estimator or "", n_rows, km.population_size)
    km.derived.update(n=n_rows, k=derived)


def presence_checks(policy: Any) -> list[tuple[str, exp.Expression]]:
    """The per-class checks on a class's size alone (``c.n``): the estimated k-map's k'. The
    checks against the population are measured on a release (:mod:`sqlanon.measure.presence`)."""
    pres = getattr(policy.privacy, "presence", None)
    km = pres.kmap if pres is not None else None
    if km is None or not km.estimated:
        return []
    if not km.derived:
        raise SqlanonError("internal: the estimated k-map's k' is derived before any check is built")
    n = exp.column("n", table=exp.to_identifier("c"))
    return [(km.label, exp.LT(this=n, expression=exp.Literal.number(km.derived["k"])))]


def release_bounds(policy: Any) -> bool:
    """Whether the policy has a requirement against the population relation: the lattice search
    decides per class from the source alone, so such a node is checked on its release after the
    search, as the table-wide risks are (:func:`sqlanon.metrics.optimum.choose`)."""
    pres = getattr(policy.privacy, "presence", None)
    return pres is not None and pres.needs_population


def describe_presence(fig: dict[str, Any]) -> str:
    """assess's presence figures as one line of the report (printed by :mod:`sqlanon.report`).

    >>> describe_presence({"k_map": {"k": 3, "min_population_class": 5},
    ...     "delta_presence": {"min": 0.2, "max": 0.5, "dmin": 0.1, "dmax": 0.6,
    ...     "unmatched_population_classes": 0, "unmatched_population_records": 0}})
    'k-map: smallest population class 5 (k = 3); delta-presence: delta in [0.2, 0.5] (bounds [0.1, 0.6])'
    """
    parts = []
    if "k_map" in fig:
        km = fig["k_map"]
        parts.append(f"k-map: smallest population class {km['min_population_class']} (k = {km['k']})")
    if "delta_presence" in fig:
        d = fig["delta_presence"]
        text = f"delta-presence: delta in [{d['min']:.4g}, {d['max']:.4g}]"
        text += f" (bounds [{d['dmin']:g}, {d['dmax']:g}])"
        if d["unmatched_population_classes"]:
            text += (
                f"; {d['unmatched_population_classes']} population class(es) with no record "
                f"({d['unmatched_population_records']} population records, delta 0)"
            )
        parts.append(text)
    return "; ".join(parts)


def estimated_k(policy: Any) -> int | None:
    """The estimated k-map's derived k' (None without one, or before :func:`resolve`): the
    release's dbt project tests it as k'-anonymity, the same per-class check."""
    pres = getattr(policy.privacy, "presence", None)
    km = pres.kmap if pres is not None else None
    return km.derived.get("k") if km is not None and km.estimated else None
