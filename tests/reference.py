"""Independent brute-force reference implementation of privacy, risk and utility metrics.

This module is a *test oracle*.  It is derived only from the source documents in
``/work/shared/seeds`` and deliberately shares no code with ``sqlanon``.  Everything is
plain Python (standard library only), quadratic where that is simplest, and written to be
read next to the seed text it cites:

* seed 000 -- Mahiou & Nagle, "Anonymity, Utility and Risk: an Overview" (sections 3-5).
* seed 001 -- k-anonymity in SQL Server (the 9-row patient example).
* seed 002 -- Marchand, "The Limits of Current Information Loss Metrics ..." (section 3).
* seed 004 -- Bezzi, "An information theoretic approach for privacy metrics" (section 3).

Conventions used throughout
---------------------------
* ``rows`` is a ``list[dict[str, object]]``.  Values may be ``str``, ``int``, ``float`` or
  ``None``; ``None`` is an ordinary value of its own and all ``None`` s group together.
* ``qis`` is the list of quasi-identifier column names, ``s`` the sensitive column.
* An *equivalence class* is the set of rows sharing the same tuple of QI values
  (seed 002 section 2.3; seed 000 algorithm 1).
* Entropies and information quantities are in **bits** (``log2``).
* Metrics that take a minimum or maximum over classes raise ``ValueError`` on an empty table.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

Row = Mapping[str, object]
Rows = Sequence[Row]

__all__ = [
    "classes",
    "k_anonymity",
    "class_size_histogram",
    "records_below_k",
    "violating_records",
    "distinct_l",
    "entropy_l",
    "recursive_c_min",
    "recursive_holds",
    "emd_equal",
    "emd_ordered",
    "i1",
    "i2",
    "kl_max",
    "entropy_w",
    "mutual_information",
    "l_max",
    "l_t",
    "prosecutor_max",
    "prosecutor_avg",
    "marketer",
    "journalist",
    "discernibility",
    "avg_class_size",
    "classification_metric",
    "absdist",
    "reldist",
    "precision",
    "precision_cells",
    "entropy_loss",
    "monotone_entropy_loss",
    "non_uniform_entropy",
    "ncp_hierarchy",
    "ncp_interval",
    "ncp_table",
    "multiple_use",
    "mi_utility",
    "pmi_utility",
    "pmi_loss",
]


# ---------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------


def _entropy_of_counts(counts: Iterable[int]) -> float:
    """Shannon entropy in bits, H = -sum q log2 q, of a multiset given by its counts."""
    counts = [c for c in counts if c > 0]
    total = sum(counts)
    if total == 0:
        return 0.0
    h = 0.0
    for c in counts:
        q = c / total
        h -= q * math.log2(q)
    return h


def _distribution(rows: Rows, s: str) -> dict[object, float]:
    """Empirical distribution of column ``s`` (value -> probability)."""
    counts = Counter(r[s] for r in rows)
    n = len(rows)
    return {v: c / n for v, c in counts.items()}


def _nonempty(rows: Rows) -> None:
    if len(rows) == 0:
        raise ValueError("metric undefined on an empty table")


def _sort_key_none_last(v: object) -> tuple[int, object]:
    return (1, 0) if v is None else (0, v)


# ---------------------------------------------------------------------------------------
# equivalence classes and k-anonymity (seed 000 section 3.1, seed 002 section 2.3)
# ---------------------------------------------------------------------------------------


def classes(rows: Rows, qis: Sequence[str]) -> dict[tuple, list[Row]]:
    """Equivalence classes keyed by the tuple of QI values (seed 002 section 2.3).

    Seed 002: "An equivalence class of table T is a set of records that have identical values
    for the quasi-identifiers".  ``None`` is grouped like any other value.  With ``qis == []``
    the whole table is one class keyed by ``()``.
    """
    out: dict[tuple, list[Row]] = {}
    for r in rows:
        key = tuple(r[q] for q in qis)
        out.setdefault(key, []).append(r)
    return out


def k_anonymity(rows: Rows, qis: Sequence[str]) -> int:
    """Smallest equivalence-class size (seed 000 section 3.1, algorithm 1: ``min(groups)``)."""
    _nonempty(rows)
    return min(len(c) for c in classes(rows, qis).values())


def class_size_histogram(rows: Rows, qis: Sequence[str]) -> dict[int, int]:
    """Map class size -> number of classes of that size."""
    return dict(Counter(len(c) for c in classes(rows, qis).values()))


def records_below_k(rows: Rows, qis: Sequence[str], k: int) -> int:
    """Number of records lying in classes of size strictly less than ``k``."""
    return sum(len(c) for c in classes(rows, qis).values() if len(c) < k)


def violating_records(rows: Rows, qis: Sequence[str], predicate: Callable[[list[Row]], bool]) -> int:
    """Total number of records in classes for which ``predicate(class_rows)`` is False."""
    return sum(len(c) for c in classes(rows, qis).values() if not predicate(c))


# ---------------------------------------------------------------------------------------
# l-diversity (seed 000 section 3.2; Machanavajjhala et al. 2006)
# ---------------------------------------------------------------------------------------


def distinct_l(rows: Rows, qis: Sequence[str], s: str) -> int:
    """Distinct l-diversity: min over classes of the number of distinct ``s`` values.

    Seed 000 section 3.2, "Distinct l-diversity: the number of unique values for a given
    sensitive attribute in each bin", combined with algorithm 2 (``ldiv = min(...)``).
    """
    _nonempty(rows)
    return min(len({r[s] for r in c}) for c in classes(rows, qis).values())


def entropy_l(rows: Rows, qis: Sequence[str], s: str) -> float:
    """Entropy l-diversity: ``2 ** min_class H(s | class)`` with H in bits.

    Seed 000 section 3.2 defines l(b) = floor(exp(Entropy(b))) with natural logs; here no
    floor is applied and base 2 is used consistently (2**H_bits == e**H_nats), so the
    result is the real-valued "effective number of values" of the least diverse class.
    Seed 004 section 3 writes the same condition as H(W | x~) >= log2 l.
    """
    _nonempty(rows)
    hmin = min(_entropy_of_counts(Counter(r[s] for r in c).values()) for c in classes(rows, qis).values())
    return 2.0**hmin


def _sorted_counts(class_rows: Sequence[Row], s: str) -> list[int]:
    return sorted(Counter(r[s] for r in class_rows).values(), reverse=True)


def recursive_c_min(rows: Rows, qis: Sequence[str], s: str, l: int) -> float | None:  # noqa: E741
    """Smallest ``c`` bound for recursive (c, l)-diversity: max over classes of r1 / tail.

    Machanavajjhala et al. (cited in seed 000 section 3.2): sort the counts of the sensitive
    values in a class descending, r1 >= r2 >= ... >= rm.  The class is recursive
    (c, l)-diverse iff r1 < c * (r_l + r_{l+1} + ... + r_m)  (1-based l).  Seed 000 writes
    the l = 2 instance f(r1) < c * sum_{i>1} f(r_i).

    Returns ``max over classes of r1 / (r_l + ... + r_m)``: the table is (c, l)-diverse iff
    c is *strictly greater* than the returned value.  If any class has fewer than ``l``
    distinct values (m < l) no c can work and ``None`` is returned.
    """
    if l < 1:
        raise ValueError("l must be >= 1")
    _nonempty(rows)
    worst = 0.0
    for c in classes(rows, qis).values():
        r = _sorted_counts(c, s)
        if len(r) < l:
            return None
        tail = sum(r[l - 1 :])
        worst = max(worst, r[0] / tail)
    return worst


def recursive_holds(rows: Rows, qis: Sequence[str], s: str, c: float, l: int) -> bool:  # noqa: E741
    """True iff every class has m >= l and r1 < c * (r_l + ... + r_m) (seed 000 section 3.2)."""
    if l < 1:
        raise ValueError("l must be >= 1")
    for cls in classes(rows, qis).values():
        r = _sorted_counts(cls, s)
        if len(r) < l:
            return False
        if not r[0] < c * sum(r[l - 1 :]):
            return False
    return True


# ---------------------------------------------------------------------------------------
# t-closeness (seed 000 section 3.3; Li, Li & Venkatasubramanian 2007)
# ---------------------------------------------------------------------------------------


def emd_equal(rows: Rows, qis: Sequence[str], s: str) -> float:
    """Equal-distance EMD, max over classes of 0.5 * sum_v |p(v) - q(v | class)|.

    ``p`` is the whole-table distribution of ``s``, ``q`` the distribution inside a class,
    and the sum runs over the whole table's domain (values absent from a class have q = 0).
    Seed 000 section 3.3 writes D[P,Q] = sum |p_i - q_i| *without* the 1/2; the factor 1/2 of
    Li et al. (2007) is used here so that the value lies in [0, 1].
    """
    _nonempty(rows)
    p = _distribution(rows, s)
    worst = 0.0
    for c in classes(rows, qis).values():
        q = _distribution(c, s)
        d = 0.5 * sum(abs(p[v] - q.get(v, 0.0)) for v in p)
        worst = max(worst, d)
    return worst


def emd_ordered(rows: Rows, qis: Sequence[str], s: str, order: Sequence[object] | None = None) -> float:
    """Ordered-distance EMD (seed 000 section 3.3, "EMD for Numerical Attributes").

    Domain: if ``order`` is None, the distinct ``s`` values present in the whole table sorted
    ascending (``None`` last); otherwise ``order`` exactly as given (it then defines the
    domain, including any listed values absent from the table, and must contain every value
    present -- otherwise ``ValueError``).  With m = |domain| and r_i = p_i - q_i:

        D(P, Q) = 1/(m-1) * sum_{i=1..m} | sum_{j<=i} r_j |

    Returns the max over classes; 0.0 when m == 1.
    """
    _nonempty(rows)
    p = _distribution(rows, s)
    if order is None:
        domain = sorted(p, key=_sort_key_none_last)
    else:
        domain = list(order)
        if len(set(domain)) != len(domain):
            raise ValueError("order contains duplicates")
        missing = set(p) - set(domain)
        if missing:
            raise ValueError(f"order lacks values present in the table: {missing!r}")
    m = len(domain)
    if m <= 1:
        return 0.0
    worst = 0.0
    for c in classes(rows, qis).values():
        q = _distribution(c, s)
        cum = 0.0
        total = 0.0
        for v in domain:
            cum += p.get(v, 0.0) - q.get(v, 0.0)
            total += abs(cum)
        worst = max(worst, total / (m - 1))
    return worst


# ---------------------------------------------------------------------------------------
# information-theoretic risk (seed 004 section 3; Bezzi)
# ---------------------------------------------------------------------------------------


def entropy_w(rows: Rows, s: str) -> float:
    """H(W): entropy in bits of the sensitive column over the whole table."""
    return _entropy_of_counts(Counter(r[s] for r in rows).values())


def i1(class_rows: Rows, all_rows: Rows, s: str, p: dict | None = None) -> float:
    """Surprise I1(W, x~) = sum_w p(w|x~) log2(p(w|x~) / p(w))  (seed 004 eqs 7-8).

    This is the Kullback-Leibler divergence of the class distribution from the whole-table
    distribution ``all_rows``; terms with p(w|x~) = 0 contribute 0.
    """
    _nonempty(class_rows)
    p = p if p is not None else _distribution(all_rows, s)
    q = _distribution(class_rows, s)
    return sum(qv * math.log2(qv / p[v]) for v, qv in q.items() if qv > 0)


def i2(class_rows: Rows, all_rows: Rows, s: str) -> float:
    """Specific information I2(W, x~) = H(W) - H(W | x~)  (seed 004 eq 10).  May be negative."""
    return entropy_w(all_rows, s) - entropy_w(class_rows, s)


def kl_max(rows: Rows, qis: Sequence[str], s: str) -> float:
    """KL form of t-closeness: max over classes of I1(W, class)  (seed 004 eqs 7-8)."""
    _nonempty(rows)
    p = _distribution(rows, s)
    return max(i1(c, rows, s, p) for c in classes(rows, qis).values())


def mutual_information(rows: Rows, qis: Sequence[str], s: str) -> float:
    """I(W; X~) = sum_classes p(class) * I1(W, class)  (seed 004 eq 9).

    Equals H(W) - sum_classes p(class) H(W | class) (seed 004 eq 11); both forms are checked
    against each other in the self-check tests.
    """
    _nonempty(rows)
    n = len(rows)
    p = _distribution(rows, s)
    return sum(len(c) / n * i1(c, rows, s, p) for c in classes(rows, qis).values())


def l_max(rows: Rows, s: str) -> float:
    """Upper bound on entropy l: l_max = 2 ** H(W)  (seed 004 eq 15)."""
    return 2.0 ** entropy_w(rows, s)


def l_t(rows: Rows, s: str, t: float) -> float:
    """The l equivalent to a t threshold: l_t = 2 ** (H(W) - t)  (seed 004 eq 12)."""
    return 2.0 ** (entropy_w(rows, s) - t)


# ---------------------------------------------------------------------------------------
# re-identification risk (seed 000 section 5)
# ---------------------------------------------------------------------------------------


def prosecutor_max(rows: Rows, qis: Sequence[str]) -> float:
    """Prosecutor risk R_p = 1 / min_j f_j  (seed 000 section 5.3; D = U)."""
    return 1.0 / k_anonymity(rows, qis)


def prosecutor_avg(rows: Rows, qis: Sequence[str]) -> float:
    """Average prosecutor risk: (1/n) * sum over records of 1/|class| = #classes / n."""
    _nonempty(rows)
    return len(classes(rows, qis)) / len(rows)


