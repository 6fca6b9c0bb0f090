"""The policy keys of delta-disclosure privacy and beta-likeness (issue 35, item 4).

Both bound, per equivalence class, how far a sensitive value's share in the class (q) may move away
from its share in the whole table (p). The definitions are ARX 3.9.2's (its
``criteria.DDisclosurePrivacy``, ``BasicBLikeness`` and ``EnhancedBLikeness``), so that a verdict
here is ARX's verdict on the same data:

* delta-disclosure privacy (Brickell and Shmatikov, KDD 2008): for every value present in a class,
  ``|log2(q / p)| < delta``. ARX takes the logarithm to base 2 (the paper writes ``log``) and skips
  the values absent from a class (q = 0 would make every class that lacks a value fail);
* basic beta-likeness (Cao and Karras, VLDB 2012): for every value present in a class,
  ``(q - p) / p <= beta``;
* enhanced beta-likeness: ``(q - p) / p <= min(beta, -ln p)`` (natural logarithm, as the paper and
  ARX), which tightens the bound on frequent values.

Kept apart from :mod:`sqlanon.policy` (at its size limit), which stores what is parsed here in
:attr:`sqlanon.policy.Privacy.likeness`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlanon.errors import PolicyError

#: The policy keys under ``privacy`` that this module reads.
LIKENESS_KEYS = ("delta_disclosure", "beta_likeness")
BETA_KINDS = ("basic", "enhanced")


@dataclass(frozen=True)
class LikenessRequirement:
    attribute: str
    model: str  # delta-disclosure | beta-basic | beta-enhanced
    bound: float  # delta or beta

    @property
    def label(self) -> str:
        if self.model == "delta-disclosure":
            return f"delta[{self.attribute}]: delta-disclosure < {self.bound:g}"
        return f"beta[{self.attribute}]: {self.model[5:]} likeness <= {self.bound:g}"


def _fail(key: str, msg: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {msg}")


def _positive(key: str, value: Any) -> float:
    """A finite number > 0: delta = 0 or beta = 0 admits no class that differs from the table at all
    (ARX refuses beta <= 0 too)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(key, f"expected a finite number, got {value!r}")
    if value <= 0:
        raise _fail(key, f"must be > 0, got {value!r}")
    return float(value)


def _mapping(key: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise _fail(key, f"expected a mapping, got {type(value).__name__}")
    return value


def parse_likeness(privacy: dict, sensitive: set[str]) -> tuple[LikenessRequirement, ...]:
    """``privacy.delta_disclosure.<attr>: delta`` and ``privacy.beta_likeness.<attr>: beta`` or
    ``{beta: b, kind: basic|enhanced}`` (default basic)."""
    out: list[LikenessRequirement] = []
    for attr, spec in _mapping("privacy.delta_disclosure", privacy.get("delta_disclosure") or {}).items():
        key = f"privacy.delta_disclosure.{attr}"
        if attr not in sensitive:
            raise _fail(key, f"{attr!r} is not a sensitive column")
        out.append(LikenessRequirement(str(attr), "delta-disclosure", _positive(key, spec)))
    for attr, spec in _mapping("privacy.beta_likeness", privacy.get("beta_likeness") or {}).items():
        key = f"privacy.beta_likeness.{attr}"
        if attr not in sensitive:
            raise _fail(key, f"{attr!r} is not a sensitive column")
        if not isinstance(spec, dict):
            spec = {"beta": spec}
        for k in spec:
            if k not in ("beta", "kind"):
                raise _fail(f"{key}.{k}", "unknown key; allowed: beta, kind")
        kind = spec.get("kind", "basic")
        if kind not in BETA_KINDS:
            raise _fail(f"{key}.kind", f"expected one of {', '.join(BETA_KINDS)}, got {kind!r}")
        if "beta" not in spec:
            raise _fail(f"{key}.beta", "missing")
        out.append(LikenessRequirement(str(attr), f"beta-{kind}", _positive(f"{key}.beta", spec["beta"])))
    return tuple(out)


def checked_attributes(privacy: Any) -> set[str]:
    """The sensitive attributes whose per-class statistics some requirement reads (l, t, likeness)."""
    return (
        {r.attribute for r in privacy.l}
        | {r.attribute for r in privacy.t}
        | {r.attribute for r in privacy.likeness}
    )


def likeness_monotone(privacy: Any) -> bool:
    """Whether the likeness requirements keep a policy without suppression monotone along
    generalisation. Beta-likeness does: a merged class's q is a weighted mean of its parts' q (an
    absent value counts 0), so q <= (1 + beta) p in both parts holds in the merge. Delta-disclosure
    does not: merging a class that holds a value with one that lacks it lowers q, so the merge can
    break ``log2(q / p) > -delta`` where neither part did (ARX marks it non-monotone too)."""
    return not any(r.model == "delta-disclosure" for r in privacy.likeness)
