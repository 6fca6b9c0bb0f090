"""Issue 32: nothing sqlanon publishes, prints or writes reveals the secrets a release depends on,
tried the way an attacker who knows the README would.

The attacker holds every artefact sqlanon produces (printed SQL of ``compile`` in four dialects and
``--dry-run``, the JSON of ``anonymise``, ``assess`` and ``report``, the report page, the server's
statement log) and the published table. The tests grep every artefact for each secret in every
spelling that was once leaked (the key, its hex, the HMAC pads K xor 0x36 / K xor 0x5c), then run
the attack that undid the old release: recompute a record's noise for each candidate original value
(from a 10-year band) with every key or seed the artefacts offer, and keep the candidates that give
the published value. The reference HMAC is Python's :mod:`hmac`, written here from RFC 2104.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sqlanon.sql.secrets import pads
from tests.conftest import TEST_HASH_KEY, TEST_PERTURB_KEY, TestDB
from tests.helpers import cli, cli_json, write_policy


def _spellings(key: str) -> list[str]:
    """Every form of a key an artefact has ever carried."""
    raw = key.encode()
    i, o = pads(raw)
    return [key, raw.hex(), i, o, i[:32], o[:32], i.upper(), o.upper()]


SECRETS = _spellings(TEST_HASH_KEY) + _spellings(TEST_PERTURB_KEY)


def _people(n: int = 120) -> tuple[list[str], list[list[Any]], list[str]]:
    cols = ["pid", "age", "zip", "income", "disease"]
    rows = []
    for i in range(n):
        age = 20 + (i * 7) % 50
        rows.append(
            [f"P{1000 + i}", age, f"4760{i % 4}", 1000 * (i % 9) + 7 * i, ["flu", "hiv", "cold"][i % 3]]
        )
    rows.append(["P9999", 97, "99901", 250000, "ebola"])  # an outlier the release suppresses
    return cols, rows, ["VARCHAR", "BIGINT", "VARCHAR", "BIGINT", "VARCHAR"]


def _policy(target: str = "main.people_anon") -> dict[str, Any]:
    return {
        "source": "main.people",
        "target": target,
        "columns": {
            "pid": {"role": "identifier", "action": "hash"},
            "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [10, 20], "start": 0}}},
            "zip": {"role": "quasi"},
            "income": {
                "role": "sensitive",
                "perturb": {"method": "noise", "distribution": "laplace", "scale": 300},
            },
            "disease": {"role": "insensitive", "perturb": {"method": "pram", "retain": 0.7}},
        },
        "privacy": {"k": 3, "suppression": 0.05, "suppression_mode": "mask"},  # PRAM: cross-record
    }


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_no_secret_in_anything_printed_or_written(db: TestDB, tmp_path: Path) -> None:
    """compile (four dialects), --dry-run, anonymise --json, assess --json, report and report
    --json: no spelling of either key anywhere; the SQL names the secret relation instead."""
    cols, rows, types = _people()
    db.load("people", cols, rows, types)
    path = write_policy(tmp_path, _policy())
    artefacts: dict[str, str] = {}
    for dialect in ("duckdb", "postgres", "spark", "tsql"):
        code, out, err = cli("compile", str(path), "--db", db.url, "--dialect", dialect)
        assert code == 0, err
        assert "sqlanon_secret" in out
        artefacts[f"compile {dialect}"] = out + err
    code, out, err = cli("anonymise", str(path), "--db", db.url, "--dry-run")
    assert code == 0, err
    artefacts["dry-run"] = out + err
    code, out, err = cli("anonymise", str(path), "--db", db.url, "--json")
    assert code == 0, err
    artefacts["anonymise --json"] = out + err
    code, out, err = cli("assess", str(path), "--db", db.url, "--json")
    artefacts["assess --json"] = out + err
    page = tmp_path / "report.html"
    code, out, err = cli("report", str(path), "--db", db.url, "--out", str(page), "--k", "3")
    assert code == 0, err
    artefacts["report"] = out + err + page.read_text(encoding="utf-8")
    code, out, err = cli("report", str(path), "--db", db.url, "--out", str(tmp_path / "r2.html"), "--json")
    artefacts["report --json"] = out + err
    for name, text in artefacts.items():
        assert not _leaks(text), f"{name} shows a secret"


def test_postgres_statement_log_holds_no_secret(pg_patients: TestDB, tmp_path: Path) -> None:
    """With every statement logged (log_statement = all) a publish with a hashed identifier and
    perturbed columns leaves no spelling of either key in the server's log: the pads travel by
    COPY, whose rows the server never logs."""
    db = pg_patients
    cols, rows, types = _people()
    db.load("people", cols, rows, types)
    assert db._pg is not None
    db.sql(f"ALTER DATABASE {db._dbname} SET log_statement = 'all'")
    log = db._pg.datadir.parent / "log"
    start = log.stat().st_size
    cli_json("anonymise", str(write_policy(tmp_path, _policy())), "--db", db.url)
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    assert "sqlanon_secret" in text and "COPY" in text  # the log did record sqlanon's statements
    assert not _leaks(text)


def _old_u(seed: str, column: str, draw: str, key: str) -> float:
    h = int(hashlib.md5(f"{seed}|{column}|{draw}|{key}".encode()).hexdigest()[:8], 16)  # noqa: S324
    return (h + 0.5) / 2**32


def _new_u(secret: str, column: str, draw: str, key: str) -> float:
    msg = f"{len(column)}:{column}|{draw}|{key}".encode()
    m = int(hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()[:14], 16) >> 3
    return min((m + 0.5) / 2**53, 1 - 2**-53)


def _recovered(rows: list[list[Any]], published: list[tuple], tokens: set[str]) -> int:
    """Rows whose published income some (candidate age, token) pair reproduces exactly."""
    recovered = 0
    for band, zipc, y in published:
        lo = int(str(band).strip("[").split("-")[0])
        hit = False
        for x in (r[2] for r in rows if lo <= r[0] < lo + 10 and r[1] == zipc):
            for age in range(lo, lo + 10):
                for text in {f"{x}", f"{x:g}"}:
                    key = f"v{age}|v{zipc}|v{text}#1"
                    for t in tokens:
                        for u in (_old_u(t, "income", "a", key), _new_u(t, "income", "a", key)):
                            hit = hit or x + 400 * (2 * u - 1) == y
        recovered += hit
    return recovered


def test_reader_cannot_recompute_the_noise(db: TestDB, tmp_path: Path) -> None:
    """The attack that recovered 60 of 60 ages: for each published row, each candidate age of its
    band and each key a reader can find (every token of every artefact, seed 0 and its old formula),
    recompute the noise of the income with the row key the README defines, and count the rows where
    some candidate gives the published value exactly. None may; with the real key (the control: the
    attack itself works) every row is recovered."""
    cols = ["age", "zip", "income"]
    rows = [[20 + (i * 7) % 40, f"4760{i % 3}", 1000.0 + 13 * i] for i in range(60)]
    db.load("people", cols, rows, ["BIGINT", "VARCHAR", "DOUBLE PRECISION"])
    noise = {"method": "noise", "distribution": "uniform", "scale": 400}
    pol = {
        "source": "main.people",
        "target": "main.people_anon",
        "columns": {
            "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [10], "start": 0}}},
            "zip": "quasi",
            "income": {"role": "sensitive", "perturb": noise},
        },
        "privacy": {"k": 2},
    }
    path = write_policy(tmp_path, pol)
    text = cli("compile", str(path), "--db", db.url, "--dialect", "duckdb")[1]
    text += cli("anonymise", str(path), "--db", db.url, "--json", "--levels", "age=1,zip=0")[1]
    published = db.sql('SELECT "age", "zip", "income" FROM "main"."people_anon"')
    assert len(published) == 60
    tokens = set(re.findall(r"[A-Za-z0-9_]{6,}", text)) | {"0"}
    assert _recovered(rows, published, tokens) == 0
    assert _recovered(rows, published[:5], {TEST_PERTURB_KEY}) == 5


def test_integer_column_is_published_whole_with_no_grid(duck_patients: TestDB, tmp_path: Path) -> None:
    """Uniform noise of scale 500 on whole numbers was published as 15-digit doubles on a grid of
    spacing 2a/2^32, which left only the x with x mod 125 fixed. Now every value is a whole number
    and (y - x) mod 125 takes nearly every residue."""
    db = duck_patients
    rows = [[i, "ab"[i % 2], 1000 + (i * 37) % 5000] for i in range(2000)]
    db.load("t", ["id", "q", "x"], rows, ["BIGINT", "VARCHAR", "BIGINT"])
    spec = {"method": "noise", "distribution": "uniform", "scale": 500}
    pol = {"source": "main.t", "target": "main.t_anon", "key": "id", "privacy": {"k": 2}}
    pol["columns"] = {"id": "insensitive", "q": "quasi", "x": {"role": "insensitive", "perturb": spec}}
    cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
    got = dict(db.sql("SELECT id, x FROM main.t_anon"))
    assert all(isinstance(v, int) for v in got.values())
    residues = {(got[i] - x) % 125 for i, _, x in rows}
    assert len(residues) >= 120


def test_rounding_that_cancels_the_noise_is_refused(duck_patients: TestDB, tmp_path: Path) -> None:
    db = duck_patients
    rows = [[i, "ab"[i % 2], i % 9, i * 0.37] for i in range(60)]
    db.load("t", ["id", "q", "x", "w"], rows, ["BIGINT", "VARCHAR", "BIGINT", "DOUBLE"])
    before = db.snapshot()

    def run(col: str, spec: dict[str, Any]) -> tuple[int, str, str]:
        pol = {"source": "main.t", "target": "main.t_anon", "key": "id", "privacy": {"k": 2}}
        pol["columns"] = {"id": "insensitive", "q": "quasi", col: {"role": "insensitive", "perturb": spec}}
        return cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)

    code, _, err = run("x", {"method": "noise", "scale": 0.4})
    assert code == 2 and err.count("\n") == 1 and "would cancel uniform noise of scale 0.4" in err, err
    code, _, err = run("x", {"method": "k-noise", "k": 3})  # nine values, each 6-7 times: delta 0.5
    assert code == 2 and err.count("\n") == 1 and "k-noise's delta is 0.5 here" in err, err
    code, _, err = run("w", {"method": "noise", "scale": 2, "round": 5})
    assert code == 2 and "would cancel" in err, err
    assert db.snapshot() == before
    code, _, err = run("w", {"method": "noise", "scale": 2, "round": 0.01})
    assert code == 0, err
    vals = [v for (v,) in db.sql("SELECT w FROM main.t_anon")]
    assert all(abs(v * 100 - round(v * 100)) < 1e-6 for v in vals) and len(set(vals)) > 30


def test_a_seed_and_a_missing_key_are_one_line(duck_patients: TestDB, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    db = duck_patients
    db.load(
        "t", ["id", "q", "w"], [[i, "ab"[i % 2], i * 0.5] for i in range(20)], ["BIGINT", "VARCHAR", "DOUBLE"]
    )
    pol: dict[str, Any] = {"source": "main.t", "target": "main.t_anon", "privacy": {"k": 2}}
    pol["columns"] = {
        "id": "insensitive",
        "q": "quasi",
        "w": {"role": "insensitive", "perturb": {"method": "noise", "scale": 2}},
    }
    before = db.snapshot()
    code, _, err = cli("anonymise", str(write_policy(tmp_path, {**pol, "seed": 0})), "--db", db.url)
    assert code == 2 and err.count("\n") == 1 and "'seed': no longer accepted" in err, err
    monkeypatch.delenv("SQLANON_PERTURB_KEY")
    code, _, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
    assert code == 2 and err.count("\n") == 1 and "SQLANON_PERTURB_KEY" in err, err
    monkeypatch.setenv("SQLANON_PERTURB_KEY", "short")
    code, _, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
    assert code == 2 and "at least 16" in err and "short" not in err.replace("shorter", ""), err
    assert db.snapshot() == before
    # A secrets file gives the same release as the variable holding the same key.
    monkeypatch.delenv("SQLANON_PERTURB_KEY")
    keyfile = tmp_path / "perturb.key"
    keyfile.write_text(TEST_PERTURB_KEY + "\n", encoding="utf-8")
    monkeypatch.setenv("SQLANON_PERTURB_KEY_FILE", str(keyfile))
    cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
    from_file = sorted(db.sql("SELECT id, w FROM main.t_anon"))
    monkeypatch.delenv("SQLANON_PERTURB_KEY_FILE")
    monkeypatch.setenv("SQLANON_PERTURB_KEY", TEST_PERTURB_KEY)
    cli_json("anonymise", str(write_policy(tmp_path, {**pol, "target": "main.t2"})), "--db", db.url)
    assert from_file == sorted(db.sql("SELECT id, w FROM main.t2"))


def run_printed_in_psql(db: TestDB, tmp_path: Path, target: str, env: dict[str, str]) -> tuple[str, Any]:
    """The README's recipe for running printed SQL by hand: `compile` the people's release into a
    file, then psql creates the secret relation, fills it with `\\copy ... from program 'sqlanon
    secret-pads'` (under ``env``: the keys set there), and runs the file. The printed text and
    psql's completed process."""
    import shutil
    import subprocess
    import sys

    cols, rows, types = _people()
    db.load("people", cols, rows, types)
    path = write_policy(tmp_path, _policy(target))
    code, out, err = cli(
        "compile", str(path), "--db", db.url, "--dialect", "postgres", "--levels", "age=1,zip=0"
    )
    assert code == 0, err
    sql_file = tmp_path / "release.sql"
    sql_file.write_text(out, encoding="utf-8")
    assert db._pg is not None
    exe = shutil.which("sqlanon") or str(Path(sys.executable).parent / "sqlanon")
    script = (
        "CREATE TEMP TABLE sqlanon_secret"
        " (hash_ipad text, hash_opad text, perturb_ipad text, perturb_opad text);\n"
        f"\\copy sqlanon_secret from program '{exe} secret-pads'\n"
        f"\\i {sql_file}\n"
    )
    res = subprocess.run(
        [str(db._pg.bin / "psql"), "-v", "ON_ERROR_STOP=1", "-X", "-q", db._pg.conninfo(db._dbname)],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return out, res


def test_printed_sql_runs_in_psql_with_the_pads_bound_by_copy(pg_patients: TestDB, tmp_path: Path) -> None:
    """The README's recipe for running printed SQL by hand (:func:`run_printed_in_psql`) gets the
    rows sqlanon publishes itself; the printed file holds no secret."""
    import os

    db = pg_patients
    out, res = run_printed_in_psql(db, tmp_path, "main.by_hand", {**os.environ})
    assert not _leaks(out)
    assert res.returncode == 0, res.stderr
    cli_json(
        "anonymise",
        str(write_policy(tmp_path, _policy("main.by_sqlanon"))),
        "--db",
        db.url,
        "--levels",
        "age=1,zip=0",
    )
    q = 'SELECT "pid", "age", "zip", "income", "disease" FROM main.{} ORDER BY 1'
    assert (
        db.sql(q.format("by_hand")) == db.sql(q.format("by_sqlanon"))
        and len(db.sql(q.format("by_hand"))) > 100
    )
    code, _, err = cli("secret-pads")  # CliRunner's stdout is not a terminal: the row comes out
    assert code == 0


def test_dbt_refuses_a_release_that_needs_a_key(duck_patients: TestDB, tmp_path: Path) -> None:
    """A dbt model would need the key in dbt's session at every build, where its readers see the
    compiled SQL and the logs: hashed and perturbed releases are refused, nothing written."""
    db = duck_patients
    cols, rows, types = _people()
    db.load("people", cols, rows, types)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: p\nprofile: p\n", encoding="utf-8")
    pol = _policy()
    for columns, what in (
        (pol["columns"], "columns.pid.action: hash needs the secret key"),
        ({**pol["columns"], "pid": {"role": "identifier", "action": "drop"}}, "columns.income.perturb:"),
    ):
        path = write_policy(tmp_path, {**pol, "columns": columns})
        code, _, err = cli("dbt", str(path), "--db", db.url, "--project", str(project))
        assert code == 2 and err.count("\n") == 1 and what in err, err
    assert sorted(p.name for p in project.iterdir()) == ["dbt_project.yml"]


def test_figures_beside_a_release_never_name_a_suppressed_class(db: TestDB, tmp_path: Path) -> None:
    """`report --json` (its *before*) and `evaluate --json` (its assessment before suppression)
    listed the source's most disclosive classes: the outlier the release suppressed, by its zip."""
    cols, rows, types = _people()
    db.load("people", cols, rows, types)
    pol = {
        "source": "main.people",
        "target": "main.people_anon",
        "columns": {"pid": "identifier", "age": "quasi", "zip": "quasi", "disease": "sensitive"},
        "privacy": {"k": 3, "suppression": 0.05},
    }
    path = write_policy(tmp_path, pol)
    report = cli("report", str(path), "--db", db.url, "--out", str(tmp_path / "r.html"), "--json", "--k", "3")
    evaluate = cli("evaluate", str(path), "--db", db.url, "--levels", "age=0,zip=0", "--json")
    for code, out, err in (report, evaluate):
        assert code in (0, 1), err
        assert "99901" not in out and "ebola" not in out
    assert "99901" in cli("assess", str(path), "--db", db.url, "--json")[1]  # assess shows the source


def _outliers(db: TestDB) -> list[list[Any]]:
    """60 ordinary records and four unique outliers that k = 5 suppresses."""
    rows = [[i, 30 + i % 3, f"4760{i % 2}", 1000 + 10 * (i % 20), 60.0 + i % 7] for i in range(60)]
    rows += [[97, 97, "99901", 300777, 180.3], [98, 12, "55501", 5, 20.1]]
    db.load(
        "clinic",
        ["id", "age", "zip", "income", "weight"],
        rows,
        ["BIGINT", "BIGINT", "VARCHAR", "BIGINT", "DOUBLE"],
    )
    return rows


def _clinic_policy(perturb: dict[str, Any]) -> dict[str, Any]:
    """k = 5 with up to 10 % suppressed (the two outliers) and the income perturbed."""
    cols = {"id": "insensitive", "age": "quasi", "zip": "quasi"}
    cols["income"] = {"role": "insensitive", "perturb": perturb}  # type: ignore[assignment]
    return {
        "source": "main.clinic",
        "target": "main.clinic_anon",
        "key": "id",
        "columns": cols,
        "privacy": {"k": 5, "suppression": 0.1},
    }


def test_cross_record_perturbation_never_carries_a_suppressed_value(
    duck_patients: TestDB, tmp_path: Path
) -> None:
    """Rank swapping ran before suppression and published the suppressed outliers' incomes on other
    rows (a microaggregation mean and a PRAM draw would too): such a method is refused where the
    release may remove records, and allowed without suppression or in mask mode."""
    db = duck_patients
    _outliers(db)
    before = db.snapshot()
    for method in (
        {"method": "swap", "p": 10},
        {"method": "microaggregate", "k": 3},
        {"method": "pram", "retain": 0.5},
    ):
        pol = _clinic_policy(method)
        code, _, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
        assert code == 2 and err.count("\n") == 1 and "a record the release suppresses would show" in err, err
        assert db.snapshot() == before
    pol["privacy"] = {"k": 5, "suppression": 0.1, "suppression_mode": "mask"}
    code, _, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--json")
    assert code == 0, err


def test_figures_of_a_release_with_suppressed_records_hide_their_values(
    duck_patients: TestDB, tmp_path: Path
) -> None:
    """The JSON printed the original range (the outliers' own values) and means over every record:
    no range is shown, and where the release suppresses records the figures are not shown."""
    db = duck_patients
    _outliers(db)
    noise = {"method": "noise", "distribution": "laplace", "scale": 50}
    pol = _clinic_policy(noise)
    path = write_policy(tmp_path, pol)
    out = cli_json("anonymise", str(path), "--db", db.url, "--dry-run")
    assert out["suppressed_records"] == 2
    assert set(out["perturbation"]["income"]) == {"method", "describe", "not_shown"}
    text = (
        json.dumps(out)
        + cli("report", str(path), "--db", db.url, "--out", str(tmp_path / "r.html"), "--json", "--k", "5")[1]
    )
    assert "300777" not in text and "180.3" not in text
    pol["privacy"] = {"k": 2}
    out = cli_json("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--dry-run")
    assert out["suppressed_records"] == 0 and "range" not in out["perturbation"]["income"]["binned"]


def test_noise_that_changes_nothing_is_refused(duck_patients: TestDB, tmp_path: Path) -> None:
    db = duck_patients
    _outliers(db)
    before = db.snapshot()
    for col, spec, msg in (
        ("income", {"method": "noise", "distribution": "laplace", "scale": 0.01}, "changes no value"),
        ("weight", {"method": "noise", "scale": 1e-300}, "changes no value"),
        ("weight", {"method": "noise", "scale": 5, "round": 1e-320}, "'columns.weight.perturb.round'"),
    ):
        pol = {
            "source": "main.clinic",
            "target": "main.clinic_anon",
            "key": "id",
            "columns": {"id": "insensitive", "age": "quasi", col: {"role": "insensitive", "perturb": spec}},
            "privacy": {"k": 2},
        }
        code, _, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
        assert code == 2 and err.count("\n") == 1 and msg in err, err
    assert db.snapshot() == before


def test_secret_pads_refuses_a_file(tmp_path: Path) -> None:
    """The pads are the keys: a file would keep them (world-readable under a usual umask)."""
    import os
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "sqlanon")
    with (tmp_path / "pads").open("w") as f:
        res = subprocess.run(
            [exe, "secret-pads"],
            stdout=f,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
            check=False,
        )
    assert res.returncode == 2 and "not a terminal or a file" in res.stderr
    assert (tmp_path / "pads").read_text() == ""
    piped = subprocess.run(
        [exe, "secret-pads"], capture_output=True, text=True, env=dict(os.environ), check=False
    )
    assert piped.returncode == 0 and piped.stdout.count("\t") == 3 and not _leaks(piped.stderr)