def _population_counts(population_rows: Rows, qis: Sequence[str]) -> Counter:
    return Counter(tuple(r[q] for q in qis) for r in population_rows)


def marketer(rows: Rows, qis: Sequence[str], population_rows: Rows | None = None) -> float:
    """Marketer risk R_m = (1/n) * sum_j f_j / F_j  (seed 000 section 5.2).

    ``f_j`` is the size of sample class j, ``F_j`` the number of ``population_rows`` with the
    same QI tuple.  Without a population (D = U, F_j = f_j) this is #classes / n.  A sample
    class absent from the population violates U subset-of D and raises ``ValueError``.
    """
    _nonempty(rows)
    n = len(rows)
    cls = classes(rows, qis)
    if population_rows is None:
        return len(cls) / n
    big_f = _population_counts(population_rows, qis)
    total = 0.0
    for key, members in cls.items():
        if big_f[key] == 0:
            raise ValueError(f"sample class {key!r} absent from the population")
        total += len(members) / big_f[key]
    return total / n


def journalist(rows: Rows, qis: Sequence[str], population_rows: Rows) -> float:
    """Journalist risk R_j = 1 / min_{j in sample classes} F_j  (seed 000 section 5.4).

    Population classes not represented in the sample are discarded, as the seed says.
    """
    _nonempty(rows)
    big_f = _population_counts(population_rows, qis)
    fs = []
    for key in classes(rows, qis):
        if big_f[key] == 0:
            raise ValueError(f"sample class {key!r} absent from the population")
        fs.append(big_f[key])
    return 1.0 / min(fs)


