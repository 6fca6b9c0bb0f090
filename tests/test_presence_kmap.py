"""Delta-presence and k-map (issue 35 item 3), held to three oracles:

* a brute-force reference written here from the definitions (Nergiz, Atzori, Clifton 2007: delta =
  source records / population records of a class, a population class without source records has
  delta 0; k-map: each class of the release matches >= k population records), in exact fractions,
  against assess's figures and verdicts on every node, on DuckDB and PostgreSQL;
* ARX 3.9.2 itself (a Java driver compiled here where javac and ../shared/peers/arx are present):
  its verdict on every node for ``DPresence`` and ``KMap`` with the population as ARX's dataset and
  the source as its research subset, and the k' its ``KMap`` estimator derives for a grid of
  (k, significance, n / N, estimator); on DuckDB and PostgreSQL, and on Spark for a subset
  (tests/test_spark.py);
* the search: the node it chooses meets the reference (the requirement changes the choice).
"""

from __future__ import annotations

import collections
import itertools
import json
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.lattice import prepare
from sqlanon.measure.assessment import assess
from sqlanon.metrics.optimum import node_exprs, walk
from sqlanon.policy import parse_policy
from sqlanon.presence import derive_k
from tests.conftest import ENGINES, TestDB
from tests.helpers import ArxDriver, arx_driver, cli, once, write_policy

COUNTER = itertools.count()
A_LEVEL1 = {"a1": "A12", "a2": "A12", "a3": "A34", "a4": "A34"}
B_LEVEL1 = {10: "1x", 11: "1x", 12: "1x", 20: "2x", 21: "2x"}
NODES = list(itertools.product(range(3), range(3)))

# --- the reference, from the definitions -------------------------------------------------------


def _key(r: tuple, node: tuple[int, int]) -> tuple:
    a = r[0] if node[0] == 0 else (A_LEVEL1[r[0]] if node[0] == 1 else "*")
    b = r[1] if node[1] == 0 else (B_LEVEL1[r[1]] if node[1] == 1 else "*")
    return (a, b)


def reference(sample: list[tuple], pop: list[tuple], node: tuple[int, int], k: int, dmin: float, dmax: float):
    """(k-map violating records, min population class, delta-presence violating records, min delta,
    max delta, unmatched population classes) of ``node``."""
    n = collections.Counter(_key(r, node) for r in sample)
    big = collections.Counter(_key(r, node) for r in pop)
    kmap_bad = sum(c for key, c in n.items() if big[key] < k)
    deltas = {key: Fraction(n.get(key, 0), big[key]) for key in big}
    lo, hi = Fraction(str(dmin)), Fraction(str(dmax))
    d_bad = sum(n[key] for key in n if not lo <= deltas[key] <= hi)
    unmatched = sum(1 for key in big if key not in n)
    return kmap_bad, min(big[key] for key in n), d_bad, min(deltas.values()), max(deltas.values()), unmatched


def ref_ok(sample, pop, node, k=None, d=None, allowed=0) -> bool:  # noqa: ANN001
    kb, _, db_, _, _, unmatched = reference(sample, pop, node, k or 1, *(d or (0.0, 1.0)))
    ok = True
    if k is not None:
        ok &= kb <= allowed
    if d is not None:
        ok &= db_ <= allowed and not (unmatched and d[0] > 0)
    return ok


# --- data -------------------------------------------------------------------------------------------


def _table(n: int, extra: int, seed: int) -> tuple[list[tuple], list[tuple]]:
    rnd = random.Random(seed)
    rows = [(rnd.choice(list(A_LEVEL1)), rnd.choice(list(B_LEVEL1))) for _ in range(n + extra)]
    return rows[:n], rows  # the sample is the population's first n records


TABLES = [_table(20, 30, 1), _table(30, 15, 2), _table(12, 40, 3)]


def _load(db: TestDB, sample: list[tuple], pop: list[tuple]) -> tuple[str, str]:
    i = next(COUNTER)
    for name, rows in ((f"s{i}", sample), (f"p{i}", pop)):
        db.load(name, ["a", "b"], [list(r) for r in rows], ["VARCHAR", "INTEGER"])
    return f"s{i}", f"p{i}"


