"""t-closeness with hierarchical ground distance (issue 35 item 2; Li, Li, Venkatasubramanian, ICDE
2007, section 4.2; ARX 3.9.2's HierarchicalDistanceTCloseness), held to three oracles:

* the EMD itself, from its definition: a minimum-cost transport of the class's distribution q onto
  the table's p (scipy's linear program), the ground distance between two values the height of
  their lowest common ancestor over the hierarchy's height; and the paper's recursive form
  (sum over inner nodes of height/H * min(pos_extra, neg_extra)), checked against the transport
  here, which is quick enough for Adult's classes. Both in this file, independent of the SQL.
* ARX 3.9.2 itself (a Java driver, as tests/test_likeness.py's): its verdict on every node.
* the same figures on DuckDB, PostgreSQL and Spark.
"""

from __future__ import annotations

import collections
import itertools
import json
import random
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from sqlanon.engines import session
from sqlanon.errors import PolicyError
from sqlanon.lattice import prepare, run_search
from sqlanon.measure.assessment import assess
from sqlanon.policy import parse_policy
from tests.conftest import ADULT_DIR, ENGINES, TestDB, read_adult
from tests.helpers import arx_jars, cli, once, write_policy

COUNTER = itertools.count()
A_LEVEL1 = {"a1": "A12", "a2": "A12", "a3": "A34", "a4": "A34"}
B_LEVEL1 = {10: "1x", 11: "1x", 12: "1x", 20: "2x", 21: "2x"}
NODES = list(itertools.product(range(3), range(3)))
#: The sensitive attribute's own hierarchy (height 3): a chain (s3 -> Y -> XY), unequal fan-outs.
S_HIER = {
    "s1": ["X", "XY", "*"],
    "s2": ["X", "XY", "*"],
    "s3": ["Y", "XY", "*"],
    "s4": ["Z", "ZZ", "*"],
    "s5": ["Z", "ZZ", "*"],
}

# --- the reference, from the definition ------------------------------------------------------------


def _dist(values: list[Any]) -> dict[Any, Fraction]:
    counts = collections.Counter(values)
    return {v: Fraction(c, len(values)) for v, c in counts.items()}


def _paths(hier: dict[Any, list[str]]) -> dict[Any, list[tuple[int, str]]]:
    """Each value's ancestors as (level, label) nodes, level 0 the value itself."""
    return {v: [(0, str(v))] + [(i + 1, g) for i, g in enumerate(labels)] for v, labels in hier.items()}


