"""Utility and information-loss metrics of a lattice node, computed in the database, and choosing
the anonymisation by any of them.

A node is a level vector; its release is the source generalised to those levels with the records
of every class that violates the policy removed (record suppression, seed 002 section 2.4). Every
metric below is a metric of that release, measured against the source, with T = the source, N =
|T|, r = the number of quasi-identifiers, S = the suppressed records, L_j the node's level of
quasi-identifier j and h_j the height of its hierarchy. B_ij is the set of original values that
record i's label on X_j stands for: the values present in the source carrying that label (global
recoding, so B depends on the label only); probabilities are counted in the source. Logs are base 2.

How suppressed records count. Bayardo and Agrawal charge a suppressed record |T| in DM; Iyengar
charges it 1 in CM and in the multiple-use metric (the maximal loss). Every other per-record metric
counts a suppressed record as a record whose every quasi-identifier is fully generalised ('*': B is
the whole domain), which for most of them is the most it can lose (not for ``entropy_loss`` and
the private-MI metrics: see :func:`rank_lower_bound`); for average class size the suppressed records
form one more (fully generalised) class.

========================= ===================================================================
name                      formula (source)
========================= ===================================================================
``height``, ``absdist``   sum_j L_j (seed 002 section 3.1, eq. 1, Absdist)
``reldist``               sum_j L_j / h_j (seed 002 eq. 2, Reldist)
``precision``             1 - sum_{i,j} h_ij / h_j / (r N) (seed 002 eq. 3, Sweeney's Prec)
``discernibility``        sum_{kept E} |E|^2 + S N (seed 002 eq. 4; Bayardo & Agrawal)
``avg_class_size``        (N / #classes) / k (LeFevre et al.'s normalised average class size)
``ncp``                   1/(N r) sum_i sum_j w_j NCP_j(B_ij) (seed 002 eqs. 5-7)
``cm``                    (sum_{kept E} (|E| - majority label count) + S) / N (seed 000 4.1,
                          seed 002 eq. 8; Iyengar)
``multiple_use``          1/N (sum_{kept E} |E| l_E + S), l_E = (M_E - 1)/(M - 1) or
                          (U_E - L_E)/(U - L) (seed 000 section 4.2), mean over sensitive attributes
``entropy_loss``          1/N sum_i sum_j H(X_j | X_j in B_ij) (seed 002 eqs. 9-11, Pi_e)
``monotone_entropy``      1/N sum_i sum_j Pr(B_ij) H(X_j | B_ij) (seed 000 section 4.3, Pi_me)
``non_uniform_entropy``   1/N sum_i sum_j -log2 Pr(X_j = R_i(j) | B_ij) (Gionis & Tassa)
``mutual_information``    1/(N r) sum_j sum_i log2(Pr(R_i(j) | B_ij) / Pr(R_i(j))) (seed 000 4.4, U)
``mi_loss``               -1/(N r) sum_i sum_j log2 Pr(R_i(j) | B_ij) (seed 000 4.4, Pi_MI)
``private_mi``            1/(N r) sum_j sum_i log2(Pr(Y = S_i | B_ij) / Pr(Y = S_i)) (seed 000 4.5,
                          U_PMI), mean over sensitive attributes Y
``private_mi_loss``       -1/(N r) sum_i sum_j log2 Pr(Y = S_i | B_ij) (seed 000 4.5, Pi_PMI)
========================= ===================================================================

NCP_j is the categorical eq. 5 (0 when B holds one value, else |B| / |A_j|, values present in the
source) for a non-numeric quasi-identifier and the numerical eq. 6 ((max B - min B) / (max A_j -
min A_j)) for a numeric one; w_j is the quasi-identifier's ``weight`` (default 1) and, as in eq. 7,
the sum is divided by N r whatever the weights. The multiple-use metric is numerical for a numeric
sensitive attribute and categorical otherwise. CM predicts the original value of the policy's
``label`` column (also when the label is a quasi-identifier, generalised in the release); a label
that is neither a quasi-identifier nor sensitive costs one more scan of the source.

Monotonicity. A metric is monotone when it is never better at a more general node; then the optimum
lies among the minimal satisfying nodes. Without suppression every metric here is monotone on the
full-domain lattice: class-based ones because generalising only merges classes, record-based ones
because each cell's loss grows with its set B. That includes ``entropy_loss``: Gionis and Tassa show
Pi_e is not monotone for local recoding (seed 000 section 4.3), but with global recoding it equals
N sum_j H(X_j | X^_j), which cannot fall when X^_j is coarsened (it is then equal to
``non_uniform_entropy``). With suppression only the node-level distances (``height``, ``absdist``,
``reldist``) are monotone: generalising can cut the number of suppressed records, and so improve any
metric that counts them. :func:`candidates_for` returns the minimal nodes for a monotone metric and
every satisfying node otherwise.

SQL. A node's metrics come from the base frequency table (one scan of the source) in at most three
kinds of queries: the metrics' coded table (``templates/metrics/coded.sql.j2``, once per plan: every
per-record quantity at every level), its whole-table sums (``templates/metrics/totals.sql.j2``, once
per plan: a node without suppression needs nothing else for the record-level metrics, because with
global recoding they are sums over quasi-identifiers of per-level totals), and, per batch of nodes
that suppress records or need class-level figures (CM, multiple use),
``templates/metrics/node.sql.j2``, which rolls each node up, flags its violating classes and sums
what the metrics need over them.
"""

from sqlanon.metrics.bounds import BOUND_EPS, BOUNDED_METRICS, CHOOSE_CHUNK, max_classes, rank_lower_bound
from sqlanon.metrics.evaluate import evaluate_node, metric_info, parse_ks, profile
from sqlanon.metrics.info import (
    METRIC_INFO,
    METRICS,
    NODE_METRICS,
    MetricInfo,
    candidates_for,
    monotone,
    precision,
)
from sqlanon.metrics.optimum import choose, choose_among, global_bounds
from sqlanon.metrics.scoring import MetricTables, compute, score, tables, undefined_reason, value

__all__ = [
    "BOUNDED_METRICS",
    "BOUND_EPS",
    "CHOOSE_CHUNK",
    "METRICS",
    "METRIC_INFO",
    "MetricInfo",
    "MetricTables",
    "NODE_METRICS",
    "candidates_for",
    "choose",
    "choose_among",
    "compute",
    "evaluate_node",
    "global_bounds",
    "max_classes",
    "metric_info",
    "monotone",
    "parse_ks",
    "precision",
    "profile",
    "rank_lower_bound",
    "score",
    "tables",
    "undefined_reason",
    "value",
]
