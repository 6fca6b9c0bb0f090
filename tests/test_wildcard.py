"""ARX 3.9.2's RiskModelSampleWildcard as ``risk.wildcard`` (issue 35): a suppressed cell ('*')
matches any value; a record's risk is 1 / (records matching it cell by cell, itself included).

Oracles, none of them sqlanon's code:
* ARX's own unit test (``org.deidentifier.arx.test.TestWildcardMatching``): its three tables and
  the per-record match counts its authors worked out by hand;
* a brute-force reference written here from the definition (every pair of records compared);
* ARX 3.9.2 itself, where javac is present: a driver compiled into tmp_path calls
  ``getSampleBasedRiskSummaryWildcard(0.2, "*")`` on each table (all columns quasi-identifying)
  and prints the average, highest and lowest risk and the records at risk.
sqlanon's figures are measured on DuckDB and PostgreSQL.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sqlanon import api
from sqlanon.measure import wildcard
from tests.conftest import ROOT, TestDB
from tests.helpers import arx_jars, once

RISK = 0.2  # records_at_risk's risk: ARX's size threshold 5
REL = 1e-12
S = "*"

# ARX's TestWildcardMatching: tables and the expected match count of each record (its authors').
ARX_TABLES: list[tuple[list[str], list[list[str]], list[int]]] = [
    (
        ["sex", "zip"],
        [["M", "4711"]] * 3 + [[S, "4711"]] * 2 + [["F", "4712"], ["F", S], ["M", S]],
        [6, 6, 6, 7, 7, 2, 4, 6],
    ),
    (
        ["age", "sex", "region"],
        [[S, "F", "North"], ["68", "F", "North"], ["68", S, "North"]]
        + [[S, S, "North"]] * 3
        + [["68", "F", S], ["68", S, "South"], ["68", "F", "South"], ["68", "F", "South"]],
        [7, 7, 7, 7, 7, 7, 10, 4, 4, 4],
    ),
    (
        ["weight", "icd"],
        [["73", "C18.7"]] * 2
        + [[S, "C18.7"]] * 2
        + [[S, "C18.2"]]
        + [["67", "C18.2"]] * 2
        + [["67", "C18.7"]] * 3,
        [4, 4, 7, 7, 3, 3, 3, 5, 5, 5],
    ),
]


def _random_table(seed: int, n: int = 400) -> tuple[list[str], list[list[str]]]:
    """Three QIs of 2-5 values, each cell '*' with probability 0.15 (rows all '*' included)."""
    rng = random.Random(seed)
    doms = [["a", "b"], ["x", "y", "z"], ["1", "2", "3", "4", "5"]]
    rows = [[S if rng.random() < 0.15 else rng.choice(d) for d in doms] for _ in range(n)]
    return ["p", "q", "r"], rows


# ARX's tables, two random ones (the first has a record '*' in every QI), one of nothing but '*'.
TABLES = [(c, r) for c, r, _ in ARX_TABLES] + [
    _random_table(1),
    _random_table(2, 60),
    (["p", "q"], [[S, S]] * 3),
]


def size_threshold(risk: float) -> int:
    """ARX's ParameterTranslation.getSizeThreshold, from its source: floor(1/R), plus one where
    that moves the risk by >= 1 % of R."""
    f = math.floor(1 / risk)
    return f + 1 if 1 / f - risk >= 0.01 * risk else f


def ref_counts(rows: list[list[str]]) -> list[int]:
    """Each record's matches, by comparing it with every record cell by cell."""
    return [sum(all(a == b or S in (a, b) for a, b in zip(r, o, strict=True)) for o in rows) for r in rows]


def ref_figures(rows: list[list[str]]) -> dict[str, float]:
    """ARX's figures over the records not '*' in every QI (ARX's DataHandleInput.isOutlier: those
    are suppressed records, out of the matches and the count); 0 where none is left."""
    rows = [r for r in rows if any(c != S for c in r)]
    if not rows:
        return dict.fromkeys(("average", "highest", "lowest", "records_at_risk"), 0.0)
    m = ref_counts(rows)
    n = len(rows)
    return {
        "average": sum(1 / c for c in m) / n,
        "highest": 1 / min(m),
        "lowest": 1 / max(m),
        "records_at_risk": sum(c < size_threshold(RISK) for c in m) / n,
    }


def _assess(db: TestDB, cols: list[str], rows: list[list[str]], name: str = "t") -> dict[str, Any]:
    db.load(name, cols, rows, types=["VARCHAR"] * len(cols))
    pol = {
        "source": f"main.{name}",
        "columns": {c: "quasi" for c in cols},
        "privacy": {"risk": {"records_at_risk": {"risk": RISK, "share": 1.0}}},
    }
    return api.assess(pol, db.url).to_dict()["risk"]


def test_reference_matches_arx_unit_test() -> None:
    """The reference reproduces the match counts ARX's authors wrote down for their three tables."""
    for _, rows, want in ARX_TABLES:
        assert ref_counts(rows) == want