def emd_transport(p: dict[Any, Fraction], q: dict[Any, Fraction], hier: dict[Any, list[str]]) -> float:
    """The EMD as its definition states it (Li et al. 2007 section 4.1): the least work moving q onto
    p, ground distance = level of the lowest common ancestor / height (section 4.2)."""
    from scipy.optimize import linprog

    values = list(hier)
    paths = _paths(hier)
    height = len(next(iter(hier.values())))

    def dist(a: Any, b: Any) -> float:
        return min(lvl for (lvl, g), (_, h) in zip(paths[a], paths[b], strict=True) if g == h) / height

    n = len(values)
    cost = [dist(a, b) for a in values for b in values]
    a_eq, b_eq = [], []
    for i in range(n):  # flow out of q's value i, flow into p's value j
        a_eq.append([1.0 if k // n == i else 0.0 for k in range(n * n)])
        b_eq.append(float(q.get(values[i], 0)))
        a_eq.append([1.0 if k % n == i else 0.0 for k in range(n * n)])
        b_eq.append(float(p.get(values[i], 0)))
    res = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


def emd_tree(p: dict[Any, Fraction], q: dict[Any, Fraction], hier: dict[Any, list[str]]) -> Fraction:
    """The paper's section 4.2 form: extra(leaf) = p - q, extra(N) = sum over its children, and
    cost = sum over inner nodes N of height(N)/H * min(pos_extra(N), neg_extra(N))."""
    paths = _paths(hier)
    height = len(next(iter(hier.values())))
    children: dict[tuple[int, str], set[tuple[int, str]]] = collections.defaultdict(set)
    for path in paths.values():
        for lo, hi in itertools.pairwise(path):
            children[hi].add(lo)
    extra = {path[0]: p.get(v, Fraction(0)) - q.get(v, Fraction(0)) for v, path in paths.items()}
    cost = Fraction(0)
    for lvl in range(1, height + 1):
        for node in [n for n in children if n[0] == lvl]:
            ex = [extra[c] for c in children[node]]
            extra[node] = sum(ex, Fraction(0))
            pos, neg = sum(e for e in ex if e > 0), -sum(e for e in ex if e < 0)
            cost += Fraction(lvl, height) * min(pos, neg)
    return cost


def _generalise(rows: list[tuple], node: tuple[int, int]) -> dict[tuple, list[tuple]]:
    out: dict[tuple, list[tuple]] = collections.defaultdict(list)
    for r in rows:
        a = r[0] if node[0] == 0 else (A_LEVEL1[r[0]] if node[0] == 1 else "*")
        b = r[1] if node[1] == 0 else (B_LEVEL1[r[1]] if node[1] == 1 else "*")
        out[(a, b)].append(r)
    return out


def class_emds(rows: list[tuple], node: tuple[int, int], hier: dict = S_HIER) -> list[tuple[int, Fraction]]:
    p = _dist([r[2] for r in rows])
    return [(len(c), emd_tree(p, _dist([r[2] for r in c]), hier)) for c in _generalise(rows, node).values()]


def bad_records(rows: list[tuple], node: tuple[int, int], t: float) -> int:
    return sum(n for n, e in class_emds(rows, node) if e > Fraction(str(t)))


# --- sqlanon ---------------------------------------------------------------------------------------


def _load(db: TestDB, rows: list[tuple]) -> str:
    name = f"h{next(COUNTER)}"
    db.load(name, ["a", "b", "s"], [list(r) for r in rows], ["VARCHAR", "INTEGER", "VARCHAR"])
    return name


def _policy(name: str, t: float, hier: dict | None = None, **extra: Any) -> dict:
    s_hier = {"map": {v: list(g) for v, g in (hier or S_HIER).items()}}
    return {
        "source": f"main.{name}",
        "columns": {
            "a": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in A_LEVEL1.items()}}},
            "b": {"role": "quasi", "hierarchy": {"map": {v: [g] for v, g in B_LEVEL1.items()}}},
            "s": {"role": "sensitive", "hierarchy": s_hier},
        },
        "privacy": {"t": {"s": {"measure": "emd-hierarchical", "t": t}}, **extra},
    }


def _table(seed: int, n: int) -> list[tuple]:
    rnd = random.Random(seed)
    return [(rnd.choice(list(A_LEVEL1)), rnd.choice(list(B_LEVEL1)), rnd.choice("1123445")) for _ in range(n)]


TABLES = [[(a, b, f"s{s}") for a, b, s in _table(seed, n)] for seed, n in ((1, 12), (2, 30), (3, 60))]


def test_reference_forms_agree() -> None:
    """The paper's recursive form equals the transport it stands for (and, with one level, the
    equal-distance EMD 1/2 sum |p - q|)."""
    rnd = random.Random(5)
    for _ in range(20):
        p = _dist([rnd.choice(list(S_HIER)) for _ in range(9)])
        q = _dist([rnd.choice(list(S_HIER)) for _ in range(4)])
        assert float(emd_tree(p, q, S_HIER)) == pytest.approx(emd_transport(p, q, S_HIER), abs=1e-9)
        flat = {v: ["*"] for v in S_HIER}
        half = sum(abs(p.get(v, 0) - q.get(v, 0)) for v in S_HIER) / 2
        assert emd_tree(p, q, flat) == half


def test_assess_and_searches_match_the_definition(db: TestDB) -> None:
    for rows in TABLES:
        name = _load(db, rows)
        for t, supp in ((0.15, 0.0), (0.3, 0.2)):
            pol = parse_policy(_policy(name, t, suppression=supp))
            with session(db.url) as be:
                a = assess(be, pol)
                plan = prepare(be, pol)
                exh = run_search(plan, "exhaustive").satisfying
                fl = run_search(plan, "flash").satisfying
            worst = max(e for _, e in class_emds(rows, (0, 0)))
            assert a["t_closeness"]["s"]["emd_hierarchical"] == pytest.approx(float(worst), abs=1e-9)
            label = f"t[s]: emd-hierarchical <= {t:g}"
            assert a["violations"][label] == bad_records(rows, (0, 0), t)
            allowed = int(supp * len(rows) + 1e-9)
            expected = {n for n in NODES if bad_records(rows, n, t) <= allowed}
            assert exh == expected and fl == expected, (t, supp)


