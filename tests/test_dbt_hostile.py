"""``sqlanon dbt`` on hostile input (issue 32, findings 9-12): names never run as dbt Jinja, nothing is
written outside the project or through a link, only sqlanon's exact header makes a file its own, and
bad project paths or target names are one line, exit 2, with nothing written.

The Jinja case runs a real ``dbt build`` (DuckDB) on names that would run code if dbt rendered them:
the attacker's method. The path cases need no dbt and no search (they are refused before it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import sqlanon
from tests.conftest import TestDB, qident
from tests.helpers import cli, dbt_profile, dbt_runner, release_duckdb, write_policy
from tests.test_dbt import POLICY

#: Names dbt would run if it rendered them as Jinja, each leaving a mark ("PWNED" and a product); a
#: quote in a name, which dbt's adapter.quote does not double.
QI_LOG = "{{ log('PWNED' ~ (7*7), info=True) }}"
QI_TAG = "{% do log('PWNED' ~ (8*8), info=True) %}\"x"
#: dbt wraps a test argument that looks like a call (env_var(...), ref(...)) in {{ }} and runs it.
SENSITIVE = "env_var('SQLANON_DBT_SECRET')"
LABEL = "{{ log('PWNED' ~ (5*5), info=True) }}"
ORDER_VALUE = "{{ log('PWNED' ~ (3*3), info=True) }}"
#: The policy file's name: a newline would end the model's SQL comment, Jinja would run.
POLICY_NAME = "p\nSELECT no_such_function(); -- {{ log('PWNED' ~ (6*7), info=True) }}.yaml"
SECRET = "s3cr3t-should-never-appear"
MARKS = re.compile(r"PWNED(49|64|25|9|42)\b|" + re.escape(SECRET))


def _hostile_table(db: TestDB) -> None:
    rows = []
    for i in range(60):
        zipc = f"47{(i % 3) + 6}{i % 10}{i % 7}"
        age = 20 + (i * 7) % 50
        s = ["p", "q", ORDER_VALUE][i % 3]
        rows.append([i, zipc, age, s])
    db.load("people", ["id", QI_LOG, QI_TAG, SENSITIVE], rows, ["INTEGER", "VARCHAR", "INTEGER", "VARCHAR"])


def _hostile_policy() -> dict[str, Any]:
    return {
        "source": "main.people",
        "target": "main.people_anon",
        "columns": {
            "id": {"role": "identifier", "action": "drop"},
            QI_LOG: {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
            QI_TAG: {
                "role": "quasi",
                "hierarchy": {"interval": {"cuts": [40]}, "labels": [LABEL, "40 or more"]},
            },
            SENSITIVE: {"role": "sensitive", "order": ["p", "q", ORDER_VALUE]},
        },
        "privacy": {
            "k": 3,
            "l": {SENSITIVE: 2},
            "t": {SENSITIVE: {"measure": "emd-ordered", "t": 0.9}},
            "risk": {"prosecutor": 0.5},
        },
    }


def _texts(folder: Path) -> str:
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.rglob("*")) if p.is_file()
    )


def test_hostile_names_do_not_run_in_dbt_build(
    duck_patients: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every name is written so that dbt reads it as text: no mark of the names' code in dbt's events,
    logs or compiled files, no secret read, the model builds with the hostile column names, its tests
    pass and its rows are ``anonymise``'s at the same node."""
    runner = dbt_runner()
    db = duck_patients
    _hostile_table(db)
    monkeypatch.setenv("SQLANON_DBT_SECRET", SECRET)
    monkeypatch.setenv("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    monkeypatch.setenv("DBT_VERSION_CHECK", "false")
    project = tmp_path / "proj"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: hostile\nversion: '1.0.0'\nconfig-version: 2\nprofile: sqlanon_example\n", encoding="utf-8"
    )
    policy = write_policy(tmp_path, _hostile_policy(), name=POLICY_NAME)
    written = sqlanon.dbt_project(policy, db.url, project=project)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    dbt_profile(db, profiles)
    events: list[str] = []
    from dbt.cli.main import dbtRunner

    runner = dbtRunner(callbacks=[lambda e: events.append(str(e.info.msg))])
    res = runner.invoke(
        [
            "build",
            "--project-dir",
            str(project),
            "--profiles-dir",
            str(profiles),
            "--target-path",
            str(tmp_path / "target"),
            "--log-path",
            str(tmp_path / "logs"),
        ]
    )
    release_duckdb()
    seen = "\n".join(events) + _texts(tmp_path / "target") + _texts(tmp_path / "logs")
    assert not MARKS.search(seen), MARKS.search(seen)
    assert res.success, [m for m in events if "rror" in m][:5]
    results = [r for r in res.result.results if r.node.resource_type == "test"]
    assert len(results) == 4 and all(str(r.status) == "pass" for r in results)
    cols = [QI_LOG, QI_TAG, SENSITIVE]
    ours = sorted(db.sql(f"SELECT {', '.join(map(qident, cols))} FROM analytics.people_anon"))
    pol = _hostile_policy()
    pol["target"] = "main.people_direct"
    # The same search (a ``levels`` mapping is joined as "QI=L,..." text, which these names break).
    direct = sqlanon.anonymise(pol, db.url, publish_as="table")
    assert direct.node == written["node"]
    theirs = sorted(db.sql(f"SELECT {', '.join(map(qident, cols))} FROM main.people_direct"))
    assert ours == theirs and ours
    assert any(row[1] == LABEL for row in ours) or written["node"][QI_TAG] != 1


