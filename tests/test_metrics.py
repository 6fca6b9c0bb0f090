"""Utility and information-loss metrics (sqlanon.metrics), on DuckDB and PostgreSQL, against the
independent brute-force reference (tests/reference.py) and the worked examples of the seeds.

The reference is given the release as a table: the source generalised to the node, with every
record of a class that violates the policy shown fully generalised ('*' on every quasi-identifier),
and the cover of each label (the set of original values it stands for) read off the hierarchy in
Python. Discernibility, CM and the multiple-use metric charge suppressed records their literature
penalty instead (|T|, 1 and 1).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sqlanon.engines import session
from sqlanon.lattice import Evaluator, prepare, run_search, successors
from sqlanon.metrics import METRIC_INFO, METRICS, candidates_for, compute, monotone, score, value
from sqlanon.policy import parse_policy
from tests import reference as ref

L3 = math.log2(3)
L5 = math.log2(5)
H23 = L3 - 2 / 3  # H(2/3, 1/3)
H45 = L5 - 8 / 5  # H(4/5, 1/5)


def approx(x: float):
    return pytest.approx(x, rel=1e-9, abs=1e-9)


# --------------------------------------------------------------------------------------------------
# A brute-force model of a node's release, for the reference
# --------------------------------------------------------------------------------------------------


class Model:
    """The source as Python rows, each QI's labels per level, and the policy's k and l."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
        qis: list[str],
        labels: dict[str, list[dict[Any, Any]]],
        heights: dict[str, int],
        numeric: list[str],
        k: int,
        l_div: tuple[str, int] | None = None,
    ) -> None:
        self.rows, self.qis, self.labels, self.heights = rows, qis, labels, heights
        self.numeric, self.k, self.l_div = numeric, k, l_div

    def label(self, qi: str, level: int, v: Any) -> Any:
        if level == 0:
            return v
        if level >= self.heights[qi]:
            return "*"
        return self.labels[qi][level - 1][v]

    def release(self, node: tuple[int, ...]) -> tuple[list[dict], list[dict], list[bool], int]:
        """(star release, kept generalised rows, suppressed flag per record, suppressed count)."""
        gen = [
            {**r, **{q: self.label(q, lvl, r[q]) for q, lvl in zip(self.qis, node, strict=True)}}
            for r in self.rows
        ]
        bad_keys = set()
        for key, members in ref.classes(gen, self.qis).items():
            bad = len(members) < self.k
            if self.l_div:
                s, lv = self.l_div
                bad = bad or len({m[s] for m in members}) < lv
            if bad:
                bad_keys.add(key)
        star, kept, flags = [], [], []
        for g in gen:
            bad = tuple(g[q] for q in self.qis) in bad_keys
            flags.append(bad)
            if bad:
                star.append({**g, **dict.fromkeys(self.qis, "*")})
            else:
                star.append(g)
                kept.append(g)
        return star, kept, flags, len(self.rows) - len(kept)

    def covers(self, node: tuple[int, ...]) -> dict[str, dict[Any, frozenset]]:
        out = {}
        for q, lvl in zip(self.qis, node, strict=True):
            present = {r[q] for r in self.rows}
            cov: dict[Any, set] = {}
            for v in present:
                cov.setdefault(self.label(q, lvl, v), set()).add(v)
            cov["*"] = present
            out[q] = {g: frozenset(vs) for g, vs in cov.items()}
        return out

    def metrics(
        self,
        node: tuple[int, ...],
        *,
        label: str | None,
        sensitive: list[str],
        s_numeric: dict[str, bool],
        weights: dict[str, float],
    ) -> dict[str, float | None]:
        star, kept, flags, supp = self.release(node)
        n, qis = len(self.rows), self.qis
        covers = self.covers(node)
        intervals = {q: {g: (min(c), max(c)) for g, c in covers[q].items()} for q in self.numeric}
        levels = dict(zip(qis, node, strict=True))
        # Per-record levels for Prec (seed 002 eq. 3): a suppressed record is fully generalised.
        cells = [dict(self.heights) if bad else dict(levels) for bad in flags]
        out: dict[str, float | None] = {
            "height": ref.absdist(levels),
            "absdist": ref.absdist(levels),
            "reldist": ref.reldist(levels, self.heights),
            "precision": ref.precision_cells(cells, self.heights),
            "discernibility": ref.discernibility(kept, qis, suppressed=supp),
            "avg_class_size": ref.avg_class_size(star, qis, self.k),
            "ncp": ref.ncp_table(
                self.rows,
                star,
                qis,
                numeric=self.numeric,
                weights=weights,
                covers=covers,
                intervals=intervals,
            ),
            "entropy_loss": ref.entropy_loss(self.rows, star, qis, covers=covers),
            "monotone_entropy": ref.monotone_entropy_loss(self.rows, star, qis, covers=covers),
            "non_uniform_entropy": ref.non_uniform_entropy(self.rows, star, qis, covers=covers),
            "mutual_information": ref.mi_utility(self.rows, star, qis, covers=covers),
            "mi_loss": ref.non_uniform_entropy(self.rows, star, qis, covers=covers, normalise="nr"),
        }
        if label is None:
            out["cm"] = None
        else:
            # The classification target is the label's original value, also when the label is a
            # quasi-identifier (and so generalised in the release).
            target = [
                {**g, "__label": o[label]}
                for o, g, bad in zip(self.rows, star, flags, strict=True)
                if not bad
            ]
            kept_penalty = ref.classification_metric(target, qis, "__label") * len(target) if target else 0
            out["cm"] = (kept_penalty + supp) / n
        if sensitive:
            mu = [
                ref.multiple_use(kept, qis, s, numeric=s_numeric[s], table_rows=self.rows, suppressed=supp)
                for s in sensitive
            ]
            pmi = [ref.pmi_utility(self.rows, star, qis, s, covers=covers) for s in sensitive]
            pml = [ref.pmi_loss(self.rows, star, qis, s, covers=covers) for s in sensitive]
            out["multiple_use"] = sum(mu) / len(mu)
            out["private_mi"] = sum(pmi) / len(pmi)
            out["private_mi_loss"] = sum(pml) / len(pml)
        else:
            out["multiple_use"] = out["private_mi"] = out["private_mi_loss"] = None
        return out