# ---------------------------------------------------------------------------------------
# class-based utility metrics (seed 002 sections 3.2, 3.4; seed 000 section 4.1)
# ---------------------------------------------------------------------------------------


def discernibility(
    gen_rows: Rows, qis: Sequence[str], suppressed: int = 0, n_total: int | None = None
) -> int:
    """Discernibility metric DM = sum_{E} |E|^2 + suppressed * n_total.

    Seed 002 eq (4) gives DM(T) = sum over classes |e|^2.  Bayardo & Agrawal additionally
    charge every suppressed record the size of the input table; ``gen_rows`` are the *kept*
    records, ``suppressed`` the number of removed records, and ``n_total`` defaults to
    ``len(gen_rows) + suppressed`` (the original table size).
    """
    if n_total is None:
        n_total = len(gen_rows) + suppressed
    return sum(len(c) ** 2 for c in classes(gen_rows, qis).values()) + suppressed * n_total


def avg_class_size(gen_rows: Rows, qis: Sequence[str], k: int) -> float:
    """Normalised average class size C_avg = (n / #classes) / k  (LeFevre et al.)."""
    _nonempty(gen_rows)
    return (len(gen_rows) / len(classes(gen_rows, qis))) / k


def classification_metric(gen_rows: Rows, qis: Sequence[str], label: str) -> float:
    """CM = (sum over classes of |class| - count of the majority label) / n.

    Seed 000 section 4.1 (algorithm 4) and seed 002 eq (8): each record whose label differs
    from its class's majority label costs 1.  Ties for the majority do not matter because
    only the majority *count* enters.  Seed 002 eq (8) omits the 1/n; seed 000 includes it.
    """
    _nonempty(gen_rows)
    penalty = 0
    for c in classes(gen_rows, qis).values():
        penalty += len(c) - max(Counter(r[label] for r in c).values())
    return penalty / len(gen_rows)


