"""Small helpers shared by the behavioural tests."""

from __future__ import annotations

import json
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
