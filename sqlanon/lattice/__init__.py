"""The generalisation lattice and its searches: Flash (the default), Incognito, Datafly and
exhaustive (MinGen).

A node is a vector of levels, one per quasi-identifier (``None`` for a quasi-identifier outside the
subset Incognito is looking at). A node satisfies the policy when the records in its classes that
violate any requirement (k, each l, each t, the prosecutor-risk bound) number at most the
suppression limit: those classes are the ones a release removes (seed 002 section 2.4, record
suppression).

Every node is evaluated in SQL by ``templates/search/evaluate.sql.j2``, many nodes per query. The
source is scanned exactly once, into the base frequency table; each level of each hierarchy is then
coded as a small integer (``templates/search/coded.sql.j2``), so that a node's classes are the
groups of one integer key (the level codes in mixed radix) and its frequency table is a rollup of
the batch's common rollup (the meet), never a rescan (seed 002 section 4.2, rollup property).
Flash also keeps the frequency tables of some failing nodes (temporary tables) and rolls the nodes
above them up from those instead of from the coded base table (:class:`Source`).
GROUPING SETS were measured first: 2-3x slower on DuckDB and PostgreSQL, and the SQL text of one
branch per node made sqlglot the bottleneck; the node table of weights keeps the SQL small.

Monotonicity. k-anonymity and distinct l-diversity (with or without suppression), and the other
l-diversities and t-closeness without suppression, satisfy the generalisation and subset properties
(seed 002 section 4.2; Machanavajjhala et al. 2006 for l, Li et al. 2007 for t; a merged class
violates k or distinct l only if both its parts do: :attr:`Plan.monotone`). Entropy and recursive l
and t *with* suppression do not: generalising can merge a good class into a bad one and raise the
count of records to suppress. For such policies Incognito
runs on the monotone relaxation (class sizes only: k, and the least class size any l or the
prosecutor bound implies), then evaluates the full policy on every node the relaxation lets through
(as ARX does for non-monotonic criteria), so the result stays exact. Flash does the same.
"""

from sqlanon.lattice.algorithms import flash, run_search
from sqlanon.lattice.evaluator import Evaluator, Source, relaxed_k
from sqlanon.lattice.plan import (
    Node,
    NodeResult,
    Plan,
    Progress,
    Pruning,
    build_hierarchies,
    check_coverage,
    prepare,
)
from sqlanon.lattice.result import SearchResult
from sqlanon.lattice.searches import datafly, exhaustive, incognito
from sqlanon.lattice.shape import (
    Levels,
    all_nodes,
    height,
    minimal,
    node_map,
    parse_levels,
    predecessors,
    successors,
)

__all__ = [
    "Evaluator",
    "Node",
    "NodeResult",
    "Plan",
    "Progress",
    "Pruning",
    "SearchResult",
    "Source",
    "all_nodes",
    "build_hierarchies",
    "check_coverage",
    "datafly",
    "exhaustive",
    "flash",
    "height",
    "incognito",
    "minimal",
    "node_map",
    "Levels",
    "parse_levels",
    "predecessors",
    "prepare",
    "relaxed_k",
    "run_search",
    "successors",
]
