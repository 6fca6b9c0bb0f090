"""Self-checks of tests/reference.py against small examples worked out by hand.

Every expected value below is derived in the comments next to it, from the seed documents
in /work/shared/seeds, never from running the code.  log2 3 ~= 1.58496, log2 5 ~= 2.32193.
"""

from __future__ import annotations

import math

import pytest

try:
    from tests import reference as ref
except ImportError:  # tests/ is not a package: pytest's default import mode puts it on sys.path
    import reference as ref

L3 = math.log2(3)
L5 = math.log2(5)


def approx(x: float):
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def h2(p: float) -> float:
    """Binary entropy in bits."""
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


# ---------------------------------------------------------------------------------------
# Seed 001: the 9-row patient table (Figure 1) and its generalisation (Figure 2)
# ---------------------------------------------------------------------------------------

PATIENTS = [
    {"PatientID": 1, "PatientName": "Alice", "Postcode": "47678", "Age": 29, "Disease": "Heart Disease"},
    {"PatientID": 2, "PatientName": "Bob", "Postcode": "47678", "Age": 22, "Disease": "Heart Disease"},
    {"PatientID": 3, "PatientName": "Caroline", "Postcode": "47678", "Age": 27, "Disease": "Heart Disease"},
    {"PatientID": 4, "PatientName": "David", "Postcode": "47905", "Age": 43, "Disease": "Flu"},
    {"PatientID": 5, "PatientName": "Eleanor", "Postcode": "47909", "Age": 52, "Disease": "Heart Disease"},
    {"PatientID": 6, "PatientName": "Frank", "Postcode": "47906", "Age": 47, "Disease": "Cancer"},
    {"PatientID": 7, "PatientName": "Geri", "Postcode": "47605", "Age": 30, "Disease": "Heart Disease"},
    {"PatientID": 8, "PatientName": "Harry", "Postcode": "47673", "Age": 36, "Disease": "Cancer"},
    {"PatientID": 9, "PatientName": "Ingrid", "Postcode": "47607", "Age": 32, "Disease": "Cancer"},
]
QI = ["Postcode", "Age"]
S = "Disease"


def _age_band(age: int) -> str:
    # CASE WHEN Age<30 THEN 'Under 30' WHEN Age>=30 AND Age<=40 THEN '30 to 40' WHEN Age>40 ...
    if age < 30:
        return "Under 30"
    if age <= 40:
        return "30 to 40"
    return "Over 40"


GEN = [
    {**r, "PatientName": "*", "Postcode": r["Postcode"][:3] + "**", "Age": _age_band(r["Age"])}
    for r in PATIENTS
]
# Seed 001 Figure 2 / GROUP BY output:
#   (476**, Under 30): rows 1,2,3 -> HD, HD, HD
#   (479**, Over 40):  rows 4,5,6 -> Flu, HD, Cancer
#   (476**, 30 to 40): rows 7,8,9 -> HD, Cancer, Cancer
# Whole-table disease distribution p: HD 5/9, Cancer 3/9, Flu 1/9.


def test_patient_generalisation_matches_seed_figure_2():
    got = [(r["Postcode"], r["Age"], r["Disease"]) for r in GEN]
    assert got[:3] == [("476**", "Under 30", "Heart Disease")] * 3
    assert got[3:6] == [
        ("479**", "Over 40", "Flu"),
        ("479**", "Over 40", "Heart Disease"),
        ("479**", "Over 40", "Cancer"),
    ]
    assert [g[1] for g in got[6:]] == ["30 to 40"] * 3


def test_patients_raw_is_1_anonymous():
    # All 9 (Postcode, Age) pairs are distinct (ages are all distinct): 9 singleton classes.
    assert ref.k_anonymity(PATIENTS, QI) == 1
    assert ref.class_size_histogram(PATIENTS, QI) == {1: 9}
    assert ref.records_below_k(PATIENTS, QI, 2) == 9
    assert ref.distinct_l(PATIENTS, QI, S) == 1
    assert ref.entropy_l(PATIENTS, QI, S) == approx(1.0)
    assert ref.prosecutor_max(PATIENTS, QI) == approx(1.0)
    assert ref.prosecutor_avg(PATIENTS, QI) == approx(1.0)  # 9 classes / 9 rows
    # Postcode alone: 47678 x3 and six singletons -> k = 1, histogram {3: 1, 1: 6}.
    assert ref.class_size_histogram(PATIENTS, ["Postcode"]) == {3: 1, 1: 6}
    # Each singleton class holds one disease -> CM = 0.
    assert ref.classification_metric(PATIENTS, QI, S) == approx(0.0)