# ---------------------------------------------------------------------------------------
# hierarchy-based metrics (seed 002 section 3.1)
# ---------------------------------------------------------------------------------------


def absdist(levels: Mapping[str, int]) -> int:
    """Absdist(T, T') = sum_j d_j  (seed 002 eq 1)."""
    return sum(levels.values())


def _ratio(level: int, height: int) -> float:
    if height == 0:
        if level != 0:
            raise ValueError("level > 0 on a hierarchy of height 0")
        return 0.0
    if not 0 <= level <= height:
        raise ValueError(f"level {level} outside [0, {height}]")
    return level / height


def reldist(levels: Mapping[str, int], heights: Mapping[str, int]) -> float:
    """Reldist(T, T') = sum_j d_j / |DGH_j|  (seed 002 eq 2)."""
    return sum(_ratio(levels[q], heights[q]) for q in levels)


def precision(levels: Mapping[str, int], heights: Mapping[str, int]) -> float:
    """Sweeney's Prec for full-domain generalisation (seed 002 eq 3).

    Prec = 1 - (sum_j level_j / height_j) / |QI|, where height_j = |DGH_j| is the maximum
    level (number of levels - 1) and every record has the same level on attribute j, so the
    sum over the N records in eq (3) cancels against the N in the denominator.  A height of
    0 (ungeneralisable attribute) contributes 0.
    """
    if not levels:
        raise ValueError("no quasi-identifiers")
    return 1.0 - sum(_ratio(levels[q], heights[q]) for q in levels) / len(levels)


def precision_cells(record_levels: Sequence[Mapping[str, int]], heights: Mapping[str, int]) -> float:
    """Seed 002 eq (3) cell by cell: 1 - sum_{i,j} h_ij/|DGH_j| / (N_QI * N).

    ``record_levels[i][qi]`` is the number of generalisation steps applied to that cell;
    useful for local recoding where levels differ per record.
    """
    if not record_levels:
        raise ValueError("empty table")
    qis = list(heights)
    total = sum(_ratio(rl[q], heights[q]) for rl in record_levels for q in qis)
    return 1.0 - total / (len(qis) * len(record_levels))


# ---------------------------------------------------------------------------------------
# covered original values of a generalised value (shared by entropy and NCP metrics)
# ---------------------------------------------------------------------------------------

