"""Human output (issue 16): nodes with an example label of each level, one plain sentence under each
table (``--quiet`` drops them), piped output never wrapped, JSON untouched. The labels expected
are the seed-001 article's own (postcode 476**, the fixture policy's bands): the release's largest
class, ties broken by its labels (three classes of 3: 476**/30 to 40 first)."""

from __future__ import annotations

import datetime
import io
import json
import re
from pathlib import Path

import yaml
from rich.console import Console

from sqlanon.engines import session
from sqlanon.lattice import build_hierarchies
from sqlanon.policy import parse_policy
from sqlanon.report import print_evaluate, print_profile
from sqlanon.transform.examples import node_examples, release_labels
from tests.conftest import PATIENT_TYPES, ROOT, TestDB, patients_rows, with_patients
from tests.helpers import cli, cli_json, write_policy

POLICY = str(ROOT / "fixtures" / "patients.yaml")
NODE = "Postcode=2 (476**), Age=1 (30 to 40)"
#: The demo names the published release's most disclosive class (all three have Heart Disease).
DEMO_NODE = "Postcode=2 (476**), Age=1 (Under 30)"


def _rounded(v: object) -> object:
    if isinstance(v, float):
        return float(f"{v:.12g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def test_nodes_show_example_labels_and_sentences(db: TestDB) -> None:
    url = with_patients(db).url
    code, out, err = cli("evaluate", POLICY, "--db", url, "--levels", "Postcode=2,Age=1")
    assert code == 0, err
    assert f"node {NODE} on" in out
    assert "{'" not in out and "'}" not in out  # never a Python dict repr
    # The sentences under the tables, each on one line although far longer than 80 columns.
    lines = out.splitlines()
    explain = [ln for ln in lines if ln.startswith("What this release costs")]
    assert len(explain) == 1 and len(explain[0]) > 100
    assert any(ln.startswith("Each requirement of the policy") for ln in lines)
    assert any(ln.startswith("l: the fewest different values") for ln in lines)
    assert max(len(ln) for ln in lines) > 80  # nothing was wrapped at rich's default 80 columns
    base = [POLICY, "--db", url, "--levels", "Postcode=2,Age=1"]
    for argv in (["evaluate", *base, "--quiet"], ["evaluate", *base, "-q"], ["--quiet", "evaluate", *base]):
        code, quiet, err = cli(*argv)
        assert code == 0, err
        assert f"node {NODE} on" in quiet
        assert "What generalising" not in quiet and "Each requirement" not in quiet
        assert "l: the fewest" not in quiet
    # JSON is the documented object, the same with or without --quiet and with no example labels.
    _, j1, _ = cli("evaluate", POLICY, "--db", url, "--levels", "Postcode=2,Age=1", "--json")
    _, j2, _ = cli("--quiet", "evaluate", POLICY, "--db", url, "--levels", "Postcode=2,Age=1", "--json")
    # Floats to 12 significant digits: DuckDB's parallel sums may differ in the last bit between runs.
    assert _rounded(json.loads(j1)) == _rounded(json.loads(j2))
    assert json.loads(j1)["node"] == {"Postcode": 2, "Age": 1}
    assert "476**)" not in j1


def test_anonymise_profile_assess_and_demo(db: TestDB, tmp_path: Path) -> None:
    url = with_patients(db).url
    code, out, err = cli("anonymise", POLICY, "--db", url, "--as", "table")
    assert code == 0, err
    assert f"chosen node {NODE} (precision" in out
    code, out, err = cli("profile", POLICY, "--db", url, "--k", "2,3")
    assert code == 0, err
    # The largest class of each k's release (issue 32: not one unordered row of the source).
    assert f"k=2: {NODE}" in out and "One column per k" in out
    code, out, _ = cli("profile", POLICY, "--db", url, "--k", "2,3", "-q")
    assert "One column per k" not in out
    code, out, _ = cli("assess", POLICY, "--db", url)
    assert code == 1 and "(Postcode=47905, Age=43) n=1" in out and "{'" not in out
    if db.kind == "duckdb":
        code, out, err = cli("demo", "--quiet")
        assert code == 0, err
        assert f"chosen node {DEMO_NODE}; after: k = 3, l = 1" in out
        assert "homogeneity" not in out  # the explaining paragraphs are left out
        code, out, err = cli("demo")
        assert code == 0 and f"chose {DEMO_NODE}" in out and "homogeneity" in out


def test_examples_never_from_the_policy_nor_a_value() -> None:
    """Issue 32: a map's or a cut's first label may be a suppressed outlier's; examples come from
    a class of the release only, '*' at the top, and never a value (level 0)."""
    pol = parse_policy(
        {
            "source": "main.t",
            "columns": {
                "a": {"role": "quasi", "hierarchy": {"map": {"x": ["g1", "h"], "y": ["g2", "h"]}}},
                "b": {"role": "quasi", "hierarchy": {"interval": {"cuts": [[10, 20], [20]]}}},
                "c": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 3}},
                "d": {"role": "quasi", "hierarchy": {"map": {"x": ["u"]}, "null": ["unknown"]}},
            },
            "privacy": {"k": 2},
        }
    )
    hs = build_hierarchies(pol)
    got = node_examples(hs, {"a": 1, "b": 2, "c": 1, "d": 2})
    assert got == {"a": None, "b": None, "c": None, "d": "*"}
    # A class of the release gives the labels; level 0 stays unprinted even there.
    assert node_examples(hs, {"a": 1, "c": 0}, {"a": "g2", "c": "abc"}) == {"a": "g2", "c": None}
    assert node_examples(hs, {"a": 1}, None, {"a": {1: "g1"}}) == {"a": "g1"}


