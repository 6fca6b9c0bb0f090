"""Self-checks of the reference functions added for the metrics (tests/reference.py: multiple_use,
mi_utility, pmi_utility, pmi_loss) against values worked out by hand from seed 000 sections 4.2,
4.4 and 4.5. The tables are seed 001's patients and seed 002's tables 1-2."""

from __future__ import annotations

import math

import pytest

from tests import reference as ref
from tests.test_reference_selfcheck import GA, GEN, PATIENTS, QI, T1, T2


def approx(x: float):
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def test_multiple_use_categorical_patients():
    # Disease has M = 3 values. Classes of seed 001's generalisation: under 30 {HD} -> 0;
    # over 40 {Flu, HD, Cancer} -> (3-1)/(3-1) = 1; 30 to 40 {HD, Cancer} -> 1/2.
    # Weighted by size 3/9 each: (0 + 1 + 1/2) / 3 = 1/2.
    assert ref.multiple_use(GEN, QI, "Disease") == approx(0.5)
    # Ungeneralised: singletons, M_b = 1 -> 0.
    assert ref.multiple_use(PATIENTS, QI, "Disease") == approx(0.0)


def test_multiple_use_numerical_marchand():
    # Balance ranges over [-50, 500] (U - L = 550). Table 2: e1 {250, 100, 250} -> 150/550,
    # e2 {-50, 500} -> 1; (3 * 150/550 + 2 * 1) / 5 = 31/55.
    assert ref.multiple_use(T2, GA, "Balance", numeric=True) == approx(31 / 55)
    # Categorical: M = 4 distinct balances; e1 has 2 -> 1/3, e2 has 2 -> 1/3: 1/3 overall.
    assert ref.multiple_use(T2, GA, "Balance") == approx(1 / 3)


def test_multiple_use_with_suppression():
    # Table 1, k = 2: the singletons 1, 2, 5 are suppressed (each charged 1); the kept class
    # (M, 24) holds -50 and 500. M, U and L come from the whole table 1.
    kept = [r for r in T1 if r["id"] in (3, 4)]
    # categorical: 2 * (2-1)/(4-1) / 5 + 3/5 = 2/15 + 9/15
    assert ref.multiple_use(kept, GA, "Balance", table_rows=T1, suppressed=3) == approx(11 / 15)
    # numerical: the kept class spans the whole range: 2/5 + 3/5
    assert ref.multiple_use(kept, GA, "Balance", numeric=True, table_rows=T1, suppressed=3) == approx(1.0)


def test_mi_utility_marchand():
    # Table 2 from table 1. Gender: {F,N} covers F x2, N x1 -> Pr(F | B) = 2/3 vs Pr(F) = 2/5,
    # Pr(N | B) = 1/3 vs 1/5: log2(5/3) for records 1, 2, 5; M: Pr(M | M) = 1 vs 2/5: log2(5/2) for
    # records 3, 4. Age: {24, 29} is the whole domain: log2 1 = 0. U = sum / (n r) = sum / 10.
    want = (3 * math.log2(5 / 3) + 2 * math.log2(5 / 2)) / 10
    assert ref.mi_utility(T1, T2, GA) == approx(want)
    # No generalisation: I(X; X) = H(X); U = (H(Gender) + H(Age)) / 2.
    h_gender = -(2 * 0.4 * math.log2(0.4) + 0.2 * math.log2(0.2))
    h_age = -(0.8 * math.log2(0.8) + 0.2 * math.log2(0.2))
    assert ref.mi_utility(T1, T1, GA) == approx((h_gender + h_age) / 2)
    # Seed 000 4.4: U and Pi_MI (= non-uniform entropy / (n r)) add up to mean_j H(X_j).
    loss = ref.non_uniform_entropy(T1, T2, GA, normalise="nr")
    assert ref.mi_utility(T1, T2, GA) + loss == approx((h_gender + h_age) / 2)


def test_private_mi_marchand():
    # Y = Balance: Pr(250) = 2/5, the other three 1/5. Gender {F,N} holds records 1, 2, 5 with
    # balances 250, 100, 250: Pr(250 | B) = 2/3 (ratio 5/3), Pr(100 | B) = 1/3 (ratio 5/3);
    # M holds -50, 500: 1/2 each (ratio 5/2). Age {24, 29} = everything: ratio 1.
    u = (3 * math.log2(5 / 3) + 2 * math.log2(5 / 2)) / 10
    assert ref.pmi_utility(T1, T2, GA, "Balance") == approx(u)
    # Pi_PMI = -1/(n r) sum log2 Pr(Y = S_i | B_ij): Gender 2 log2(3/2) + log2 3 + 2 log2 2;
    # Age 2 log2(5/2) + 3 log2 5.
    loss = (2 * math.log2(3 / 2) + math.log2(3) + 2 + 2 * math.log2(5 / 2) + 3 * math.log2(5)) / 10
    assert ref.pmi_loss(T1, T2, GA, "Balance") == approx(loss)
    # Both are averages over (record, QI) pairs of log ratios, so they add up to H(Y).
    h_y = 0.4 * math.log2(5 / 2) + 0.6 * math.log2(5)
    assert u + loss == approx(h_y)
    # Fully generalised: no information about Y.
    star = [{**r, "Gender": "*", "Age": "*"} for r in T1]
    cov = {"Gender": {"*": {"F", "M", "N"}}, "Age": {"*": {24, 29}}}
    assert ref.pmi_utility(T1, star, GA, "Balance", covers=cov) == approx(0.0)