def assert_metrics(got: dict[str, float | None], want: dict[str, float | None], where: str) -> None:
    assert set(got) == set(METRIC_INFO)
    for name, w in want.items():
        g = got[name]
        if w is None:
            assert g is None, f"{where}: {name} should be undefined, got {g}"
        else:
            assert g == approx(w), f"{where}: {name} = {g}, reference {w}"


# --------------------------------------------------------------------------------------------------
# Seed 002 (Marchand) tables 1-4
# --------------------------------------------------------------------------------------------------

T1 = [("F", 29, 250), ("F", 24, 100), ("M", 24, -50), ("M", 24, 500), ("N", 24, 250)]
T3 = [("{F,N}", "{24,29}", 250), ("{F,N}", "{24,29}", 100), ("M", "24", -50), ("M", "24", 500)]
T3 = [*T3, ("{F,N}", "{24,29}", 250)]
T4 = [("{F,M}", "{24,29}", 250), ("{F,M}", "{24,29}", 100), ("{F,M}", "{24,29}", -50)]
T4 = [*T4, ("{M,N}", "24", 500), ("{M,N}", "24", 250)]
GENDER = {"F": ["{F,N}"], "M": ["M"], "N": ["{F,N}"]}


def marchand_policy(table: str, k: int = 1, suppression: float = 0.0, gender_map: bool = True):
    gender: dict[str, Any] = {"role": "quasi"}
    if gender_map:
        gender["hierarchy"] = {"map": GENDER}
    return parse_policy(
        {
            "source": f"main.{table}",
            "label": "Balance",
            "columns": {"id": "insensitive", "Gender": gender, "Age": "quasi", "Balance": "sensitive"},
            "privacy": {"k": k, "suppression": suppression},
        }
    )


def load_marchand(db, name: str, rows, age_type: str) -> None:  # noqa: ANN001
    db.load(
        name,
        ["id", "Gender", "Age", "Balance"],
        [[i, *r] for i, r in enumerate(rows, 1)],
        ["BIGINT", "VARCHAR", age_type, "BIGINT"],
    )


def marchand_model(k: int) -> Model:
    rows = [{"id": i, "Gender": g, "Age": a, "Balance": b} for i, (g, a, b) in enumerate(T1, 1)]
    labels = {"Gender": [{v: lab[0] for v, lab in GENDER.items()}], "Age": []}
    return Model(rows, ["Gender", "Age"], labels, {"Gender": 2, "Age": 1}, ["Age"], k)


