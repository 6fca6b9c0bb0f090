"""Small helpers shared by the behavioural tests."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from sqlanon.cli import main


def write_policy(tmp_path: Path, policy: dict[str, Any], name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(policy, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def cli(*args: str) -> tuple[int, str, str]:
    """Run the sqlanon CLI in-process; returns (exit code, stdout, stderr)."""
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def cli_json(*args: str) -> dict[str, Any]:
    code, out, err = cli(*args, "--json")
    assert code in (0, 1), f"exit {code}: {err}"
    return json.loads(out)


#: Keys that differ by engine by design: the SQL dialect, what each engine cannot hide, and where
#: the lattice was walked (locally on PostgreSQL and Spark, in-process on DuckDB).
ENGINE_SPECIFIC = ("dialect", "notes", "search_location", "rows_transferred")


def same(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON, floats to 1e-9 relative (parallel sums differ in the last bits; two plans may
    sum doubles in different orders); the keys of ENGINE_SPECIFIC are not compared."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a.keys() ^ b.keys())}"
        for k in a:
            if k not in ENGINE_SPECIFIC:
                same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (
            f"{path}: {a} != {b}"
        )
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"
