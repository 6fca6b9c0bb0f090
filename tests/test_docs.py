"""The README and the documentation site (docs/, mkdocs.yml): the site builds strictly, and every
example in them runs as written.

Why: a user follows these pages from `git clone` to a published release; a broken link, a page
missing from the nav, or an example that no longer runs is a bug in the product. Conventions of
the pages, which the runner below enforces:

- ``>>>`` examples are doctests (of every page, in the test's working directory);
- every ``sqlanon`` command of a ```` ```bash ```` block runs in-process, in page order, in a fresh
  folder holding ``fixtures/``; ``# exit N`` gives its expected exit status (default 0), ``> FILE``
  keeps its stdout; ``python -c`` lines run too (they load data), and ``psql`` lines on
  PostgreSQL only (``-d NAME`` becomes the test's database);
- ``<!-- docs-test: needs MODULE -->`` skips the page's run where MODULE is not installed (its data
  comes from it);
- a ```` ```yaml title="FILE" ```` block is written to FILE at that point of the page;
- a block that cannot run here (a server, psql, dbt, a shell set-up) uses ```` ```console ```` or
  ```` ```sh ````, or is preceded by ``<!-- docs-test: skip (why) -->``.

On PostgreSQL the patients are loaded by the ``pg_patients`` fixture, every ``*.duckdb`` argument
is swapped for the server's URL, and the lines that create DuckDB data (``sqlanon demo``, embedded
DuckDB by design, and the ``python -c`` lines that name ``duckdb``) are left out.
"""

from __future__ import annotations

import doctest
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import ROOT
from tests.helpers import cli

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
SKIP = "<!-- docs-test: skip"
NEEDS = re.compile(r"<!-- docs-test: needs ([\w.]+) -->")
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M
)


@dataclass
class Step:
    """One runnable line of a page: a CLI call, a ``python -c`` line, or a file to write."""

    kind: str  # "sqlanon", "python", "psql" or "file"
    args: list[str]
    expected: int = 0
    stdout_to: str | None = None
    text: str = ""


def _dedent(body: str, indent: str) -> str:
    return "".join(line[len(indent) :] if line.startswith(indent) else line for line in body.splitlines(True))


def steps(page: Path) -> list[Step]:
    """The page's runnable steps, in page order (see the module docstring for the conventions)."""
    text = page.read_text(encoding="utf-8")
    out: list[Step] = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip().splitlines()
        if before and before[-1].strip().startswith(SKIP):
            continue
        info, body = m.group("info").strip(), _dedent(m.group("body"), m.group("indent"))
        title = re.search(r'title="([^"]+)"', info)
        if info.startswith("yaml") and title:
            out.append(Step("file", [title.group(1)], text=body))
        if info.split(" ")[0] != "bash":
            continue
        for line in body.splitlines():
            code, _, comment = line.partition(" #")
            status = re.search(r"exit (\d+)", comment)
            for part in code.split("&&"):
                words = shlex.split(part)
                redirect = None
                if ">" in words:
                    redirect = words[words.index(">") + 1]
                    words = words[: words.index(">")]
                if words and words[0].endswith("sqlanon"):
                    out.append(Step("sqlanon", words[1:], int(status.group(1)) if status else 0, redirect))
                elif words[:2] == ["python", "-c"]:
                    out.append(Step("python", words[1:]))
                elif words and words[0] == "psql":
                    out.append(Step("psql", words[1:]))
    return out