def test_local_walk_under_a_german_datestyle_prints_no_date(pg_patients: TestDB, tmp_path: Path) -> None:
    """A database whose DateStyle is German made the local walk's copy fail with the outlier's birth
    date in the error. Sessions now start with DateStyle ISO; a failed copy names types, not values."""
    db = pg_patients
    rows = [
        [i, f"19{50 + i % 30}-0{1 + i % 9}-1{i % 9}", f"4760{i % 3}", ["flu", "cold"][i % 2]]
        for i in range(120)
    ]
    rows.append([999, "1911-11-11", "99901", "ebola"])
    db.load("people", ["id", "dob", "zip", "disease"], rows, ["BIGINT", "DATE", "VARCHAR", "VARCHAR"])
    db.sql(f"ALTER DATABASE {db._dbname} SET datestyle = 'German, DMY'")
    pol = {
        "source": "main.people",
        "columns": {
            "id": "identifier",
            "dob": {"role": "quasi", "hierarchy": {"date": ["month", "year"]}},
            "zip": "quasi",
            "disease": "sensitive",
        },
        "privacy": {"k": 3, "l": {"disease": 2}, "suppression": 0.05},
        "search": {"metric": "ncp", "where": "local"},
    }
    code, out, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["search_location"] == "local"
    assert "1911" not in out + err and "11.11" not in out + err


