"""Delta-disclosure privacy and beta-likeness (issue 35 item 4), held to three oracles:

* a brute-force reference written here from the definitions (Brickell and Shmatikov 2008; Cao and
  Karras 2012; as ARX 3.9.2 reads them: log base 2 for delta, values absent from a class skipped),
  in exact fractions where the bound is rational, against assess's figures and verdicts and the
  exhaustive and Flash searches' satisfying nodes, on DuckDB and PostgreSQL (hypothesis tables);
* ARX 3.9.2 itself (a Java driver compiled here where javac and ../shared/peers/arx are present):
  its verdict on every node of the lattice, k = 1, the model alone, no suppression;
* the published release: every class it keeps meets the model.
"""

from __future__ import annotations

import collections
import itertools
import math
import random
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlanon.engines import session
from sqlanon.lattice import prepare, run_search
from sqlanon.measure.assessment import assess
from sqlanon.policy import parse_policy
from tests.conftest import ENGINES_SPARK, TestDB
from tests.helpers import arx_jars, cli, cli_json, once, write_policy

COUNTER = itertools.count()
A_LEVEL1 = {"a1": "A12", "a2": "A12", "a3": "A34", "a4": "A34"}
B_LEVEL1 = {10: "1x", 11: "1x", 12: "1x", 20: "2x", 21: "2x"}
NODES = list(itertools.product(range(3), range(3)))

# --- the reference, from the definitions -------------------------------------------------------


def _dist(rows: list[tuple]) -> dict[Any, Fraction]:
    counts = collections.Counter(r[2] for r in rows)
    return {v: Fraction(c, len(rows)) for v, c in counts.items()}


def _generalise(rows: list[tuple], node: tuple[int, int]) -> dict[tuple, list[tuple]]:
    """The classes of ``node`` (a: a1..a4 -> A12/A34 -> *, b: 10..21 -> 1x/2x -> *)."""
    out: dict[tuple, list[tuple]] = collections.defaultdict(list)
    for r in rows:
        a = r[0] if node[0] == 0 else (A_LEVEL1[r[0]] if node[0] == 1 else "*")
        b = r[1] if node[1] == 0 else (B_LEVEL1[r[1]] if node[1] == 1 else "*")
        out[(a, b)].append(r)
    return out


def _pairs(cls: list[tuple], p: dict[Any, Fraction]) -> list[tuple[Fraction, Fraction]]:
    """(q, p) of every value present in the class."""
    return [(q, p[v]) for v, q in _dist(cls).items()]


def class_ok(cls: list[tuple], p: dict[Any, Fraction], model: str, bound: float) -> bool:
    for q, pv in _pairs(cls, p):
        if model == "delta" and not abs(math.log2(q / pv)) < bound:
            return False
        limit = Fraction(str(bound))
        if model == "basic" and not (q - pv) / pv <= limit:
            return False
        if model == "enhanced" and not (q - pv) / pv <= min(limit, -math.log(pv)):
            return False
    return True


def figures(rows: list[tuple], node: tuple[int, int] = (0, 0)) -> tuple[float, float, bool]:
    """max |log2(q/p)|, max (q - p)/p, and whether (q - p)/p <= -ln p everywhere."""
    p = _dist(rows)
    pairs = [qp for cls in _generalise(rows, node).values() for qp in _pairs(cls, p)]
    dd = max(abs(math.log2(q / pv)) for q, pv in pairs)
    bl = max((q - pv) / pv for q, pv in pairs)
    capped = all((q - pv) / pv <= -math.log(pv) for q, pv in pairs)
    return dd, float(bl), capped


def bad_records(rows: list[tuple], node: tuple[int, int], models: list[tuple[str, float]]) -> int:
    p = _dist(rows)
    return sum(
        len(cls)
        for cls in _generalise(rows, node).values()
        if not all(class_ok(cls, p, m, b) for m, b in models)
    )


# --- sqlanon ---------------------------------------------------------------------------------------


def _load(db: TestDB, rows: list[tuple]) -> str:
    name = f"r{next(COUNTER)}"
    db.load(name, ["a", "b", "s"], [list(r) for r in rows], ["VARCHAR", "INTEGER", "VARCHAR"])
    return name


