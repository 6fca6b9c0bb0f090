"""ARX's remaining risk figures and estimators (issue 35): Grassberger's entropy l-diversity,
AverageReidentificationRisk's records-at-risk bound, RiskModelSampleRisks' lowest risk and the
records at the highest and lowest risk, RiskModelAttributes' distinction and separation.

Oracles, none of them sqlanon's code:
* a brute-force reference written here from the definitions (Grassberger 1988/2003's G through
  scipy's digamma: G(x) = psi(x) + (-1)^x (psi((x+1)/2) - psi(x/2)) / 2; pairs of records counted
  one by one for separation);
* ARX 3.9.2 itself, where javac is present: a driver compiled into tmp_path prints ARX's G, its
  verdicts for EntropyLDiversity(GRASSBERGER) and AverageReidentificationRisk(avg, highest,
  share) on Adult's first 3,000 rows (QIs with a one-level hierarchy: the only node is the data
  itself, 0 % suppression), and its RiskModelSampleRisks and RiskModelAttributes figures.
sqlanon's figures and verdicts are measured on DuckDB and PostgreSQL.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
from collections import Counter
from typing import Any

import pytest
from scipy import special

from sqlanon import api
from sqlanon.errors import PolicyError, SqlanonError
from sqlanon.policy import parse_policy
from tests.conftest import ADULT_COLUMNS, ROOT, TestDB, read_adult
from tests.helpers import arx_jars, once

QIS = ["sex", "race", "marital-status"]
L_QIS = ["sex", "race"]  # l: ten classes of 1 to 1,000+ records, none with a single value
SENS = "education"
REL = 1e-9


# --------------------------------------------------------------------------------------------------
# The reference
# --------------------------------------------------------------------------------------------------


def ref_g(n: int) -> float:
    """ARX's G(n): Grassberger's (2003) G(x) = psi(x) + (-1)^x (psi((x + 1)/2) - psi(x/2)) / 2 at
    the even number x = n - n mod 2 (x = 1 for n = 1), from scipy's digamma; above 100 ARX uses
    its asymptotic series, equal to 1e-10 there."""
    x = max(n - n % 2, 1)
    sign = 1 if x % 2 == 0 else -1
    return float(special.digamma(x) + sign * (special.digamma((x + 1) / 2) - special.digamma(x / 2)) / 2)


def ref_grassberger_ok(classes: list[list[int]], l: float) -> bool:  # noqa: E741
    """Every class (its value counts): G(n) - sum c G(c) / n >= ln l, and >= ceil(l) values."""
    for counts in classes:
        n = sum(counts)
        if (
            len(counts) < math.ceil(l)
            or ref_g(n) - sum(c * ref_g(c) for c in counts) / n < math.log(l) - 1e-9
        ):
            return False
    return True


def ref_l_max(classes: list[list[int]]) -> float:
    return min(min(math.exp(ref_g(sum(c)) - sum(x * ref_g(x) for x in c) / sum(c)), len(c)) for c in classes)


def ref_separation(rows: list[tuple]) -> float:
    """The share of record pairs that differ on the tuple, counted pair by pair."""
    pairs = list(itertools.combinations(rows, 2))
    return sum(a != b for a, b in pairs) / len(pairs)


def test_reference_g_equals_the_series_above_100() -> None:
    s1, s2, s3 = 1 / 24, 7 / 960, 31 / 8064
    for n in (101, 150, 999, 10**5):
        m = n - n % 2
        f = 1 / (m / 2) ** 2
        assert math.isclose(ref_g(n), math.log(m) + f * (s1 - f * (s2 - f * s3)), rel_tol=1e-10)


def test_separation_reference_on_a_tiny_table() -> None:
    rows = [("a",), ("a",), ("b",), ("c",)]
    assert ref_separation(rows) == 5 / 6  # only the pair of a's is not separated


# --------------------------------------------------------------------------------------------------
# Policy keys
# --------------------------------------------------------------------------------------------------


def _policy(privacy: dict[str, Any], qis: list[str] = QIS, source: str = "main.adult") -> dict[str, Any]:
    cols: dict[str, Any] = {c: "insensitive" for c in ADULT_COLUMNS}
    cols.update({q: "quasi" for q in qis})
    cols[SENS] = "sensitive"
    return {"source": source, "columns": cols, "privacy": privacy}


@pytest.mark.parametrize(
    ("privacy", "key"),
    [
        ({"l": {SENS: {"kind": "entropy", "l": 2, "estimator": "miller"}}}, f"privacy.l.{SENS}.estimator"),
        ({"l": {SENS: {"kind": "distinct", "l": 2, "estimator": "shannon"}}}, f"privacy.l.{SENS}.estimator"),
        ({"risk": {"records_at_risk": 0.1}}, "privacy.risk.records_at_risk"),
        ({"risk": {"records_at_risk": {"risk": 0, "share": 0.1}}}, "privacy.risk.records_at_risk.risk"),
        ({"risk": {"records_at_risk": {"risk": 0.2, "share": 2}}}, "privacy.risk.records_at_risk.share"),
        ({"risk": {"records_at_risk": {"risk": 0.2, "x": 2}}}, "privacy.risk.records_at_risk.x"),
    ],
)
def test_bad_keys_name_themselves(privacy: dict[str, Any], key: str) -> None:
    with pytest.raises(PolicyError, match=key.replace(".", r"\.")):
        parse_policy(_policy(privacy))


# --------------------------------------------------------------------------------------------------
# ARX as the oracle
# --------------------------------------------------------------------------------------------------

DRIVER = r"""
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.*;
import org.deidentifier.arx.*;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.AttributeType.Hierarchy.DefaultHierarchy;
import org.deidentifier.arx.criteria.*;
import org.deidentifier.arx.risk.*;