@pytest.mark.parametrize("i", range(len(TABLES)))
def test_wildcard_figures_match_reference(db: TestDB, i: int) -> None:
    check_figures(db, i)


def check_figures(db: TestDB, i: int, arx: list[dict[str, float]] | None = None) -> None:
    """One assess of TABLES[i]: the reference's figures, and ARX's where given (tests/test_spark.py
    checks both on Spark with one assess per table)."""
    cols, rows = TABLES[i]
    got = _assess(db, cols, rows)["wildcard"]
    if arx is not None:
        for key, v in arx[i].items():
            assert math.isclose(got[key], v, rel_tol=1e-9, abs_tol=1e-12), (i, key, got[key], v)
    want = ref_figures(rows)
    for key, v in want.items():
        assert math.isclose(got[key], v, rel_tol=REL), (i, key, got[key], v)
    assert got["records_at_risk_size"] == size_threshold(RISK) == 5
    assert got["wildcard_classes"] == len({tuple(r) for r in rows if S in r})


def test_without_wildcards_equals_prosecutor(db: TestDB) -> None:
    """No '*': the matches are the classes, so ARX's figures are the ordinary prosecutor ones."""
    rows = [["a", "x"]] * 3 + [["b", "x"]] * 5 + [["b", "y"]]
    risk = _assess(db, ["p", "q"], rows)
    w = risk["wildcard"]
    assert w["wildcard_classes"] == 0
    assert math.isclose(w["average"], 3 / 9) and w["highest"] == 1.0 and w["lowest"] == 1 / 5
    assert math.isclose(w["average"], risk["prosecutor_avg"])


def test_bound_skips_with_a_note(db: TestDB, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the classes x wildcard-classes bound the join is not run; the figure says why."""
    monkeypatch.setattr(wildcard, "MAX_WILDCARD_ROWS", 3)
    cols, rows, _ = ARX_TABLES[0]
    w = _assess(db, cols, rows)["wildcard"]
    assert "average" not in w and "exceed 3 rows" in w["skipped"] and w["wildcard_classes"] == 3


DRIVER = r"""
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.*;
import org.deidentifier.arx.*;
import org.deidentifier.arx.risk.RiskModelSampleWildcard;

public class ArxWildcard {
    public static void main(String[] args) throws Exception {
        double threshold = Double.parseDouble(args[0]);
        for (int f = 1; f < args.length; f++) {
            List<String[]> rows = new ArrayList<>();
            for (String line : Files.readAllLines(Paths.get(args[f]), StandardCharsets.UTF_8)) {
                if (!line.isEmpty()) rows.add(line.split(",", -1));
            }
            Data data = Data.create(rows);
            for (String c : rows.get(0)) {
                data.getDefinition().setAttributeType(c, AttributeType.QUASI_IDENTIFYING_ATTRIBUTE);
            }
            RiskModelSampleWildcard m =
                data.getHandle().getRiskEstimator().getSampleBasedRiskSummaryWildcard(threshold, "*");
            System.out.println("{\"average\": " + m.getAverageRisk()
                + ", \"highest\": " + m.getHighestRisk() + ", \"lowest\": " + m.getLowestRisk()
                + ", \"records_at_risk\": " + m.getRecordsAtRisk() + "}");
        }
    }
}
"""


def arx_wildcard(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, float]]:
    """ARX's figures of each of TABLES, computed once per process (DuckDB, PostgreSQL, Spark)."""
    return once("wildcard", lambda: _arx(tmp_path_factory))


@pytest.fixture(scope="module")
def arx(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, float]]:
    return arx_wildcard(tmp_path_factory)


def _arx(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, float]]:
    arx_cp = ":".join(str(j) for j in arx_jars())
    tmp: Path = tmp_path_factory.mktemp("arxwild")
    (tmp / "ArxWildcard.java").write_text(DRIVER, encoding="utf-8")
    files = []
    for i, (cols, rows) in enumerate(TABLES):
        p = tmp / f"t{i}.csv"
        p.write_text("\n".join(",".join(r) for r in [cols, *rows]) + "\n", encoding="utf-8")
        files.append(str(p))
    cp = f"{arx_cp}:{ROOT / 'fixtures' / 'arx'}/*"  # newtonraphson: RiskEstimateBuilder needs it
    subprocess.run(
        ["javac", "-cp", cp, "-d", str(tmp), str(tmp / "ArxWildcard.java")], check=True, timeout=60
    )
    out = subprocess.run(
        ["java", "-cp", f"{tmp}:{cp}", "ArxWildcard", repr(RISK), *files],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("i", range(len(TABLES)))
def test_wildcard_figures_match_arx(db: TestDB, arx: list[dict[str, float]], i: int) -> None:
    cols, rows = TABLES[i]
    got = _assess(db, cols, rows)["wildcard"]
    for key, v in arx[i].items():
        assert math.isclose(got[key], v, rel_tol=1e-9, abs_tol=1e-12), (i, key, got[key], v)