def test_patients_generalised_k_and_l():
    assert ref.k_anonymity(GEN, QI) == 3
    assert ref.class_size_histogram(GEN, QI) == {3: 3}
    assert ref.records_below_k(GEN, QI, 3) == 0
    assert ref.records_below_k(GEN, QI, 4) == 9
    # Seed 001 includes PatientName ('*' everywhere) in the GROUP BY: same classes.
    assert ref.k_anonymity(GEN, ["PatientName", *QI]) == 3
    # Homogeneity attack: the under-30 class is all Heart Disease.
    assert ref.distinct_l(GEN, QI, S) == 1
    # H(under 30) = 0 -> entropy l = 2**0 = 1.
    assert ref.entropy_l(GEN, QI, S) == approx(1.0)
    # Records in classes with < 2 distinct diseases: the 3 under-30 records.
    assert ref.violating_records(GEN, QI, lambda c: len({r[S] for r in c}) >= 2) == 3
    # Recursive: under-30 has m = 1 < 2 -> no c works.
    assert ref.recursive_c_min(GEN, QI, S, 2) is None
    assert ref.recursive_holds(GEN, QI, S, 100.0, 2) is False
    # l = 1: ratio r1 / (r1+..+rm) = 3/3, 1/3, 2/3 -> max 1; holds iff c > 1.
    assert ref.recursive_c_min(GEN, QI, S, 1) == approx(1.0)
    assert ref.recursive_holds(GEN, QI, S, 1.0, 1) is False
    assert ref.recursive_holds(GEN, QI, S, 1.01, 1) is True


def test_patients_generalised_emd():
    # Equal distance, 0.5 * sum |p - q|:
    #   under 30 q=(HD 1): |5/9-1| + 3/9 + 1/9 = 8/9 -> 4/9
    #   over 40 q=1/3 each: 2/9 + 0 + 2/9 = 4/9 -> 2/9
    #   30 to 40 q=(HD 1/3, Ca 2/3): 2/9 + 3/9 + 1/9 = 6/9 -> 1/3
    assert ref.emd_equal(GEN, QI, S) == approx(4 / 9)
    # Ordered, domain sorted: Cancer < Flu < Heart Disease, p = (3/9, 1/9, 5/9), m - 1 = 2:
    #   under 30 q=(0,0,1): r=(3/9,1/9,-4/9), cum 3/9,4/9,0 -> (7/9)/2 = 7/18
    #   over 40 q=(1/3,1/3,1/3): r=(0,-2/9,2/9), cum 0,-2/9,0 -> 1/9
    #   30 to 40 q=(6/9,0,3/9): r=(-3/9,1/9,2/9), cum -3/9,-2/9,0 -> 5/18
    assert ref.emd_ordered(GEN, QI, S) == approx(7 / 18)
    # Raw table: for a singleton class with value v, 0.5 sum|p - q| = 1 - p(v); the rarest
    # value (Flu, p = 1/9) gives the max 8/9.  Ordered, the {Flu} singleton q=(0,1,0):
    # r=(3/9,-8/9,5/9), cum 3/9,-5/9,0 -> (8/9)/2 = 4/9; {Cancer}: r=(-6/9,1/9,5/9),
    # cum -6/9,-5/9,0 -> 11/18; {HD}: 7/18 as above.  Max 11/18.
    assert ref.emd_equal(PATIENTS, QI, S) == approx(8 / 9)
    assert ref.emd_ordered(PATIENTS, QI, S) == approx(11 / 18)


def test_patients_generalised_information():
    # H(W) = H(5/9, 3/9, 1/9) = log2 9 - (5 log2 5 + 3 log2 3)/9 = (5/3) log2 3 - (5/9) log2 5
    hw = 5 / 3 * L3 - 5 / 9 * L5
    assert ref.entropy_w(GEN, S) == approx(hw)
    # I1(under 30) = 1 * log2(1 / (5/9)) = log2(9/5)
    # I1(over 40)  = 1/3 log2((1/3)/(5/9)) + 1/3 log2(1) + 1/3 log2((1/3)/(1/9)) = 1/3 log2(9/5)
    # I1(30 to 40) = 1/3 log2(3/5) + 2/3 log2(2) = 1/3 log2(3/5) + 2/3
    i_u30 = math.log2(9 / 5)
    i_o40 = math.log2(9 / 5) / 3
    i_mid = math.log2(3 / 5) / 3 + 2 / 3
    cls = ref.classes(GEN, QI)
    assert ref.i1(cls[("476**", "Under 30")], GEN, S) == approx(i_u30)
    assert ref.i1(cls[("479**", "Over 40")], GEN, S) == approx(i_o40)
    assert ref.i1(cls[("476**", "30 to 40")], GEN, S) == approx(i_mid)
    assert ref.kl_max(GEN, QI, S) == approx(i_u30)
    # I(W; X~) = mean of I1 (equal class sizes) = H(W) - mean H(W|class)
    #          = H(W) - (0 + log2 3 + (log2 3 - 2/3)) / 3 = log2 3 - (5/9) log2 5 + 2/9
    mi = L3 - 5 / 9 * L5 + 2 / 9
    assert (i_u30 + i_o40 + i_mid) / 3 == approx(mi)
    assert ref.mutual_information(GEN, QI, S) == approx(mi)
    # I2 = H(W) - H(W|class): homogeneous class -> H(W); over 40 (uniform on 3) -> H(W) - log2 3.
    assert ref.i2(cls[("476**", "Under 30")], GEN, S) == approx(hw)
    assert ref.i2(cls[("479**", "Over 40")], GEN, S) == approx(hw - L3)
    # Seed 004 eqs 12, 15: l_max = 2**H(W); l_t(t = H(W)) = 1.
    assert ref.l_max(GEN, S) == approx(2**hw)
    assert ref.l_t(GEN, S, hw) == approx(1.0)
    # Raw table: every class is a singleton, so I(W; X) = H(W).
    assert ref.mutual_information(PATIENTS, QI, S) == approx(hw)