Covers = Mapping[object, Iterable[object]] | Callable[[object], Iterable[object]]


def _cover_sets(
    orig_rows: Rows, gen_rows: Rows, qi: str, covers: Covers | None = None
) -> dict[object, frozenset]:
    """Map each generalised value of ``qi`` to the set of ORIGINAL values it stands for.

    Resolution order for a generalised value ``g``:
      1. ``g`` is a ``frozenset`` -> ``g`` itself (an explicit set, as in seed 002 tables 2-4);
      2. ``covers`` given -> ``covers[g]`` (mapping) or ``covers(g)`` (callable);
      3. otherwise *data-derived*: the distinct original values of the records whose
         generalised value is ``g``.
    """
    if len(orig_rows) != len(gen_rows):
        raise ValueError("orig_rows and gen_rows must be aligned row by row")
    derived: dict[object, set] = defaultdict(set)
    for o, g in zip(orig_rows, gen_rows, strict=True):
        derived[g[qi]].add(o[qi])
    out: dict[object, frozenset] = {}
    for g, vals in derived.items():
        if isinstance(g, frozenset):
            out[g] = g
        elif covers is not None:
            out[g] = frozenset(covers(g) if callable(covers) else covers[g])
        else:
            out[g] = frozenset(vals)
    for g, vals in derived.items():
        if not vals <= out[g]:
            raise ValueError(f"generalised value {g!r} of {qi!r} does not cover {vals - out[g]!r}")
    return out


# ---------------------------------------------------------------------------------------
# entropy-based information loss (seed 002 section 3.5; seed 000 sections 4.3-4.4;
# Gionis & Tassa 2009)
# ---------------------------------------------------------------------------------------

_NORMALISATIONS = ("n", "nr", "none")


def _normalise(total: float, n: int, r: int, normalise: str) -> float:
    if normalise == "n":
        return total / n
    if normalise == "nr":
        return total / (n * r)
    if normalise == "none":
        return total
    raise ValueError(f"normalise must be one of {_NORMALISATIONS}")


def _conditional_tables(
    orig_rows: Rows, gen_rows: Rows, qi: str, covers: Covers | None, conditional: str
) -> tuple[dict[object, Counter], Counter]:
    """For each generalised value B of ``qi``: counts of original values defining Pr(X | X in B).

    ``conditional == "cover"`` (default, seed 002 eq 10): Pr(X_j = v | X_j in B) =
        #{records with original value v} / #{records whose ORIGINAL value lies in B}, counted
        over the whole original table, with B the covered set of the generalised value.
    ``conditional == "label"``: the distribution of the original values among the records
        whose *generalised* value equals B.  The two coincide for global (full-domain /
        single-dimension) recoding; they differ for multi-dimensional and local recoding.
    Also returns the marginal counts of the original column.
    """
    marginal = Counter(o[qi] for o in orig_rows)
    tables: dict[object, Counter] = {}
    if conditional == "cover":
        for g, cover in _cover_sets(orig_rows, gen_rows, qi, covers).items():
            tables[g] = Counter({v: marginal[v] for v in cover if marginal[v] > 0})
    elif conditional == "label":
        if len(orig_rows) != len(gen_rows):
            raise ValueError("orig_rows and gen_rows must be aligned row by row")
        by_label: dict[object, Counter] = defaultdict(Counter)
        for o, g in zip(orig_rows, gen_rows, strict=True):
            by_label[g[qi]][o[qi]] += 1
        tables = dict(by_label)
    else:
        raise ValueError("conditional must be 'cover' or 'label'")
    return tables, marginal


def entropy_loss(
    orig_rows: Rows,
    gen_rows: Rows,
    qis: Sequence[str],
    *,
    covers: Mapping[str, Covers] | None = None,
    conditional: str = "cover",
    normalise: str = "n",
) -> float:
    """Entropy information loss Pi_e (seed 002 eqs 9-11; Gionis & Tassa's entropy measure).

        Pi_e = sum_{i=1..n} sum_{j in QI} H(X_j | X_j in B_ij),
        H(X_j | B) = -sum_{b in B} Pr(X_j = b | X_j in B) log2 Pr(X_j = b | X_j in B)

    where B_ij is the generalised value of record i on attribute j and the conditional
    probabilities are counted in the ORIGINAL table (see ``_conditional_tables``).
    Normalisation: ``"n"`` (default) divides by n -- i.e. the average loss per record summed
    over the QIs; ``"nr"`` divides by n * |QI|; ``"none"`` returns the raw double sum.
    This is the formula the brief calls Pi_me; see ``monotone_entropy_loss`` for the
    Pr-weighted measure of seed 000 section 4.3.
    """
    return _entropy_family(orig_rows, gen_rows, qis, covers, conditional, normalise, weighted=False)