/** args: CSV SENS Ls (comma) L_QIS (|) TRIPLES (avg:high:share, comma) QI...: JSON lines. */
public class ArxRisk {
    static Data load(String csv, String sens, String[] qis) throws Exception {
        Data data = Data.create(new FileInputStream(csv), StandardCharsets.UTF_8, ',');
        List<String> lines = Files.readAllLines(Paths.get(csv));
        String[] head = lines.get(0).split(",");
        for (String c : head) data.getDefinition().setAttributeType(c, AttributeType.INSENSITIVE_ATTRIBUTE);
        for (String q : qis) {
            int idx = Arrays.asList(head).indexOf(q);
            Set<String> vals = new TreeSet<>();
            for (int i = 1; i < lines.size(); i++) vals.add(lines.get(i).split(",", -1)[idx]);
            DefaultHierarchy h = Hierarchy.create();
            for (String v : vals) h.add(v);
            data.getDefinition().setAttributeType(q, h);
        }
        if (sens != null) data.getDefinition().setAttributeType(sens, AttributeType.SENSITIVE_ATTRIBUTE);
        return data;
    }
    static boolean ok(Data data, PrivacyCriterion c) throws Exception {
        ARXConfiguration cfg = ARXConfiguration.create();
        cfg.addPrivacyModel(c);
        cfg.setSuppressionLimit(0d);
        ARXResult r = new ARXAnonymizer().anonymize(data, cfg);
        ARXLattice.ARXNode o = r.getGlobalOptimum();
        return o != null && o.getAnonymity() == ARXLattice.Anonymity.ANONYMOUS;
    }
    public static void main(String[] a) throws Exception {
        String[] qis = Arrays.copyOfRange(a, 5, a.length);
        StringBuilder g = new StringBuilder("{\"g\": [");
        int[] ns = {1, 2, 3, 4, 5, 17, 98, 99, 100, 101, 102, 103, 250, 1001, 30001};
        for (int i = 0; i < ns.length; i++) {
            g.append(i > 0 ? ", " : "").append("[" + ns[i] + ", "
                + EntropyLDiversity.EntropyEstimator.GRASSBERGER.psi(ns[i]) + "]");
        }
        System.out.println(g.append("]}"));
        for (String l : a[2].split(",")) {
            Data d = load(a[0], a[1], a[3].split("[|]"));
            boolean v = ok(d, new EntropyLDiversity(a[1], Double.parseDouble(l),
                EntropyLDiversity.EntropyEstimator.GRASSBERGER));
            System.out.println("{\"l\": " + l + ", \"ok\": " + v + "}");
        }
        for (String t : a[4].split(",")) {
            String[] p = t.split(":");
            boolean v = ok(load(a[0], null, qis), new AverageReidentificationRisk(Double.parseDouble(p[0]),
                Double.parseDouble(p[1]), Double.parseDouble(p[2])));
            System.out.println("{\"triple\": \"" + t + "\", \"ok\": " + v + "}");
        }
        DataHandle h = load(a[0], null, qis).getHandle();
        RiskEstimateBuilder rb = h.getRiskEstimator();
        RiskModelSampleRisks s = rb.getSampleBasedReidentificationRisk();
        System.out.println("{\"lowest\": " + s.getLowestRisk() + ", \"highest\": " + s.getHighestRisk()
            + ", \"at_highest\": " + s.getFractionOfRecordsAffectedByHighestRisk()
            + ", \"at_lowest\": " + s.getFractionOfRecordsAffectedByLowestRisk() + "}");
        for (RiskModelAttributes.QuasiIdentifierRisk q : rb.getAttributeRisks().getAttributeRisks()) {
            List<String> ids = new ArrayList<>(q.getIdentifier());
            Collections.sort(ids);
            System.out.println("{\"set\": \"" + String.join("|", ids) + "\", \"distinction\": "
                + q.getDistinction() + ", \"separation\": " + q.getSeparation() + "}");
        }
    }
}
"""

#: (average, highest risk, share of records allowed above it): each bound decides once.
#: On these rows 1.233 % of the records lie in classes below 5 and 20.07 % below 100; the average is 0.016.
TRIPLES = [(0.5, 0.2, 0.012), (0.5, 0.2, 0.0124), (0.5, 0.01, 0.2), (0.5, 0.01, 0.21), (0.01, 0.5, 1.0)]


def adult_head() -> list[dict[str, Any]]:
    """Adult's first 3,000 rows, read once per process."""
    return once("adult3000", lambda: read_adult()[:3000])