def _policy(src: str, pop: str | None, privacy: dict) -> dict:
    out: dict[str, Any] = {
        "source": f"main.{src}",
        "columns": {
            "a": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in A_LEVEL1.items()}}},
            "b": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in B_LEVEL1.items()}}},
        },
        "privacy": privacy,
    }
    if pop is not None:
        out["population"] = f"main.{pop}"
    return out


# --- sqlanon against the reference ------------------------------------------------------------------


@pytest.mark.parametrize(("k", "dmin", "dmax", "supp"), [(3, 0.3, 0.8, 0.0), (5, 0.0, 0.5, 0.2)])
def test_assess_matches_the_definitions_on_every_node(db: TestDB, k, dmin, dmax, supp) -> None:  # noqa: ANN001
    for sample, pop in TABLES:
        src, pname = _load(db, sample, pop)
        privacy = {"k_map": k, "delta_presence": {"min": dmin, "max": dmax}, "suppression": supp}
        pol = parse_policy(_policy(src, pname, privacy))
        km, dp = pol.privacy.presence.kmap, pol.privacy.presence.delta
        allowed = int(supp * len(sample) + 1e-9)
        with session(db.url) as be:
            plan = prepare(be, pol)
            for node in NODES:
                a = assess(be, pol, qi_exprs=node_exprs(plan, node))
                kb, min_big, d_bad, lo, hi, unmatched = reference(sample, pop, node, k, dmin, dmax)
                fig = a["presence"]
                assert fig["k_map"]["min_population_class"] == min_big, node
                assert a["violations"][km.label] == kb, node
                assert a["satisfied"][km.label] == (kb <= allowed), node
                assert a["violations"][dp.label] == d_bad, node
                assert fig["delta_presence"]["unmatched_population_classes"] == unmatched, node
                assert fig["delta_presence"]["min"] == pytest.approx(float(lo), abs=1e-12), node
                assert fig["delta_presence"]["max"] == pytest.approx(float(hi), abs=1e-12), node
                assert a["satisfied"][dp.label] == ref_ok(sample, pop, node, d=(dmin, dmax), allowed=allowed)


def test_search_chooses_a_node_that_meets_the_population_bounds(db: TestDB) -> None:
    """Without the bounds the optimum is the bottom node (nothing else is asked); with k-map and
    delta-presence the search passes over every node whose release fails them."""
    sample, pop = TABLES[0]
    src, pname = _load(db, sample, pop)
    privacy = {"k_map": 4, "delta_presence": {"min": 0.2, "max": 0.6}}
    pol = parse_policy(_policy(src, pname, privacy))
    with session(db.url) as be:
        plan = prepare(be, pol)
        _, node, _, _ = walk(plan, "flash", "precision")
    assert node != (0, 0) and not ref_ok(sample, pop, (0, 0), k=4, d=(0.2, 0.6))
    assert ref_ok(sample, pop, node, k=4, d=(0.2, 0.6))


def test_estimated_k_map_is_k_prime_anonymity(db: TestDB) -> None:
    """The estimator form reads no population: every class needs k' records, k' ARX's derivation."""
    sample, _ = TABLES[1]
    src, _ = _load(db, sample, sample)
    km = {"k": 40, "population_size": 100, "significance": 0.05, "estimator": "zero-truncated-poisson"}
    pol = parse_policy(_policy(src, None, {"k_map": km}))
    kp = derive_k(40, 0.05, "zero-truncated-poisson", len(sample), 100)
    assert 1 < kp < 40
    with session(db.url) as be:
        a = assess(be, pol)
    label = pol.privacy.presence.kmap.label
    assert f"estimated as {kp}-anonymity" in label
    sizes = collections.Counter(sample)
    assert a["violations"][label] == sum(c for c in sizes.values() if c < kp)