def test_patients_generalised_risk_and_class_utility():
    assert ref.prosecutor_max(GEN, QI) == approx(1 / 3)
    assert ref.prosecutor_avg(GEN, QI) == approx(1 / 3)  # 3 classes / 9 rows
    assert ref.marketer(GEN, QI) == approx(1 / 3)
    # DM = 3 * 3^2 = 27; raw = 9 * 1^2 = 9.
    assert ref.discernibility(GEN, QI) == 27
    assert ref.discernibility(PATIENTS, QI) == 9
    # C_avg = (9/3)/3 = 1.
    assert ref.avg_class_size(GEN, QI, 3) == approx(1.0)
    # CM, label Disease: under 30: 3-3 = 0; over 40: 3-1 = 2; 30 to 40: 3-2 = 1 -> 3/9.
    assert ref.classification_metric(GEN, QI, S) == approx(1 / 3)


def test_patients_precision():
    # Postcode: 5 digits masked one at a time -> levels 0..5, height 5; '476**' is level 2.
    # Age: raw / band / '*' -> height 2; bands are level 1.
    # Prec = 1 - (2/5 + 1/2) / 2 = 1 - 0.45 = 0.55.
    assert ref.precision({"Postcode": 2, "Age": 1}, {"Postcode": 5, "Age": 2}) == approx(0.55)
    assert ref.precision({"Postcode": 0, "Age": 0}, {"Postcode": 5, "Age": 2}) == approx(1.0)
    assert ref.precision({"Postcode": 5, "Age": 2}, {"Postcode": 5, "Age": 2}) == approx(0.0)
    assert ref.absdist({"Postcode": 2, "Age": 1}) == 3
    assert ref.reldist({"Postcode": 2, "Age": 1}, {"Postcode": 5, "Age": 2}) == approx(0.9)


def test_patients_entropy_losses():
    # Conditional distributions (original table):
    #   Postcode '476**' covers 47678 (x3), 47605, 47673, 47607 -> (1/2, 1/6, 1/6, 1/6):
    #       H = 1/2 + 3 * (1/6) log2 6 = 1 + (1/2) log2 3;  Pr(476**) = 6/9
    #   Postcode '479**' covers 47905, 47909, 47906 (x1 each) -> H = log2 3;  Pr = 3/9
    #   Each age band covers 3 distinct ages once each -> H = log2 3;  Pr = 3/9
    # Pi_e raw = 6 (1 + log2 3 / 2) + 3 log2 3 + 9 log2 3 = 6 + 15 log2 3
    assert ref.entropy_loss(PATIENTS, GEN, QI, normalise="none") == approx(6 + 15 * L3)
    assert ref.entropy_loss(PATIENTS, GEN, QI) == approx((6 + 15 * L3) / 9)
    assert ref.entropy_loss(PATIENTS, GEN, QI, normalise="nr") == approx((6 + 15 * L3) / 18)
    # Pi_me raw = 6 (6/9)(1 + log2 3 / 2) + 3 (3/9) log2 3 + 9 (3/9) log2 3 = 4 + 6 log2 3
    assert ref.monotone_entropy_loss(PATIENTS, GEN, QI) == approx((4 + 6 * L3) / 9)
    # Non-uniform: Postcode 47678: 3 * -log2(1/2) = 3; the other three 476**: 3 log2 6;
    #   479**: 3 log2 3; Age: 9 log2 3  -> 6 + 15 log2 3 (= Pi_e for global recoding)
    assert ref.non_uniform_entropy(PATIENTS, GEN, QI) == approx((6 + 15 * L3) / 9)
    # Global recoding: the "label" conditional coincides with the "cover" one.
    assert ref.entropy_loss(PATIENTS, GEN, QI, conditional="label") == approx((6 + 15 * L3) / 9)
    # No generalisation -> no loss.
    assert ref.entropy_loss(PATIENTS, PATIENTS, QI) == approx(0.0)
    assert ref.monotone_entropy_loss(PATIENTS, PATIENTS, QI) == approx(0.0)
    assert ref.non_uniform_entropy(PATIENTS, PATIENTS, QI) == approx(0.0)