def _policy(name: str, privacy: dict) -> dict:
    return {
        "source": f"main.{name}",
        "columns": {
            "a": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in A_LEVEL1.items()}}},
            "b": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in B_LEVEL1.items()}}},
            "s": {"role": "sensitive"},
        },
        "privacy": privacy,
    }


def _privacy(models: list[tuple[str, float]]) -> dict:
    out: dict[str, Any] = {}
    for m, b in models:
        if m == "delta":
            out["delta_disclosure"] = {"s": b}
        else:
            out["beta_likeness"] = {"s": {"beta": b, "kind": m}}
    return out


row = st.tuples(
    st.sampled_from(list(A_LEVEL1)),
    st.sampled_from(list(B_LEVEL1)),
    st.sampled_from(["s1", "s2", "s3", None]),
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(row, min_size=2, max_size=30),
    delta=st.sampled_from([0.5, 1.0, 1.5, 2.0]),
    beta=st.sampled_from([0.25, 0.5, 1.0, 2.0]),
    kind=st.sampled_from(["basic", "enhanced"]),
    supp=st.sampled_from([0.0, 0.2]),
)
def test_assess_and_searches_match_the_definitions(db: TestDB, rows, delta, beta, kind, supp) -> None:  # noqa: ANN001
    name = _load(db, rows)
    models = [("delta", delta), (kind, beta)]
    pol = parse_policy(_policy(name, {"suppression": supp, **_privacy(models)}))
    with session(db.url) as be:
        a = assess(be, pol)
        plan = prepare(be, pol)
        exh = run_search(plan, "exhaustive")
        fl = run_search(plan, "flash")
    dd, bl, capped = figures(rows)
    got = a["likeness"]["s"]
    assert got["delta_disclosure"] == pytest.approx(dd, abs=1e-9)
    assert got["beta"] == pytest.approx(bl, abs=1e-9)
    assert got["beta_enhanced"] == (pytest.approx(bl, abs=1e-9) if capped else None)
    for (m, b), label in zip(models, [r.label for r in pol.privacy.likeness], strict=True):
        assert a["violations"][label] == bad_records(rows, (0, 0), [(m, b)]), label
    allowed = math.floor(supp * len(rows) + 1e-9)
    expected = {n for n in NODES if bad_records(rows, n, models) <= allowed}
    assert exh.satisfying == expected
    assert fl.satisfying == expected


# Delta-disclosure is not monotone: node (0, *) satisfies delta = 1, its generalisation (1, *) does
# not (A34 = a3 + a4 holds y once in 6 records, p(y) = 6/16: log2(0.44) = -1.17), the top does.
NON_MONOTONE = (
    [("a1", 10, "x")] * 2
    + [("a1", 10, "y")] * 2
    + [("a2", 10, "y")] * 3
    + [("a2", 10, "z")] * 3
    + [("a3", 10, "x")] * 2
    + [("a3", 10, "z")] * 2
    + [("a4", 10, "x"), ("a4", 10, "y")]
)


def test_delta_disclosure_is_searched_as_not_monotone(db: TestDB) -> None:
    name = _load(db, NON_MONOTONE)
    pol = parse_policy(_policy(name, {"delta_disclosure": {"s": 1.0}}))
    expected = {n for n in NODES if n[0] != 1}
    assert expected == {n for n in NODES if bad_records(NON_MONOTONE, n, [("delta", 1.0)]) == 0}
    with session(db.url) as be:
        plan = prepare(be, pol)
        assert not plan.monotone
        for algorithm in ("exhaustive", "flash", "incognito"):
            assert run_search(plan, algorithm).satisfying == expected, algorithm


@pytest.mark.parametrize("db", ENGINES_SPARK, indirect=True)
def test_assess_figures_on_every_engine(db: TestDB) -> None:
    """The same figures and verdicts on DuckDB, PostgreSQL and Spark, each equal to the reference's."""
    name = _load(db, NON_MONOTONE)
    models = [("delta", 0.6), ("enhanced", 0.3)]
    pol = parse_policy(_policy(name, _privacy(models)))
    with session(db.url) as be:
        a = assess(be, pol)
    dd, bl, capped = figures(NON_MONOTONE)
    assert a["likeness"]["s"]["delta_disclosure"] == pytest.approx(dd, abs=1e-9)
    assert a["likeness"]["s"]["beta"] == pytest.approx(bl, abs=1e-9)
    assert (a["likeness"]["s"]["beta_enhanced"] is not None) == capped
    for (m, b), r in zip(models, pol.privacy.likeness, strict=True):
        assert a["violations"][r.label] == bad_records(NON_MONOTONE, (0, 0), [(m, b)])