def test_estimated_k_follows_the_source_as_it_grows(db: TestDB) -> None:
    """A policy loaded once and used again (a Python process anonymising a growing table each
    night) derives k' from the source's size of each run: k' grows with the sample (lambda =
    (n / N) k), so the first run's k' would have checked the larger table too weakly."""
    sample, _ = TABLES[1]
    src, _ = _load(db, sample, sample)
    km = {"k": 40, "population_size": 400, "significance": 0.05, "estimator": "zero-truncated-poisson"}
    pol = parse_policy(_policy(src, None, {"k_map": km}))
    with session(db.url) as be:
        assess(be, pol)
    first = derive_k(40, 0.05, "zero-truncated-poisson", len(sample), 400)
    assert f"estimated as {first}-anonymity" in pol.privacy.presence.kmap.label
    db.load(src, ["a", "b"], [list(r) for r in sample * 4], ["VARCHAR", "INTEGER"])  # replaced: 4x
    grown = derive_k(40, 0.05, "zero-truncated-poisson", 4 * len(sample), 400)
    assert grown > first
    with session(db.url) as be:
        plan = prepare(be, pol)
    assert plan.n_rows == 4 * len(sample)
    assert f"estimated as {grown}-anonymity" in pol.privacy.presence.kmap.label


@pytest.mark.parametrize(
    ("privacy", "population", "message"),
    [
        ({"k_map": 3}, False, "'privacy.k_map': needs a population relation"),
        ({"delta_presence": {"min": 0.1, "max": 0.5}}, False, "'privacy.delta_presence': needs a population"),
        ({"delta_presence": {"min": 0.6, "max": 0.5}}, True, "min (0.6) exceeds max (0.5)"),
        ({"delta_presence": {"max": 1.5}}, True, "'privacy.delta_presence.max': must be between 0 and 1"),
        ({"k_map": 0}, True, "'privacy.k_map': must be >= 1"),
        ({"k_map": {"k": 3, "estimator": "poisson"}}, True, "give population_size too"),
        ({"k_map": {"k": 3, "population_size": 10, "estimator": "x"}}, False, "expected one of poisson"),
        ({"k_map": {"k": 3, "population_size": 10, "significance": 2}}, False, "must be between 0 and 1"),
        ({"k_map": {"k": 3, "population_size": 10, "significance": 0}}, False, "significance': must be > 0"),
        # Beyond ARX's int and long: lambda was 0.0 (log(0): a traceback) or a literal overflowed.
        ({"k_map": {"k": 3, "population_size": 10**400}}, False, "population_size': must be at most"),
        ({"k_map": 2**31}, True, "'privacy.k_map': must be at most 2147483647"),
    ],
)
def test_bad_keys_are_one_line_exit_2(tmp_path: Path, privacy: dict, population: bool, message: str) -> None:
    pol = _policy("t", "p" if population else None, privacy)
    code, _, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", "duckdb://")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("db", ENGINES, indirect=True)  # Spark: tests/test_spark.py
def test_assess_figures_on_every_engine(db: TestDB) -> None:
    sample, pop = TABLES[2]
    src, pname = _load(db, sample, pop)
    pol = parse_policy(_policy(src, pname, {"k_map": 3, "delta_presence": {"min": 0.1, "max": 0.5}}))
    with session(db.url) as be:
        a = assess(be, pol)
    kb, min_big, d_bad, lo, hi, unmatched = reference(sample, pop, (0, 0), 3, 0.1, 0.5)
    assert a["presence"]["k_map"]["min_population_class"] == min_big
    assert a["violations"][pol.privacy.presence.kmap.label] == kb
    assert a["violations"][pol.privacy.presence.delta.label] == d_bad
    assert a["presence"]["delta_presence"]["max"] == pytest.approx(float(hi), abs=1e-12)
    assert a["presence"]["delta_presence"]["unmatched_population_classes"] == unmatched


# --- ARX 3.9.2 as the oracle -----------------------------------------------------------------------

