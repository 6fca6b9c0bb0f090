"""(epsilon, delta)-differential privacy by SafePub (issue 35 item 1), held to two oracles:

* ARX 3.9.2 itself (``dp.ParameterCalculation``, the class its ``EDDifferentialPrivacy`` calls, driven
  by a small Java program compiled here where javac and ../shared/peers/arx are present): the k and
  beta a grid of (epsilon, search budget, delta) implies;
* a brute-force reference written here from the theorem (Li, Qardaji and Su 2012, Theorem 5, as
  SafePub section 3.3 states it), with scipy's binomial tail: d(k) for every k, the least k with
  d(k) < delta, then ARX's one more.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import binom

import sqlanon
from sqlanon.engines import session
from sqlanon.errors import PolicyError
from sqlanon.lattice import prepare
from sqlanon.lattice.evaluator import Evaluator
from sqlanon.metrics.safepub_search import search
from sqlanon.policy import load_policy
from sqlanon.safepub import DPRequirement, parse_dp, safepub_k, sampling_probability
from sqlanon.transform.safepub import materialise_sample
from tests.conftest import ENGINES, TEST_PERTURB_KEY, TestDB
from tests.helpers import arx_jars, cli, once

#: (epsilon, search budget, delta): ARX's default budget 0.1 and others, epsilon from 0.05 to 2.
GRID = [
    (eps, search, delta)
    for eps in (0.05, 0.3, 1.0, 2.0)
    for search in (0.0, 0.01, 0.1)
    for delta in (1e-2, 1e-4, 1e-6)
    if search < eps
]

# --- the reference, from the theorem ------------------------------------------------------------


def _reference_k(epsilon_anon: float, delta: float) -> int:
    """Walk k = 1, 2, ... as the theorem reads: d(k) = max over n >= ceil(k / gamma - 1) of
    a_n = P(Binomial(n, beta) > gamma n), the maximum taken until the Chernoff bound c_n falls below it
    (every a_n and c_n at once, with numpy; the bound c_n falls below 1e-26 within the range)."""
    beta = 1 - math.exp(-epsilon_anon)
    gamma = (math.exp(epsilon_anon) - 1 + beta) / math.exp(epsilon_anon)
    rate = gamma * math.log(gamma / beta) - (gamma - beta)
    ns = np.arange(int(60 / rate) + 4000)
    a, c = binom.sf(np.floor(ns * gamma), ns, beta), np.exp(-ns * rate)
    k = 1
    while True:
        n0 = math.ceil(k / gamma - 1)
        running = np.maximum.accumulate(a[n0:])
        stop = int(np.argmax(running > c[n0:]))
        assert running[stop] > c[n0 + stop]  # the range reached the stop
        if running[stop] < delta:
            return k + 1  # ARX returns one above the least k that holds (see sqlanon.safepub)
        k += 1


@pytest.mark.parametrize(("epsilon", "search", "delta"), GRID)
def test_k_matches_the_theorem(epsilon: float, search: float, delta: float) -> None:
    assert safepub_k(epsilon - search, delta) == _reference_k(epsilon - search, delta)


def test_beta_is_the_largest_sampling_probability() -> None:
    # SafePub section 3.3: beta = 1 - e^-epsilon; epsilon = ln 2 samples half the records.
    assert sampling_probability(math.log(2)) == pytest.approx(0.5, abs=1e-15)
    assert sampling_probability(1e-9) == pytest.approx(1e-9, rel=1e-8)  # no digits lost to 1 - x


# --- ARX 3.9.2 as the oracle --------------------------------------------------------------------

DRIVER = r"""
import org.deidentifier.arx.dp.ParameterCalculation;
import org.deidentifier.arx.reliability.IntervalArithmeticDouble;

/* For each "epsilon:search:delta": the k and beta ARX's EDDifferentialPrivacy.initialize computes
   (epsilon_anon = epsilon - search budget, the interval's lower end, as it does). */