def test_null_is_a_value_with_its_own_labels(db: TestDB) -> None:
    rows = [("a1", 10, "s1"), ("a1", 10, None), ("a2", 10, "s4"), ("a3", 20, None), ("a4", 21, "s1")]
    hier = {**S_HIER, "N": ["Y", "XY", "*"]}  # the reference's name for NULL
    pol = _policy(_load(db, rows), 0.5)
    pol["columns"]["s"]["hierarchy"]["null"] = ["Y", "XY"]
    with session(db.url) as be:
        a = assess(be, parse_policy(pol))
    named = [(x, y, "N" if s is None else s) for x, y, s in rows]
    worst = max(e for _, e in class_emds(named, (0, 0), hier))
    assert a["t_closeness"]["s"]["emd_hierarchical"] == pytest.approx(float(worst), abs=1e-9)


@pytest.mark.parametrize("db", ENGINES, indirect=True)  # Spark: tests/test_spark.py
def test_assess_figure_on_every_engine(db: TestDB) -> None:
    rows = TABLES[1]
    pol = parse_policy(_policy(_load(db, rows), 0.2))
    with session(db.url) as be:
        a = assess(be, pol)
    worst = max(e for _, e in class_emds(rows, (0, 0)))
    assert a["t_closeness"]["s"]["emd_hierarchical"] == pytest.approx(float(worst), abs=1e-9)
    assert a["violations"]["t[s]: emd-hierarchical <= 0.2"] == bad_records(rows, (0, 0), 0.2)


def _adult_hierarchy() -> dict[str, list[str]]:
    lines = (ADULT_DIR / "adult_hierarchy_education.csv").read_text(encoding="utf-8").splitlines()
    return {r[0]: r[1:] for r in (line.split(";") for line in lines if line.strip())}


def test_adult_education_against_the_transport(db: TestDB) -> None:
    """Adult (3000 records), sensitive education with ARX's own education hierarchy (a file),
    classes by sex and race: every class's figure equals the transport's, the largest is assess's."""
    adult = read_adult()[:3000]
    db.load("adult_h", ["sex", "race", "education"], [[r["sex"], r["race"], r["education"]] for r in adult])
    pol = parse_policy(
        {
            "source": "main.adult_h",
            "columns": {
                "sex": "quasi",
                "race": "quasi",
                "education": {
                    "role": "sensitive",
                    "hierarchy": {"file": str(ADULT_DIR / "adult_hierarchy_education.csv")},
                },
            },
            "privacy": {"t": {"education": {"measure": "emd-hierarchical", "t": 0.2}}},
        }
    )
    hier = _adult_hierarchy()
    p = _dist([r["education"] for r in adult])
    classes = collections.defaultdict(list)
    for r in adult:
        classes[(r["sex"], r["race"])].append(r["education"])
    emds = {k: emd_transport(p, _dist(v), hier) for k, v in classes.items()}
    with session(db.url) as be:
        a = assess(be, pol)
    assert a["t_closeness"]["education"]["emd_hierarchical"] == pytest.approx(max(emds.values()), abs=1e-9)
    bad = sum(len(classes[k]) for k, e in emds.items() if e > 0.2 + 1e-9)
    assert a["violations"]["t[education]: emd-hierarchical <= 0.2"] == bad


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["columns"]["s"].pop("hierarchy"), "'privacy.t.s.measure': emd-hierarchical needs"),
        (lambda p: p["columns"]["a"].update(role="insensitive"), "'columns.a.hierarchy': only quasi"),
        (
            lambda p: p["columns"]["s"]["hierarchy"]["map"].update(s3=["X", "ZZ"]),
            "label 'X' at level 1 generalises to both",
        ),
        (lambda p: p["columns"]["s"]["hierarchy"]["map"].pop("s5"), "does not cover value 's5'"),
        (
            lambda p: p["columns"]["s"].update(hierarchy={"mask": "right", "levels": 2}),
            "a sensitive attribute's hierarchy is a map or a file",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, change: Any, message: str) -> None:
    db = tmp_path / "t.duckdb"
    import duckdb

    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a1', 10, 's1'), ('a2', 11, 's5')) v(a, b, s)")
    con.close()
    pol = _policy("t", 0.3)
    change(pol)
    code, _out, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", f"duckdb:///{db}")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_policy_error_names_the_key() -> None:
    pol = _policy("t", 0.3)
    pol["columns"]["s"].pop("hierarchy")
    with pytest.raises(PolicyError, match="privacy.t.s.measure"):
        parse_policy(pol)