def test_marchand_table_2_is_node_1_1(db):  # noqa: ANN001
    """Table 2 = table 1 at Gender level 1 ({F,N}, M) and Age level 1 ({24,29} = '*')."""
    load_marchand(db, "t1", T1, "BIGINT")
    with session(db.url) as be:
        plan = prepare(be, marchand_policy("t1", k=2))
        got = compute(plan, [(1, 1), (0, 0)])
    t2 = got[(1, 1)]
    # Seed 002: DM = 3^2 + 2^2 = 13 (section 3.2); Prec = 1 - (1/2 + 1/1) / 2 (eq. 3);
    # NCP = (Gender 2/5 + Age 1) / 2 (eqs. 5-7); CM = 2/5 with label Balance (eq. 8).
    assert t2["discernibility"] == 13
    assert t2["precision"] == approx(0.25)
    assert t2["ncp"] == approx(0.7)
    assert t2["cm"] == approx(0.4)
    assert t2["avg_class_size"] == approx(1.25)  # (5 / 2) / 2
    assert t2["entropy_loss"] == approx((3 * H23 + 5 * H45) / 5)  # eqs. 9-11
    assert t2["monotone_entropy"] == approx((9 / 5 * H23 + 5 * H45) / 5)
    assert t2["non_uniform_entropy"] == approx((3 * H23 + 5 * H45) / 5)  # = Pi_e, global recoding
    # Multiple use (numerical Balance, range 550): e1 {250,100,250} 150/550, e2 {-50,500} 1.
    assert t2["multiple_use"] == approx((3 * 150 / 550 + 2) / 5)
    # MI utility = H(generalised Gender) / 2: Gender labels {F,N} x3, M x2; Age fully generalised.
    assert t2["mutual_information"] == approx((0.6 * math.log2(5 / 3) + 0.4 * math.log2(5 / 2)) / 2)
    # Both nodes against the reference; at (0, 0) the release removes table 1's three singleton
    # classes (k = 2), which the next test checks against the seed's figures.
    model = marchand_model(2)
    for node, vals in got.items():
        want = model.metrics(
            node, label="Balance", sensitive=["Balance"], s_numeric={"Balance": True}, weights={}
        )
        assert_metrics(vals, want, f"node {node}")


def test_marchand_table_1_suppression(db):  # noqa: ANN001
    """Table 1 at the bottom node with k = 2: the three singleton classes are suppressed; DM charges
    each |T| (4 + 3 * 5 = 19, Bayardo and Agrawal), CM charges each 1 ((1 + 3) / 5, Iyengar)."""
    load_marchand(db, "t1", T1, "BIGINT")
    with session(db.url) as be:
        plan = prepare(be, marchand_policy("t1", k=2, suppression=0.6))
        got = compute(plan, [(0, 0)])[(0, 0)]
        plain = compute(prepare(be, marchand_policy("t1", k=1)), [(0, 0)])[(0, 0)]
    assert got["discernibility"] == 19
    assert got["cm"] == approx(0.8)
    assert plain["discernibility"] == 7  # 1 + 1 + 4 + 1
    assert plain["cm"] == approx(0.2)
    want = marchand_model(2).metrics(
        (0, 0), label="Balance", sensitive=["Balance"], s_numeric={"Balance": True}, weights={}
    )
    assert_metrics(got, want, "table 1, k = 2")


@pytest.mark.parametrize("table", ["t3", "t4"])
def test_marchand_tables_3_4_have_the_dm_of_table_2(db, table):  # noqa: ANN001
    """Tables 3 (multi-dimensional) and 4 (local recoding) are not lattice nodes: measured as given
    (their bottom node), their class-based metrics match the reference, and DM equals table 2's
    (seed 002 section 3.2: "table 2 and 3 ... have the same discernibility value")."""
    rows = {"t3": T3, "t4": T4}[table]
    load_marchand(db, table, rows, "VARCHAR")
    load_marchand(db, "t1", T1, "BIGINT")
    with session(db.url) as be:
        got = compute(prepare(be, marchand_policy(table, k=2, gender_map=False)), [(0, 0)])[(0, 0)]
        t2 = compute(prepare(be, marchand_policy("t1", k=2)), [(1, 1)])[(1, 1)]
    assert got["discernibility"] == t2["discernibility"] == 13
    gen = [{"id": i, "Gender": g, "Age": a, "Balance": b} for i, (g, a, b) in enumerate(rows, 1)]
    ga = ["Gender", "Age"]
    assert got["cm"] == approx(ref.classification_metric(gen, ga, "Balance"))
    assert got["avg_class_size"] == approx(ref.avg_class_size(gen, ga, 2))
    assert got["multiple_use"] == approx(ref.multiple_use(gen, ga, "Balance", numeric=True))
    # Measured as given, nothing is generalised: no hierarchy-based loss.
    assert got["precision"] == 1.0 and got["ncp"] == 0.0 and got["entropy_loss"] == approx(0.0)


