"""The ``sqlanon`` command line. Errors print one line (``error: ...``) and exit with status 2."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click
from rich.console import Console

from sqlanon.errors import SqlanonError

DB_HELP = "SQLAlchemy URL or DuckDB file path (default: an in-memory DuckDB); 'spark' for local Spark"


def _errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SqlanonError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)

    return wrapper


def _emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


@click.group()
@click.version_option(package_name="sqlanon")
def main() -> None:
    """SQL-pushdown anonymiser: measure, search and publish anonymised relations in the database."""


@main.command()
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--db", "db", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@_errors
def assess(policy: str, db: str | None, as_json: bool) -> None:
    """Measure the policy's source relation as it is (k, l, t, risks); writes nothing."""
    from sqlanon.assess import assess as run_assess
    from sqlanon.engine import session
    from sqlanon.policy import load_policy

    pol = load_policy(policy)
    with session(db) as be:
        result = run_assess(be, pol)
    if as_json:
        _emit_json(result)
    else:
        from sqlanon.report import print_assess

        print_assess(result, Console())
    if result["satisfied"] and not result["satisfied"].get("all", True):
        sys.exit(1)


@main.command()
@click.option("--db", "db", default=None, help="Where to load the demo table (default: in-memory DuckDB).")
@click.option("--json", "as_json", is_flag=True)
@_errors
def demo(db: str | None, as_json: bool) -> None:
    """Load the seed-001 patient table into DuckDB and run the main job on it."""
    from sqlanon.demo import run_demo

    run_demo(db, as_json=as_json, console=Console())


if __name__ == "__main__":  # pragma: no cover
    main()