# --- ARX 3.9.2 as the oracle -----------------------------------------------------------------------

DRIVER = r"""
import java.nio.charset.StandardCharsets;
import org.deidentifier.arx.*;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.*;
import org.deidentifier.arx.metric.Metric;

/* For each data file (a[4..]) and each t (a[3], comma-separated), ARX's verdict with
   HierarchicalDistanceTCloseness on every node (la, lb): a lattice of that node alone (minimum =
   maximum generalisation), k = 1, no suppression. One JVM for every table. */
public class HierTDriver {
    public static void main(String[] a) throws Exception {
        ARXAnonymizer an = new ARXAnonymizer();
        for (int d = 4; d < a.length; d++) {
            Data data = Data.create(a[d], StandardCharsets.UTF_8, ';');
            data.getDefinition().setAttributeType("a", Hierarchy.create(a[0], StandardCharsets.UTF_8, ';'));
            data.getDefinition().setAttributeType("b", Hierarchy.create(a[1], StandardCharsets.UTF_8, ';'));
            data.getDefinition().setAttributeType("s", AttributeType.SENSITIVE_ATTRIBUTE);
            Hierarchy hs = Hierarchy.create(a[2], StandardCharsets.UTF_8, ';');
            for (String ts : a[3].split(",")) {
                double t = Double.parseDouble(ts);
                for (int la = 0; la < 3; la++) for (int lb = 0; lb < 3; lb++) {
                    data.getHandle().release();
                    data.getDefinition().setMinimumGeneralization("a", la);
                    data.getDefinition().setMaximumGeneralization("a", la);
                    data.getDefinition().setMinimumGeneralization("b", lb);
                    data.getDefinition().setMaximumGeneralization("b", lb);
                    ARXConfiguration cfg = ARXConfiguration.create();
                    cfg.addPrivacyModel(new KAnonymity(1));
                    cfg.addPrivacyModel(new HierarchicalDistanceTCloseness("s", t, hs));
                    cfg.setSuppressionLimit(0d);
                    cfg.setQualityModel(Metric.createPrecisionMetric());
                    ARXResult res = an.anonymize(data, cfg);
                    boolean ok = res.getGlobalOptimum() != null;
                    System.out.println((d - 4) + " " + ts + " " + la + " " + lb + " " + ok);
                }
            }
        }
    }
}
"""

#: Bounds away from the fractions small tables make exactly (ARX compares doubles without tolerance).
ARX_TS = ["0.083", "0.137", "0.219", "0.301", "0.45"]


