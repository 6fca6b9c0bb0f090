"""(epsilon, delta)-differential privacy by SafePub (issue 35, item 1): the parameters and the policy key.

SafePub (Bild, Kuhn and Prasser, "SafePub: A Truthful Data Anonymization Algorithm With Strong
Privacy Guarantees", PoPETs 2018(1):67-87; ARX 3.9.2's ``criteria.EDDifferentialPrivacy``) samples
every record independently with probability beta, generalises the sample, and suppresses every
class smaller than k. Li, Qardaji and Su ("On sampling, anonymization, and differential privacy",
ASIACCS 2012, Theorem 5; SafePub section 3.3) show that this is (epsilon_anon, delta)-differentially
private for

* beta = 1 - e^(-epsilon_anon) (the largest sampling probability epsilon_anon admits),
* gamma = (e^epsilon_anon - 1 + beta) / e^epsilon_anon,
* delta = d(k) = max over n >= n_m of a_n, n_m = ceil(k / gamma - 1),
  a_n = sum over j > gamma n of C(n, j) beta^j (1 - beta)^(n - j) (a binomial tail),

and d(k) is bounded by c_n = exp(-n (gamma ln(gamma / beta) - (gamma - beta))) (a Chernoff bound),
so the maximum over n stops once the running maximum reaches c_n. The generalisation itself is
chosen by the exponential mechanism with the rest of the budget, epsilon_search (SafePub section 4);
epsilon = epsilon_anon + epsilon_search, as in ARX, where ``epsilon`` is the total and
``ARXConfiguration.setDPSearchBudget`` the search's part (default 0.1).

k is ARX's (``dp.ParameterCalculation``): its loop returns one more than the least k with
d(k) < delta. A larger k suppresses more and only strengthens the guarantee (d falls with k), and
keeping ARX's value lets a privacy officer compare the two tools' releases directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlanon.errors import PolicyError, SqlanonError

#: The policy key under ``privacy`` that this module reads.
DP_KEY = "differential_privacy"
_DP_FIELDS = ("epsilon", "delta", "search_epsilon", "steps")
#: ARX's default search budget (``ARXConfiguration.dpSearchBudget``).
DEFAULT_SEARCH_EPSILON = 0.1
#: The privacy keys SafePub does not compose with: its guarantee is for the sampled, k-suppressed
#: generalisation alone, and a further data-dependent choice (a class dropped for l, t, a risk bound)
#: would spend privacy the theorem does not account for. ARX, too, refuses other models beside it
#: in its data-dependent search (``isOptimalSearchSupported`` false, only the heuristic one).
DP_EXCLUSIVE = (
    *("k", "l", "t", "risk", "delta_disclosure", "beta_likeness", "suppression", "suppression_mode"),
    *("delta_presence", "k_map", "profitability"),
)
#: k above this is refused: every class would need more records than any table sqlanon reads has
#: in one class, and d(k) takes time in proportion to k / gamma to evaluate.
MAX_K = 1_000_000


@dataclass(frozen=True)
class DPRequirement:
    """The policy's ``privacy.differential_privacy``; beta and k follow from the others."""

    epsilon: float  # the total budget (ARX's ``EDDifferentialPrivacy(epsilon, ...)``)
    delta: float
    search_epsilon: float = DEFAULT_SEARCH_EPSILON
    steps: int = 0  # the search's steps (ARX's heuristic step limit); 0: the top node, no search

    @property
    def epsilon_anon(self) -> float:
        return self.epsilon - self.search_epsilon

    @property
    def beta(self) -> float:
        return sampling_probability(self.epsilon_anon)

    @property
    def k(self) -> int:
        return safepub_k(self.epsilon_anon, self.delta)

    @property
    def label(self) -> str:
        dp = f"({self.epsilon:g}, {self.delta:g})-differential privacy"
        return f"{dp} (SafePub: beta {self.beta:.6g}, k {self.k})"

    def figures(self) -> dict[str, float | int]:
        """What the JSON and the report state: the parameters and what they imply."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "epsilon_anon": self.epsilon_anon,
            "search_epsilon": self.search_epsilon,
            "steps": self.steps,
            "beta": self.beta,
            "k": self.k,
        }


def sampling_probability(epsilon_anon: float) -> float:
    """beta = 1 - e^(-epsilon_anon) (SafePub section 3.3), computed as -expm1(-x) so that a small
    epsilon does not lose its digits to the subtraction.

    >>> round(sampling_probability(math.log(2)), 12)
    0.5
    """
    return -math.expm1(-epsilon_anon)


def _binomial_tail(n: int, first: int, beta: float) -> float:
    """P(X >= first) for X ~ Binomial(n, beta), first > n beta: the terms fall from the first on, so
    the sum starts there (in logs, against underflow) and stops once a term no longer counts."""
    if first > n:
        return 0.0
    if first <= 0:
        return 1.0
    log_term = (
        math.lgamma(n + 1)
        - math.lgamma(first + 1)
        - math.lgamma(n - first + 1)
        + first * math.log(beta)
        + (n - first) * math.log1p(-beta)
    )
    term = math.exp(log_term)
    total, odds = 0.0, beta / (1.0 - beta)
    j = first
    while term > 0.0 and j <= n:
        total += term
        if term < total * 1e-18:
            break
        term *= (n - j) / (j + 1) * odds
        j += 1
    return total


class _Delta:
    """d(k) for one (epsilon_anon, beta), with a_n and c_n cached across k (they do not depend on k)."""

    def __init__(self, epsilon_anon: float):
        self.beta = sampling_probability(epsilon_anon)
        power = math.exp(epsilon_anon)
        self.gamma = (power - 1.0 + self.beta) / power
        self.divergence = self.gamma * math.log(self.gamma / self.beta) - (self.gamma - self.beta)
        self._a: dict[int, float] = {}

    def a(self, n: int) -> float:
        if n not in self._a:
            self._a[n] = _binomial_tail(n, math.floor(n * self.gamma) + 1, self.beta)
        return self._a[n]

    def c(self, n: int) -> float:
        return math.exp(-n * self.divergence)

    def __call__(self, k: int) -> float:
        n = max(0, math.ceil(k / self.gamma - 1.0))
        delta, bound = -math.inf, math.inf
        while delta <= bound:  # ARX: continue while the intervals are below or overlap
            delta, bound = max(delta, self.a(n)), self.c(n)
            n += 1
        return delta


@cache
def safepub_k(epsilon_anon: float, delta: float) -> int:
    """The k that (epsilon_anon, delta) imply: ARX's ``ParameterCalculation.getK`` (see the module).

    >>> safepub_k(1.0, 1e-5)  # between ARX's 48 at 1e-4 and 75 at 1e-6 (tests/test_safepub.py)
    62
    """
    if not (epsilon_anon > 0 and math.isfinite(epsilon_anon)) or not 0 < delta < 1:
        raise ValueError(f"SafePub needs epsilon_anon > 0 and 0 < delta < 1, got {epsilon_anon}, {delta}")
    d = _Delta(epsilon_anon)
    # d(k) falls as k grows (the maximum is taken over fewer n), so the least k with d(k) < delta is
    # found by doubling and bisection instead of ARX's walk k = 1, 2, ...: the same k, in log k steps.
    hi = 1
    while not d(hi) < delta:
        hi *= 2
        if hi > MAX_K:
            raise ValueError(f"(epsilon_anon {epsilon_anon:g}, delta {delta:g}) imply k > {MAX_K:,}")
    lo = hi // 2  # d(lo) >= delta, or lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if d(mid) < delta else (mid, hi)
    return hi + 1  # ARX's loop increments once more after the k that meets delta (see the module)


def refuse_mondrian(dp: DPRequirement | None, algorithm: str | None) -> None:
    """SafePub's release is a lattice node drawn by the exponential mechanism; Mondrian's partitions
    are cut where the data's medians lie, a data-dependent choice no part of epsilon pays for, so a
    Mondrian release of the sample would carry no differential-privacy guarantee (ARX, too, refuses
    local recoding with it: ``EDDifferentialPrivacy.isLocalRecodingSupported`` is false)."""
    if dp is not None and algorithm == "mondrian":
        raise SqlanonError(
            "search.algorithm mondrian (or --algorithm): privacy.differential_privacy chooses a lattice "
            "node by SafePub's exponential mechanism; Mondrian's median cuts would spend privacy its "
            "guarantee does not cover: use another algorithm or drop differential_privacy"
        )


def refuse_dbt(dp: DPRequirement | None) -> None:
    """A dbt model is a SELECT that dbt runs again at every build over the whole source: SafePub's
    release is a sample drawn once under the secret key (which dbt has no unseen place for), so a
    model would publish every record at the node, k-anonymous but not differentially private."""
    if dp is not None:
        raise SqlanonError(
            "privacy.differential_privacy: SafePub's release is a keyed sample drawn once, which a dbt "
            "model (re-run over the whole source at every build) cannot be; publish it with "
            "`sqlanon anonymise` and read the table from dbt as a source"
        )


def _fail(key: str, msg: str) -> PolicyError:
    return PolicyError(f"policy key {key!r}: {msg}")


def _positive(key: str, value: Any, *, below: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(key, f"expected a finite number, got {value!r}")
    if value <= 0 or (below is not None and value >= below):
        bound = f"between 0 and {below:g} (both excluded)" if below is not None else "> 0"
        raise _fail(key, f"must be {bound}, got {value!r}")
    return float(value)


def parse_dp(privacy: dict[str, Any]) -> DPRequirement | None:
    """Validate ``privacy.differential_privacy`` (None where absent); one line naming the key on any
    problem, including the models SafePub does not compose with."""
    spec = privacy.get(DP_KEY)
    if spec is None:
        return None
    key = f"privacy.{DP_KEY}"
    if not isinstance(spec, dict):
        raise _fail(key, f"expected a mapping with epsilon and delta, got {type(spec).__name__}")
    for name in spec:
        if name not in _DP_FIELDS:
            raise _fail(f"{key}.{name}", f"unknown key; allowed: {', '.join(_DP_FIELDS)}")
    for name in ("epsilon", "delta"):
        if name not in spec:
            raise _fail(f"{key}.{name}", "missing; SafePub needs epsilon and delta")
    others = [name for name in DP_EXCLUSIVE if privacy.get(name) not in (None, {}, [])]
    if others:
        raise _fail(
            key,
            f"SafePub's guarantee does not compose with privacy.{others[0]} "
            "(k follows from epsilon and delta); use one or the other",
        )
    epsilon = _positive(f"{key}.epsilon", spec["epsilon"])
    delta = _positive(f"{key}.delta", spec["delta"], below=1.0)
    search = DEFAULT_SEARCH_EPSILON
    if "search_epsilon" in spec:
        search = _positive(f"{key}.search_epsilon", spec["search_epsilon"])
    if search >= epsilon:
        raise _fail(
            f"{key}.search_epsilon",
            f"the search's budget {search:g} leaves nothing of epsilon {epsilon:g} for the sampling",
        )
    steps = spec.get("steps", 0)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= 100_000:
        raise _fail(f"{key}.steps", f"expected a whole number between 0 and 100000, got {steps!r}")
    req = DPRequirement(epsilon=epsilon, delta=delta, search_epsilon=search, steps=steps)
    try:
        req.k  # noqa: B018 - computed here so that an unusable pair fails while the policy is read
    except ValueError as e:
        raise _fail(key, str(e)) from None
    return req
