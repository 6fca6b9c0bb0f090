"""Seed 001 (the SQL Server k-anonymity article): the 9-row patient table before and after its SQL.

The generalisation is the article's own SELECT (LEFT(Postcode,3)+'**', CASE age bands), run on the
engine itself; the expected figures are the article's GROUP BY outputs (three classes of 3, the
under-30 class homogeneous) and hand computations written out below.
"""

from __future__ import annotations

import math

import pytest

from tests.conftest import ENGINES_SPARK, PATIENT_TYPES, patients_rows
from tests.helpers import cli, cli_json, write_policy

#: The tests that also run on Spark (the same data, the same expected numbers; a Spark assess costs
#: ~10 s on two shared cores, so the population tests run there through tests/test_spark.py).
ON_SPARK = pytest.mark.parametrize("db", ENGINES_SPARK, indirect=True)

SEED_SQL = """
CREATE TABLE "main"."anon" AS
SELECT
  '*' AS "PatientName",
  LEFT("Postcode", 3) || '**' AS "Postcode",
  CASE WHEN "Age" < 30 THEN 'Under 30'
       WHEN "Age" >= 30 AND "Age" <= 40 THEN '30 to 40'
       WHEN "Age" > 40 THEN 'Over 40' END AS "AgeGroup",
  "Disease"
FROM "main"."patients"
"""


def _policy(source: str, qis: list[str], **privacy: object) -> dict:
    cols: dict[str, dict] = {q: {"role": "quasi"} for q in qis}
    cols["Disease"] = {"role": "sensitive"}
    return {"source": source, "columns": cols, "privacy": privacy}


@pytest.fixture
def patients(db):  # noqa: ANN001
    cols, rows = patients_rows()
    db.load("patients", cols, rows, PATIENT_TYPES)
    db.sql(SEED_SQL)
    return db


@ON_SPARK
def test_raw_table_is_1_anonymous(patients, tmp_path):  # noqa: ANN001
    pol = write_policy(tmp_path, _policy("main.patients", ["Postcode", "Age"], k=3))
    a = cli_json("assess", str(pol), "--db", patients.url)
    assert a["rows"] == 9
    assert a["k"] == 1
    assert a["classes"] == 9
    assert a["class_sizes"] == {"1": 9}
    assert a["records_below_k"] == 9
    assert a["risk"]["prosecutor_max"] == 1.0
    assert a["satisfied"] == {"k": False, "all": False}


@ON_SPARK
def test_after_the_articles_sql_is_3_anonymous_with_a_homogeneous_class(patients, tmp_path):  # noqa: ANN001
    policy = _policy(
        "main.anon",
        ["PatientName", "Postcode", "AgeGroup"],
        k=3,
        l={"Disease": {"kind": "distinct", "l": 2}},
        t={"Disease": {"measure": "emd-equal", "t": 0.5}},
    )
    a = cli_json("assess", str(write_policy(tmp_path, policy)), "--db", patients.url)
    # The article: "* | 476** | 30 to 40 | 3", "* | 476** | Under 30 | 3", "* | 479** | Over 40 | 3"
    assert a["k"] == 3 and a["classes"] == 3 and a["class_sizes"] == {"3": 3}
    assert a["records_below_k"] == 0
    # Homogeneity attack: everyone under 30 has heart disease -> distinct l = 1
    assert a["l_diversity"]["Disease"]["distinct"] == 1
    assert a["l_diversity"]["Disease"]["entropy"] == pytest.approx(1.0)
    # Hand computation, whole table p = (HD 5/9, Flu 1/9, Cancer 3/9):
    #   under 30 (HD 1): 1/2 (4/9 + 1/9 + 3/9) = 4/9;  30-40 (HD 1/3, C 2/3): 1/2 (2/9+1/9+3/9) = 3/9;
    #   over 40 (1/3 each): 1/2 (2/9 + 2/9 + 0) = 2/9.  Max = 4/9.
    assert a["t_closeness"]["Disease"]["emd_equal"] == pytest.approx(4 / 9)
    # KL of the under-30 class: log2(9/5)
    assert a["t_closeness"]["Disease"]["kl"] == pytest.approx(math.log2(9 / 5))
    assert a["risk"]["prosecutor_max"] == pytest.approx(1 / 3)
    assert a["satisfied"]["k"] is True
    assert a["satisfied"]["l[Disease]: distinct l >= 2"] is False
    assert a["violations"]["l[Disease]: distinct l >= 2"] == 3
    assert a["satisfied"]["t[Disease]: emd-equal <= 0.5"] is True
    top = a["information"]["Disease"]["top_i2"][0]
    assert top["class"]["AgeGroup"] == "Under 30" and top["size"] == 3