public class SafePubDriver {
    public static void main(String[] a) throws Exception {
        IntervalArithmeticDouble ia = new IntervalArithmeticDouble();
        for (String spec : a) {
            String[] p = spec.split(":");
            double eps = Double.parseDouble(p[0]), search = Double.parseDouble(p[1]);
            double anon = ia.sub(ia.createInterval(eps), ia.createInterval(search)).lower;
            ParameterCalculation pc = new ParameterCalculation(anon, Double.parseDouble(p[2]));
            System.out.println(spec + " " + pc.getK() + " " + Double.toString(pc.getBeta()));
        }
    }
}
"""


def _java_classpath(tmp_path: Path, name: str, source: str) -> str:
    """Compile ``source`` against the ARX jars; the classpath to run it (skips where Java or ARX lack)."""
    jars, javac = arx_jars(), "javac"
    cp = ":".join(str(j) for j in jars)
    src = tmp_path / f"{name}.java"
    src.write_text(source, encoding="utf-8")
    subprocess.run([javac, "-cp", cp, "-d", str(tmp_path), str(src)], check=True, timeout=120)
    return f"{cp}:{tmp_path}"


def test_k_and_beta_match_arx(tmp_path: Path) -> None:
    cp = _java_classpath(tmp_path, "SafePubDriver", DRIVER)
    specs = [f"{e!r}:{s!r}:{d!r}" for e, s, d in GRID]
    out = subprocess.run(
        ["java", "-cp", cp, "SafePubDriver", *specs], check=True, capture_output=True, text=True, timeout=300
    ).stdout
    arx = {spec: (int(k), float(beta)) for spec, k, beta in (line.split() for line in out.splitlines())}
    assert len(arx) == len(GRID), out[-2000:]
    for (eps, budget, delta), spec in zip(GRID, specs, strict=True):
        req = DPRequirement(epsilon=eps, delta=delta, search_epsilon=budget or 1e-300)
        k, beta = arx[spec]
        assert safepub_k(eps - budget, delta) == k, spec
        # ARX keeps the lower end of beta's interval: within a few ulps of the exact value
        assert sampling_probability(eps - budget) == pytest.approx(beta, rel=1e-14, abs=0), spec
        assert req.epsilon_anon == pytest.approx(eps - budget, rel=1e-15)


# --- the policy key -----------------------------------------------------------------------------


def test_parse_dp_defaults_to_arx_search_budget() -> None:
    req = parse_dp({"differential_privacy": {"epsilon": 1.0, "delta": 1e-5}})
    assert req is not None
    assert (req.search_epsilon, req.steps, req.epsilon_anon) == (0.1, 0, pytest.approx(0.9))
    assert req.k == safepub_k(0.9, 1e-5) and 0 < req.beta < 1
    assert parse_dp({"k": 5}) is None


@pytest.mark.parametrize(
    ("privacy", "message"),
    [
        ({"differential_privacy": {"epsilon": 1}}, "missing; SafePub needs epsilon and delta"),
        ({"differential_privacy": {"epsilon": 0, "delta": 1e-5}}, "must be > 0"),
        ({"differential_privacy": {"epsilon": 1, "delta": 1}}, "between 0 and 1"),
        ({"differential_privacy": {"epsilon": 1, "delta": 1e-5, "seed": 3}}, "unknown key"),
        ({"differential_privacy": {"epsilon": 0.1, "delta": 1e-5}}, "leaves nothing of epsilon"),
        ({"differential_privacy": {"epsilon": 1, "delta": 1e-5, "steps": -1}}, "whole number"),
        ({"differential_privacy": {"epsilon": 1, "delta": 1e-5}, "k": 5}, "does not compose with privacy.k"),
        ({"differential_privacy": {"epsilon": 1, "delta": 1e-5}, "l": {"s": 2}}, "privacy.l"),
        ({"differential_privacy": {"epsilon": 1, "delta": 1e-5}, "k_map": 3}, "privacy.k_map"),
        (
            {"differential_privacy": {"epsilon": 1, "delta": 1e-5}, "profitability": {"attack": False}},
            "privacy.profitability",
        ),
        ({"differential_privacy": [1, 2]}, "expected a mapping"),
    ],
)
def test_bad_dp_keys(privacy: dict, message: str) -> None:
    with pytest.raises(PolicyError, match="differential_privacy") as e:
        parse_dp(privacy)
    assert message in str(e.value) and "\n" not in str(e.value)


# --- the release, end to end on DuckDB and PostgreSQL --------------------------------------------

A_LEVEL1 = {"a1": "A12", "a2": "A12", "a3": "A34", "a4": "A34"}
B_LEVEL1 = {10: "1x", 11: "1x", 12: "1x", 20: "2x", 21: "2x"}
N_ROWS = 2000
DP = {"epsilon": 2.0, "delta": 1e-3, "search_epsilon": 0.5, "steps": 3}


def _rows() -> list[tuple]:
    """A table of our own: skewed so that some classes of the most specific node fall below k."""
    out = []
    for i in range(N_ROWS):
        a = "a1" if i % 10 < 6 else ("a2" if i % 10 < 9 else ("a3" if i % 7 else "a4"))
        b = (10, 11, 12, 20, 21)[(i * 7) % 5] if i % 3 else 21
        out.append((i, a, b, "xyz"[i % 3]))
    return out


def _dp_policy(tmp_path: Path, target: str, dp: dict | None = None) -> Path:
    doc = {
        "source": "main.t",
        "target": target,
        "key": "id",
        "columns": {
            "id": "insensitive",
            "a": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in A_LEVEL1.items()}}},
            "b": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in B_LEVEL1.items()}}},
            "s": "sensitive",
        },
        "privacy": {"differential_privacy": dp or DP},
    }
    path = tmp_path / f"{target.split('.')[-1]}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _u(key: str, text: str) -> float:
    """The SQL's keyed_uniform, from its definition (sqlanon.sql.builders): the first 53 bits of
    HMAC-SHA-256(key, text), plus one half, over 2^53."""
    digest = hmac.new(key.encode(), text.encode(), hashlib.sha256).digest()
    return ((int.from_bytes(digest, "big") >> (256 - 53)) + 0.5) / 2.0**53


@pytest.fixture
def table(db: TestDB) -> TestDB:
    db.load("t", ["id", "a", "b", "s"], _rows(), ["BIGINT", "VARCHAR", "BIGINT", "VARCHAR"])
    return db


@pytest.mark.parametrize("db", ENGINES, indirect=True)
def test_release_is_the_keyed_sample_with_no_class_below_k(table: TestDB, tmp_path: Path) -> None:
    req = DPRequirement(epsilon=2.0, delta=1e-3, search_epsilon=0.5, steps=3)
    out = sqlanon.anonymise(_dp_policy(tmp_path, "main.t_dp"), table.url, publish_as="table").to_dict()
    ids = [r[0] for r in table.sql("SELECT id FROM main.t_dp")]
    # The sample: exactly the rows whose keyed draw falls below beta (then classes below k removed).
    sampled = {i for i, *_ in _rows() if _u(TEST_PERTURB_KEY, f"safepub|{i}") < req.beta}
    assert set(ids) <= sampled and len(ids) == len(set(ids))
    sd = math.sqrt(N_ROWS * req.beta * (1 - req.beta))
    assert abs(len(sampled) - N_ROWS * req.beta) < 4 * sd  # the share is beta within sampling error
    dp = out["differential_privacy"]
    assert (dp["epsilon"], dp["delta"], dp["k"]) == (2.0, 1e-3, req.k)
    assert dp["beta"] == pytest.approx(req.beta)
    # No count of the source or the sample: sample size less published rows = records suppressed,
    # which the guarantee does not cover.
    assert not {"sampled_rows", "source_rows", "score"} & set(dp), dp
    # No published class below k; every class of the sample at that node that is missing is below k.
    node = out["node"]
    gen = {
        "a": lambda v, lvl: (v, A_LEVEL1[v], "*")[lvl],
        "b": lambda v, lvl: (str(v), B_LEVEL1[v], "*")[lvl],
    }
    classes: dict[tuple, int] = {}
    for i, a, b, _s in _rows():
        if i in sampled:
            c = (gen["a"](a, node["a"]), gen["b"](b, node["b"]))
            classes[c] = classes.get(c, 0) + 1
    published = table.sql(
        "SELECT a, CAST(b AS VARCHAR), COUNT(*) FROM main.t_dp GROUP BY a, CAST(b AS VARCHAR)"
    )
    assert all(n >= req.k for *_c, n in published)
    assert {tuple(r[:2]): r[2] for r in published} == {c: n for c, n in classes.items() if n >= req.k}


@pytest.mark.parametrize("db", ENGINES, indirect=True)
def test_same_key_same_release_other_key_other_sample(
    table: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def release(target: str) -> tuple[dict, list]:
        out = sqlanon.anonymise(_dp_policy(tmp_path, target), table.url, publish_as="table").to_dict()
        return out["node"], sorted(table.sql(f"SELECT * FROM {target}"))

    first, again = release("main.r1"), release("main.r2")
    assert first == again
    monkeypatch.setenv("SQLANON_PERTURB_KEY", "another-secret-key-0123456789")
    other = release("main.r3")
    assert {r[0] for r in other[1]} != {r[0] for r in first[1]}


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
def test_cli_states_the_parameters_never_the_key(table: TestDB, tmp_path: Path) -> None:
    policy = str(_dp_policy(tmp_path, "main.t_cli"))
    code, out, err = cli("anonymise", policy, "--db", table.url)
    assert code == 0, err
    for word in ("epsilon", "delta", "beta", "k"):
        assert word in out
    code_j, out_j, _ = cli("anonymise", policy, "--db", table.url, "--replace", "--json")
    assert json.loads(out_j)["differential_privacy"]["k"] == safepub_k(1.5, 1e-3)
    for text in (out, err, out_j):
        assert TEST_PERTURB_KEY not in text and TEST_PERTURB_KEY.encode().hex() not in text


def test_missing_key_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQLANON_PERTURB_KEY")
    code, _out, err = cli("anonymise", str(_dp_policy(tmp_path, "main.t_nokey")), "--db", "duckdb://")
    assert code == 2 and "SQLANON_PERTURB_KEY" in err and len(err.strip().splitlines()) == 1, err


# --- the search: the exponential mechanism over SafePub's walk ----------------------------------


def _reference_distribution(rows: list[tuple], req: DPRequirement) -> dict[tuple, float]:
    """The chosen node's exact distribution for this sample, by enumerating every path of the walk
    (SafePub section 4, ARX's DataDependentEDDPAlgorithm): scores from the definition (section
    5.2), each step's draw proportional to exp(epsilon_step score / 2), the best pivot returned."""
    k, n = req.k, len(rows)
    gen_a = lambda v, lvl: (v, A_LEVEL1[v], "*")[lvl]  # noqa: E731
    gen_b = lambda v, lvl: (v, B_LEVEL1[v], "*")[lvl]  # noqa: E731

    def score(node: tuple) -> float:
        sizes: dict[tuple, int] = {}
        for _i, a, b, _s in rows:
            c = (gen_a(a, node[0]), gen_b(b, node[1]))
            sizes[c] = sizes.get(c, 0) + 1
        kept = sum(m * m for m in sizes.values() if m >= k)
        suppressed = sum(m for m in sizes.values() if m < k)
        return -(kept + N_ROWS * (suppressed + N_ROWS - n)) / (N_ROWS * (k * k / (k - 1) + 1))

    scores = {(x, y): score((x, y)) for x in range(3) for y in range(3)}
    eps = req.search_epsilon / req.steps
    out: dict[tuple, float] = {}

    def walk(pivot: tuple, cands: frozenset, best: tuple, step: int, p: float) -> None:
        if step > req.steps:
            out[best] = out.get(best, 0.0) + p
            return
        preds = {(pivot[0] - 1, pivot[1]) if i == 0 else (pivot[0], pivot[1] - 1) for i in (0, 1) if pivot[i]}
        cands = (cands | preds) - {pivot}
        if not cands:
            out[best] = out.get(best, 0.0) + p
            return
        weights = {c: math.exp(eps * scores[c] / 2) for c in cands}
        total = sum(weights.values())
        for c, w in weights.items():
            better = scores[c] > scores[best] or (scores[c] == scores[best] and sum(c) < sum(best))
            walk(c, cands, c if better else best, step + 1, p * w / total)

    walk((2, 2), frozenset({(2, 2)}), (2, 2), 1, 1.0)
    return out


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
def test_search_draws_nodes_as_the_exponential_mechanism(table: TestDB, tmp_path: Path) -> None:
    pol = load_policy(_dp_policy(tmp_path, "main.t_search"))
    req = pol.privacy.dp
    assert req is not None
    runs = 400
    with session(table.url) as be:
        plan = prepare(be, materialise_sample(be, pol).policy)
        ev = Evaluator(plan)
        chosen = [search(plan, req, N_ROWS, f"search-key-{i:04d}".encode(), ev)[0] for i in range(runs)]
    sampled = [r for r in _rows() if _u(TEST_PERTURB_KEY, f"safepub|{r[0]}") < req.beta]
    want = _reference_distribution(sampled, req)
    assert sum(want.values()) == pytest.approx(1.0)
    for node, p in want.items():
        got = chosen.count(node)
        assert abs(got - runs * p) <= 4 * math.sqrt(runs * p * (1 - p)) + 1, (node, got, runs * p, want)
    assert set(chosen) <= set(want)
    assert max(want.values()) < 0.9  # the draw is random, not the optimum every time