def monotone_entropy_loss(
    orig_rows: Rows,
    gen_rows: Rows,
    qis: Sequence[str],
    *,
    covers: Mapping[str, Covers] | None = None,
    conditional: str = "cover",
    normalise: str = "n",
) -> float:
    """Monotone entropy loss Pi_me (seed 000 section 4.3; Gionis & Tassa 2009).

        Pi_me = sum_{i=1..n} sum_{j in QI} Pr(X_j in B_ij) * H(X_j | X_j in B_ij)

    Seed 000 prints the weight as ``Pr(R_i(j))``; it is read here as Pr(X_j in R-bar_i(j)),
    the marginal probability (in the original table) of the generalised set B_ij.  That
    weight is what makes the measure monotone: Pr(B) H(X|B) = -sum_{b in B} p_b log2 p_b +
    Pr(B) log2 Pr(B) grows when B grows, while the unweighted ``entropy_loss`` need not.
    With ``conditional="label"`` Pr(B) is the fraction of records carrying the label B.
    Normalisation as in ``entropy_loss`` (default: divide by n).
    """
    return _entropy_family(orig_rows, gen_rows, qis, covers, conditional, normalise, weighted=True)


def _entropy_family(
    orig_rows: Rows,
    gen_rows: Rows,
    qis: Sequence[str],
    covers: Mapping[str, Covers] | None,
    conditional: str,
    normalise: str,
    weighted: bool,
) -> float:
    _nonempty(orig_rows)
    n = len(orig_rows)
    total = 0.0
    for qi in qis:
        tables, _ = _conditional_tables(orig_rows, gen_rows, qi, (covers or {}).get(qi), conditional)
        h = {g: _entropy_of_counts(t.values()) for g, t in tables.items()}
        w = {g: sum(t.values()) / n for g, t in tables.items()}
        for g in gen_rows:
            b = g[qi]
            total += (w[b] * h[b]) if weighted else h[b]
    return _normalise(total, n, len(qis), normalise)


def non_uniform_entropy(
    orig_rows: Rows,
    gen_rows: Rows,
    qis: Sequence[str],
    *,
    covers: Mapping[str, Covers] | None = None,
    conditional: str = "cover",
    normalise: str = "n",
) -> float:
    """Non-uniform entropy loss (Gionis & Tassa; seed 000 section 4.4, Pi_MI).

        Pi_ne = sum_{i=1..n} sum_{j in QI} -log2 Pr(X_j = R_i(j) | X_j in B_ij)

    with R_i(j) the original value and the same conditional distribution as
    ``entropy_loss``.  Default normalisation divides by n; seed 000 section 4.4 writes the
    1/(n r) form, available as ``normalise="nr"``.  For global recoding with
    ``conditional="cover"`` the raw sum equals the raw sum of ``entropy_loss``.
    """
    _nonempty(orig_rows)
    n = len(orig_rows)
    total = 0.0
    for qi in qis:
        tables, _ = _conditional_tables(orig_rows, gen_rows, qi, (covers or {}).get(qi), conditional)
        sizes = {g: sum(t.values()) for g, t in tables.items()}
        for o, g in zip(orig_rows, gen_rows, strict=True):
            b = g[qi]
            total -= math.log2(tables[b][o[qi]] / sizes[b])
    return _normalise(total, n, len(qis), normalise)


# ---------------------------------------------------------------------------------------
# Normalised Certainty Penalty (seed 002 section 3.3)
# ---------------------------------------------------------------------------------------


def ncp_hierarchy(
    orig_rows: Rows,
    gen_rows: Rows,
    qi: str,
    *,
    covers: Covers | None = None,
    variant: str = "seed",
) -> float:
    """Average over records of the categorical NCP of attribute ``qi`` (seed 002 eq 5).

    With |e[A_j]| the number of distinct ORIGINAL values covered by the generalised value
    (see ``_cover_sets``) and |A_j^(0)| the number of distinct original values of the column:

    * ``variant="seed"`` (default, seed 002 eq 5):  NCP = 0 if |e[A_j]| = 1,
      else |e[A_j]| / |A_j^(0)|.
    * ``variant="xu"`` (Xu et al. 2006):  NCP = (|e[A_j]| - 1) / (|A_j^(0)| - 1)
      (0 when the domain has a single value).

    Both give 0 for an ungeneralised value and 1 for full suppression; they differ between.
    """
    _nonempty(orig_rows)
    domain_size = len({o[qi] for o in orig_rows})
    cover = _cover_sets(orig_rows, gen_rows, qi, covers)
    total = 0.0
    for g in gen_rows:
        size = len(cover[g[qi]])
        if variant == "seed":
            total += 0.0 if size <= 1 else size / domain_size
        elif variant == "xu":
            total += 0.0 if domain_size <= 1 else (size - 1) / (domain_size - 1)
        else:
            raise ValueError("variant must be 'seed' or 'xu'")
    return total / len(gen_rows)