def test_full_suppression_entropy_equals_marginal_entropy():
    # Age fully suppressed to '*': B = whole domain, Pr(B) = 1, H(Age | B) = H(Age) = log2 9
    # for every record, so all three measures / n give log2 9.
    sup = [{**r, "Age": "*"} for r in PATIENTS]
    for f in (ref.entropy_loss, ref.monotone_entropy_loss, ref.non_uniform_entropy):
        assert f(PATIENTS, sup, ["Age"]) == approx(math.log2(9))
    # NCP of full suppression is 1 in every variant.
    assert ref.ncp_hierarchy(PATIENTS, sup, "Age") == approx(1.0)
    assert ref.ncp_hierarchy(PATIENTS, sup, "Age", variant="xu") == approx(1.0)
    assert ref.ncp_interval(PATIENTS, sup, "Age") == approx(1.0)


def test_patients_ncp():
    # Postcode domain: 7 distinct originals.  '476**' covers 4 of them (6 records),
    # '479**' covers 3 (3 records).
    #   seed eq 5: (6 * 4/7 + 3 * 3/7) / 9 = (33/7)/9 = 11/21
    #   Xu:        (6 * 3/6 + 3 * 2/6) / 9 = 4/9
    assert ref.ncp_hierarchy(PATIENTS, GEN, "Postcode") == approx(11 / 21)
    assert ref.ncp_hierarchy(PATIENTS, GEN, "Postcode", variant="xu") == approx(4 / 9)
    # Age, eq 6 with data-derived intervals; domain 22..52 (width 30):
    #   Under 30: 22..29 -> 7/30;  30 to 40: 30..36 -> 6/30;  Over 40: 43..52 -> 9/30
    #   average = 3 (7 + 6 + 9) / (9 * 30) = 11/45
    assert ref.ncp_interval(PATIENTS, GEN, "Age") == approx(11 / 45)
    # Explicit band intervals and domain [20, 60]: widths 10, 10, 20 over 40 -> (1/4+1/4+1/2)/3
    bands = {"Under 30": (20, 30), "30 to 40": (30, 40), "Over 40": (40, 60)}
    assert ref.ncp_interval(PATIENTS, GEN, "Age", intervals=bands, domain=(20, 60)) == approx(1 / 3)
    assert ref.ncp_table(PATIENTS, GEN, QI, numeric=["Age"]) == approx((11 / 21 + 11 / 45) / 2)
    # Eq 7 denominator is N * N_QI regardless of the weights.
    w = {"Postcode": 2.0, "Age": 0.0}
    assert ref.ncp_table(PATIENTS, GEN, QI, numeric=["Age"], weights=w) == approx(11 / 21)
    assert ref.ncp_table(PATIENTS, PATIENTS, QI, numeric=["Age"]) == approx(0.0)


# ---------------------------------------------------------------------------------------
# Seed 002 (Marchand) tables 1-4: Gender, Age are QIs, Balance is the sensitive attribute
# ---------------------------------------------------------------------------------------


def _table(spec):
    return [{"id": i, "Gender": g, "Age": a, "Balance": b} for i, (g, a, b) in enumerate(spec, 1)]


T1 = _table([("F", 29, 250), ("F", 24, 100), ("M", 24, -50), ("M", 24, 500), ("N", 24, 250)])
T2 = _table(
    [
        ("{F,N}", "{24,29}", 250),
        ("{F,N}", "{24,29}", 100),
        ("M", "{24,29}", -50),
        ("M", "{24,29}", 500),
        ("{F,N}", "{24,29}", 250),
    ]
)
T3 = _table(
    [
        ("{F,N}", "{24,29}", 250),
        ("{F,N}", "{24,29}", 100),
        ("M", "24", -50),
        ("M", "24", 500),
        ("{F,N}", "{24,29}", 250),
    ]
)
T4 = _table(
    [
        ("{F,M}", "{24,29}", 250),
        ("{F,M}", "{24,29}", 100),
        ("{F,M}", "{24,29}", -50),
        ("{M,N}", "24", 500),
        ("{M,N}", "24", 250),
    ]
)
GA = ["Gender", "Age"]
H23 = L3 - 2 / 3  # H(2/3, 1/3)
H45 = L5 - 8 / 5  # H(4/5, 1/5) = log2 5 - (4/5) * 2