SEARCH_DRIVER = r"""
import java.nio.charset.StandardCharsets;
import org.deidentifier.arx.*;
import org.deidentifier.arx.ARXConfiguration.SearchStepSemantics;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.EDDifferentialPrivacy;
import org.deidentifier.arx.metric.Metric;

/* SafePub in ARX, run a[3] times (each run draws its own sample and search, SecureRandom):
   the levels of a and b of each run's release. */
public class SafePubSearchDriver {
    public static void main(String[] a) throws Exception {
        Data data = Data.create(a[0], StandardCharsets.UTF_8, ';');
        data.getDefinition().setAttributeType("id", AttributeType.INSENSITIVE_ATTRIBUTE);
        data.getDefinition().setAttributeType("a", Hierarchy.create(a[1], StandardCharsets.UTF_8, ';'));
        data.getDefinition().setAttributeType("b", Hierarchy.create(a[2], StandardCharsets.UTF_8, ';'));
        data.getDefinition().setAttributeType("s", AttributeType.INSENSITIVE_ATTRIBUTE);
        ARXAnonymizer an = new ARXAnonymizer();
        for (int r = 0; r < Integer.parseInt(a[3]); r++) {
            data.getHandle().release();
            ARXConfiguration cfg = ARXConfiguration.create();
            double eps = Double.parseDouble(a[4]), delta = Double.parseDouble(a[5]);
            cfg.addPrivacyModel(new EDDifferentialPrivacy(eps, delta));
            cfg.setDPSearchBudget(Double.parseDouble(a[6]));
            cfg.setHeuristicSearchStepLimit(Integer.parseInt(a[7]), SearchStepSemantics.EXPANSIONS);
            cfg.setSuppressionLimit(1d);
            cfg.setQualityModel(Metric.createDiscernabilityMetric(false));
            ARXResult res = an.anonymize(data, cfg);
            ARXLattice.ARXNode n = res.getGlobalOptimum();
            System.out.println(n.getGeneralization("a") + " " + n.getGeneralization("b"));
        }
    }
}
"""