# --------------------------------------------------------------------------------------------------
# Hypothesis: random tables, every node of the lattice, both engines
# --------------------------------------------------------------------------------------------------

A_VALUES = ["a", "b", "c", "d", "e"]
A_LABELS = [
    {"a": "ab", "b": "ab", "c": "c", "d": "de", "e": "de"},
    {"a": "abc", "b": "abc", "c": "abc", "d": "de", "e": "de"},
]
B_VALUES = list(range(1, 9))
B_LABELS = [
    {v: f"{v - (v + 1) % 2}-{v + v % 2}" for v in B_VALUES},
    {v: "1-4" if v <= 4 else "5-8" for v in B_VALUES},
]
C_VALUES = ["x", "y"]


@st.composite
def cases(draw):  # noqa: ANN001, ANN201
    n = draw(st.integers(2, 12))
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": i,
                "A": draw(st.sampled_from(A_VALUES[: draw(st.integers(1, 5))])),
                "B": draw(st.sampled_from(B_VALUES)),
                "C": draw(st.sampled_from(C_VALUES)),
                "S": draw(st.sampled_from(["flu", "hiv", "none", None])),
                "Y": draw(st.one_of(st.none(), st.integers(0, 100))),
                "Lab": draw(st.sampled_from(["yes", "no", None])),
            }
        )
    k = draw(st.integers(1, 4))
    suppression = draw(st.sampled_from([0.0, 0.3, 1.0]))
    label = draw(st.sampled_from(["Lab", "S", "A", None]))
    sensitive = draw(st.sampled_from([["S", "Y"], ["S"], []]))
    l_div = draw(st.booleans()) and "S" in sensitive
    weight_a = draw(st.sampled_from([1.0, 2.5]))
    return rows, k, suppression, label, sensitive, l_div, weight_a


def case_policy(k, suppression, label, sensitive, l_div, weight_a):  # noqa: ANN001, ANN201
    cols: dict[str, Any] = {
        "id": "insensitive",
        "A": {
            "role": "quasi",
            "weight": weight_a,
            "hierarchy": {"map": {v: [A_LABELS[0][v], A_LABELS[1][v]] for v in A_VALUES}},
        },
        "B": {"role": "quasi", "hierarchy": {"map": {v: [B_LABELS[0][v], B_LABELS[1][v]] for v in B_VALUES}}},
        "C": "quasi",
    }
    for s in ("S", "Y", "Lab"):
        cols[s] = "sensitive" if s in sensitive else "insensitive"
    privacy: dict[str, Any] = {"k": k, "suppression": suppression}
    if l_div:
        privacy["l"] = {"S": 2}
    pol = {"source": "main.h", "columns": cols, "privacy": privacy}
    if label:
        pol["label"] = label
    return parse_policy(pol)


HEIGHTS = {"A": 3, "B": 3, "C": 1}


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
def test_every_metric_matches_the_reference(db, case):  # noqa: ANN001
    rows, k, suppression, label, sensitive, l_div, weight_a = case
    assume(not l_div or len({r["S"] for r in rows}) >= 2)  # else the policy is refused outright
    cols = ["id", "A", "B", "C", "S", "Y", "Lab"]
    db.load(
        "h",
        cols,
        [[r[c] for c in cols] for r in rows],
        ["BIGINT", "VARCHAR", "BIGINT", "VARCHAR", "VARCHAR", "BIGINT", "VARCHAR"],
    )
    pol = case_policy(k, suppression, label, sensitive, l_div, weight_a)
    model = Model(
        rows,
        ["A", "B", "C"],
        {"A": A_LABELS, "B": B_LABELS, "C": []},
        HEIGHTS,
        ["B"],
        k,
        ("S", 2) if l_div else None,
    )
    with session(db.url) as be:
        plan = prepare(be, pol)
        nodes = list(itertools.product(range(4), range(4), range(2)))
        results = Evaluator(plan).evaluate(nodes)
        start = len(be.log)
        got = compute(plan, nodes, None, results)
        metric_sql = be.log[start:]
    # Batched: the metrics' coded table and its sums once (plus a frequency table with the label
    # when it is neither a quasi-identifier nor sensitive), then one query for all 32 nodes.
    node_queries = [q for q in metric_sql if "meet" in q]
    assert len(node_queries) == (
        1 if (label or sensitive or any(r.bad_records for r in results.values())) else 0
    )
    extra_scan = label is not None and label not in ("A", "B", "C") and label not in sensitive
    assert len(metric_sql) == 3 + len(node_queries) + extra_scan
    for node in nodes:
        want = model.metrics(
            node,
            label=label,
            sensitive=sensitive,
            s_numeric={"S": False, "Y": True},
            weights={"A": weight_a},
        )
        assert_metrics(got[node], want, f"node {node}")
    # Monotonicity (the METRICS table): without suppression no metric improves when a node is
    # generalised, so a monotone metric's optimum is among the minimal nodes.
    for node in nodes:
        if results[node].bad_records:
            continue
        for up in successors(node, plan.heights):
            assert results[up].bad_records == 0
            for name, (mono, _, higher) in METRICS.items():
                a, b = got[node][name], got[up][name]
                if a is None or not mono:
                    continue
                assert (b <= a + 1e-9) if higher else (b >= a - 1e-9), f"{name} improves {node} -> {up}"