def test_marchand_k_and_dm():
    # Table 1: classes (F,29),(F,24),(M,24)x2,(N,24): not 2-anonymous, DM = 1+1+4+1 = 7.
    assert ref.k_anonymity(T1, GA) == 1
    assert ref.discernibility(T1, GA) == 7
    # Tables 2, 3, 4: classes of sizes 3 and 2 -> 2-anonymous, DM = 9 + 4 = 13 for all three
    # (seed 002 section 3.2: "table 2 and 3 ... have the same discernibility value").
    for t in (T2, T3, T4):
        assert ref.k_anonymity(t, GA) == 2
        assert ref.class_size_histogram(t, GA) == {3: 1, 2: 1}
        assert ref.discernibility(t, GA) == 13
    # Seed 002 section 2.3: e1 = {1,2,5}, e2 = {3,4} in table 2.
    ids = sorted(sorted(r["id"] for r in c) for c in ref.classes(T2, GA).values())
    assert ids == [[1, 2, 5], [3, 4]]
    # C_avg(T2, k=2) = (5/2)/2 = 1.25
    assert ref.avg_class_size(T2, GA, 2) == approx(1.25)


def test_discernibility_with_suppression():
    # Table 1 with the three singletons (records 1, 2, 5) suppressed: kept class (M,24) x2.
    # DM = 2^2 + 3 * |T| = 4 + 3 * 5 = 19  (Bayardo & Agrawal penalty |D| per suppressed row).
    kept = [r for r in T1 if r["id"] in (3, 4)]
    assert ref.discernibility(kept, GA, suppressed=3) == 19
    assert ref.discernibility(kept, GA, suppressed=3, n_total=100) == 304


def test_marchand_cm():
    # Table 2, label Balance: e1 balances 250,100,250 -> majority count 2, penalty 1;
    # e2 balances -50,500 -> majority count 1 (tie), penalty 1.  CM = 2/5.
    assert ref.classification_metric(T2, GA, "Balance") == approx(0.4)
    # Table 1: singletons penalty 0; (M,24) class balances -50, 500 -> penalty 1.  CM = 1/5.
    assert ref.classification_metric(T1, GA, "Balance") == approx(0.2)


def test_marchand_precision():
    # Table 2 as full-domain generalisation: Gender hierarchy {F},{M},{N} -> {F,N},{M} -> *
    # (height 2, level 1); Age 24, 29 -> {24,29} (height 1, level 1).
    # Prec = 1 - (1/2 + 1/1) / 2 = 0.25
    assert ref.precision({"Gender": 1, "Age": 1}, {"Gender": 2, "Age": 1}) == approx(0.25)
    # Table 3 cell by cell (multi-dimensional): records 1,2,5 at levels (1,1), records 3,4 at (0,0)
    # sum h/|DGH| = 3 * (1/2 + 1) = 4.5 ; Prec = 1 - 4.5 / (2 * 5) = 0.55
    levels = [{"Gender": 1, "Age": 1}] * 2 + [{"Gender": 0, "Age": 0}] * 2 + [{"Gender": 1, "Age": 1}]
    assert ref.precision_cells(levels, {"Gender": 2, "Age": 1}) == approx(0.55)


def test_marchand_ncp():
    # |Gender^(0)| = 3, |Age^(0)| = 2.
    # Table 2: Gender {F,N} -> 2/3 (records 1,2,5), M -> 0: mean 2/5.  Age {24,29} -> 2/2 = 1.
    assert ref.ncp_hierarchy(T1, T2, "Gender") == approx(0.4)
    assert ref.ncp_hierarchy(T1, T2, "Age") == approx(1.0)
    assert ref.ncp_table(T1, T2, GA) == approx(0.7)
    # Xu variant: Gender (2-1)/(3-1) = 1/2 on 3 records -> 0.3 ; Age 1 -> (0.3 + 1)/2 = 0.65
    assert ref.ncp_table(T1, T2, GA, variant="xu") == approx(0.65)
    # Age as numeric interval: {24,29} spans the whole range -> 1.
    assert ref.ncp_interval(T1, T2, "Age") == approx(1.0)
    # Table 3: Gender as table 2 (0.4); Age {24,29} on 3 records -> 1, "24" -> 0: 0.6.
    assert ref.ncp_table(T1, T3, GA) == approx(0.5)
    # Explicit frozenset generalised values give the same result as labels.
    t2_sets = [
        {**r, "Gender": frozenset(r["Gender"].strip("{}").split(",")), "Age": frozenset({24, 29})} for r in T2
    ]
    assert ref.ncp_table(T1, t2_sets, GA) == approx(0.7)