def _policy(tmp_path: Path, name: str = "policy.yaml", **privacy: object) -> str:
    pol = yaml.safe_load(Path(POLICY).read_text(encoding="utf-8"))
    pol["privacy"].update(privacy)
    return str(write_policy(tmp_path, pol, name))


def test_suppression_said_without_contradiction(db: TestDB, tmp_path: Path) -> None:
    """k = 2 with 12 % suppression (1 of 9 records) at Postcode=1, Age=1: classes 4767*/Under 30
    (Alice, Bob, Caroline), 4767*/30 to 40 (Harry, alone), 4790*/Over 40 (3), 4760*/30 to 40 (Geri,
    Ingrid). Before suppression k = 1; k >= 2 holds once Harry is suppressed, which the limit
    allows. Issue 16: `evaluate` printed "k = 1" beside "k ... holds: yes"."""
    url = with_patients(db).url
    policy = _policy(tmp_path, k=2, suppression=0.12)
    code, out, err = cli("evaluate", policy, "--db", url, "--levels", "Postcode=1,Age=1")
    assert code == 0, err
    assert "k = 1 (smallest class, before suppression); records in classes smaller than k=2: 1" in out
    assert re.search(r"│ k >= 2 +│ 1 +│ yes, after suppression +│", out)
    assert re.search(r"│ all requirements +│ 1 +│ yes, after suppression +│", out)
    assert not re.search(r"│ k +│", out)  # the bare JSON key is not a label for people
    assert "suppression limit 12.00% (1 records); records violating any requirement: 1" in out
    assert (
        "k = 1 before suppression; k >= 2 holds after suppressing the 1 record(s) in smaller "
        "classes (within the limit of 1)" in out
    )
    # JSON keeps its keys.
    r = cli_json("evaluate", policy, "--db", url, "--levels", "Postcode=1,Age=1")
    assert r["assess"]["satisfied"] == {"k": True, "all": True} and r["assess"]["violations"] == {"k": 1}
    # Published: measured after suppression (8 rows, k = 2) under the policy's limit, not 0.
    code, out, err = cli("anonymise", policy, "--db", url, "--levels", "Postcode=1,Age=1", "--as", "table")
    assert code == 0, err
    pub = out[out.index("Published") :]
    assert "rows 8, equivalence classes 3, k = 2 (smallest class);" in pub
    assert "policy requirements (after suppression)" in pub and "yes, after suppression" not in pub
    assert (
        "suppression limit 12.00% (1 records); records suppressed: 1; records violating any "
        "requirement: 0" in pub
    )
    assert "before suppression" not in pub


def test_published_shows_the_policys_suppression_limit(db: TestDB, tmp_path: Path) -> None:
    """Issue 16: after publishing a 2 % policy the summary said "suppression limit 0.00%". 2 % of 9
    records is 0 records (floor(0.18)); 12 % is 1, which the release at Postcode=1, Age=1 uses."""
    url = with_patients(db).url
    policy = _policy(tmp_path, k=3, suppression=0.02)
    r = cli_json("anonymise", policy, "--db", url, "--as", "table")
    assert r["node"] == {"Postcode": 2, "Age": 1}
    s = r["published"]["suppression"]
    assert (s["limit"], s["allowed_records"], s["records_violating_any"]) == (0.02, 0, 0)
    assert r["published"]["suppressed_records"] == 0
    code, out, err = cli("anonymise", policy, "--db", url, "--as", "table", "--replace")
    assert code == 0, err
    assert "suppression limit 2.00% (0 records); records suppressed: 0;" in out
    r = cli_json(
        "anonymise", _policy(tmp_path, "p12.yaml", k=2, suppression=0.12), "--db", url,
        "--levels", "Postcode=1,Age=1", "--as", "table", "--replace",
    )  # fmt: skip
    s = r["published"]["suppression"]
    assert (s["limit"], s["allowed_records"], r["published"]["suppressed_records"]) == (0.12, 1, 1)
    assert r["published"]["rows"] == 8 and r["published"]["k"] == 2