def test_local_measure_under_rounded_floats_counts_postgresql_s_classes(
    pg_patients: TestDB, tmp_path: Path
) -> None:
    """A database whose extra_float_digits is 0 wrote 0.3 and 0.1 + 0.2 both as 0.3 into the local
    copy, which then counted one class of four where PostgreSQL has two of two (k 4 locally, and
    the policy satisfied). Sessions now start with extra_float_digits 3: the local and the database
    measurements agree, and both say k = 2."""
    db = pg_patients
    db.sql(
        "CREATE TABLE main.fl AS SELECT CAST(v AS DOUBLE PRECISION) AS score "
        "FROM (VALUES (0.3), (0.3), (0.5), (0.5), (0.5), (0.5)) AS t(v)"
    )
    db.sql(
        "INSERT INTO main.fl SELECT CAST(0.1 AS DOUBLE PRECISION) + CAST(0.2 AS DOUBLE PRECISION) "
        "FROM GENERATE_SERIES(1, 2)"
    )
    db.sql(f"ALTER DATABASE {db._dbname} SET extra_float_digits = 0")
    figures = {}
    for where in ("local", "database"):
        pol = {
            "source": "main.fl",
            "columns": {"score": "quasi"},
            "privacy": {"k": 4},
            "search": {"where": where},
        }
        code, out, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", db.url, "--json")
        assert code == 1, (where, code, err)  # not satisfied: two classes of two
        figures[where] = json.loads(out)
    assert figures["local"]["k"] == figures["database"]["k"] == 2
    assert figures["local"]["classes"] == figures["database"]["classes"] == 3