def test_marchand_entropy_losses():
    # Table 2 (global recoding), seed 002 eqs 9-11:
    #   Gender {F,N}: originals with Gender in {F,N}: F,F,N -> H(2/3,1/3); Pr({F,N}) = 3/5
    #   Gender M -> 0.   Age {24,29}: 24 x4, 29 x1 -> H(4/5,1/5); Pr = 1
    # Pi_e raw = 3 H23 + 5 H45 ;  Pi_me raw = 3 (3/5) H23 + 5 H45
    assert ref.entropy_loss(T1, T2, GA, normalise="none") == approx(3 * H23 + 5 * H45)
    assert ref.entropy_loss(T1, T2, GA) == approx((3 * H23 + 5 * H45) / 5)
    assert ref.monotone_entropy_loss(T1, T2, GA) == approx((9 / 5 * H23 + 5 * H45) / 5)
    # Non-uniform: Gender F,F -> 2 log2(3/2), N -> log2 3 ; Age 29 -> log2 5, 24 x4 -> 4 log2(5/4)
    # = 3 H23 + 5 H45 (same as Pi_e for global recoding)
    nu = 2 * math.log2(3 / 2) + L3 + L5 + 4 * math.log2(5 / 4)
    assert nu == approx(3 * H23 + 5 * H45)
    assert ref.non_uniform_entropy(T1, T2, GA, normalise="none") == approx(nu)


def test_marchand_entropy_multidimensional_cover_vs_label():
    # Table 3: Age '{24,29}' on records 1,2,5 (originals 29,24,24), '24' on records 3,4.
    # cover (seed 002 eq 10): Pr(.|{24,29}) counted over ALL records with Age in {24,29}
    #   -> (4/5, 1/5), H45 ; Pr({24,29}) = 1.
    # label: originals among records labelled '{24,29}' -> (2/3, 1/3), H23 ; Pr(label) = 3/5.
    assert ref.entropy_loss(T1, T3, GA, normalise="none") == approx(3 * H23 + 3 * H45)
    assert ref.entropy_loss(T1, T3, GA, normalise="none", conditional="label") == approx(6 * H23)
    assert ref.monotone_entropy_loss(T1, T3, GA, normalise="none") == approx(9 / 5 * H23 + 3 * H45)
    assert ref.monotone_entropy_loss(T1, T3, GA, normalise="none", conditional="label") == approx(
        18 / 5 * H23
    )


def test_marchand_non_uniform_local_recoding():
    # Table 4 (local): Gender '{F,M}' on records 1,2,3 (F,F,M); cover {F,M} has F x2, M x2 in T1
    #   -> -log2(1/2) three times = 3.
    # Gender '{M,N}' on records 4 (M), 5 (N); cover {M,N}: M x2, N x1 -> log2(3/2) + log2 3.
    # Age '{24,29}' on records 1 (29), 2, 3 (24): log2 5 + 2 log2(5/4); '24' -> 0.
    # total = 3 + log2 3 - 1 + log2 3 + log2 5 + 2 log2 5 - 4 = -2 + 2 log2 3 + 3 log2 5
    got = ref.non_uniform_entropy(T1, T4, GA, normalise="none")
    assert got == approx(-2 + 2 * L3 + 3 * L5)


def test_monotone_entropy_is_monotone_where_plain_entropy_is_not():
    # X: a x1, b x1, c x14 (n = 16).  Record 1 (a) is generalised either to B1 = {a,b}
    # or to the coarser B2 = {a,b,c} = '*'; everything else is untouched.
    #   H(X | B1) = H(1/2, 1/2) = 1 ;  H(X | B2) = H(1/16, 1/16, 14/16) ~ 0.67 < 1
    #   Pr(B1) = 2/16, Pr(B2) = 1  ->  Pi_me: 2/16 * 1 = 0.125 < 1 * 0.67
    orig = [{"x": "a"}, {"x": "b"}] + [{"x": "c"}] * 14
    g1 = [{"x": "{a,b}"}, {"x": "b"}] + [{"x": "c"}] * 14
    g2 = [{"x": "*"}, {"x": "b"}] + [{"x": "c"}] * 14
    covers = {"x": {"{a,b}": {"a", "b"}, "*": {"a", "b", "c"}, "b": {"b"}, "c": {"c"}}}
    h_b2 = -(2 * (1 / 16) * math.log2(1 / 16) + (14 / 16) * math.log2(14 / 16))
    e1 = ref.entropy_loss(orig, g1, ["x"], covers=covers, normalise="none")
    e2 = ref.entropy_loss(orig, g2, ["x"], covers=covers, normalise="none")
    assert e1 == approx(1.0)
    assert e2 == approx(h_b2)
    assert e2 < e1  # more generalisation, less "loss": Pi_e is not monotone
    m1 = ref.monotone_entropy_loss(orig, g1, ["x"], covers=covers, normalise="none")
    m2 = ref.monotone_entropy_loss(orig, g2, ["x"], covers=covers, normalise="none")
    assert m1 == approx(2 / 16 * 1.0)
    assert m2 == approx(1.0 * h_b2)
    assert m2 > m1