DRIVER = r"""
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.deidentifier.arx.*;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.*;
import org.deidentifier.arx.metric.Metric;

/* nodes A.csv B.csv SPEC,SPEC,... POP.csv N_SAMPLE [POP.csv N_SAMPLE ...]: ARX's verdict on every
   node (la, lb), each population as the dataset, its first N_SAMPLE rows the research subset; SPEC
   "dp:min:max" (DPresence alone) or "km:k" (KMap with the subset), no suppression.
   derive N_SAMPLE SPEC...: the k' KMap's estimator derives, SPEC "k:significance:N:poisson|zero". */
public class PresenceDriver {
    static ARXConfiguration config(String spec, DataSubset subset) {
        ARXConfiguration cfg = ARXConfiguration.create();
        String[] s = spec.split(":");
        if (s[0].equals("dp")) {
            cfg.addPrivacyModel(new DPresence(Double.parseDouble(s[1]), Double.parseDouble(s[2]), subset));
        }
        if (s[0].equals("km")) cfg.addPrivacyModel(new KMap(Integer.parseInt(s[1]), subset));
        cfg.setSuppressionLimit(0d);
        cfg.setQualityModel(Metric.createPrecisionMetric());
        return cfg;
    }
    public static void main(String[] a) throws Exception {
        ARXAnonymizer an = new ARXAnonymizer();
        if (a[0].equals("derive")) {
            int n = Integer.parseInt(a[1]);
            for (int m = 2; m < a.length; m++) {
                String[] s = a[m].split(":");
                Data.DefaultData data = Data.create();
                data.add("q");
                for (int i = 0; i < n; i++) data.add("v");
                data.getDefinition().setAttributeType("q", AttributeType.QUASI_IDENTIFYING_ATTRIBUTE);
                data.getDefinition().setAttributeType("q", Hierarchy.create(new String[][] {{"v", "*"}}));
                KMap.CellSizeEstimator est = s[3].equals("poisson") ? KMap.CellSizeEstimator.POISSON
                    : KMap.CellSizeEstimator.ZERO_TRUNCATED_POISSON;
                ARXConfiguration cfg = ARXConfiguration.create();
                cfg.addPrivacyModel(new KMap(Integer.parseInt(s[0]), Double.parseDouble(s[1]),
                    ARXPopulationModel.create(Long.parseLong(s[2])), est));
                cfg.setSuppressionLimit(1d);
                ARXResult res = an.anonymize(data, cfg);
                KMap km = res.getConfiguration().getPrivacyModel(KMap.class);
                System.out.println(a[m] + " " + km.getDerivedK());
            }
            return;
        }
        for (int t = 4; t < a.length; t += 2) {
        Data data = Data.create(a[t], StandardCharsets.UTF_8, ';');
        int n = Integer.parseInt(a[t + 1]);
        data.getDefinition().setAttributeType("a", Hierarchy.create(a[1], StandardCharsets.UTF_8, ';'));
        data.getDefinition().setAttributeType("b", Hierarchy.create(a[2], StandardCharsets.UTF_8, ';'));
        Set<Integer> rows = new HashSet<>();
        for (int i = 0; i < n; i++) rows.add(i);
        DataSubset subset = DataSubset.create(data, rows);
        for (String spec : a[3].split(",")) {
            for (int la = 0; la < 3; la++) for (int lb = 0; lb < 3; lb++) {
                data.getHandle().release();
                data.getDefinition().setMinimumGeneralization("a", la);
                data.getDefinition().setMaximumGeneralization("a", la);
                data.getDefinition().setMinimumGeneralization("b", lb);
                data.getDefinition().setMaximumGeneralization("b", lb);
                ARXResult res = an.anonymize(data, config(spec, subset));
                boolean ok = res.getGlobalOptimum() != null;
                System.out.println(t + " " + spec + " " + la + " " + lb + " " + ok);
            }
        }
        }
    }
}
"""

#: Bounds away from the ratios these tables make exactly (ARX compares doubles without tolerance).
ARX_MODELS = ["dp:0.31:0.77", "km:2", "dp:0.0:0.45", "km:4", "dp:0.12:1.0", "km:7"]
#: (k, significance, N, estimator) for n = 1000 sample records: k' from 1 to k.
DERIVE_GRID = [
    (k, sig, big_n, est)
    for k in (2, 5, 50, 200, 800)
    for sig in (0.001, 0.05, 0.2)
    for big_n in (1000, 1500, 100_000)
    for est in ("poisson", "zero-truncated-poisson")
]
DERIVE_N = 1000


