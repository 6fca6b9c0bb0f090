"""The package's shape stays as the README describes it (issue 9): layers that import only
downwards (import-linter's contracts in pyproject.toml), no module over ~500 lines, and no
function-local import of sqlanon's own modules (the way an import cycle hides)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "sqlanon"
MAX_LINES = 520


def test_layers_import_only_downwards() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_no_module_is_too_long() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_no_function_local_imports_of_sqlanon() -> None:
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlanon"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}")
                if isinstance(node, ast.Import) and any(a.name.startswith("sqlanon") for a in node.names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} import")
    assert not found, found