# ---------------------------------------------------------------------------------------
# l-diversity, EMD and risk toys
# ---------------------------------------------------------------------------------------


def _rows(groups: dict[object, list[object]], qi: str = "q", s: str = "s"):
    return [{qi: k, s: v} for k, vals in groups.items() for v in vals]


def test_recursive_8_1_1():
    # Counts [8, 1, 1], l = 3: r1 = 8, tail r3 = 1 -> c_min = 8; holds iff 8 < c * 1.
    rows = _rows({"A": ["x"] * 8 + ["y", "z"]})
    assert ref.recursive_c_min(rows, ["q"], "s", 3) == approx(8.0)
    assert ref.recursive_holds(rows, ["q"], "s", 8.0, 3) is False
    assert ref.recursive_holds(rows, ["q"], "s", 8.000001, 3) is True
    # l = 2: tail = 1 + 1 = 2 -> 4.
    assert ref.recursive_c_min(rows, ["q"], "s", 2) == approx(4.0)
    # l = 4 > m = 3 -> impossible.
    assert ref.recursive_c_min(rows, ["q"], "s", 4) is None
    assert ref.recursive_holds(rows, ["q"], "s", 1e9, 4) is False
    # Add a class with counts [2, 2, 1]: l = 3 ratio 2/1 = 2, l = 2 ratio 2/3; max unchanged.
    rows2 = rows + _rows({"B": ["x", "x", "y", "y", "z"]})
    assert ref.recursive_c_min(rows2, ["q"], "s", 3) == approx(8.0)
    assert ref.recursive_c_min(rows2, ["q"], "s", 2) == approx(4.0)
    assert ref.distinct_l(rows2, ["q"], "s") == 3


def test_entropy_l_toy():
    # Class A uniform on 4 values: H = 2 ; class B counts [2, 2]: H = 1 -> entropy l = 2^1 = 2.
    rows = _rows({"A": ["a", "b", "c", "d"], "B": ["a", "a", "b", "b"]})
    assert ref.entropy_l(rows, ["q"], "s") == approx(2.0)
    assert ref.distinct_l(rows, ["q"], "s") == 2
    # Class counts [3, 1]: H = h2(1/4) ~ 0.811 -> l = 2^0.811 ~ 1.755
    rows = _rows({"A": ["a", "a", "a", "b"]})
    assert ref.entropy_l(rows, ["q"], "s") == approx(2 ** h2(0.25))


def test_two_class_emd():
    # Class A: s = [1, 1]; class B: s = [1, 2, 3, 3]; whole table p = (1/2, 1/6, 1/3).
    rows = _rows({"A": [1, 1], "B": [1, 2, 3, 3]})
    # Equal: A q=(1,0,0): 0.5 (1/2 + 1/6 + 1/3) = 1/2 ; B q=(1/4,1/4,1/2): 0.5 (1/4+1/12+1/6) = 1/4
    assert ref.emd_equal(rows, ["q"], "s") == approx(0.5)
    # Ordered 1<2<3: A r=(-1/2,1/6,1/3), cum -1/2,-1/3,0 -> (5/6)/2 = 5/12
    #                B r=(1/4,-1/12,-1/6), cum 1/4,1/6,0 -> (5/12)/2 = 5/24
    assert ref.emd_ordered(rows, ["q"], "s") == approx(5 / 12)
    # Reversing the order leaves |cumulative sums| unchanged (sum r = 0): still 5/12.
    assert ref.emd_ordered(rows, ["q"], "s", order=[3, 2, 1]) == approx(5 / 12)
    # Order 2<1<3: p = (1/6, 1/2, 1/3)
    #   A q=(0,1,0): r=(1/6,-1/2,1/3), cum 1/6,-1/3,0 -> (1/2)/2 = 1/4
    #   B q=(1/4,1/4,1/2): r=(-1/12,1/4,-1/6), cum -1/12,1/6,0 -> (1/4)/2 = 1/8
    assert ref.emd_ordered(rows, ["q"], "s", order=[2, 1, 3]) == approx(1 / 4)
    # An order listing an absent value enlarges the domain: m = 4, order 1<2<3<4:
    #   A cum -1/2,-1/3,0,0 -> (5/6)/3 = 5/18
    assert ref.emd_ordered(rows, ["q"], "s", order=[1, 2, 3, 4]) == approx(5 / 18)
    with pytest.raises(ValueError):
        ref.emd_ordered(rows, ["q"], "s", order=[1, 2])
    # KL: A I1 = log2(1 / (1/2)) = 1 ; B I1 = 1/4 log2(1/2) + 1/4 log2(3/2) + 1/2 log2(3/2)
    #       = -1/4 + 3/4 log2(3/2) ~ 0.189 -> max 1
    assert ref.kl_max(rows, ["q"], "s") == approx(1.0)
    # MI = 2/6 * 1 + 4/6 * (-1/4 + 3/4 log2(3/2)) = H(W) - [2/6 * 0 + 4/6 * 1.5]
    hw = -(0.5 * math.log2(0.5) + (1 / 6) * math.log2(1 / 6) + (1 / 3) * math.log2(1 / 3))
    assert ref.mutual_information(rows, ["q"], "s") == approx(hw - 1.0)
    assert ref.mutual_information(rows, ["q"], "s") == approx(
        1 / 3 + 2 / 3 * (-1 / 4 + 3 / 4 * math.log2(1.5))
    )