def ncp_interval(
    orig_rows: Rows,
    gen_rows: Rows,
    qi: str,
    *,
    intervals: Mapping[object, tuple[float, float]] | Callable[[object], tuple[float, float]] | None = None,
    domain: tuple[float, float] | None = None,
) -> float:
    """Average over records of the numeric NCP of attribute ``qi`` (seed 002 eq 6).

        NCP = (max(e[A_j]) - min(e[A_j])) / (max(A_j^(0)) - min(A_j^(0)))

    The interval of a generalised value ``g`` is: ``g`` itself if it is a 2-tuple (lo, hi);
    else ``intervals[g]`` / ``intervals(g)`` if given; else *data-derived*: min and max of the
    original values of the records carrying ``g``.  The domain range is ``domain`` if given,
    else min/max of the original column.  ``None`` originals are ignored when taking
    min/max; a zero-width domain yields 0.
    """
    _nonempty(orig_rows)
    if len(orig_rows) != len(gen_rows):
        raise ValueError("orig_rows and gen_rows must be aligned row by row")
    values = [o[qi] for o in orig_rows if o[qi] is not None]
    lo_d, hi_d = domain if domain is not None else (min(values), max(values))
    width_d = hi_d - lo_d
    derived: dict[object, list] = defaultdict(list)
    for o, g in zip(orig_rows, gen_rows, strict=True):
        if o[qi] is not None:
            derived[g[qi]].append(o[qi])
    total = 0.0
    for g in gen_rows:
        b = g[qi]
        if isinstance(b, tuple) and len(b) == 2:
            lo, hi = b
        elif intervals is not None:
            lo, hi = intervals(b) if callable(intervals) else intervals[b]
        elif derived[b]:
            lo, hi = min(derived[b]), max(derived[b])
        else:
            lo = hi = 0
        total += 0.0 if width_d == 0 else (hi - lo) / width_d
    return total / len(gen_rows)


def ncp_table(
    orig_rows: Rows,
    gen_rows: Rows,
    qis: Sequence[str],
    *,
    numeric: Iterable[str] = (),
    weights: Mapping[str, float] | None = None,
    covers: Mapping[str, Covers] | None = None,
    intervals: Mapping[str, object] | None = None,
    domains: Mapping[str, tuple[float, float]] | None = None,
    variant: str = "seed",
) -> float:
    """Whole-table NCP (seed 002 eq 7), per record:

        NCP(T) = 1 / (N * N_QI) * sum_{records} sum_{j} w_j * NCP_{A_j}(record's class)

    = sum_j w_j * (per-attribute average NCP) / N_QI.  Attributes in ``numeric`` use
    ``ncp_interval`` (eq 6), the others ``ncp_hierarchy`` (eq 5).  Weights default to 1; the
    denominator is N * N_QI exactly as in eq 7 (so with weights not summing to N_QI the value
    is not a weighted mean).  Eq 7 literally sums over equivalence classes, not records; the
    record-weighted reading is used because only it reaches 1 for a fully generalised
    table, as the seed's text says it should.
    """
    numeric = set(numeric)
    weights = weights or {}
    total = 0.0
    for qi in qis:
        w = weights.get(qi, 1.0)
        if qi in numeric:
            total += w * ncp_interval(
                orig_rows,
                gen_rows,
                qi,
                intervals=(intervals or {}).get(qi),
                domain=(domains or {}).get(qi),
            )
        else:
            total += w * ncp_hierarchy(
                orig_rows, gen_rows, qi, covers=(covers or {}).get(qi), variant=variant
            )
    return total / len(qis)


# ---------------------------------------------------------------------------------------
# multiple-use metric (seed 000 section 4.2; Iyengar 2002)
# ---------------------------------------------------------------------------------------


def multiple_use(
    gen_rows: Rows,
    qis: Sequence[str],
    s: str,
    *,
    numeric: bool = False,
    table_rows: Rows | None = None,
    suppressed: int = 0,
) -> float:
    """Multiple-use metric, seed 000 section 4.2 (algorithm 5): the bin-size weighted average of
    the loss of granularity l_b of the sensitive attribute ``s`` over the bins (classes):

    * categorical: l_b = (M_b - 1) / (M - 1), M_b distinct values of ``s`` in bin b, M in the table;
    * numerical:   l_b = (U_b - L_b) / (U - L), bounds of ``s`` in bin b and in the table.

    ``gen_rows`` are the released (kept) records.  ``table_rows`` (default ``gen_rows``) is the
    table that defines M, U and L -- the original table when records were suppressed.  Each of
    the ``suppressed`` records is charged the maximal loss 1 (nothing of it is released), and the
    weights are then size_b / (kept + suppressed).  ``None`` values count as a value for M (as
    everywhere here) and are ignored for U and L.  A zero denominator (one value, or U = L) gives
    l_b = 0.
    """
    table_rows = gen_rows if table_rows is None else table_rows
    size_t = len(gen_rows) + suppressed
    if size_t == 0:
        raise ValueError("metric undefined on an empty table")
    if numeric:
        values_t = [r[s] for r in table_rows if r[s] is not None]
        span_t = (max(values_t) - min(values_t)) if values_t else 0
    else:
        m_t = len({r[s] for r in table_rows})
    score = 0.0
    for members in classes(gen_rows, qis).values():
        if numeric:
            vals = [r[s] for r in members if r[s] is not None]
            span_b = (max(vals) - min(vals)) if vals else 0
            l_b = span_b / span_t if span_t else 0.0
        else:
            m_b = len({r[s] for r in members})
            l_b = (m_b - 1) / (m_t - 1) if m_t > 1 else 0.0
        score += len(members) / size_t * l_b
    return score + suppressed / size_t


