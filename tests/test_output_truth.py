"""Issue 34, items 2-5 and 7: output that tells the truth.

Each test fails on the code before the fix: the dry run's stdout mixed the summary into the SQL, a
perturbed QI was out of k without a word, unsupported URLs ended in tracebacks (or an empty SQLite
file), errors named a policy key the user never wrote, and the page and console printed ``k``,
seed numbers, ``2.834e+04`` and a 300-column profile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sqlanon.engines import normalise_url
from sqlanon.report import charts
from tests.conftest import ROOT, TestDB, with_patients
from tests.helpers import cli, cli_json, write_policy

POLICY = str(ROOT / "fixtures" / "patients.yaml")


def _policy(tmp_path: Path, **changes: Any) -> Path:
    pol = yaml.safe_load(Path(POLICY).read_text(encoding="utf-8"))
    for key, value in changes.items():
        if key == "columns":
            pol["columns"].update(value)
        else:
            pol[key] = {**pol.get(key, {}), **value} if isinstance(value, dict) else value
    return write_policy(tmp_path, pol, f"p{len(list(tmp_path.iterdir()))}.yaml")


# -- item 2: `anonymise --dry-run > release.sql` runs as it is -------------------------------------


@pytest.mark.parametrize("quiet", [False, True])
def test_dry_run_stdout_is_sql_the_engine_runs(db: TestDB, quiet: bool) -> None:
    """stdout is the SQL alone; piped into the engine it creates the release (9 rows: k = 3 with
    no suppression keeps all nine patients, seed 001's table)."""
    url = with_patients(db).url
    code, out, err = cli(*(["--quiet"] if quiet else []), "anonymise", POLICY, "--db", url, "--dry-run")
    assert code == 0, err
    # PostgreSQL: the definer's statements, then the view (what publishing runs: engines/definer.py).
    assert out.startswith("CREATE ") and 'CREATE VIEW "main"."patients_anon"' in out, out[:200]
    assert "chosen node" in err and "chosen node" not in out and "note:" not in out
    db.sql(out)
    assert db.sql('SELECT COUNT(*) FROM "main"."patients_anon"') == [(9,)]


def test_dry_run_secret_note_is_comments(duck_patients: TestDB, tmp_path: Path) -> None:
    """A release reading the secret relation says so in `--` lines before the SQL, nothing else."""
    pol = _policy(tmp_path, columns={"PatientName": {"role": "identifier", "action": "hash"}})
    code, out, err = cli("anonymise", str(pol), "--db", duck_patients.url, "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    first_sql = next(i for i, line in enumerate(lines) if not line.startswith("--"))
    assert first_sql > 0 and "sqlanon_secret" in "\n".join(lines[:first_sql])
    assert lines[first_sql].startswith("CREATE ") and "chosen node" in err


# -- item 3: a perturbed QI is named out of k ------------------------------------------------------


def test_perturbed_qi_is_said_to_be_out_of_k(duck_patients: TestDB, tmp_path: Path) -> None:
    pol = _policy(
        tmp_path,
        columns={"Age": {"role": "quasi", "perturb": {"method": "k-noise", "k": 3}}},
        publish={"as": "table"},
    )
    r = cli_json("anonymise", str(pol), "--db", duck_patients.url)
    assert r["k_over"] == ["Postcode"] and list(r["perturbed_qis"]) == ["Age"]
    assert "k-noise" in r["perturbed_qis"]["Age"]
    assert r["published"]["k_over"] == ["Postcode"] and list(r["published"]["perturbed_qis"]) == ["Age"]
    # Why it must be said: over every declared QI the published table has classes below k = 3.
    sizes = duck_patients.sql(
        'SELECT COUNT(*) FROM "main"."patients_anon" GROUP BY "Postcode", "Age" ORDER BY 1 LIMIT 1'
    )
    assert sizes[0][0] < 3
    code, out, err = cli("anonymise", str(pol), "--db", duck_patients.url, "--replace")
    assert code == 0, err
    assert "k is over Postcode only" in out and "Age by k-noise" in out
    page = tmp_path / "r.html"
    code, _, err = cli("report", str(pol), "--db", duck_patients.url, "--out", str(page), "--k", "2,3")
    assert code == 0, err
    html = page.read_text(encoding="utf-8")
    assert "not counted in k" in html and "perturbed (k-noise" in html


# -- item 4: unsupported URLs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("mysql://u:pw@127.0.0.1:1/db", None),
        ("mssql+pyodbc://u:pw@127.0.0.1:1/db", "--dialect tsql"),
        ("sqlite:///{tmp}/x.db", None),
        ("oracle://u@h/db", None),
    ],
)
def test_unsupported_url_is_one_line_exit_2_nothing_created(
    tmp_path: Path, url: str, extra: str | None
) -> None:
    url = url.format(tmp=tmp_path)
    for command in (("assess", POLICY), ("anonymise", POLICY), ("init", "--table", "main.t")):
        code, out, err = cli(*command, "--db", url)
        assert code == 2 and out == "", (command, out, err)
        assert err.count("\n") == 1 and err.startswith("error: --db:"), err
        assert "Traceback" not in err and "postgresql+psycopg://" in err and "duckdb:///" in err
        assert "pw" not in err
        if extra:
            assert extra in err
    assert not (tmp_path / "x.db").exists()


def test_postgres_scheme_is_read_as_psycopg(pg_patients: TestDB) -> None:
    assert normalise_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"
    url = "postgres://" + pg_patients.url.split("://", 1)[1]
    code, out, err = cli("assess", POLICY, "--db", url, "--json")
    assert code in (0, 1), err
    assert json.loads(out)["rows"] == 9