# -- paths: nothing outside the project, nothing through a link -------------------------------------


def _tree(path: Path) -> dict[str, Any]:
    """Every entry under ``path`` (links as their target, files as bytes, folders as themselves)."""
    out: dict[str, Any] = {}
    for p in sorted(path.rglob("*")):
        key = str(p.relative_to(path))
        if p.is_symlink():
            out[key] = ("link", os.readlink(p))
        elif p.is_file():
            out[key] = p.read_bytes()
        else:
            out[key] = "dir"
    return out


def _project(tmp_path: Path, extra: str = "") -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dbt_project.yml").write_text(f"name: p\nprofile: p\n{extra}", encoding="utf-8")
    return project


def _run(db: TestDB, project: Path, *more: str) -> tuple[int, str, str]:
    return cli(
        "dbt", str(POLICY), "--db", db.url, "--project", str(project), "--levels", "Postcode=2,Age=2", *more
    )


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("model-paths: ['../outside']\n", "outside the project"),
        ("macro-paths: ['../outside']\n", "outside the project"),
        ("model-paths: ['models/../../outside']\n", "outside the project"),
        ("link-models", "outside the project"),
        ("link-macros", "outside the project"),
        ("dangling-model", "symbolic link"),
        ("dangling-macro", "symbolic link"),
    ],
)
def test_nothing_is_written_outside_the_project(
    duck_patients: TestDB, tmp_path: Path, setup: str, message: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    extra = setup if setup.endswith("\n") else ""
    project = _project(tmp_path, extra)
    if setup == "link-models":
        (project / "models").symlink_to(outside)
    elif setup == "link-macros":
        (project / "macros").symlink_to(outside)
    elif setup == "dangling-model":
        (project / "models").mkdir()
        (project / "models" / "patients_anon.sql").symlink_to(outside / "planted.sql")
    elif setup == "dangling-macro":
        (project / "macros" / "sqlanon").mkdir(parents=True)
        (project / "macros" / "sqlanon" / "sqlanon.sql").symlink_to(outside / "planted.sql")
    before = _tree(tmp_path)
    for flags in ((), ("--replace",)):
        code, out, err = _run(duck_patients, project, *flags)
        assert code == 2 and err.count("\n") == 1 and message in err, (code, out, err)
        assert _tree(tmp_path) == before


def test_replace_never_writes_through_a_link(duck_patients: TestDB, tmp_path: Path) -> None:
    """``--replace`` refuses a model file that is a link (to a file outside, or to one of ours)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.sql"
    victim.write_text("-- precious\n", encoding="utf-8")
    project = _project(tmp_path)
    (project / "models").mkdir()
    (project / "models" / "patients_anon.sql").symlink_to(victim)
    before = _tree(tmp_path)
    code, _, err = _run(duck_patients, project, "--replace")
    assert code == 2 and "symbolic link" in err and err.count("\n") == 1
    assert _tree(tmp_path) == before


def test_a_link_inside_the_project_is_written_to_its_resolved_place(
    duck_patients: TestDB, tmp_path: Path
) -> None:
    """A model path that is a link inside the project is not outside it: the files go to the target."""
    project = _project(tmp_path, "model-paths: ['m']\n")
    (project / "real").mkdir()
    (project / "m").symlink_to(project / "real")
    code, _, err = _run(duck_patients, project)
    assert code == 0, err
    assert (project / "real" / "patients_anon.sql").is_file()
    assert os.readlink(project / "m") == str(project / "real")


def test_only_sqlanons_exact_header_makes_a_file_its_own(duck_patients: TestDB, tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "models").mkdir()
    model = project / "models" / "patients_anon.sql"
    model.write_text("-- NOT written by sqlanon dbt, keep!\nselect 1\n", encoding="utf-8")
    before = _tree(tmp_path)
    code, _, err = _run(duck_patients, project)
    assert code == 2 and "was not written by sqlanon dbt" in err
    assert _tree(tmp_path) == before
    model.unlink()
    yml = project / "models" / "patients_anon.yml"
    yml.write_text(
        "# keep: this was not written by sqlanon dbt from anything\nversion: 2\n", encoding="utf-8"
    )
    before = _tree(tmp_path)
    code, _, err = _run(duck_patients, project)
    assert code == 2 and "patients_anon.yml exists and was not written by sqlanon dbt" in err
    assert _tree(tmp_path) == before
    yml.unlink()
    # sqlanon's own files are rewritten: change one after a run, the next run updates it.
    code, _, err = _run(duck_patients, project)
    assert code == 0, err
    text = model.read_text(encoding="utf-8")
    model.write_text(text.replace("JOIN kept", "JOIN kept "), encoding="utf-8")
    code, out, err = _run(duck_patients, project)
    assert code == 0 and "updated   models/patients_anon.sql" in out, (out, err)
    assert model.read_text(encoding="utf-8") == text


# -- bad project paths and target names: one line, exit 2, nothing written -----------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("model-paths: ['/tmp/sqlanon-abs-models']\n", "model-paths"),
        ("macro-paths: ['/tmp/sqlanon-abs-macros']\n", "macro-paths"),
        ('model-paths: ["mod\\0els"]\n', "model-paths"),
        ("model-paths: ['']\n", "model-paths"),
        ("model-paths: [3]\n", "model-paths"),
    ],
)
def test_bad_project_paths_are_one_line(
    duck_patients: TestDB, tmp_path: Path, extra: str, message: str
) -> None:
    project = _project(tmp_path, extra)
    before = _tree(tmp_path)
    code, out, err = _run(duck_patients, project)
    assert code == 2 and err.count("\n") == 1 and message in err, (code, out, err)
    assert _tree(tmp_path) == before
    assert not Path("/tmp/sqlanon-abs-models").exists() and not Path("/tmp/sqlanon-abs-macros").exists()


def test_a_target_name_too_long_for_a_file_is_refused_before_the_search(
    duck_patients: TestDB, tmp_path: Path
) -> None:
    project = _project(tmp_path)
    policy = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    policy["target"] = "main." + "t" * 300
    path = write_policy(tmp_path, policy)
    before = _tree(tmp_path)
    code, out, err = cli("dbt", str(path), "--db", duck_patients.url, "--project", str(project))
    assert code == 2 and err.count("\n") == 1 and "too long" in err, (code, out, err)
    assert "search" not in out
    assert _tree(tmp_path) == before


# -- the writer: links planted after the checks, a round trip of the Jinja escapes ---------------


def test_the_writer_never_follows_a_link_planted_after_the_checks(tmp_path: Path) -> None:
    """``files.write_all`` opens every folder and file without following links: a folder or a file
    name turned into a link between the checks and the write fails, writes nothing, and removes
    the folders it created."""
    from sqlanon.dbt import files
    from sqlanon.errors import SqlanonError

    outside = tmp_path / "outside"
    outside.mkdir()
    root = (tmp_path / "proj").resolve()
    root.mkdir()
    (root / "m").symlink_to(outside)
    before = _tree(tmp_path)
    for target in (root / "m" / "x.sql", root / "new" / "m" / "x.sql"):
        if target.parts[-3] == "new":
            (root / "new").mkdir()
            (root / "new" / "m").symlink_to(outside)
            before = _tree(tmp_path)
        with pytest.raises(SqlanonError, match="cannot write"):
            files.write_all(root, {root / "a" / "b.sql": "ok", target: "evil"}, set())
        assert _tree(tmp_path) == before  # a/ was created for b.sql, then removed
    (root / "d").mkdir()
    (root / "d" / "x.sql").symlink_to(outside / "planted.sql")
    before = _tree(tmp_path)
    for replace in (set(), {root / "d" / "x.sql"}):
        with pytest.raises(SqlanonError, match="cannot write"):
            files.write_all(root, {root / "d" / "x.sql": "evil"}, replace)
        assert _tree(tmp_path) == before


@pytest.mark.parametrize(
    "name",
    [
        QI_LOG,
        QI_TAG,
        SENSITIVE,
        "  ref('x')",
        "a'b\\c\n{#}}%}",
        "é\u202e\U0001f600{{",
        "{%- raw %}{% endraw %}",
    ],
)
def test_jinja_escapes_render_back_to_the_name(name: str) -> None:
    """What dbt's renderer (Jinja, as dbt_common configures it) makes of the escaped text is the name."""
    dbt_runner()  # skips (or fails in CI) without dbt
    from dbt.clients.jinja import get_rendered

    from sqlanon.dbt import files

    assert get_rendered(files.jinja_value(name), {}, native=True) == name
    assert get_rendered(files.jinja_text(name), {}) == name
