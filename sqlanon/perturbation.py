"""The ``perturb:`` key of a column: which perturbation method, with which parameters.

The methods follow seed 000 sections 2.2.1-2.2.2 (microaggregation, random perturbation,
permutation) and seed 003 (PRAM, k-PRAM, k-noise); their parameters follow the tools users know
(sdcMicro's ``pram(pd=)``, ``addNoise``, ``microaggregation(aggr=)``, ``rankSwap(P=)``). The SQL
lives in ``templates/_macros/perturb.sql.j2`` and :mod:`sqlanon.transform.perturb`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlanon.errors import PolicyError

METHODS = ("noise", "k-noise", "pram", "k-pram", "microaggregate", "swap")
DISTRIBUTIONS = ("uniform", "laplace", "gaussian")
#: Methods that need numbers (an average or a sum is taken of the values).
NUMERIC_METHODS = ("noise", "k-noise", "microaggregate")

#: The keys each method takes, and which of them are required.
_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "noise": (("method", "distribution", "scale", "round"), ("scale",)),
    "k-noise": (("method", "k", "round"), ("k",)),
    "pram": (("method", "retain"), ("retain",)),
    "k-pram": (("method", "k", "retain", "width", "start"), ()),
    "microaggregate": (("method", "k", "round"), ("k",)),
    "swap": (("method", "p"), ("p",)),
}


@dataclass(frozen=True)
class Perturbation:
    """One column's perturbation. ``k``: group size (k-noise, k-PRAM, microaggregation);
    ``retain``: PRAM's probability of keeping the value (sdcMicro's ``pd``); ``scale``: the
    noise's half-width (uniform), b (Laplace) or sigma (Gaussian); ``p``: swapping distance in
    percent of the rows."""

    method: str
    distribution: str = "uniform"
    scale: float | None = None
    k: int | None = None
    retain: float = 0.0
    p: float | None = None
    width: float | None = None  # k-PRAM's equal-width groups (seed 003 section 2.3)
    start: float | None = None  # where the first equal-width group starts (default: the minimum)
    #: Publish the computed value rounded to a multiple of this step (``round: 1``: whole numbers).
    #: An integer column is always published as whole numbers (step 1 unless given): the noise's
    #: finite resolution, added to a whole number, would otherwise tell which whole numbers fit.
    round: float | None = None

    def describe(self) -> str:
        if self.method == "noise":
            return f"noise ({self.distribution}, scale {self.scale:g})"
        if self.method == "pram":
            return f"PRAM (retain {self.retain:g})"
        if self.method == "swap":
            return f"rank swapping (p = {self.p:g} %)"
        if self.method == "k-pram" and self.width is not None:
            return f"k-PRAM (groups of width {self.width:g})"
        return f"{self.method} (k = {self.k})"


def _fail(key: str, msg: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {msg}")


def _num(key: str, value: Any, *, lo: float, hi: float | None = None, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(key, f"expected a finite number, got {value!r}")
    if integer and not float(value).is_integer():
        raise _fail(key, f"expected a whole number, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        bound = f"between {lo:g} and {hi:g}" if hi is not None else f">= {lo:g}"
        raise _fail(key, f"must be {bound}, got {value!r}")
    return float(value)


def parse_perturbation(key: str, spec: Any, role: str) -> Perturbation:
    """Validate ``columns.<name>.perturb`` (``key``) for a column of ``role``."""
    if role == "identifier":
        raise _fail(key, "identifiers are dropped, masked or hashed, never perturbed")
    if isinstance(spec, str):
        spec = {"method": spec}
    if not isinstance(spec, dict):
        raise _fail(key, f"expected a mapping with a method, got {type(spec).__name__}")
    method = spec.get("method")
    if method not in METHODS:
        raise _fail(f"{key}.method", f"expected one of {', '.join(METHODS)}, got {method!r}")
    allowed, required = _KEYS[method]
    for k in spec:
        if k not in allowed:
            raise _fail(f"{key}.{k}", f"unknown key for {method}; allowed: {', '.join(allowed)}")
    for k in required:
        if k not in spec:
            raise _fail(f"{key}.{k}", f"missing; {method} needs {', '.join(required)}")
    distribution = spec.get("distribution", "uniform")
    if distribution not in DISTRIBUTIONS:
        raise _fail(
            f"{key}.distribution", f"expected one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}"
        )
    scale = _num(f"{key}.scale", spec["scale"], lo=0) if "scale" in spec else None
    if scale is not None and scale <= 0:
        raise _fail(f"{key}.scale", f"must be > 0, got {spec['scale']!r}")
    k = int(_num(f"{key}.k", spec["k"], lo=2, hi=1e9, integer=True)) if "k" in spec else None
    retain = _num(f"{key}.retain", spec["retain"], lo=0, hi=1) if "retain" in spec else 0.0
    if method in ("pram", "k-pram") and retain >= 1:
        raise _fail(f"{key}.retain", f"1 keeps every value; {method} needs retain < 1")
    p = _num(f"{key}.p", spec["p"], lo=0, hi=100) if "p" in spec else None
    if p is not None and p <= 0:
        raise _fail(f"{key}.p", f"must be > 0, got {spec['p']!r}")
    if method == "k-pram" and k is None and "width" not in spec:
        raise _fail(f"{key}.k", "missing; k-pram needs k (groups of k records) or width (equal-width groups)")
    if "k" in spec and "width" in spec:
        raise _fail(f"{key}.width", "give k (groups of k records) or width (equal-width groups), not both")
    width = _num(f"{key}.width", spec["width"], lo=0) if "width" in spec else None
    if width is not None and width <= 0:
        raise _fail(f"{key}.width", f"must be > 0, got {spec['width']!r}")
    if "start" in spec and width is None:
        raise _fail(f"{key}.start", "start only applies with width")
    start = _num(f"{key}.start", spec["start"], lo=-math.inf) if "start" in spec else None
    step = _num(f"{key}.round", spec["round"], lo=0) if "round" in spec else None
    if step is not None and not 1e-9 <= step <= 1e15:
        raise _fail(
            f"{key}.round",
            f"must be between 1e-9 and 1e15 (the step values are rounded to), got {spec['round']!r}",
        )
    return Perturbation(
        method=method,
        distribution=distribution,
        scale=scale,
        k=k,
        retain=retain,
        p=p,
        width=width,
        start=start,
        round=step,
    )


def refuse_seed() -> None:
    """A policy's ``seed`` is refused: whoever reads the policy (or a view's definition) would hold
    the randomness and could recompute every record's noise. The randomness comes from the secret
    key ``SQLANON_PERTURB_KEY`` instead (:mod:`sqlanon.sql.secrets`)."""
    raise _fail(
        "seed",
        "no longer accepted: a seed anyone can read lets them recompute the noise; perturbation "
        "draws from the secret key in SQLANON_PERTURB_KEY (or SQLANON_PERTURB_KEY_FILE) instead",
    )


def parse_row_key(value: Any, names: list[str], perturbed: bool) -> str | None:
    """The policy's ``key``: a declared column, used only by perturbation (its text is hashed)."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in names:
        raise _fail("key", f"{value!r} is not a declared column (the row key of perturbation)")
    if not perturbed:
        raise _fail("key", "no column is perturbed; the row key is only used by perturbation")
    return value
