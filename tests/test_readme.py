"""The README's Python API example runs as written (a doctest of the README itself)."""

from __future__ import annotations

import doctest
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import cli


def test_readme_python_api_example_runs() -> None:
    result = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False
    )
    assert result.attempted >= 5
    assert result.failed == 0


def _bash_commands() -> list[tuple[list[str], int]]:
    """Every ``sqlanon`` command of the README's ```bash blocks (the part after ``&&`` in an install
    line too), with its expected exit status: 0, or the N of a trailing ``# exit N``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            code, _, comment = line.partition("#")
            m = re.search(r"exit (\d+)", comment)
            for part in code.split("&&"):
                words = shlex.split(part)
                if words and words[0].endswith("sqlanon"):
                    out.append((words[1:], int(m.group(1)) if m else 0))
    return out


def test_readme_has_shell_examples() -> None:
    names = [args[0] for args, _ in _bash_commands()]
    for command in ("demo", "assess", "anonymise", "evaluate", "profile", "init", "hierarchy"):
        assert command in names, command


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_readme_shell_examples_run(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ```bash example runs in a fresh folder holding the README's ``fixtures/``. On
    PostgreSQL the demo's patients are loaded by the test and the DuckDB file is swapped for the
    server's URL; ``sqlanon demo`` itself (embedded DuckDB by design) runs on DuckDB only."""
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    url = request.getfixturevalue("pg_patients").url if engine == "postgres" else None
    ran = 0
    for args, expected in _bash_commands():
        if url is not None:
            if args[0] == "demo":
                continue
            args = [url if a == "demo.duckdb" else a for a in args]
        code, out, err = cli(*args)
        assert code == expected, f"sqlanon {' '.join(args)}: exit {code}: {err}"
        ran += 1
    assert ran >= (6 if url else 8)  # the demo, twice in the README, is DuckDB only
    assert (tmp_path / "start.yaml").is_file() and (tmp_path / "age.csv").is_file()
    # The files are the starting points they claim to be: the policy loads, the hierarchy covers.
    assert "k: 5" in (tmp_path / "start.yaml").read_text(encoding="utf-8")
    rows = (tmp_path / "age.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "22;[20-30);[20-40);*" and len(rows) == 9  # nine distinct ages, no NULL