def test_release_keeps_only_classes_that_meet_the_model(db: TestDB, tmp_path: Path) -> None:
    """The published view's own per-class check (and the re-verification of what it holds): every
    class it keeps meets enhanced beta-likeness against the source's distribution."""
    rnd = random.Random(7)
    rows = [(rnd.choice(list(A_LEVEL1)), rnd.choice(list(B_LEVEL1)), rnd.choice("xxxyyz")) for _ in range(80)]
    name = _load(db, rows)
    pol = {
        **_policy(name, {"suppression": 0.5, "beta_likeness": {"s": {"beta": 0.6, "kind": "enhanced"}}}),
        "target": f"main.{name}_anon",
    }
    r = cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
    label = "beta[s]: enhanced likeness <= 0.6"
    assert r["published"]["satisfied"][label] is True
    published = db.sql(f'SELECT "a", "b", "s" FROM "main"."{name}_anon"')
    assert 0 < len(published) < len(rows)  # some classes suppressed, some kept
    p = _dist(rows)
    classes = collections.defaultdict(list)
    for a, b, s in published:
        classes[(a, b)].append((a, b, s))
    assert all(class_ok(cls, p, "enhanced", 0.6) for cls in classes.values())


@pytest.mark.parametrize(
    ("privacy", "message"),
    [
        ({"delta_disclosure": {"s": 0}}, "privacy.delta_disclosure.s': must be > 0"),
        ({"delta_disclosure": {"a": 1}}, "'a' is not a sensitive column"),
        ({"beta_likeness": {"s": {"beta": 1, "kind": "x"}}}, "expected one of basic, enhanced"),
        ({"beta_likeness": {"s": {"kind": "basic"}}}, "privacy.beta_likeness.s.beta': missing"),
        ({"beta_likeness": {"s": "1"}}, "expected a finite number"),
    ],
)
def test_bad_keys_are_one_line_exit_2(tmp_path: Path, privacy: dict, message: str) -> None:
    code, out, err = cli("assess", str(write_policy(tmp_path, _policy("t", privacy))), "--db", "duckdb://")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


# --- ARX 3.9.2 as the oracle -----------------------------------------------------------------------

DRIVER = r"""
import java.nio.charset.StandardCharsets;
import org.deidentifier.arx.*;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.*;
import org.deidentifier.arx.metric.Metric;

/* For each model given ("delta|basic|enhanced:bound"), ARX's verdict on every node (la, lb) of the
   lattice: a lattice of that node alone (minimum = maximum generalisation), k = 1, no suppression. */
public class LikenessDriver {
    public static void main(String[] a) throws Exception {
        Data data = Data.create(a[0], StandardCharsets.UTF_8, ';');
        data.getDefinition().setAttributeType("a", Hierarchy.create(a[1], StandardCharsets.UTF_8, ';'));
        data.getDefinition().setAttributeType("b", Hierarchy.create(a[2], StandardCharsets.UTF_8, ';'));
        data.getDefinition().setAttributeType("s", AttributeType.SENSITIVE_ATTRIBUTE);
        ARXAnonymizer an = new ARXAnonymizer();
        for (int m = 3; m < a.length; m++) {
            String[] spec = a[m].split(":");
            double bound = Double.parseDouble(spec[1]);
            for (int la = 0; la < 3; la++) for (int lb = 0; lb < 3; lb++) {
                data.getHandle().release();
                data.getDefinition().setMinimumGeneralization("a", la);
                data.getDefinition().setMaximumGeneralization("a", la);
                data.getDefinition().setMinimumGeneralization("b", lb);
                data.getDefinition().setMaximumGeneralization("b", lb);
                ARXConfiguration cfg = ARXConfiguration.create();
                cfg.addPrivacyModel(new KAnonymity(1));
                if (spec[0].equals("delta")) cfg.addPrivacyModel(new DDisclosurePrivacy("s", bound));
                if (spec[0].equals("basic")) cfg.addPrivacyModel(new BasicBLikeness("s", bound));
                if (spec[0].equals("enhanced")) cfg.addPrivacyModel(new EnhancedBLikeness("s", bound));
                cfg.setSuppressionLimit(0d);
                cfg.setQualityModel(Metric.createPrecisionMetric());
                ARXResult res = an.anonymize(data, cfg);
                System.out.println(a[m] + " " + la + " " + lb + " " + (res.getGlobalOptimum() != null));
            }
        }
    }
}
"""