def _psql(args: list[str], url: str) -> list[str]:
    """A page's ``psql`` line against the test's database: its ``-d NAME`` and the server come from
    the sqlanon URL (``postgresql+psycopg://USER@/DB?host=SOCKETDIR&port=PORT``)."""
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql (PostgreSQL's client) is not installed")
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    server = ["-h", query.get("host") or parts.hostname or "localhost", "-p", query.get("port") or "5432"]
    args = [a for i, a in enumerate(args) if a != "-d" and (i == 0 or args[i - 1] != "-d")]
    return [psql, *server, "-U", parts.username or "postgres", "-d", parts.path.lstrip("/"), *args]


def run_page(page: Path, url: str | None) -> list[Step]:
    """Run a page's steps in the current folder (on ``url`` instead of DuckDB files when given)."""
    ran = []
    for step in steps(page):
        if step.kind == "file":
            Path(step.args[0]).write_text(step.text, encoding="utf-8")
            continue
        if url is None and step.kind == "psql":
            continue
        if url is not None and step.kind == "psql":
            done = subprocess.run(_psql(step.args, url), capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{page.name}: psql {step.args}: {done.stderr}"
            ran.append(step)
            continue
        makes_duckdb_data = step.kind == "python" and "duckdb" in step.args[1]
        if url is not None and (makes_duckdb_data or step.args[0] == "demo"):
            continue
        if step.kind == "python":
            done = subprocess.run([sys.executable, *step.args], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{page.name}: python {step.args}: {done.stderr}"
            ran.append(step)
            continue
        args = [url if url is not None and a.endswith(".duckdb") else a for a in step.args]
        code, out, err = cli(*args)
        assert code == step.expected, f"{page.name}: sqlanon {' '.join(step.args)}: exit {code}: {err}"
        if step.stdout_to:
            Path(step.stdout_to).write_text(out, encoding="utf-8")
        ran.append(step)
    return ran


def test_docs_build_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: any warning (a broken link or anchor, a page outside the nav, a
    docstring the API reference cannot read) fails the build, and so this test."""
    if not os.environ.get("CI"):
        for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "mkdocs_click"):
            pytest.importorskip(module, reason=f"{module} is in the test extra")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    site = tmp_path / "site"
    # The generated references are there: every command from click, the API from the docstrings.
    cli_page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("assess", "anonymise", "compile", "init", "hierarchy", "report", "utility", "dbt"):
        assert f"sqlanon {command}" in cli_page, command
    api_page = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("load_policy", "assess", "anonymise", "AssessResult", "write_report"):
        assert name in api_page, name


def test_nav_lists_every_page() -> None:
    """Every page in docs/ is in the nav (mkdocs only warns about this as INFO by default)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        assert f" {page.name}" in nav, page.name


def test_readme_is_a_front_page() -> None:
    """The README stays a front page (issue 34: it was 132 KB), keeps CI's test command, and links
    into the site with relative links that GitHub resolves too."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 15_500
    assert re.search(r"<!-- test-command -->\n```bash\n.*pytest.*\n```", text)
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), target
    assert "source .venv/bin/activate" in text


def test_newcomer_path_is_documented() -> None:
    """Where a newcomer following the README got stuck (issue 34, "Done when"): the tour's report
    step needs the ``report`` extra, which the demo's set-up command does not install; PostgreSQL
    keeps tables in ``public``, not DuckDB's ``main``; and a CSV of one's own needs a page that
    loads it and corrects ``init``'s guesses."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    report_extra = readme.find("pip install -q -e '.[report]'")
    assert -1 < report_extra < readme.find("sqlanon report "), (
        "the report extra is installed before the report"
    )
    assert "public.patients" in readme and "docs/your-own-table.md" in readme
    tutorial = (DOCS / "tutorial.md").read_text(encoding="utf-8")
    assert "public.patients" in tutorial and "your-own-table.md" in tutorial
    own = (DOCS / "your-own-table.md").read_text(encoding="utf-8")
    for needed in ("psql -d survey", "\\copy affairs", "role: sensitive", "--algorithm flash,mondrian"):
        assert needed in own, needed


DOCTEST_PAGES = [p for p in PAGES if re.search(r"^\s*>>> ", p.read_text(encoding="utf-8"), re.M)]


@pytest.mark.parametrize("page", DOCTEST_PAGES, ids=lambda p: p.name)
def test_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 1
    assert result.failed == 0


def test_python_examples_exist() -> None:
    assert [p.name for p in DOCTEST_PAGES] == ["api.md"]


def test_every_command_is_shown() -> None:
    names = {step.args[0] for page in PAGES for step in steps(page) if step.kind == "sqlanon"}
    for command in ("demo", "init", "assess", "anonymise", "evaluate", "profile", "hierarchy", "report"):
        assert command in names, command


RUNNABLE = [p for p in PAGES if any(s.kind == "sqlanon" for s in steps(p))]


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_shell_examples_run(
    page: Path, engine: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page's ```bash examples run, in order, in a fresh folder holding the repository's
    ``fixtures/``, on DuckDB and on PostgreSQL."""
    for module in NEEDS.findall(page.read_text(encoding="utf-8")):
        if os.environ.get("CI"):  # CI installs it beside the test extra (the README's test command)
            importlib.import_module(module)
        else:
            pytest.importorskip(module, reason=f"{page.name} takes its data from {module}")
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    db = request.getfixturevalue("pg_patients") if engine == "postgres" else None
    ran = run_page(page, db.url if db is not None else None)
    assert ran, page.name
    if page.name == "cli.md":
        # The files are the starting points they claim to be: the policy loads, the hierarchy covers.
        assert "k: 5" in (tmp_path / "start.yaml").read_text(encoding="utf-8")
        rows = (tmp_path / "age.csv").read_text(encoding="utf-8").splitlines()
        assert rows[0] == "22;[20-30);[20-40);*" and len(rows) == 9  # nine distinct ages, no NULL
    if page.name in ("README.md", "tutorial.md", "your-own-table.md"):
        assert (tmp_path / "release.sql").read_text(encoding="utf-8").strip()
        assert (tmp_path / "report.html").is_file()
    if page.name == "your-own-table.md":
        _check_survey_release(db, tmp_path)


def _check_survey_release(db: object, folder: Path) -> None:
    """The page's release, counted in Python from its rows (not by sqlanon's SQL): every group of
    respondents sharing the six quasi-identifiers of the page's policy has at least 5 records and 2
    different ``affairs`` answers, all 601 records are there, and the identifier is gone."""
    qis = ["gender", "age", "yearsmarried", "children", "education", "occupation"]
    query = f"SELECT {', '.join(qis)}, affairs FROM affairs_anon"
    if db is None:
        import duckdb

        con = duckdb.connect(str(folder / "survey.duckdb"), read_only=True)
        rows = con.execute(query).fetchall()
        columns = [r[0] for r in con.execute("DESCRIBE affairs_anon").fetchall()]
        con.close()
    else:
        rows = db.sql(query)  # type: ignore[attr-defined]
        columns = [
            r[0]
            for r in db.sql(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'affairs_anon'"
            )
        ]  # type: ignore[attr-defined]
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault(tuple(row[:-1]), []).append(row[-1])
    assert len(rows) == 601
    assert min(len(g) for g in groups.values()) >= 5
    assert min(len(set(g)) for g in groups.values()) >= 2
    assert len(groups) > 16, "Mondrian's release, not Flash's 16 classes"
    assert "rownames" not in columns and "affairs" in columns