def test_emd_none_and_single_value():
    # None is an ordinary value; default ordering puts it last: domain [1, 2, None],
    # p = (1/2, 1/4, 1/4).  A = [1, 1]: r = (-1/2, 1/4, 1/4), cum -1/2,-1/4,0 -> (3/4)/2 = 3/8.
    #                      B = [None, 2]: r = (1/2,-1/4,-1/4), cum 1/2,1/4,0 -> 3/8.
    rows = _rows({"A": [1, 1], "B": [None, 2]})
    assert ref.emd_ordered(rows, ["q"], "s") == approx(3 / 8)
    # Order [None, 1, 2]: p = (1/4, 1/2, 1/4); A r=(1/4,-1/2,1/4): cum 1/4,-1/4,0 -> 1/4
    assert ref.emd_ordered(rows, ["q"], "s", order=[None, 1, 2]) == approx(1 / 4)
    assert ref.distinct_l(rows, ["q"], "s") == 1
    # Single-valued sensitive column -> both EMDs are 0.
    flat = _rows({"A": ["x"], "B": ["x", "x"]})
    assert ref.emd_ordered(flat, ["q"], "s") == 0.0
    assert ref.emd_equal(flat, ["q"], "s") == approx(0.0)
    assert ref.kl_max(flat, ["q"], "s") == approx(0.0)


def test_none_is_a_qi_value():
    rows = [{"q": None, "s": 1}, {"q": None, "s": 2}, {"q": "a", "s": 1}]
    cls = ref.classes(rows, ["q"])
    assert sorted(len(c) for c in cls.values()) == [1, 2]
    assert (None,) in cls
    assert ref.k_anonymity(rows, ["q"]) == 1
    assert ref.records_below_k(rows, ["q"], 2) == 1


def test_population_risks():
    # Population classes (single QI 'q'): A x4, B x2, C x5 (11 rows).
    # Sample: A x2, B x1 (n = 3).
    #   marketer   = (1/3) (2/4 + 1/2) = 1/3
    #   journalist = 1 / min(F_A, F_B) = 1/2       (C is not in the sample -> ignored)
    #   prosecutor = 1 / min(f_A, f_B) = 1
    pop = _rows({"A": [0] * 4, "B": [0] * 2, "C": [0] * 5})
    sample = _rows({"A": [0] * 2, "B": [0]})
    assert ref.marketer(sample, ["q"], pop) == approx(1 / 3)
    assert ref.journalist(sample, ["q"], pop) == approx(1 / 2)
    assert ref.prosecutor_max(sample, ["q"]) == approx(1.0)
    # Without a population: #classes / n = 2/3.
    assert ref.marketer(sample, ["q"]) == approx(2 / 3)
    # Sample == population: marketer = #classes/n, journalist = prosecutor.
    assert ref.marketer(pop, ["q"], pop) == approx(3 / 11)
    assert ref.journalist(pop, ["q"], pop) == approx(1 / 2)
    with pytest.raises(ValueError):
        ref.marketer(_rows({"Z": [0]}), ["q"], pop)


def test_empty_table_raises():
    with pytest.raises(ValueError):
        ref.k_anonymity([], ["q"])
    assert ref.class_size_histogram([], ["q"]) == {}
    assert ref.discernibility([], ["q"]) == 0