def test_two_sensitive_attributes_each_requirement_once(db: TestDB, tmp_path: Path) -> None:
    """Lower-case sensitive attributes: ``l[disease]`` was read as rich markup and vanished, so
    the rows of `disease` and `patientname` printed identically. Each requirement once, named.
    At the source every class is one record (nine ages): all nine break k >= 2, l >= 2 (one
    value per class) and the prosecutor bound (1/1 > 0.5)."""
    cols, rows = patients_rows()
    db.load("people", [c.lower() for c in cols], rows, PATIENT_TYPES)
    policy = {
        "source": f"{db.schema}.people",
        "columns": {
            "patientid": {"role": "identifier"},
            "postcode": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
            "age": {"role": "quasi", "hierarchy": {"interval": {"cuts": [30, 41]}}},
            "disease": {"role": "sensitive"},
            "patientname": {"role": "sensitive"},
        },
        "privacy": {
            "k": 2,
            "l": {"disease": 2, "patientname": 2},
            "t": {"disease": 0.6, "patientname": 0.9},
            "risk": {"prosecutor": 0.5},
        },
    }
    code, out, err = cli("assess", str(write_policy(tmp_path, policy)), "--db", db.url)
    assert code == 1, err
    table = out[out.index("policy requirements") :]
    labels = re.findall(r"^│ (.+?) +│ +(\S+) +│", table, flags=re.M)
    assert labels == [
        ("k >= 2", "9"),
        ("l[disease]: distinct l >= 2", "9"),
        ("l[patientname]: distinct l >= 2", "9"),
        ("t[disease]: emd-equal <= 0.6", labels[3][1]),
        ("t[patientname]: emd-equal <= 0.9", labels[4][1]),
        ("risk.prosecutor <= 0.5", "9"),
        ("all requirements", "9"),
    ]
    assert len({lbl for lbl, _ in labels}) == len(labels)
    # The sensitive attributes' table names both columns.
    assert re.search(r"┃ measure +┃ disease +┃ patientname +┃", out)


def test_example_labels_read_from_the_release(db: TestDB, tmp_path: Path) -> None:
    """Masks, interval widths and dates have no label without a value: the labels of the
    release's largest class are read (templates/examples/labels.sql.j2). Postcode=3 is 47*** and
    Age in widths of 100 is [0-100) for every patient, so the example is the same on every engine."""
    url = with_patients(db).url
    code, out, err = cli("anonymise", POLICY, "--db", url, "--dry-run", "--levels", "Postcode=3,Age=2")
    assert code == 0, err
    assert "chosen node Postcode=3 (47***), Age=2 (*) (precision" in err
    pol = yaml.safe_load(Path(POLICY).read_text(encoding="utf-8"))
    pol["columns"]["Age"] = {"role": "quasi", "hierarchy": {"interval": {"widths": [100, 200]}}}
    widths = str(write_policy(tmp_path, pol))
    code, out, err = cli("anonymise", widths, "--db", url, "--dry-run", "--levels", "Postcode=3,Age=1")
    assert code == 0, err
    assert "chosen node Postcode=3 (47***), Age=1 ([0-100)) (precision" in err
    # JSON is unchanged: no labels.
    argv = ("anonymise", widths, "--db", url, "--dry-run", "--levels", "Postcode=3,Age=1", "--json")
    code, out, _ = cli(*argv)
    assert json.loads(out)["node"] == {"Postcode": 3, "Age": 1} and "[0-100)" not in out
    # Dates: the NULL row is no example; the larger month (2 rows) wins over the earlier one.
    dates = [None, datetime.date(2023, 1, 2), datetime.date(2024, 5, 17), datetime.date(2024, 5, 3)]
    db.load("visits", ["id", "d"], [[i, d] for i, d in enumerate(dates)], ["INTEGER", "DATE"])
    pol = parse_policy(
        {
            "source": f"{db.schema}.visits",
            "columns": {"d": {"role": "quasi", "hierarchy": {"date": ["month", "year"]}}},
        }
    )
    hs = build_hierarchies(pol)
    with session(db.url) as be:
        got = release_labels(be, pol, hs, {"d": 1}, coarser=True)
        assert release_labels(be, pol, hs, {"d": 2}) == {"d": {2: "2024", 3: "*"}}
    assert got == {"d": {1: "2024-05", 2: "2024", 3: "*"}}
    assert node_examples(hs, {"d": 1}, None, got) == {"d": "2024-05"}


def test_metric_names_never_break_on_a_narrow_terminal(duck_patients: TestDB) -> None:
    """`profile` folded `suppressed` to `suppresse/d` at 60 columns: metric names stay whole."""
    url = duck_patients.url
    r = cli_json("profile", POLICY, "--db", url, "--k", "2,3,5")
    buf = io.StringIO()
    print_profile(r, Console(file=buf, width=60, force_terminal=False), quiet=True)
    text = buf.getvalue()
    for name in ("suppressed", "private_mi_loss", "non_uniform_entropy"):
        assert re.search(rf"│ {name} +│", text), name
    assert not re.search(r"^│ +│", text, flags=re.M)  # no row continued on a second line
    e = cli_json("evaluate", POLICY, "--db", url, "--levels", "Postcode=2,Age=1")
    buf = io.StringIO()
    print_evaluate(e, Console(file=buf, width=60), quiet=True)
    assert re.search(r"│ non_uniform_entropy +│", buf.getvalue())