def test_entropy_loss_equals_non_uniform_without_suppression(db):  # noqa: ANN001
    """Global recoding: Pi_e = N sum_j H(X_j | X^_j) = the non-uniform entropy; U + Pi_MI = mean_j
    H(X_j) (seed 000 section 4.4: the loss form of the MI utility); U_PMI + Pi_PMI = H(Y)."""
    load_marchand(db, "t1", T1, "BIGINT")
    with session(db.url) as be:
        plan = prepare(be, marchand_policy("t1", k=1))
        got = compute(plan, [(0, 0), (1, 0), (0, 1), (1, 1), (2, 1)])
    h_gender = -(0.4 * math.log2(0.4) * 2 + 0.2 * math.log2(0.2))
    h_age = -(0.8 * math.log2(0.8) + 0.2 * math.log2(0.2))
    h_balance = -(0.4 * math.log2(0.4) + 3 * 0.2 * math.log2(0.2))
    for node, v in got.items():
        assert v["entropy_loss"] == approx(v["non_uniform_entropy"]), node
        assert v["mutual_information"] + v["mi_loss"] == approx((h_gender + h_age) / 2), node
        assert v["private_mi"] + v["private_mi_loss"] == approx(h_balance), node


# --------------------------------------------------------------------------------------------------
# Choosing by metric
# --------------------------------------------------------------------------------------------------


def test_monotonicity_table():
    """Every metric is monotone without suppression on the full-domain lattice; with suppression
    only the node-level distances are (the README lists the same)."""
    assert set(METRICS) == set(METRIC_INFO)
    assert [m for m, (mono, _, _) in METRICS.items() if not mono] == []
    assert [m for m, (_, mono_s, _) in METRICS.items() if mono_s] == ["height", "absdist", "reldist"]
    higher = sorted(m for m, (_, _, hb) in METRICS.items() if hb)
    assert higher == ["mutual_information", "precision", "private_mi"]


def test_suppression_makes_metrics_non_monotone(db):  # noqa: ANN001
    """With suppression a more general node can be better (fewer suppressed records), so every
    satisfying node is a candidate; the distances keep to the minimal nodes."""
    load_marchand(db, "t1", T1, "BIGINT")
    with session(db.url) as be:
        plan = prepare(be, marchand_policy("t1", k=2, suppression=0.6))
        got = compute(plan, [(0, 0), (1, 0)])
        result = run_search(plan, "exhaustive")
        assert not monotone(plan, "precision") and monotone(plan, "height")
        assert candidates_for(plan, result, "precision") == sorted(result.satisfying)
        assert candidates_for(plan, result, "height") == result.minimal
        # Table 1 at (0,0) suppresses 3 records; one step up, (1,0), suppresses 1: Prec rises.
        assert got[(1, 0)]["precision"] > got[(0, 0)]["precision"]
        ranked = score(plan, sorted(result.satisfying), "precision", result.results)
        best = min(ranked, key=lambda nv: nv[1])
        assert value(best[1], "precision") == max(
            compute(plan, sorted(result.satisfying), ["precision"])[n]["precision"] for n in result.satisfying
        )


def test_undefined_metric_is_refused(db):  # noqa: ANN001
    from sqlanon.errors import SqlanonError

    load_marchand(db, "t1", T1, "BIGINT")
    pol = parse_policy(
        {"source": "main.t1", "columns": {"Gender": "quasi", "Age": "quasi"}, "privacy": {"k": 2}}
    )
    with session(db.url) as be:
        plan = prepare(be, pol)
        vals = compute(plan, [(0, 0)])[(0, 0)]
        assert vals["cm"] is None and vals["private_mi"] is None and vals["multiple_use"] is None
        with pytest.raises(SqlanonError, match="label"):
            score(plan, [(0, 0)], "cm")
        with pytest.raises(SqlanonError, match="unknown metric"):
            score(plan, [(0, 0)], "nope")
