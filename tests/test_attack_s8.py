"""An attacker's review of what readers and operators receive (task A, session 8): the report page,
the dbt project sqlanon writes, printed SQL, JSON and the console, with hostile source values and
readers. Each test failed on the code before its fix.

The data are those of tests/test_readers_pg.py: 196 regular patients and four unique outliers the
release suppresses, whose postcodes and diseases (SENTINELS) occur in no released row; the
postcode hierarchy is a map written in the policy, so anything that lists the map's raw values
names the outliers' postcodes. SafePub's table is tests/test_safepub.py's."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

import sqlanon
from sqlanon.safepub import DPRequirement
from tests.conftest import TEST_PERTURB_KEY, TestDB
from tests.helpers import cli, cli_json, dbt_build, dbt_runner, write_policy
from tests.test_readers_pg import _as, _leaky_count, _no_sentinel, _policy, _rows, clinic  # noqa: F401 - a fixture
from tests.test_safepub import _dp_policy as dp_policy
from tests.test_safepub import _rows as safepub_rows
from tests.test_safepub import _u as safepub_u
from tests.test_safepub import table  # noqa: F401 - a fixture

COLUMNS, TYPES = ["id", "age", "zip", "disease"], ["INTEGER", "INTEGER", "VARCHAR", "VARCHAR"]


def _load(db: TestDB) -> str:
    db.load("patients", COLUMNS, _rows(), TYPES)
    return f"{db.schema}.patients"


def test_the_report_names_no_suppressed_value(db: TestDB, tmp_path: Path) -> None:
    """The page (and its JSON) folded the release's SQL in, and a map hierarchy's SQL is a CASE
    listing every raw value it maps: the four suppressed outliers' postcodes were on the page
    (``WHEN '99901' THEN '999**'``), with the labels of their suppressed classes. The page and its
    data now leave the SQL out (``sqlanon compile`` prints it for the operator)."""
    pol = _policy(source=_load(db))
    pol["target"] = f"{db.schema}.patients_anon"
    path = write_policy(tmp_path, pol)
    out = tmp_path / "r.html"
    args = ["--levels", "age=1,zip=1", "--out", str(out), "--json", "--k", "5"]
    code, text, err = cli("report", str(path), "--db", db.url, *args)
    assert code == 0, err
    _no_sentinel(out.read_text(encoding="utf-8"))
    _no_sentinel(text + err)
    for label in ("555**", "999**"):  # the suppressed classes' labels
        assert label not in out.read_text(encoding="utf-8") + text, label


def _project(root: Path) -> Path:
    project = root / "project"
    (project / "models").mkdir(parents=True)
    conf = {"name": "s8", "version": "1.0.0", "config-version": 2, "profile": "sqlanon_example"}
    (project / "dbt_project.yml").write_text(yaml.safe_dump(conf), encoding="utf-8")
    return project


def test_a_dbt_model_on_postgres_shows_a_reader_no_suppressed_row(
    clinic: tuple[TestDB, str],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """``sqlanon dbt`` on PostgreSQL wrote ``materialized='view'``: a plain view of the release's
    SELECT, none of the hardening of a view sqlanon publishes (docs/security.md). A reader granted
    SELECT on the model read the map's raw values in ``pg_views`` (readable by every role), and a
    leaky function in their WHERE ran on every row before the suppression, the outliers' too. On
    PostgreSQL the model is now a table (:func:`sqlanon.dbt.project.materialization`)."""
    db, role = clinic
    runner = dbt_runner()
    project = _project(tmp_path)
    written = sqlanon.dbt_project(_policy(), db.url, project=project, levels={"age": 1, "zip": 1})
    assert written["suppressed_records"] == 4
    results, ok = dbt_build(runner, db, project, tmp_path)
    assert ok, {k: str(r.message) for k, r in results.items()}
    model = '"analytics"."patients_anon"'
    db.sql(f"GRANT USAGE ON SCHEMA analytics TO {role}")
    db.sql(f"GRANT SELECT ON {model} TO {role}")
    with _as(db, role) as con:
        assert len(con.execute(f"SELECT * FROM {model}").fetchall()) == 196
        defs = con.execute("SELECT string_agg(definition, ' ') FROM pg_views WHERE schemaname = 'analytics'")
        viewdefs = str(defs.fetchone()[0])
        n, seen = _leaky_count(con, role, model)
    assert n == (196,)
    _no_sentinel("\n".join(seen))
    _no_sentinel(viewdefs)


def _sample_size() -> int:
    """The SafePub sample of tests/test_safepub.py's table under the tests' key, from the draw's
    definition (a row is sampled where HMAC-SHA-256(key, 'safepub|<id>') gives u < beta)."""
    beta = DPRequirement(epsilon=2.0, delta=1e-3, search_epsilon=0.5, steps=3).beta
    return sum(1 for i, *_ in safepub_rows() if safepub_u(TEST_PERTURB_KEY, f"safepub|{i}") < beta)


def test_a_safepub_release_states_no_count_of_its_sample(
    table: TestDB,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """SafePub's guarantee covers the published rows, not the sample they were drawn from: the
    sample's size, and the records suppressed from it (its size less the published rows), are
    figures of the source it does not cover (tests/test_safepub.py asserts the DP object holds
    neither). ``anonymise`` still printed both, as ``rows`` and ``suppressed_records`` (``chosen
    node ...; suppressed records: 21 of 1544``, ``suppression limit 100.00% (1544 records)``), and
    the same of its dry run."""
    n_sample = _sample_size()
    path = dp_policy(tmp_path, "main.t_dp")
    code, text, err = cli("anonymise", str(path), "--db", table.url, "--as", "table")
    assert code == 0, err
    published = table.sql("SELECT COUNT(*) FROM main.t_dp")[0][0]
    assert 0 < published < n_sample  # the guard: some sampled records were suppressed
    for shown in (f"of {n_sample}", f"({n_sample} records)", f": {n_sample - published}"):
        assert shown not in text + err, shown
    for args in (["--as", "table", "--replace"], ["--dry-run"]):
        out = cli_json("anonymise", str(path), "--db", table.url, "--json", *args)
        pub = out.get("published") or {}
        figures = [out.get("rows"), out.get("suppressed_records"), pub.get("suppressed_records")]
        figures.append((pub.get("suppression") or {}).get("allowed_records"))
        assert not {n_sample, n_sample - published} & set(figures), (args, figures)
    # Re-verified in a local DuckDB, the rows copied were the sample's distinct QI rows (9 here).
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**doc, "search": {"where": "local"}}), encoding="utf-8")
    out = cli_json("anonymise", str(path), "--db", table.url, "--json", "--as", "table", "--replace")
    assert (out.get("verified_in") or {}).get("rows_transferred") in (None, 0), out.get("verified_in")


def test_a_safepub_report_is_refused_in_one_line(
    table: TestDB,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """``report`` drew a SafePub policy's page from the whole source: *after* was the source's
    release at the chosen node (1972 rows, not the ~1523 of the sample published), *before* and
    the profile the source's, none covered by the guarantee, beside an epsilon that claimed it."""
    path = dp_policy(tmp_path, "main.t_dp")
    out = tmp_path / "r.html"
    code, text, err = cli("report", str(path), "--db", table.url, "--out", str(out), "--k", "2")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "differential_privacy" in err, err
    assert not out.exists() and not list(tmp_path.glob("*.html"))