#: Bounds away from the ratios small tables make exactly (ARX compares doubles without tolerance).
ARX_MODELS = ["delta:0.9", "delta:1.3", "basic:0.55", "basic:1.3", "enhanced:0.55", "enhanced:1.3"]


def _arx_verdicts(tmp_path: Path, rows: list[tuple]) -> dict[tuple[str, tuple[int, int]], bool]:
    jars, javac = arx_jars(), "javac"
    cp = ":".join(str(j) for j in jars)
    src = tmp_path / "LikenessDriver.java"
    if not (tmp_path / "LikenessDriver.class").exists():  # compiled once for every table
        src.write_text(DRIVER, encoding="utf-8")
        subprocess.run([javac, "-cp", cp, "-d", str(tmp_path), str(src)], check=True, timeout=60)
    csv = tmp_path / "data.csv"
    csv.write_text("a;b;s\n" + "".join(f"{a};{b};{s}\n" for a, b, s in rows), encoding="utf-8")
    ha, hb = tmp_path / "a.csv", tmp_path / "b.csv"
    ha.write_text("".join(f"{v};{g};*\n" for v, g in A_LEVEL1.items()), encoding="utf-8")
    hb.write_text("".join(f"{v};{g};*\n" for v, g in B_LEVEL1.items()), encoding="utf-8")
    out = subprocess.run(
        ["java", "-cp", f"{cp}:{tmp_path}", "LikenessDriver", str(csv), str(ha), str(hb), *ARX_MODELS],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    verdicts = {}
    for line in out.splitlines():
        spec, la, lb, ok = line.split()
        verdicts[(spec, (int(la), int(lb)))] = ok == "true"
    assert len(verdicts) == len(ARX_MODELS) * len(NODES), out[-2000:]
    return verdicts


_rnd = random.Random(35)
ARX_TABLES = [NON_MONOTONE] + [
    [(_rnd.choice(list(A_LEVEL1)), _rnd.choice(list(B_LEVEL1)), _rnd.choice("xxyyz")) for _ in range(n)]
    for n in (25, 40)
]


def arx_likeness(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """ARX's verdicts on each of ARX_TABLES, computed once per process (DuckDB, PostgreSQL, Spark)."""
    return once(
        "likeness",
        lambda: [_arx_verdicts(tmp, rows) for tmp in [tmp_path_factory.mktemp("arx")] for rows in ARX_TABLES],
    )


@pytest.fixture(scope="module")
def arx_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return arx_likeness(tmp_path_factory)


def check_arx_agrees(
    db: TestDB, arx_verdicts: list[dict], tables: tuple[int, ...] = (0, 1, 2), specs: list[str] = ARX_MODELS
) -> None:
    """Every model of ``specs`` on every node of ``tables``: the exhaustive search's satisfying
    nodes are the reference's and ARX's (tests/test_spark.py: Spark, on the ones it names)."""
    for t in tables:
        rows, arx = ARX_TABLES[t], arx_verdicts[t]
        name = _load(db, rows)
        for spec in specs:
            model, bound = spec.split(":")
            pol = parse_policy(_policy(name, _privacy([(model, float(bound))])))
            with session(db.url) as be:
                sat = run_search(prepare(be, pol), "exhaustive").satisfying
            ref = {n for n in NODES if bad_records(rows, n, [(model, float(bound))]) == 0}
            assert ref == sat, (t, spec)
            assert {n for n in NODES if arx[(spec, n)]} == sat, (t, spec)


def test_arx_agrees_on_every_node(db: TestDB, arx_verdicts: list[dict]) -> None:
    check_arx_agrees(db, arx_verdicts)