def _arx_driver(tmp_path_factory: pytest.TempPathFactory) -> ArxDriver:
    """The driver and the a/b hierarchy files, compiled once per process."""
    return once(
        "presence_driver",
        lambda: arx_driver(
            tmp_path_factory.mktemp("arx_presence"), "PresenceDriver", DRIVER, {"a": A_LEVEL1, "b": B_LEVEL1}
        ),
    )


@pytest.fixture(scope="module")
def arx_java(tmp_path_factory: pytest.TempPathFactory) -> ArxDriver:
    return _arx_driver(tmp_path_factory)


def arx_presence(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """ARX's verdict per (model, node) on each of TABLES, computed once per process (DuckDB,
    PostgreSQL, Spark)."""
    return once("presence", lambda: _arx_verdicts(_arx_driver(tmp_path_factory)))


@pytest.fixture(scope="module")
def arx_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return arx_presence(tmp_path_factory)


def _arx_verdicts(java: ArxDriver) -> list[dict]:
    arx_dir = java.folder
    ha, hb = arx_dir / "a.csv", arx_dir / "b.csv"
    args = []
    for t, (sample, pop) in enumerate(TABLES):
        csv = arx_dir / f"pop{t}.csv"
        csv.write_text("a;b\n" + "".join(f"{a};{b}\n" for a, b in pop), encoding="utf-8")
        args += [str(csv), str(len(sample))]
    text = java("nodes", str(ha), str(hb), ",".join(ARX_MODELS), *args, timeout=120)
    out: list[dict] = [{} for _ in TABLES]
    for line in text.splitlines():
        t, spec, la, lb, ok = line.split()
        out[(int(t) - 4) // 2][(spec, (int(la), int(lb)))] = ok == "true"
    assert all(len(v) == len(ARX_MODELS) * len(NODES) for v in out), text[-2000:]
    return out


def test_arx_agrees_on_every_node(db: TestDB, arx_verdicts: list[dict]) -> None:
    check_arx_agrees(db, arx_verdicts)


def check_arx_agrees(
    db: TestDB,
    arx_verdicts: list[dict],
    tables: tuple[int, ...] = (0, 1, 2),
    pairs: tuple[int, ...] = (0, 1, 2),
    nodes: list = NODES,
) -> None:
    """Each delta-presence spec of ARX_MODELS with the k-map spec after it in one policy (assess
    gives each its own verdict), each of ``nodes`` measured as ``evaluate`` measures it, on
    ``tables`` with the ``pairs`` of specs (tests/test_spark.py: Spark, on fewer)."""
    all_pairs = list(zip(ARX_MODELS[::2], ARX_MODELS[1::2], strict=True))
    for t in tables:
        (sample, pop), arx = TABLES[t], arx_verdicts[t]
        src, pname = _load(db, sample, pop)
        for dp_spec, km_spec in (all_pairs[i] for i in pairs):
            d = (float(dp_spec.split(":")[1]), float(dp_spec.split(":")[2]))
            k = int(km_spec.split(":")[1])
            privacy = {"delta_presence": {"min": d[0], "max": d[1]}, "k_map": k}
            pol = parse_policy(_policy(src, pname, privacy))
            labels = {dp_spec: pol.privacy.presence.delta.label, km_spec: pol.privacy.presence.kmap.label}
            with session(db.url) as be:
                plan = prepare(be, pol)
                sat = {n: assess(be, pol, qi_exprs=node_exprs(plan, n))["satisfied"] for n in nodes}
            ref = {
                dp_spec: {n for n in nodes if ref_ok(sample, pop, n, d=d)},
                km_spec: {n for n in nodes if ref_ok(sample, pop, n, k=k)},
            }
            for spec, label in labels.items():
                ours = {n for n in nodes if sat[n][label]}
                assert ours == ref[spec], (t, spec)
                assert {n for n in nodes if arx[(spec, n)]} == ours, (t, spec)


def test_arx_derives_the_same_k(arx_java: ArxDriver) -> None:
    specs = [
        f"{k}:{sig}:{big_n}:{'poisson' if est == 'poisson' else 'zero'}" for k, sig, big_n, est in DERIVE_GRID
    ]
    text = arx_java("derive", str(DERIVE_N), *specs, timeout=120)
    arx = dict(line.split() for line in text.splitlines())
    assert len(arx) == len(DERIVE_GRID), text[-2000:]
    ours = {
        s: derive_k(k, sig, est, DERIVE_N, big_n)
        for s, (k, sig, big_n, est) in zip(specs, DERIVE_GRID, strict=True)
    }
    assert {s: int(v) for s, v in arx.items()} == ours
    assert len(set(ours.values())) > 5  # the grid spans many k'


def test_published_release_meets_both(db: TestDB, tmp_path: Path) -> None:
    """``anonymise`` publishes a node whose release meets k-map and delta-presence; its
    re-verification names both, and the published classes meet the reference."""
    sample, pop = TABLES[0]
    src, pname = _load(db, sample, pop)
    privacy = {"k_map": 4, "delta_presence": {"min": 0.2, "max": 0.6}}
    pol = {**_policy(src, pname, privacy), "target": f"main.{src}_anon"}
    code, out, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--json")
    assert code == 0, err
    r = json.loads(out)
    parsed = parse_policy(_policy(src, pname, privacy))
    for label in (parsed.privacy.presence.kmap.label, parsed.privacy.presence.delta.label):
        assert r["published"]["satisfied"][label] is True, label
    node = (r["node"]["a"], r["node"]["b"])
    assert ref_ok(sample, pop, node, k=4, d=(0.2, 0.6))
    assert len(db.sql(f'SELECT "a", "b" FROM "main"."{src}_anon"')) == len(sample)


def test_dbt_tests_the_estimated_k_map_as_k_prime_anonymity() -> None:
    """The release's dbt project tests the estimated k-map per class, with ARX's k'."""
    from sqlanon.dbt.project import _tests
    from sqlanon.presence import resolve

    km = {"k": 10, "population_size": 400, "significance": 0.05}
    pol = parse_policy(_policy("s", None, {"k_map": km}))
    resolve(pol, 100)
    kp = derive_k(10, 0.05, "poisson", 100, 400)
    # lambda = (100 / 400) 10 = 2.5: P(X <= 4) = 0.891, P(X <= 5) = 0.958 >= 0.95; ARX's loop
    # returns that count plus 2 (its counter is past it, then + 1): k' = 7 (< k = 10).
    assert kp == 7
    args = [t["sqlanon_k_anonymity"]["arguments"] for t in _tests(pol, "ref") if "sqlanon_k_anonymity" in t]
    assert args == [{"quasi_identifiers": ["a", "b"], "k": kp}]


def test_console_report_names_both(db: TestDB, tmp_path: Path) -> None:
    sample, pop = TABLES[2]
    src, pname = _load(db, sample, pop)
    pol = _policy(src, pname, {"k_map": 3, "delta_presence": {"min": 0.1, "max": 0.5}})
    code, out, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", db.url)
    _, min_big, _, lo, hi, unmatched = reference(sample, pop, (0, 0), 3, 0.1, 0.5)
    assert code in (0, 1), err
    assert f"k-map: smallest population class {min_big} (k = 3)" in out
    assert f"delta-presence: delta in [{float(lo):.4g}, {float(hi):.4g}]" in out
    assert (f"{unmatched} population class(es) with no record" in out) == (unmatched > 0)


def test_suppression_budget_covers_the_union_with_the_other_checks(db: TestDB) -> None:
    """A class that fails k-anonymity and another that fails k-map must both be suppressed: ARX's
    HashGroupify counts a class as an outlier when any criterion fails it, and compares the sum of
    the outliers with the limit. Here each requirement alone needs <= 2 of the 6 records (the
    budget, floor(0.34 * 6)), but the two together need 3, so the policy is not met."""
    sample = [("a1", 10)] + [("a2", 11)] * 2 + [("a3", 20)] * 3
    pop = sample + [("a1", 10)] * 4 + [("a3", 20)] * 2  # a1: 5, a2: 2 (< 3), a3: 5 population records
    src, pname = _load(db, sample, pop)
    pol = parse_policy(_policy(src, pname, {"k": 2, "k_map": 3, "suppression": 0.34}))
    with session(db.url) as be:
        a = assess(be, pol)
    assert a["violations"][pol.privacy.presence.kmap.label] == 2  # the a2 class
    assert a["satisfied"][pol.privacy.presence.kmap.label] is True
    assert a["suppression"]["records_violating_any"] == 3  # a1 (k) and a2 (k-map)
    assert a["suppression"]["classes_violating_any"] == 2
    assert a["satisfied"]["all"] is False


def _poisson_ppf(q: float, lam: float) -> int:
    """The least c with P(X <= c) >= q for X ~ Poisson(lam), from scipy (the regularised gamma
    function, as ARX's commons-math ``cumulativeProbability``), not from the code under test."""
    from scipy.stats import poisson

    return int(poisson.ppf(q, lam))


@pytest.mark.parametrize("estimator", ["poisson", "zero-truncated-poisson"])
def test_derived_k_for_a_large_k_is_quick_and_arx_s(estimator: str) -> None:
    """ARX's loop counts up from 0 to about lambda; recomputing the cumulative sum at each count
    made it quadratic: k = 5,000 with n = N took 5.7 s, k = 20,000 over a minute, a larger k
    never ended. The result is ARX's: the least count c whose (zero-truncated) CDF reaches
    1 - significance gives k' = c + 2 (Poisson) or c + 1 (zero-truncated), at most k and n."""
    import time

    from scipy.stats import poisson

    cases = [(5000, 0.01, 1000, 1000), (20_000, 0.05, 1000, 1000), (10**9, 0.01, 1000, 1000)]
    cases += [(800, 0.01, 1000, 1000), (3000, 0.2, 10_000, 20_000), (10**6, 0.01, 10**5, 10**8)]
    for k, sig, n, big_n in cases:
        lam = n / big_n * k
        if estimator == "poisson":
            expected = _poisson_ppf(1 - sig, lam) + 2
        else:
            p0 = poisson.pmf(0, lam)
            expected = _poisson_ppf((1 - sig) * (1 - p0) + p0, lam) + 1
        t0 = time.perf_counter()
        got = derive_k(k, sig, estimator, n, big_n)
        assert time.perf_counter() - t0 < 0.5, (k, n, big_n)
        assert got == min(k, expected, n), (k, sig, n, big_n)
    # Significance 1: ARX's loop never runs (its value 0 is not below the threshold 0): k' = 1.
    assert derive_k(10**6, 1.0, estimator, 10**5, 10**5) == 1


def test_delta_presence_with_a_class_suppressed_for_k(db: TestDB) -> None:
    """ARX suppresses a class of the source that fails k (its count > 0: HashGroupify's
    "no matching candidates" rule is for population classes without source records only), so
    delta-presence with a min > 0 still holds at the bottom node; the release then lacks that
    class, and its population records are not a population class without a source record."""
    sample = [("a1", 10)] + [("a2", 11)] * 2 + [("a3", 20)] * 3
    pop = sample + [("a1", 10)] * 2 + [("a2", 11)] * 2 + [("a3", 20)] * 2
    src, pname = _load(db, sample, pop)
    privacy = {"k": 2, "delta_presence": {"min": 0.2, "max": 1.0}, "suppression": 0.2}
    pol = parse_policy(_policy(src, pname, privacy))
    with session(db.url) as be:
        a = assess(be, pol)
        assert a["satisfied"]["all"] is True  # a1 (1 record <= 1 allowed) suppressed; deltas 1/3, 1/2, 1/2
        plan = prepare(be, pol)
        _, node, _, _ = walk(plan, "flash", "precision")
    assert node == (0, 0)