# -- item 5: errors that say more ------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["flash", "mondrian"])
def test_k_larger_than_the_table_is_named(duck_patients: TestDB, tmp_path: Path, algorithm: str) -> None:
    pol = _policy(tmp_path, privacy={"k": 50})
    code, _, err = cli(
        "anonymise", str(pol), "--db", duck_patients.url, "--dry-run", "--algorithm", algorithm
    )
    assert code == 2 and "k = 50 but the table has 9 rows" in err, err


def test_mondrian_refusal_is_a_whole_sentence(duck_patients: TestDB, tmp_path: Path) -> None:
    """A prosecutor risk of at most 5 %: even the whole table (9 records, 1/9) breaks it."""
    pol = _policy(tmp_path, privacy={"risk": {"prosecutor": 0.05}})
    code, _, err = cli(
        "anonymise", str(pol), "--db", duck_patients.url, "--dry-run", "--algorithm", "mondrian"
    )
    assert code == 2, err
    assert "no partition of it can; relax the requirements" in err, err


def test_column_typo_suggests_the_close_name(duck_patients: TestDB, tmp_path: Path) -> None:
    duck_patients.load("wage", ["age", "maritl"], [[30, "1. Never Married"], [40, "2. Married"]])
    pol = {"source": "main.wage", "columns": {"age": "quasi", "marital": "sensitive"}, "privacy": {"k": 1}}
    code, _, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", duck_patients.url)
    assert code == 2 and "did you mean 'maritl'?" in err, err


def test_hierarchy_option_error_names_the_option(duck_patients: TestDB) -> None:
    args = ("hierarchy", "--db", duck_patients.url, "--table", "main.patients", "--column", "Age")
    code, out, err = cli(*args, "--intervals", "5,7")
    assert code == 2 and out == ""
    assert err.startswith("error: --intervals:") and "policy key" not in err, err


# -- item 7: the report and the console ------------------------------------------------------------


def test_report_page_reads_as_people_read(duck_patients: TestDB, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    pol = _policy(tmp_path, privacy={"suppression": 1.0})  # Postcode kept: 6 records suppressed
    args = ("report", str(pol), "--db", duck_patients.url, "--out", str(page), "--k", "2,3")
    code, _, err = cli(*args, "--levels", "Postcode=0,Age=2")
    assert code in (0, 1), err
    html = page.read_text(encoding="utf-8")
    assert "<td><bdi>k &gt;= 3</bdi></td>" in html and "<bdi>k</bdi>" not in html
    assert "seed 0" not in html.lower() and "README" not in html
    assert "kept as it is (level 0 of" in html and "generalised to level 0" not in html


def test_one_number_format() -> None:
    from sqlanon.report.console import number

    assert [number(v) for v in (1020234, 28340.0, 15098.0, 0.384127, 1.5, None)] == [
        "1,020,234",
        "28,340",
        "15,098",
        "0.3841",
        "1.5",
        "-",
    ]


def test_histogram_bins_at_their_real_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """l = 1, 2 and 9: the gap from 2 to 9 is seven bins wide, not one."""
    figs: list[Any] = []
    monkeypatch.setattr(charts, "svg", lambda fig, name: figs.append(fig) or "<svg/>")
    hist = [[1, 1, 10], [2, 1, 10], [9, 1, 10]]
    charts.spread("d", "distinct", hist, hist, None, True)
    bars = sorted(figs[0].axes[0].patches, key=lambda b: b.get_x())
    source = [b.get_x() for b in bars][::2]  # source and release alternate within a bin
    assert source[2] - source[1] == pytest.approx(7 * (source[1] - source[0]))


def test_profile_of_two_algorithms_fits_100_columns(duck_patients: TestDB) -> None:
    code, out, err = cli("profile", POLICY, "--db", duck_patients.url, "--algorithm", "flash,mondrian")
    assert code == 0, err
    tables = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert tables and max(len(line) for line in tables) <= 100


def test_dbt_mondrian_line_is_whole(duck_patients: TestDB, tmp_path: Path) -> None:
    pol = _policy(tmp_path, search={"algorithm": "mondrian"})
    project = tmp_path / "proj"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: x\nversion: '1'\nprofile: x\n", encoding="utf-8")
    code, out, err = cli("dbt", str(pol), "--db", duck_patients.url, "--project", str(project))
    assert code == 0, err
    first = out.splitlines()[0]
    assert not first.endswith(" at") and "Mondrian" in first, first


def test_a_wiped_qi_is_named_with_the_alternatives(duck_patients: TestDB) -> None:
    """Issue 34 item 8: a QI generalised to '*' keeps nothing; the output says so and names what
    would keep more (another metric, Mondrian, a finer hierarchy)."""
    db = duck_patients
    top = cli_json("anonymise", POLICY, "--db", db.url, "--dry-run", "--levels", "Postcode=5,Age=2")
    assert top["wiped_qis"] == ["Postcode", "Age"]
    code, _, err = cli("anonymise", POLICY, "--db", db.url, "--dry-run", "--levels", "Postcode=5,Age=1")
    assert code == 0 and "note: Postcode generalised to '*'" in err and "--algorithm mondrian" in err
    low = cli_json("anonymise", POLICY, "--db", db.url, "--dry-run", "--levels", "Postcode=2,Age=1")
    assert low["wiped_qis"] == []
