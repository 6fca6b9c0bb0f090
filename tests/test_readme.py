"""The README's Python API example runs as written (a doctest of the README itself)."""

from __future__ import annotations

import doctest

from tests.conftest import ROOT


def test_readme_python_api_example_runs() -> None:
    result = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False
    )
    assert result.attempted >= 5
    assert result.failed == 0
