"""SafePub's search (Bild, Kuhn and Prasser, PoPETs 2018, section 4; ARX 3.9.2's
``algorithm.DataDependentEDDPAlgorithm``): the generalisation chosen by the exponential mechanism.

Starting from the top of the lattice (every QI at its highest level), each of ``steps`` steps adds
the pivot's predecessors (one QI one level lower) to the candidates, removes the pivot, and draws
the next pivot from the candidates with probability proportional to exp(epsilon_step score / 2),
epsilon_step = epsilon_search / steps (McSherry and Talwar 2007; the score has sensitivity 1). The
release is the pivot with the best score (ties: the lower node), as ARX's ``trackOptimum``.

The score is SafePub section 5.2's, for discernibility (ARX's ``MetricSDNMDiscernability.getScore``):
-(sum over kept classes of |E|^2 + N (S + N - n)) / (N (k^2 / (k - 1) + 1)), N the source's rows,
n the sample's, S the sampled records suppressed (in classes below k); 5 replaces k^2/(k-1) + 1
for k = 1. Dividing by that bound on the change one record makes gives sensitivity 1.

The draws come from HMAC-SHA-256 under the release's secret perturbation key (never Python's
``random``, never a seed a reader could know): u = (first 53 bits + 1/2) / 2^53 of
HMAC(K, "safepub-search|<step>"), the inverse of the candidates' cumulative distribution, taken in
the lattice's order so the same key gives the same node on every engine.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from typing import Any

from sqlanon.lattice import Node, Plan
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.policy import Policy
from sqlanon.safepub import DPRequirement
from sqlanon.sql import secrets


def score(dp: DPRequirement, n_total: int, n_sample: int, dm_kept: int, suppressed: int) -> float:
    """SafePub's discernibility score (section 5.2), higher is better, sensitivity 1."""
    k = dp.k
    bound = 5.0 if k == 1 else k * k / (k - 1) + 1.0
    return -(dm_kept + n_total * (suppressed + n_total - n_sample)) / (n_total * bound)


def keyed_uniform(key: bytes, text: str) -> float:
    """u in (0, 1) from HMAC-SHA-256(key, text), as the SQL's keyed_uniform computes it.

    >>> 0 < keyed_uniform(b"0123456789abcdef", "safepub-search|1") < 1
    True
    """
    bits = int.from_bytes(hmac.new(key, text.encode(), hashlib.sha256).digest()[:8], "big") >> 11
    return (bits + 0.5) / 2.0**53


def exponential_mechanism(scores: dict[Node, float], epsilon: float, u: float) -> Node:
    """The candidate the uniform ``u`` picks with probability proportional to exp(epsilon score / 2)
    (ARX's ``dp.ExponentialMechanism``: shifted by the largest exponent against overflow)."""
    nodes = sorted(scores)
    exps = [0.5 * epsilon * scores[n] for n in nodes]
    top = max(exps)
    weights = [math.exp(e - top) for e in exps]
    target, acc = u * math.fsum(weights), 0.0
    for node, w in zip(nodes, weights, strict=True):
        acc += w
        if target < acc:
            return node
    return nodes[-1]


def predecessors(node: Node) -> list[Node]:
    """The nodes one level lower in one QI (ARX's predecessors: one step less general)."""
    out = []
    for i, lvl in enumerate(node):
        if lvl:
            out.append((*node[:i], lvl - 1, *node[i + 1 :]))
    return out


def search(
    plan: Plan, dp: DPRequirement, n_total: int, key: bytes, ev: Evaluator | None = None
) -> tuple[Node, dict[str, Any]]:
    """SafePub's walk over ``plan`` (built on the sample): the chosen node and what the report shows.
    ``ev``: an evaluator whose cached node results are reused (many keys over one sample)."""
    ev = ev or Evaluator(plan)

    def scored(nodes: list[Node]) -> dict[Node, float]:
        res = ev.evaluate(nodes)
        return {n: score(dp, n_total, plan.n_rows, r.dm_kept, r.bad_records) for n, r in res.items()}

    pivot: Node = tuple(plan.heights)
    known = scored([pivot])
    best, best_score = pivot, known[pivot]
    candidates = dict(known)
    eps_step = dp.search_epsilon / dp.steps if dp.steps else 0.0
    taken = 0
    for step in range(1, dp.steps + 1):
        new = [p for p in predecessors(pivot) if p not in known]
        known.update(scored(new))
        candidates.update({p: known[p] for p in new})
        candidates.pop(pivot, None)
        if not candidates:
            break
        pivot = exponential_mechanism(candidates, eps_step, keyed_uniform(key, f"safepub-search|{step}"))
        taken = step
        s = known[pivot]
        if s > best_score or (s == best_score and sum(pivot) < sum(best)):
            best, best_score = pivot, s
    # The best score is a figure of the sample the guarantee does not cover: not returned.
    return best, {"steps_taken": taken, "nodes_scored": len(known)}


def safepub_release(
    be: Any, policy: Policy, sampled: Policy, plan: Plan
) -> tuple[Policy, Node, dict[str, Any]]:
    """For ``anonymise``: the policy the release reads (the sample's), SafePub's node, and what the
    JSON and the report state: the parameters and the search's path, never the key, and no count
    of the source or the sample (the guarantee covers the release only: the sample's size less the
    published rows would tell how many records the suppression removed)."""
    dp = policy.privacy.dp
    assert dp is not None
    n_total = int(be.query("search/row_count", rel=policy.source)[0][0])
    node, found = search(plan, dp, n_total, secrets.read_key("perturb"))
    return sampled, node, {**dp.figures(), **found}