def test_a_failed_secret_load_is_one_line_without_its_values(
    duck_patients: TestDB, tmp_path: Path, monkeypatch
) -> None:  # noqa: ANN001
    """A driver error while loading the keys' relation ended in a traceback; it is one line and never
    the driver's text (a COPY error quotes the row it carried)."""
    from sqlanon.sql import secrets as secrets_mod

    db = duck_patients

    def broken(env: Any = None) -> Any:
        raise RuntimeError("COPY line 1: PADVALUE")

    monkeypatch.setattr(secrets_mod, "secret_row", broken)
    pol = {
        "source": "main.patients",
        "target": "main.patients_out",
        "columns": {
            "PatientName": {"role": "identifier", "action": "hash"},
            "Postcode": "quasi",
            "Age": "quasi",
        },
        "privacy": {"k": 2},
    }
    before = db.snapshot()
    code, _, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
    assert code == 2 and err.count("\n") == 1 and "cannot load the secret keys' relation" in err, err
    assert "PADVALUE" not in err and db.snapshot() == before


def test_hipaa_age_warning_names_no_age(duck_patients: TestDB, tmp_path: Path) -> None:
    """The warning said "ages up to 104": the exact age Safe Harbor says to hide."""
    db = duck_patients
    db.load("old", ["id", "age", "zip"], [[i, 30 + i, "47601"] for i in range(60)] + [[99, 104, "47601"]])
    pol = {
        "source": "main.old",
        "columns": {"id": "insensitive", "age": "quasi", "zip": "quasi"},
        "privacy": {"k": 2},
    }
    out = cli_json("assess", str(write_policy(tmp_path, pol)), "--db", db.url)
    text = json.dumps(out.get("warnings"))
    assert "over 89" in text and "104" not in text


@pytest.mark.spark
def test_spark_secret_never_goes_through_a_pickled_temp_file(spark_session, monkeypatch) -> None:  # noqa: ANN001
    """pyspark's createDataFrame of local data pickles the rows into a temporary file (the pads on
    disk); a classic session builds the secret row in the JVM instead."""
    import pyspark

    from sqlanon.engines.spark import SparkBackend

    if spark_session is None:
        pytest.skip("no Spark")
    spark = spark_session.spark if hasattr(spark_session, "spark") else spark_session

    def forbidden(*a: Any, **k: Any) -> Any:
        raise AssertionError("local data serialised through a temporary file")

    monkeypatch.setattr(pyspark.SparkContext, "_serialize_to_jvm", forbidden)
    be = SparkBackend(dialect="spark", url="spark", _spark=spark)
    try:
        be.load_secrets()
        got = spark.sql("SELECT hash_ipad FROM sqlanon_secret").collect()[0][0]
        assert got == pads(TEST_HASH_KEY.encode())[0]
    finally:
        spark.catalog.dropTempView("sqlanon_secret")