def arx_hierarchical(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """ARX's verdicts on each of TABLES, computed once per process (one JVM: DuckDB, PostgreSQL
    and Spark)."""
    return once("tcloseness_hier", lambda: _arx_verdicts(tmp_path_factory))


@pytest.fixture(scope="module")
def arx_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return arx_hierarchical(tmp_path_factory)


def _arx_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    jars, javac = arx_jars(), "javac"
    tmp = tmp_path_factory.mktemp("arxh")
    cp = ":".join(str(j) for j in jars)
    src = tmp / "HierTDriver.java"
    src.write_text(DRIVER, encoding="utf-8")
    subprocess.run([javac, "-cp", cp, "-d", str(tmp), str(src)], check=True, timeout=60)
    files = []
    for i, rows in enumerate(TABLES):
        data = tmp / f"data{i}.csv"
        data.write_text("a;b;s\n" + "".join(f"{a};{b};{s}\n" for a, b, s in rows), encoding="utf-8")
        files.append(str(data))
    ha, hb, hs = tmp / "a.csv", tmp / "b.csv", tmp / "s.csv"
    ha.write_text("".join(f"{v};{g};*\n" for v, g in A_LEVEL1.items()), encoding="utf-8")
    hb.write_text("".join(f"{v};{g};*\n" for v, g in B_LEVEL1.items()), encoding="utf-8")
    hs.write_text("".join(f"{v};{';'.join(g)}\n" for v, g in S_HIER.items()), encoding="utf-8")
    out = subprocess.run(
        ["java", "-cp", f"{cp}:{tmp}", "HierTDriver", str(ha), str(hb), str(hs), ",".join(ARX_TS), *files],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    verdicts: list[dict] = [{} for _ in TABLES]
    for line in out.splitlines():
        d, t, la, lb, ok = line.split()
        verdicts[int(d)][(t, (int(la), int(lb)))] = ok == "true"
    assert all(len(v) == len(ARX_TS) * len(NODES) for v in verdicts), out[-2000:]
    assert {ok for v in verdicts for ok in v.values()} == {True, False}  # the bounds split the nodes
    return verdicts


def test_arx_agrees_on_every_node(db: TestDB, arx_verdicts: list[dict]) -> None:
    check_arx_agrees(db, arx_verdicts)


def check_arx_agrees(
    db: TestDB, arx_verdicts: list[dict], tables: tuple[int, ...] = (0, 1, 2), ts: list[str] = ARX_TS
) -> None:
    """The exhaustive search's satisfying nodes are the reference's and ARX's, for each t of ``ts``
    on each of ``tables`` (tests/test_spark.py: Spark, on fewer)."""
    for i in tables:
        rows, arx = TABLES[i], arx_verdicts[i]
        name = _load(db, rows)
        for t in ts:
            with session(db.url) as be:
                sat = run_search(prepare(be, parse_policy(_policy(name, float(t)))), "exhaustive").satisfying
            assert {n for n in NODES if bad_records(rows, n, float(t)) == 0} == sat, (i, t)
            assert {n for n in NODES if arx[(t, n)]} == sat, (i, t)


# --- the release and Mondrian ----------------------------------------------------------------------


def _published_classes(db: TestDB, target: str) -> list[list[tuple]]:
    classes = collections.defaultdict(list)
    for a, b, s in db.sql(f'SELECT "a", "b", "s" FROM "main"."{target}"'):
        classes[(a, b)].append((a, b, s))
    return list(classes.values())


@pytest.mark.parametrize(("algorithm", "mode"), [("flash", "mask"), ("mondrian", "remove")])
def test_release_keeps_only_classes_that_meet_it(
    db: TestDB, tmp_path: Path, algorithm: str, mode: str
) -> None:
    """The published view's per-class check (templates/publish/_release.sql.j2), Mondrian's cuts and
    the re-verification: every class the release keeps is within t of the source's distribution."""
    rows = TABLES[2]
    name = _load(db, rows)
    t = 0.2
    pol = {
        **_policy(name, t, suppression=0.5, suppression_mode=mode),
        "target": f"main.{name}_{algorithm}_{mode}",
        "search": {"algorithm": algorithm},
    }
    if algorithm == "mondrian":
        pol["columns"]["b"] = "quasi"
    code, out, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["published"]["t_closeness"]["s"]["emd_hierarchical"] <= t + 1e-9
    p = _dist([s for _, _, s in rows])
    kept = [
        c for c in _published_classes(db, f"{name}_{algorithm}_{mode}") if c[0][0] != "*" or mode == "remove"
    ]
    assert kept
    for cls in kept:
        assert emd_tree(p, _dist([s for _, _, s in cls]), S_HIER) <= Fraction(str(t)), cls


def test_report_and_console_show_it(tmp_path: Path) -> None:
    """The report's data carry the per-class spread of emd_hier (before and after), its HTML
    charts it against the bound, and assess's console table has the row."""
    import duckdb

    import sqlanon
    from sqlanon.report.html import render

    path = tmp_path / "r.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE r (a VARCHAR, b INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", [list(r) for r in TABLES[2]])
    con.close()
    url = f"duckdb:///{path}"
    pol = {**_policy("r", 0.3, k=2), "target": "main.r_rep"}
    data = sqlanon.report_data(pol, url, ks=[2]).to_dict()
    before = data["distributions"]["before"]["s"]["emd_hier"]
    assert sum(c for _, c, _ in before) == data["before"]["classes"]
    worst = max(e for _, e in class_emds(TABLES[2], (0, 0)))
    assert max(b for b, _, _ in before) == pytest.approx(int(float(worst) * 50 + 1e-9) / 50)
    assert "hierarchical distance of the class" in render(data)
    code, out, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", url)
    assert code in (0, 1), err
    assert "t: EMD hierarchical" in out


def test_one_level_is_the_equal_distance(db: TestDB) -> None:
    """A hierarchy of the values and '*' alone: every two values are 1 apart, emd-equal's distance."""
    rows = TABLES[1]
    pol = parse_policy(_policy(_load(db, rows), 0.2, hier={v: [] for v in S_HIER}))
    with session(db.url) as be:
        a = assess(be, pol)
    got = a["t_closeness"]["s"]
    assert got["emd_hierarchical"] == pytest.approx(got["emd_equal"], abs=1e-12)
    flat = {v: ["*"] for v in S_HIER}
    assert got["emd_hierarchical"] == pytest.approx(float(max(e for _, e in class_emds(rows, (0, 0), flat))))


#: S_HIER whose root is a label of its own, not '*': a tree of height 3, as ARX reads it (its tree's
#: height is the hierarchy's columns - 1, DataManager.getTree) and as the paper defines it. An added
#: '*' above the root would make the height 4 and every distance 3/4 of the paper's.
S_ROOTED = {v: [*g[:-1], "all"] for v, g in S_HIER.items()}


def test_a_root_of_its_own_is_the_root(db: TestDB, tmp_path: Path) -> None:
    check_a_root_of_its_own(db, tmp_path)


def check_a_root_of_its_own(db: TestDB, tmp_path: Path, ts: list[str] = ARX_TS) -> None:
    """The figure, and ARX's verdicts for each t of ``ts`` (tests/test_spark.py: Spark, on fewer)."""
    rows = TABLES[1]
    name = _load(db, rows)
    with session(db.url) as be:
        a = assess(be, parse_policy(_policy(name, 0.2, hier=S_ROOTED)))
    worst = max(e for _, e in class_emds(rows, (0, 0), S_ROOTED))
    assert worst == max(e for _, e in class_emds(rows, (0, 0), S_HIER))  # the same tree, root renamed
    assert a["t_closeness"]["s"]["emd_hierarchical"] == pytest.approx(float(worst), abs=1e-9)
    # ARX 3.9.2 on the same hierarchy file agrees on every node and t (where Java is absent the test
    # skips here, after sqlanon's own checks; under CI=true it fails).
    jars, javac = arx_jars(), "javac"
    cp = ":".join(str(j) for j in jars)
    (tmp_path / "HierTDriver.java").write_text(DRIVER, encoding="utf-8")
    subprocess.run([javac, "-cp", cp, "-d", str(tmp_path), str(tmp_path / "HierTDriver.java")], check=True)
    data, ha, hb, hs = (tmp_path / f for f in ("d.csv", "a.csv", "b.csv", "s.csv"))
    data.write_text("a;b;s\n" + "".join(f"{x};{y};{s}\n" for x, y, s in rows), encoding="utf-8")
    ha.write_text("".join(f"{v};{g};*\n" for v, g in A_LEVEL1.items()), encoding="utf-8")
    hb.write_text("".join(f"{v};{g};*\n" for v, g in B_LEVEL1.items()), encoding="utf-8")
    hs.write_text("".join(f"{v};{';'.join(g)}\n" for v, g in S_ROOTED.items()), encoding="utf-8")
    out = subprocess.run(
        [
            "java",
            "-cp",
            f"{cp}:{tmp_path}",
            "HierTDriver",
            str(ha),
            str(hb),
            str(hs),
            ",".join(ARX_TS),
            str(data),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    arx = {(t, (int(la), int(lb))) for _, t, la, lb, ok in map(str.split, out.splitlines()) if ok == "true"}
    for t in ts:
        with session(db.url) as be:
            pol = parse_policy(_policy(name, float(t), hier=S_ROOTED))
            sat = run_search(prepare(be, pol), "exhaustive").satisfying
        assert {n for n in NODES if (t, n) in arx} == sat, t


def test_dbt_test_gets_the_same_tree_for_a_root_of_its_own() -> None:
    """The release's dbt test receives the hierarchy with its root written '*' (the macro
    sqlanon_hier_rows leaves a trailing '*' out as the root): a root named 'all' kept as a label
    would be one more level, a tree of height 4 instead of 3."""
    from sqlanon.dbt.project import _tests

    def hier_arg(hier: dict) -> dict:
        tests = _tests(parse_policy(_policy("h", 0.2, hier=hier)), "ref")
        return next(
            t["sqlanon_t_closeness"]["arguments"]["hierarchy"] for t in tests if "sqlanon_t_closeness" in t
        )

    assert hier_arg(S_ROOTED) == hier_arg(S_HIER) == S_HIER
