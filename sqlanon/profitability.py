"""Game-theoretic profitability (issue 35, item 6): Wan, Vorobeychik, Xia, Clayton, Kantarcioglu,
Ganta, Heatherly and Malin, *A game theoretic framework for analyzing re-identification risk*,
PLoS ONE 10(3), 2015, as ARX 3.9.2 implements it (``criteria.ProfitabilityProsecutor``,
``ProfitabilityJournalist``, their ``NoAttack`` variants, ``risk.RiskModelCostBenefit`` and
``ARXCostBenefitConfiguration``), so that a verdict here is ARX's on the same data.

The game, per equivalence class, with p the adversary's success probability (prosecutor:
1 / class size; journalist: 1 / the class's size in the population):

* the adversary's expected payout is ``G p - C`` (gain G per re-identified record, cost C per
  attempt); an attack pays when it is > 0;
* the publisher's is ``B (1 - IL) - (L p if the attack pays else 0)`` (benefit B per record,
  IL ARX's entropy-based information loss of the class, loss L per re-identification).

With ``attack: false`` (ARX's ``NoAttack`` variants) the publisher publishes only classes that give
the adversary no incentive to attack: ``G / n < C``, i.e. n > G / C. ARX reduces this to a class
size (prosecutor: k-anonymity) or a population class size (journalist: k-map) of
``K = floor(G / C) + 1`` (1 when G = 0; unbounded when C = 0 < G). A class that does not pay is
suppressed (ARX's criteria work with its suppression limit; so do sqlanon's checks).

``attack: true`` (ARX's ``ProfitabilityProsecutor`` / ``ProfitabilityJournalist``) keeps a class
only where the publisher's payout ``B (1 - IL) - (L p if G p - C > 0)`` is positive, IL ARX's
entropy-based information loss of the class (from each QI label's share of its hierarchy's rows).
IL needs the class's labels, which the search's classes (grouped by level codes) do not carry, so
it is decided in SQL per class of each candidate's release, as the journalist's threshold is (it
reads the population): :func:`sqlanon.measure.presence.class_predicates`. As in ARX, each is a
per-class criterion: a failing class is suppressed with the classes that fail k (one suppression
limit for all), the release drops it, and the search re-verifies each candidate's release. ARX
calls the attack model non-monotone, and sqlanon's check prunes nothing: every node the other
requirements allow is a candidate, best first.

Kept apart from :mod:`sqlanon.policy` (at its size limit), which stores what is parsed here in
:attr:`sqlanon.policy.Privacy.profitability`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlanon.errors import PolicyError

#: The policy key under ``privacy`` that this module reads.
PROFITABILITY_KEY = "profitability"
MODELS = ("prosecutor", "journalist")
#: ARX's ``ARXCostBenefitConfiguration`` defaults (benefit 1200, loss 300, gain 300, cost 4).
DEFAULTS = {
    "publisher_benefit": 1200.0,
    "publisher_loss": 300.0,
    "adversary_gain": 300.0,
    "adversary_cost": 4.0,
}
#: ARX's threshold when every attack pays (C = 0 < G): Integer.MAX_VALUE, which no class reaches.
UNBOUNDED = 2**31 - 1


@dataclass(frozen=True)
class Profitability:
    model: str  # prosecutor | journalist
    attack: bool
    publisher_benefit: float
    publisher_loss: float
    adversary_gain: float
    adversary_cost: float

    @property
    def threshold(self) -> int:
        """ARX's ``ProfitabilityProsecutorNoAttack.initialize``: the least (population) class
        size at which an attack does not pay, n > G / C."""
        g, c = self.adversary_gain, self.adversary_cost
        if g == 0:
            return 1
        if c == 0:
            return UNBOUNDED
        t = g / c
        if math.isinf(t):  # ARX: Double.isInfinite(threshold) -> Integer.MAX_VALUE
            return UNBOUNDED
        k = int(t) + 1 if t == math.floor(t) else math.ceil(t)
        return min(k, UNBOUNDED)

    @property
    def label(self) -> str:
        if self.attack:
            return f"profitability ({self.model}, attack): publisher payout > 0 in every class"
        size = "class size" if self.model == "prosecutor" else "population class size"
        return f"profitability ({self.model}, no attack): {size} >= {self.threshold}"

    def adversary_payout(self, p: float) -> float:
        """ARX's ``RiskModelCostBenefit.getExpectedAdversaryPayout``: G p - C."""
        return self.adversary_gain * p - self.adversary_cost

    def figures(self, smallest: float | None, attack: dict[str, Any] | None = None) -> dict[str, Any]:
        """What ``assess`` reports: the threshold, and the adversary's best expected payout over
        the classes (``smallest``: the least class size, or population class size); with attack,
        the publisher's least payout and the records and classes that do not pay it."""
        payout = None if smallest is None else self.adversary_payout(1.0 / smallest)
        extra = {}
        if attack is not None:
            extra = {
                "publisher_payout_min": attack["publisher_payout_min"],
                "unprofitable_records": attack["records"],
                "unprofitable_classes": attack["classes"],
            }
        return {
            "model": self.model,
            "attack": self.attack,
            "threshold": self.threshold,
            "adversary_payout_max": payout,
            **extra,
            "publisher_benefit": self.publisher_benefit,
            "publisher_loss": self.publisher_loss,
            "adversary_gain": self.adversary_gain,
            "adversary_cost": self.adversary_cost,
        }