def _ref_classes(adult_rows: list[dict[str, Any]]) -> list[list[int]]:
    by: dict[tuple, Counter] = {}
    for r in adult_rows:
        by.setdefault(tuple(r[q] for q in L_QIS), Counter())[r[SENS]] += 1
    return [list(c.values()) for c in by.values()]


def _l_values(ref_classes: list[list[int]]) -> list[float]:
    lm = ref_l_max(ref_classes)
    return [1.5, lm * (1 - 1e-6), lm * (1 + 1e-6), 6.0]


@pytest.fixture(scope="module")
def adult_rows() -> list[dict[str, Any]]:
    return adult_head()


def arx_risk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ARX's figures and verdicts, computed once per process (DuckDB, PostgreSQL, Spark)."""
    return once(
        "risk_figures", lambda: _arx(adult_head(), _l_values(_ref_classes(adult_head())), tmp_path_factory)
    )


@pytest.fixture(scope="module")
def arx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return arx_risk(tmp_path_factory)


def _arx(
    adult_rows: list[dict[str, Any]], l_values: list[float], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    arx_cp = ":".join(str(j) for j in arx_jars())
    tmp = tmp_path_factory.mktemp("arxrisk")
    (tmp / "ArxRisk.java").write_text(DRIVER, encoding="utf-8")
    csv_path = tmp / "adult.csv"
    lines = [",".join(ADULT_COLUMNS)] + [",".join(str(r[c]) for c in ADULT_COLUMNS) for r in adult_rows]
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cp = f"{arx_cp}:{ROOT / 'fixtures' / 'arx'}/*"
    subprocess.run(["javac", "-cp", cp, "-d", str(tmp), str(tmp / "ArxRisk.java")], check=True, timeout=60)
    ls = ",".join(repr(v) for v in l_values)
    triples = ",".join(":".join(map(repr, t)) for t in TRIPLES)
    out = subprocess.run(
        ["java", "-cp", f"{tmp}:{cp}", "ArxRisk", str(csv_path), SENS, ls, "|".join(L_QIS), triples, *QIS],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    res: dict[str, Any] = {"l": {}, "triple": {}, "sets": {}}
    for d in map(json.loads, out.splitlines()):
        if "g" in d:
            res["g"] = d["g"]
        elif "l" in d:
            res["l"][d["l"]] = d["ok"]
        elif "triple" in d:
            res["triple"][d["triple"]] = d["ok"]
        elif "set" in d:
            res["sets"][d["set"]] = d
        else:
            res["sample"] = d
    return res


@pytest.fixture
def adult_db(db: TestDB, adult_rows: list[dict[str, Any]]) -> TestDB:
    db.load("adult", ADULT_COLUMNS, [[r[c] for c in ADULT_COLUMNS] for r in adult_rows])
    return db


def test_g_equals_arx(arx: dict[str, Any]) -> None:
    for n, g in arx["g"]:
        assert math.isclose(ref_g(n), g, rel_tol=1e-10), (n, g)


def test_grassberger_l_equals_arx(adult_db: TestDB, arx: dict[str, Any]) -> None:
    """The largest l and each verdict equal the reference and ARX; the classes hold 1 to 1,000+
    records, so both G's table and its series are used."""
    check_grassberger_l_equals_arx(adult_db, arx)


def check_grassberger_l_equals_arx(
    adult_db: TestDB, arx: dict[str, Any], which: tuple[int, ...] = (0, 1, 2, 3), source: str = "main.adult"
) -> None:
    """The comparison for the l values ``which`` picks (tests/test_spark.py: Spark, on fewer) of
    the source ``source`` (Adult's first 3,000 rows)."""
    ref_classes = _ref_classes(adult_head())
    sizes = sorted(sum(c) for c in ref_classes)
    assert sizes[0] < 100 < sizes[-1]
    for lv in (_l_values(ref_classes)[i] for i in which):
        pol = _policy({"l": {SENS: {"kind": "entropy", "l": lv, "estimator": "grassberger"}}}, L_QIS, source)
        got = api.assess(pol, adult_db.url).to_dict()
        want = arx["l"][lv]
        assert want is ref_grassberger_ok(ref_classes, lv), lv
        assert got["satisfied"]["all"] is want, (lv, got["satisfied"])
        assert math.isclose(
            got["l_diversity"][SENS]["entropy_grassberger"], ref_l_max(ref_classes), rel_tol=REL
        )


def test_sample_risks_equal_arx(adult_db: TestDB, arx: dict[str, Any]) -> None:
    check_sample_risks_equal_arx(api.assess(_policy({}), adult_db.url).to_dict()["risk"], arx)


def check_sample_risks_equal_arx(got: dict[str, Any], arx: dict[str, Any]) -> None:
    """``got``: assess's risk figures of Adult's first 3,000 rows (the QIS, no bound)."""
    want = arx["sample"]
    assert math.isclose(got["prosecutor_max"], want["highest"], rel_tol=REL)
    assert math.isclose(got["prosecutor_min"], want["lowest"], rel_tol=REL)
    assert math.isclose(got["share_at_highest"], want["at_highest"], rel_tol=REL)
    assert math.isclose(got["share_at_lowest"], want["at_lowest"], rel_tol=REL)


def test_records_at_risk_equal_arx(adult_db: TestDB, arx: dict[str, Any]) -> None:
    check_records_at_risk_equal_arx(adult_db, arx)


def check_records_at_risk_equal_arx(
    adult_db: TestDB, arx: dict[str, Any], triples: list = TRIPLES, source: str = "main.adult"
) -> None:
    """Each of ``triples`` (tests/test_spark.py: Spark, on fewer) decides as ARX and the reference."""
    adult_rows = adult_head()
    sizes = Counter(tuple(r[q] for q in QIS) for r in adult_rows)
    n = len(adult_rows)
    seen = set()
    for avg, high, share in triples:
        pol = _policy(
            {"risk": {"average": avg, "records_at_risk": {"risk": high, "share": share}}}, source=source
        )
        got = api.assess(pol, adult_db.url).to_dict()
        want = arx["triple"][":".join(map(repr, (avg, high, share)))]
        # reference: records whose risk 1/size exceeds the highest risk (ARX rounds 1/R: exact here)
        at_risk = sum(s for s in sizes.values() if 1 / s > high * (1 + 1e-12)) / n
        assert math.isclose(got["risk"]["records_at_risk"], at_risk, rel_tol=REL, abs_tol=1e-15)
        assert (at_risk <= share and len(sizes) / n <= avg) is want, (avg, high, share)
        assert got["satisfied"]["all"] is want, (avg, high, share, got["satisfied"])
        seen.add(want)
    assert seen == {True, False}


def test_attribute_risks_equal_arx(adult_db: TestDB, arx: dict[str, Any]) -> None:
    got = api.assess(_policy({}), adult_db.url).to_dict()["risk"]["attributes"]
    check_attribute_risks_equal_arx(got, arx)
    adult_rows = adult_head()
    one = next(a for a in got if a["quasi_identifiers"] == ["sex"])
    sample = adult_rows[:400]  # the pair-by-pair reference on a part (80,000 pairs)
    adult_db.load("adult_part", ADULT_COLUMNS, [[r[c] for c in ADULT_COLUMNS] for r in sample])
    part = {**_policy({}), "source": "main.adult_part"}
    small = api.assess(part, adult_db.url).to_dict()["risk"]["attributes"]
    for a in small:
        keys = [tuple(r[q] for q in a["quasi_identifiers"]) for r in sample]
        assert math.isclose(a["separation"], ref_separation(keys), rel_tol=REL), a
    assert 0 < one["separation"] < 1


def check_attribute_risks_equal_arx(got: list[dict[str, Any]], arx: dict[str, Any]) -> None:
    """``got``: assess's attribute risks of Adult's first 3,000 rows: ARX's distinction and
    separation, and the reference's distinction."""
    adult_rows = adult_head()
    assert len(got) == 2 ** len(QIS) - 1 == len(arx["sets"])
    for a in got:
        want = arx["sets"]["|".join(sorted(a["quasi_identifiers"]))]
        assert math.isclose(a["distinction"], want["distinction"], rel_tol=REL), a
        assert math.isclose(a["separation"], want["separation"], rel_tol=REL), a
        keys = [tuple(r[q] for q in a["quasi_identifiers"]) for r in adult_rows]
        assert math.isclose(a["distinction"], len(set(keys)) / len(keys), rel_tol=REL)


@pytest.mark.parametrize("counts", [[101, 49], [150, 150, 3], [1, 1, 1], [7, 200], [5000, 4000, 1]])
def test_grassberger_figure_of_one_class(db: TestDB, counts: list[int]) -> None:
    """One class per table, sizes each side of 100 (ARX's table below, its series above): the
    largest l equals the reference's, and l a hair above it fails, a hair below holds."""
    rows = [["x", f"v{i}"] for i, c in enumerate(counts) for _ in range(c)]
    db.load("one", ["g", "w"], rows)
    base = {"source": "main.one", "columns": {"g": "quasi", "w": "sensitive"}}
    want = ref_l_max([counts])
    got = api.assess({**base, "privacy": {}}, db.url).to_dict()["l_diversity"]["w"]["entropy_grassberger"]
    assert math.isclose(got, want, rel_tol=REL), (counts, got, want)
    for lv, ok in [(want * (1 - 1e-6), True), (want * (1 + 1e-6), False)]:
        if lv < 1:
            continue
        priv = {"l": {"w": {"kind": "entropy", "l": lv, "estimator": "grassberger"}}}
        if math.ceil(lv) > len(counts):  # ARX needs ceil(l) distinct values: refused up front
            with pytest.raises(SqlanonError, match="no release can satisfy it"):
                api.assess({**base, "privacy": priv}, db.url)
            continue
        res = api.assess({**base, "privacy": priv}, db.url).to_dict()
        assert res["satisfied"]["all"] is ok, (counts, lv)


def test_search_meets_grassberger_l_and_records_at_risk(db: TestDB, adult_rows: list[dict[str, Any]]) -> None:
    """The source fails both; the search generalises until the published release (measured again
    by the reference from its own rows) meets Grassberger's l and the records-at-risk bound."""
    rows = adult_rows[:1500]
    db.load("adult", ["age", "sex", "education"], [[r["age"], r["sex"], r["education"]] for r in rows])
    lv, high, share = 4.0, 0.1, 0.01
    pol = {
        "source": "main.adult",
        "target": "main.adult_anon",
        "columns": {
            "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [5, 10, 20, 40]}}},
            "sex": "quasi",
            "education": "sensitive",
        },
        "privacy": {
            "l": {"education": {"kind": "entropy", "l": lv, "estimator": "grassberger"}},
            "risk": {"records_at_risk": {"risk": high, "share": share}},
        },
    }
    src = api.assess(pol, db.url).to_dict()
    assert src["satisfied"][f"l[education]: entropy (grassberger) l >= {lv:g}"] is False
    assert src["satisfied"][f"risk.records_at_risk <= {share:g}"] is False
    out = api.anonymise(pol, db.url, publish_as="view")
    assert out.published is not None and out.published.ok
    released = db.sql('SELECT "age", "sex", "education" FROM "main"."adult_anon"')
    by: dict[tuple, Counter] = {}
    for a, s, e in released:
        by.setdefault((a, s), Counter())[e] += 1
    assert sum(sum(c.values()) for c in by.values()) <= len(rows)
    assert ref_grassberger_ok([list(c.values()) for c in by.values()], lv)
    n = sum(sum(c.values()) for c in by.values())
    assert sum(sum(c.values()) for c in by.values() if 1 / sum(c.values()) > high) / n <= share