@ON_SPARK
def test_numbers_match_the_brute_force_reference(patients, tmp_path):  # noqa: ANN001
    from tests import reference as ref

    cols, rows = patients_rows()
    dict_rows = [dict(zip(cols, r, strict=True)) for r in rows]
    qis = ["Postcode", "Age"]
    policy = _policy("main.patients", qis, k=2, l={"Disease": {"kind": "recursive", "c": 3, "l": 2}})
    a = cli_json("assess", str(write_policy(tmp_path, policy)), "--db", patients.url)
    assert a["l_diversity"]["Disease"]["distinct"] == ref.distinct_l(dict_rows, qis, "Disease")
    assert a["t_closeness"]["Disease"]["emd_equal"] == pytest.approx(ref.emd_equal(dict_rows, qis, "Disease"))
    assert a["t_closeness"]["Disease"]["emd_ordered"] == pytest.approx(
        ref.emd_ordered(dict_rows, qis, "Disease")
    )
    assert a["information"]["Disease"]["entropy"] == pytest.approx(ref.entropy_w(dict_rows, "Disease"))
    assert a["information"]["Disease"]["mutual_information"] == pytest.approx(
        ref.mutual_information(dict_rows, qis, "Disease")
    )


def test_assess_writes_nothing(patients, tmp_path):  # noqa: ANN001
    before = patients.relations()
    pol = write_policy(tmp_path, _policy("main.patients", ["Postcode", "Age"], k=3))
    code, _, _ = cli("assess", str(pol), "--db", patients.url)
    assert code == 1  # k = 3 does not hold: exit status 1, not an error
    assert patients.relations() == before
    assert patients.sql('SELECT COUNT(*) FROM "main"."patients"') == [(9,)]


def test_population_risks_match_the_reference(patients, tmp_path):  # noqa: ANN001
    """Journalist and marketer risk against a population that contains the sample (seed 000 5.2-5.4)."""
    from tests import reference as ref

    cols, rows = patients_rows()
    extra = [
        [100 + i, f"P{i}", pc, age, "Flu"]
        for i, (pc, age) in enumerate(
            [("47678", 29), ("47678", 29), ("47905", 43), ("47606", 30), ("47673", 36), ("47673", 36)]
        )
    ]
    patients.load("census", cols, rows + extra, PATIENT_TYPES)
    policy = _policy("main.patients", ["Postcode", "Age"], k=1)
    policy["population"] = "main.census"
    policy["privacy"]["risk"] = {"prosecutor": 1.0, "marketer": 0.9, "journalist": 0.6}
    a = cli_json("assess", str(write_policy(tmp_path, policy)), "--db", patients.url)
    sample = [dict(zip(cols, r, strict=True)) for r in rows]
    population = sample + [dict(zip(cols, r, strict=True)) for r in extra]
    qis = ["Postcode", "Age"]
    assert a["risk"]["journalist"] == pytest.approx(ref.journalist(sample, qis, population))
    assert a["risk"]["marketer"] == pytest.approx(ref.marketer(sample, qis, population))
    assert a["risk"]["prosecutor_max"] >= a["risk"]["journalist"] >= a["risk"]["marketer"]
    assert a["satisfied"]["risk.journalist <= 0.6"] is False  # 1/min F = 1
    assert a["satisfied"]["risk.marketer <= 0.9"] is True


def test_population_must_contain_the_sample(patients, tmp_path):  # noqa: ANN001
    cols, rows = patients_rows()
    patients.load("census", cols, rows[:5], PATIENT_TYPES)
    policy = _policy("main.patients", ["Postcode", "Age"], k=1)
    policy["population"] = "main.census"
    code, _, err = cli("assess", str(write_policy(tmp_path, policy)), "--db", patients.url)
    assert code == 2 and "population" in err and "must contain" in err