def describe_profitability(fig: dict[str, Any]) -> str:
    """One line for the console: the game, its threshold and the adversary's best payout."""
    size = "class" if fig["model"] == "prosecutor" else "population class"
    payout = fig["adversary_payout_max"]
    best = "none" if payout is None else f"{payout:.4g}"
    if fig["attack"]:
        least = fig.get("publisher_payout_min")
        return (
            f"profitability ({fig['model']}, attack; benefit {fig['publisher_benefit']:g}, loss "
            f"{fig['publisher_loss']:g}, gain {fig['adversary_gain']:g}, cost {fig['adversary_cost']:g}): "
            f"{fig.get('unprofitable_records', 0)} record(s) in {fig.get('unprofitable_classes', 0)} "
            f"class(es) where publishing does not pay; publisher's least payout "
            f"{'none' if least is None else f'{least:.4g}'}; adversary's best expected payout {best}"
        )
    return (
        f"profitability ({fig['model']}, no attack; gain {fig['adversary_gain']:g}, cost "
        f"{fig['adversary_cost']:g}): a {size} of at least {fig['threshold']} gives no incentive; "
        f"adversary's best expected payout {best} (an attack pays above 0)"
    )


def _fail(key: str, msg: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {msg}")


def _amount(key: str, value: Any) -> float:
    """A finite amount >= 0 (ARX's ``checkParameter`` refuses negative, NaN and infinite ones)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(key, f"expected a finite number, got {value!r}")
    if value < 0:
        raise _fail(key, f"must be >= 0, got {value!r}")
    return float(value)


def parse_profitability(privacy: dict, has_population: bool) -> Profitability | None:
    """``privacy.profitability: {model: prosecutor|journalist, attack: false|true, publisher_benefit:
    B, publisher_loss: L, adversary_gain: G, adversary_cost: C}``; amounts default to ARX's. Whether
    every quasi-identifier has the hierarchy rows ``attack: true`` needs is checked when measuring
    (:func:`sqlanon.measure.profitability_attack.log_shares`)."""
    raw = privacy.get(PROFITABILITY_KEY)
    if raw is None:
        return None
    key = f"privacy.{PROFITABILITY_KEY}"
    if not isinstance(raw, dict):
        raise _fail(key, f"expected a mapping, got {type(raw).__name__}")
    allowed = ("model", "attack", *DEFAULTS)
    for k in raw:
        if k not in allowed:
            raise _fail(f"{key}.{k}", f"unknown key; allowed: {', '.join(allowed)}")
    model = raw.get("model", "prosecutor")
    if model not in MODELS:
        raise _fail(f"{key}.model", f"expected one of {', '.join(MODELS)}, got {model!r}")
    attack = raw.get("attack", False)
    if not isinstance(attack, bool):
        raise _fail(f"{key}.attack", f"expected true or false, got {attack!r}")
    if model == "journalist" and not has_population:
        raise _fail(f"{key}.model", "journalist needs a population relation (top-level population:)")
    amounts = {name: _amount(f"{key}.{name}", raw.get(name, dflt)) for name, dflt in DEFAULTS.items()}
    return Profitability(model, attack, **amounts)


def profitability_checks(privacy: Any) -> list[tuple[str, exp.Expression]]:
    """The class-size check (label, violation predicate over the class table ``c``): the
    prosecutor's no-attack rule, decided by the search like k. The journalist's reads the
    population and the attack games the class's labels: per-class checks measured against the
    population (:func:`sqlanon.measure.presence.class_predicates`)."""
    p: Profitability | None = getattr(privacy, "profitability", None)
    if p is None or p.model != "prosecutor" or p.attack:
        return []
    n = exp.column("n", table=exp.to_identifier("c"))
    return [(p.label, exp.LT(this=n, expression=exp.Literal.number(p.threshold)))]


def profitability_min_size(privacy: Any) -> int:
    """The least class size the prosecutor rule implies (1 otherwise), for the search's monotone
    class-size relaxation (a class size check: monotone under generalisation, like k)."""
    p: Profitability | None = getattr(privacy, "profitability", None)
    return p.threshold if p is not None and p.model == "prosecutor" and not p.attack else 1


def is_table_wide(privacy: Any) -> bool:
    """Whether the policy has the journalist rule or the attack game, which are checked on a
    candidate's release (its classes joined to the population generalised to the node; the
    attack game needs the classes' labels), as journalist risk is."""
    p: Profitability | None = getattr(privacy, "profitability", None)
    return p is not None and (p.model == "journalist" or p.attack)


def profitability_assessment(
    privacy: Any, k_min: int, min_population: int | None, attack: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``assess``'s ``profitability`` figures: the threshold, the adversary's best expected payout
    over the classes and, with attack (``attack``: :func:`sqlanon.measure.profitability_attack.
    attack_figures`), the publisher's least payout and the classes that do not pay it. The verdicts
    are per class, with suppression: the prosecutor's no-attack rule from
    :func:`profitability_checks`, the journalist's and the attack games from
    :func:`sqlanon.measure.presence.class_predicates`."""
    p: Profitability | None = getattr(privacy, "profitability", None)
    if p is None:
        return {}
    smallest = float(k_min) if p.model == "prosecutor" else min_population
    return {"figures": p.figures(smallest, attack)}
