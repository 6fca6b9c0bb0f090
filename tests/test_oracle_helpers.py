"""The ARX oracles cannot be skipped silently under CI (task TS).

CI installs Java and clones the checkout beside ../shared (.ci/run), so an ARX oracle that cannot
run there is a broken run: tests/helpers.py ``arx_jars`` skips where Java or ARX's jar is absent,
and fails under ``CI=true``, as tests/conftest.py does for an engine that cannot start. Every
test that compiles a driver against ARX goes through it: none keeps a skip of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import arx_dir, arx_jars


def test_an_absent_arx_skips_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("SQLANON_ARX_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(pytest.skip.Exception, match="ARX's jar"):
        arx_jars()


def test_an_absent_arx_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("SQLANON_ARX_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(pytest.fail.Exception, match="CI=true and .*ARX's jar"):
        arx_jars()


def test_absent_java_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", "")  # no javac, no java
    with pytest.raises(pytest.fail.Exception, match="no javac, java"):
        arx_jars()


def test_sqlanon_arx_dir_moves_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The jars are read from ``$SQLANON_ARX_DIR`` (benchmarks/arx.py's variable) where it is set."""
    jars = arx_jars()  # the default folder: skips (or fails under CI) where ARX is absent
    moved = tmp_path / "arx"
    moved.mkdir()
    for j in jars:
        (moved / j.name).symlink_to(j)
    monkeypatch.setenv("SQLANON_ARX_DIR", str(moved))
    assert arx_dir() == moved
    assert [j.name for j in arx_jars()] == [j.name for j in jars]
    assert all(j.parent == moved for j in arx_jars())


def test_no_arx_test_skips_on_its_own() -> None:
    """No test file looks for ARX's jar or Java itself: each goes through ``arx_jars``, so CI=true
    fails every one of them alike (before: ten files, each with its own skip, one a silent return)."""
    own = re.compile(r'\bARX_DIR\b|"peers" / "arx"|shutil\.which\("javac?"\)')
    found = [
        f"{p.name}:{n}"
        for p in sorted((ROOT / "tests").glob("*.py"))
        if p.name not in ("helpers.py", "test_oracle_helpers.py")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if own.search(line)
    ]
    assert found == []