def arx_safepub_runs(tmp_path_factory: pytest.TempPathFactory, runs: int = 300) -> list[tuple[int, int]]:
    """ARX's chosen node in each of ``runs`` SafePub runs (its own sample and search each), computed
    once per process (the reference here, and sqlanon on DuckDB, PostgreSQL and Spark)."""
    return once("safepub_runs", lambda: _arx_runs(tmp_path_factory.mktemp("arx_safepub"), runs))


def _arx_runs(tmp_path: Path, runs: int) -> list[tuple[int, int]]:
    cp = _java_classpath(tmp_path, "SafePubSearchDriver", SEARCH_DRIVER)
    csv, ha, hb = tmp_path / "t.csv", tmp_path / "a.csv", tmp_path / "b.csv"
    csv.write_text("id;a;b;s\n" + "".join(f"{i};{a};{b};{s}\n" for i, a, b, s in _rows()), encoding="utf-8")
    ha.write_text("".join(f"{v};{g};*\n" for v, g in A_LEVEL1.items()), encoding="utf-8")
    hb.write_text("".join(f"{v};{g};*\n" for v, g in B_LEVEL1.items()), encoding="utf-8")
    args = [str(runs), str(DP["epsilon"]), str(DP["delta"]), str(DP["search_epsilon"]), str(DP["steps"])]
    out = subprocess.run(
        ["java", "-cp", cp, "SafePubSearchDriver", str(csv), str(ha), str(hb), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    arx = [(int(x), int(y)) for x, y in (line.split() for line in out.splitlines())]
    assert len(arx) == runs, out[-2000:]
    return arx


def test_chosen_node_distribution_matches_arx(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Over many samples and searches, the chosen node is distributed as in ARX's runs: ARX against
    the reference above (which sqlanon's search matches exactly for each sample, and whose samples
    are sqlanon's, the previous tests), both within sampling error."""
    arx = arx_safepub_runs(tmp_path_factory)
    runs = len(arx)
    req = DPRequirement(**DP)
    rng = np.random.default_rng(35)  # the reference's own samples (ARX draws with SecureRandom)
    samples = 200
    ref: dict[tuple, float] = {}
    for _ in range(samples):
        keep = rng.random(N_ROWS) < req.beta
        rows = [r for r, kept in zip(_rows(), keep, strict=True) if kept]
        for node, p in _reference_distribution(rows, req).items():
            ref[node] = ref.get(node, 0.0) + p / samples
    for node in set(ref) | set(arx):
        p, got = ref.get(node, 0.0), arx.count(node) / runs
        err = 4 * math.sqrt(p * (1 - p) / runs) + 4 * math.sqrt(p * (1 - p) / samples) + 0.02
        assert abs(got - p) <= err, (node, got, p, ref)


@pytest.mark.parametrize("db", ENGINES, indirect=True)
def test_sqlanon_runs_are_distributed_as_arx_s(
    table: TestDB, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    check_runs_match_arx(table, tmp_path, arx_safepub_runs(tmp_path_factory), samples=12, draws=50)


def check_runs_match_arx(
    db: TestDB, tmp_path: Path, arx: list[tuple[int, int]], samples: int, draws: int
) -> None:
    """sqlanon's SafePub on ``db`` (``main.t`` holding _rows()) against ARX's runs, directly: for
    each of ``samples`` secret keys the database draws its own sample (the rows the key draws by
    the definition: checked by count), then ``draws`` searches over it (the class sizes are
    counted once: the evaluator's cache). Pooled, the searches' nodes follow the reference's exact
    distribution for each sample; and every node's share over all keys is ARX's share within
    sampling error (ARX's runs, the searches', and the spread between samples: the reference's
    distributions' standard deviation over these samples). tests/test_spark.py runs it on Spark
    with fewer samples."""
    pol = load_policy(_dp_policy(tmp_path, "main.t_runs"))
    req = pol.privacy.dp
    assert req is not None
    counts: dict[tuple, int] = {}
    dists: list[dict[tuple, float]] = []
    for i in range(samples):
        key = f"{TEST_PERTURB_KEY}-run-{i:03d}"
        sampled = [r for r in _rows() if _u(key, f"safepub|{r[0]}") < req.beta]
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SQLANON_PERTURB_KEY", key)
            with session(db.url) as be:
                plan = prepare(be, materialise_sample(be, pol).policy)
                assert plan.n_rows == len(sampled), (key, plan.n_rows, len(sampled))
                ev = Evaluator(plan)
                for j in range(draws):
                    node = search(plan, req, N_ROWS, f"{key}|{j}".encode(), ev)[0]
                    counts[node] = counts.get(node, 0) + 1
        dists.append(_reference_distribution(sampled, req))
    nodes = set(counts) | set(arx) | {n for d in dists for n in d}
    total = samples * draws
    for node in nodes:
        ps = [d.get(node, 0.0) for d in dists]
        got = counts.get(node, 0)
        # The searches against the reference, sample by sample (pooled).
        sd = math.sqrt(sum(draws * p * (1 - p) for p in ps))
        assert abs(got - draws * sum(ps)) <= 4 * sd + 1, (node, got, draws * sum(ps))
        # Against ARX's runs.
        p = sum(ps) / samples
        spread = math.sqrt(sum((x - p) ** 2 for x in ps) / max(samples - 1, 1))
        a = arx.count(node) / len(arx)
        err = 4 * math.sqrt(p * (1 - p) / len(arx)) + 4 * math.sqrt(p * (1 - p) / total)
        err += 4 * spread / math.sqrt(samples) + 0.02
        assert abs(got / total - a) <= err, (node, got / total, a, err)


# --- what SafePub refuses, in one line --------------------------------------------------------


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
@pytest.mark.parametrize("how", ["policy", "flag"])
def test_mondrian_is_refused_naming_why(table: TestDB, tmp_path: Path, how: str) -> None:
    """Mondrian's median cuts are a data-dependent choice no part of epsilon pays for (before: the
    run failed with "--levels: a Mondrian release has no levels", though no --levels was given)."""
    path = _dp_policy(tmp_path, "main.t_mondrian")
    if how == "policy":
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        path.write_text(yaml.safe_dump({**doc, "search": {"algorithm": "mondrian"}}), encoding="utf-8")
    flag = ["--algorithm", "mondrian"] if how == "flag" else []
    for dry in ([], ["--dry-run"]):
        code, _out, err = cli("anonymise", str(path), "--db", table.url, *flag, *dry)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "mondrian" in err and "differential_privacy" in err and "--levels" not in err, err
    assert not table.sql("SELECT * FROM information_schema.tables WHERE table_name = 't_mondrian'")


@pytest.mark.parametrize("db", ["duckdb"], indirect=True)
def test_dbt_is_refused_and_writes_nothing(table: TestDB, tmp_path: Path) -> None:
    """A dbt model re-reads the whole source at every build: it cannot be SafePub's sample (before:
    `sqlanon dbt` wrote a k-anonymous model of every record, with no word of the guarantee lost)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: p\nprofile: p\n", encoding="utf-8")
    policy = str(_dp_policy(tmp_path, "main.t_dbt"))
    for levels in ([], ["--levels", "a=1,b=1"]):
        code, _out, err = cli("dbt", policy, "--db", table.url, "--project", str(project), *levels)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "differential_privacy" in err and "sqlanon anonymise" in err, err
    assert [p.name for p in project.rglob("*")] == ["dbt_project.yml"]