# ---------------------------------------------------------------------------------------
# mutual-information utility and private mutual information (seed 000 sections 4.4-4.5;
# Goldberger & Tassa 2010)
# ---------------------------------------------------------------------------------------


def _cover_counts(orig_rows: Rows, gen_rows: Rows, qi: str, covers: Covers | None, col: str) -> dict:
    """Generalised value B -> Counter of column ``col`` over the ORIGINAL records whose value of
    ``qi`` lies in B's cover (the records X_j in B of the conditional probabilities)."""
    cover = _cover_sets(orig_rows, gen_rows, qi, covers)
    out: dict[object, Counter] = {}
    for g, members in cover.items():
        out[g] = Counter(o[col] for o in orig_rows if o[qi] in members)
    return out


def mi_utility(
    orig_rows: Rows, gen_rows: Rows, qis: Sequence[str], *, covers: Mapping[str, Covers] | None = None
) -> float:
    """Mutual-information utility U = I(D, g(D)) (seed 000 section 4.4):

        U = 1/r sum_j I(X_j; X^_j),
        I(X_j; X^_j) = 1/n sum_i log2( Pr(X_j = R_i(j) | X_j in B_ij) / Pr(X_j = R_i(j)) )

    Probabilities are counted in the original table (rows aligned with ``gen_rows``); B_ij is
    the generalised value of record i, resolved to its cover as in ``_cover_sets``.  Logs in bits.
    """
    _nonempty(orig_rows)
    n, r = len(orig_rows), len(qis)
    total = 0.0
    for qi in qis:
        inside = _cover_counts(orig_rows, gen_rows, qi, (covers or {}).get(qi), qi)
        marginal = Counter(o[qi] for o in orig_rows)
        for o, g in zip(orig_rows, gen_rows, strict=True):
            members = inside[g[qi]]
            p_cond = members[o[qi]] / sum(members.values())
            total += math.log2(p_cond / (marginal[o[qi]] / n))
    return total / (n * r)


def _pmi_terms(
    orig_rows: Rows, gen_rows: Rows, qis: Sequence[str], s: str, covers: Mapping[str, Covers] | None
) -> list[tuple[float, float]]:
    """(Pr(Y = S_i | X_j in B_ij), Pr(Y = S_i)) for every record i and quasi-identifier j."""
    n = len(orig_rows)
    p_y = Counter(o[s] for o in orig_rows)
    out = []
    for qi in qis:
        inside = _cover_counts(orig_rows, gen_rows, qi, (covers or {}).get(qi), s)
        for o, g in zip(orig_rows, gen_rows, strict=True):
            members = inside[g[qi]]
            p_cond = members[o[s]] / sum(members.values())
            out.append((p_cond, p_y[o[s]] / n))
    return out


def pmi_utility(
    orig_rows: Rows,
    gen_rows: Rows,
    qis: Sequence[str],
    s: str,
    *,
    covers: Mapping[str, Covers] | None = None,
) -> float:
    """Private mutual-information utility U_PMI (seed 000 section 4.5):

        U_PMI = 1/(n r) sum_j sum_i log2( Pr(Y = S_i | X_j in B_ij) / Pr(Y = S_i) )

    with Y the private (sensitive) attribute ``s`` and S_i its value in record i, probabilities
    counted in the original table.
    """
    _nonempty(orig_rows)
    terms = _pmi_terms(orig_rows, gen_rows, qis, s, covers)
    return sum(math.log2(pc / py) for pc, py in terms) / len(terms)


def pmi_loss(
    orig_rows: Rows,
    gen_rows: Rows,
    qis: Sequence[str],
    s: str,
    *,
    covers: Mapping[str, Covers] | None = None,
) -> float:
    """Private mutual-information loss Pi_PMI (seed 000 section 4.5):

    Pi_PMI = -1/(n r) sum_i sum_j log2 Pr(Y = S_i | X_j in B_ij)
    """
    _nonempty(orig_rows)
    terms = _pmi_terms(orig_rows, gen_rows, qis, s, covers)
    return -sum(math.log2(pc) for pc, _ in terms) / len(terms)