#: A value an attacker inserts into the source: cursor up and erase the line (hiding what sqlanon
#: printed above), set the terminal's title, an 8-bit CSI, and a line break that forges a line.
EVIL = "\x1b[1A\x1b[2K\x1b]0;PWNED\x1b\\\x9b2J\nall requirements hold FORGED"


def test_the_console_prints_no_control_character_of_the_data(db: TestDB, tmp_path: Path) -> None:
    """``assess`` and ``anonymise`` print the most disclosive classes (a QI at level 0 is the
    source's value) through rich, which passes ESC through: the value above reached the operator's
    terminal as it was, erasing a line of the output and starting a forged one."""
    rows = [[i, f"{EVIL}{i % 3}", f"s{i % 2}{EVIL}"] for i in range(30)]
    db.load("t", ["id", "q", "s"], rows, ["INTEGER", "VARCHAR", "VARCHAR"])
    pol = {
        "source": f"{db.schema}.t",
        "target": f"{db.schema}.t_anon",
        "columns": {"id": "insensitive", "q": "quasi", "s": "sensitive"},
        "privacy": {"k": 2, "l": {"s": 2}},
    }
    path = write_policy(tmp_path, pol)
    for args in (["assess"], ["anonymise", "--as", "table"]):
        code, out, err = cli(args[0], str(path), "--db", db.url, *args[1:])
        assert code == 0, err
        text = out + err
        assert "PWNED" in text  # the guard: the values are printed (escaped)
        assert not set(text) & {"\x1b", "\x9b"}, args
        assert not any(line.startswith("all requirements hold FORGED") for line in text.splitlines()), args


def _metrics_section(html: str) -> str:
    return html[html.index('<section id="metrics">') : html.index('<section id="tradeoff">')]


def test_the_reports_metrics_move_with_no_suppressed_record(db: TestDB, tmp_path: Path) -> None:
    """Two sources that differ only in a record the release suppresses (the 97-year-old with
    Anthrax is 150 with Flu in the second) give the same published rows; the page's "Utility of
    the release" and the chosen node's optimum must then be the same too. They were not: NCP
    divides by the range of the source's ages (0.2881 against 0.2792), multiple use and the
    private mutual informations count the suppressed disease."""
    rows_a = _rows()
    rows_b = [*rows_a[:-1], [rows_a[-1][0], 150, rows_a[-1][2], "Flu"]]
    pages, data = [], []
    for name, rows in (("pa", rows_a), ("pb", rows_b)):
        db.load(name, COLUMNS, rows, TYPES)
        pol = {**_policy(source=f"{db.schema}.{name}"), "target": f"{db.schema}.{name}_anon"}
        path = write_policy(tmp_path, pol, name=f"{name}.yaml")
        out = tmp_path / f"{name}.html"
        args = ["--levels", "age=1,zip=1", "--out", str(out), "--json", "--k", "5"]
        code, text, err = cli("report", str(path), "--db", db.url, *args)
        assert code == 0, err
        pages.append(_metrics_section(out.read_text(encoding="utf-8")))
        data.append(json.loads(text))
    a, b = data
    assert a["after"]["class_sizes"] == b["after"]["class_sizes"] and a["after"]["rows"] == 196
    assert a["metrics"] == b["metrics"]
    assert a["search"]["optimum"] == b["search"]["optimum"]
    assert pages[0] == pages[1]
