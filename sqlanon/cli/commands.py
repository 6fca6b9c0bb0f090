"""The ``sqlanon`` command line: a thin wrapper over :mod:`sqlanon.api` that prints.

Errors print one line (``error: ...``) and exit with status 2; interrupts exit 128 + the signal.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from sqlanon import api, interrupt
from sqlanon.cli import keys
from sqlanon.demo import run_demo
from sqlanon.engines import redact
from sqlanon.errors import SqlanonError
from sqlanon.lattice import build_hierarchies
from sqlanon.measure.columns import check_columns
from sqlanon.metrics import METRICS
from sqlanon.policy import ALGORITHMS
from sqlanon.report import (
    make_console,
    print_anonymise,
    print_assess,
    print_evaluate,
    print_profile,
)
from sqlanon.search_where import SEARCH_IN_HELP, searched_in
from sqlanon.sql import secrets
from sqlanon.transform.examples import node_examples, release_labels

DB_PATH = "SQLAlchemy URL or DuckDB file path"
DB_HELP = DB_PATH + " (default: an in-memory DuckDB)"


def _one_line(text: str) -> str:
    return " ".join(redact(str(text)).split())


def _errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every failure a user can cause is one line on stderr and exit status 2; an interrupt is one
    line and 128 + the signal number (see :mod:`sqlanon.interrupt`)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        interrupt.install()
        try:
            result = fn(*args, **kwargs)
            interrupt.check()  # an interrupt held during the commit of the swap
            return result
        except KeyboardInterrupt as e:
            signum = interrupt.received() or getattr(e, "signum", None) or signal.SIGINT
            done = interrupt.published()
            if done:
                click.echo(f"error: interrupted after the release was published to {done}", err=True)
            else:
                click.echo("error: interrupted; nothing was published or changed", err=True)
            sys.exit(128 + int(signum))
        except SqlanonError as e:
            if interrupt.received() is not None:
                # A driver reported the interrupt as its own error: say what really happened.
                click.echo("error: interrupted; nothing was published or changed", err=True)
                sys.exit(128 + int(interrupt.received() or signal.SIGINT))
            click.echo(f"error: {_one_line(str(e))}", err=True)
            sys.exit(2)
        except RecursionError:
            click.echo("error: input nested too deeply to process", err=True)
            sys.exit(2)

    return wrapper


class _Group(click.Group):
    """Usage errors (an unknown option, a bad --as, a directory as the policy) in one line too."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        standalone = kwargs.pop("standalone_mode", True)
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as e:
            where = f"{e.ctx.command_path}: " if e.ctx is not None else ""
            click.echo(f"error: {where}{_one_line(e.format_message())}", err=True)
            sys.exit(2)
        except click.Abort:
            click.echo("error: interrupted; nothing was published or changed", err=True)
            sys.exit(130)
        except click.exceptions.Exit as e:
            if standalone:
                sys.exit(e.exit_code)
            return e.exit_code


def _emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


QUIET_HELP = "Leave out the plain-language sentence under each table."


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sqlanon")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP + " (every command)")
def main(quiet: bool) -> None:
    """SQL-pushdown anonymiser: measure, search and publish anonymised relations in the database."""


def _quiet_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--quiet`` on a command that prints tables; ``sqlanon --quiet CMD`` works too."""
    return click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)(fn)


def _quiet(flag: bool) -> bool:
    ctx = click.get_current_context(silent=True)
    return flag or bool(ctx is not None and ctx.find_root().params.get("quiet"))


def _examples(policy: str, db: str | None, nodes: list[Any], published: bool = False) -> Any:
    """An example label per QI of each node, from the largest class of that node's release (the
    published target when ``published``, else the release's own SQL): never a class the release
    suppressed, a finer level or a value (sqlanon/transform/examples.py). Examples are a help:
    where they cannot be read the node prints without them."""
    pol = api.load_policy(policy)
    cache: dict[tuple, Any] = {}
    with contextlib.suppress(SqlanonError), api.connect(db) as be:
        hs = build_hierarchies(pol, check_columns(be, pol))
        for n in nodes:
            key = tuple(sorted((n or {}).items()))
            if n and key not in cache:
                rel = pol.target if published else None
                cache[key] = node_examples(hs, n, None, release_labels(be, pol, hs, n, release=rel))
    return [cache.get(tuple(sorted(n.items()))) if n else None for n in nodes]


@main.command()
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--db", "db", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@_quiet_option
@_errors
def assess(policy: str, db: str | None, as_json: bool, quiet: bool) -> None:
    """Measure the policy's source relation as it is (k, l, t, risks); writes nothing."""
    result = api.assess(policy, db)
    if as_json:
        _emit_json(result.to_dict())
    else:
        print_assess(result.to_dict(), make_console(), quiet=_quiet(quiet))
    if not result.ok:
        sys.exit(1)


def _progress_bar(console: Any) -> Any:
    """A rich progress bar fed by the search's (checked, pruned, remaining) callback; only on a
    terminal (piped stderr stays clean: one line per error)."""
    if not console.is_terminal:
        return contextlib.nullcontext(), None
    bar = Progress(
        TextColumn("search"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task("", total=None)

    def update(checked: int, pruned: int, remaining: int) -> None:
        bar.update(task, description=f"checked {checked}, pruned {pruned}, remaining {remaining}")

    return bar, update


def _metric_help() -> str:
    return "Choose the optimum by this metric (default: policy search.metric); one of: " + (
        ", ".join(METRICS) + "."
    )


@main.command()
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--db", "db", default=None, help=DB_HELP)
@click.option("--dry-run", is_flag=True, help="Search; print the SQL publish runs (as compile); no writes.")
@click.option("--replace", is_flag=True, help="Replace an existing target relation.")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@click.option("--metric", default=None, help=_metric_help())
@click.option(
    "--algorithm",
    type=click.Choice(list(ALGORITHMS)),
    default=None,
    help="Search algorithm (default: policy search.algorithm).",
)
@click.option("--levels", default=None, help="Skip the search: publish this node, e.g. 'Postcode=2,Age=1'.")
@click.option(
    "--as",
    "publish_as",
    type=click.Choice(["view", "table"]),
    default=None,
    help="Publish as a view (default; checks run at read time) or a materialised table.",
)
@click.option("--search-in", type=click.Choice(["database", "local"]), default=None, help=SEARCH_IN_HELP)
@_quiet_option
@_errors
def anonymise(
    policy: str,
    db: str | None,
    dry_run: bool,
    replace: bool,
    as_json: bool,
    metric: str | None,
    algorithm: str | None,
    levels: str | None,
    publish_as: str | None,
    search_in: str | None,
    quiet: bool,
) -> None:
    """Search the generalisation lattice and publish the best release (view or table)."""
    bar, update = _progress_bar(make_console(stderr=True))
    with bar:
        result = api.anonymise(
            searched_in(api.load_policy(policy), search_in) if search_in else policy,
            db,
            replace=replace,
            dry_run=dry_run,
            levels=levels,
            metric=metric,
            algorithm=algorithm,
            publish_as=publish_as,
            progress=update,
        ).to_dict()
    if result.get("leftovers"):
        click.echo(
            f"note: {len(result['leftovers'])} staging relation(s) left by interrupted runs of older "
            "versions; `sqlanon cleanup --db URL` lists them",
            err=True,
        )
    if as_json:
        _emit_json(result)
        return
    sql = result.get("sql")
    examples = _examples(policy, db, [result.get("node")], bool(result.get("published")))[0]
    # A dry run's stdout is the SQL alone (`--dry-run > release.sql` runs as it is): what the
    # search found goes to stderr there (issue 34).
    summary = make_console(stderr=bool(sql))
    print_anonymise({**result, "sql": None}, summary, examples=examples, quiet=_quiet(quiet))
    if sql:
        if secrets.uses_secret(sql):
            click.echo(keys.SECRET_NOTE)
        # Byte-exact whatever the terminal: never through rich, which wraps long lines.
        click.echo(sql + ";")


main.add_command(anonymise, name="anonymize")


@main.command(name="compile")
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option(
    "--dialect", required=True, help="Target dialect: duckdb, postgres, tsql, spark or any sqlglot dialect."
)
@click.option(
    "--levels", default=None, help="The node to compile, e.g. 'Postcode=2,Age=1' (no database needed)."
)
@click.option("--db", "db", default=None, help="Database to search when --levels is not given.")
@click.option("--as", "publish_as", type=click.Choice(["view", "table"]), help="A view (default) or a table.")
@_errors
def compile_cmd(
    policy: str, dialect: str, levels: str | None, db: str | None, publish_as: str | None
) -> None:
    """Print the CREATE VIEW (or TABLE) statement of the release for a DBA to review and run (a
    PostgreSQL view: the statements that publish it through a SECURITY DEFINER function)."""
    sql = api.compile(policy, dialect, levels=levels, db=db, publish_as=publish_as)
    for note in keys.compile_notes(sql, dialect, api.load_policy(policy), db):
        click.echo(note)
    click.echo(sql + ";")


@main.command(name="secret-pads")
@_errors
def secret_pads() -> None:
    """Write the HMAC pads of the secret keys to a pipe into COPY, for printed SQL run by hand."""
    sys.stdout.write(keys.secret_pads_line())


@main.command()
@click.option("--db", "db", default=None, help="Where to load the demo table (default: in-memory DuckDB).")
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@_quiet_option
@_errors
def demo(db: str | None, as_json: bool, quiet: bool) -> None:
    """Load the 9-patient example table into DuckDB, then assess and anonymise it."""
    run_demo(db, as_json=as_json, console=make_console(), quiet=_quiet(quiet))


@main.command()
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--levels", default=None, help="The node, e.g. 'Postcode=2,Age=1' (unlisted QIs: level 0).")
@click.option(
    "--algorithm",
    type=click.Choice(["mondrian"]),
    default=None,
    help="Evaluate Mondrian's release instead of a node (default without --levels: the policy's).",
)
@click.option("--db", "db", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@_quiet_option
@_errors
def evaluate(
    policy: str, levels: str | None, algorithm: str | None, db: str | None, as_json: bool, quiet: bool
) -> None:
    """Every utility and information-loss metric of one release (a node's or Mondrian's); writes nothing."""
    result = api.evaluate(policy, levels, db, algorithm=algorithm).to_dict()
    if as_json:
        _emit_json(result)
    else:
        examples = _examples(policy, db, [result["node"]])[0] if result["node"] else None
        print_evaluate(result, make_console(), examples=examples, quiet=_quiet(quiet))
    if not result["satisfies"]:
        sys.exit(1)


@main.command()
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--k", "ks", default="2,3,5,10,20", show_default=True, help="The k values, comma-separated.")
@click.option("--metric", default=None, help=_metric_help())
@click.option(
    "--algorithm",
    default=None,
    metavar="ALGO[,ALGO]",
    help="Search algorithm, or several to compare k by k, e.g. flash,mondrian "
    "(default: policy search.algorithm).",
)
@click.option("--db", "db", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@_quiet_option
@_errors
def profile(
    policy: str,
    ks: str,
    metric: str | None,
    algorithm: str | None,
    db: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """The privacy/utility trade-off: for each k, the optimal node and all its metrics; writes nothing."""
    bar, update = _progress_bar(make_console(stderr=True))
    with bar:
        result = api.profile(policy, ks, db, metric=metric, algorithm=algorithm, progress=update).to_dict()
    if as_json:
        _emit_json(result)
    else:
        examples = _examples(policy, db, [e.get("node") for e in result["profile"]])
        print_profile(result, make_console(), examples=examples, quiet=_quiet(quiet))


def _write_new(out: str | None, text: str) -> None:
    """Print, or write a file that does not exist yet (sqlanon never overwrites what it did not write)."""
    if out is None:
        click.echo(text, nl=False)
        return
    path = Path(out)
    if path.exists():
        raise SqlanonError(f"--out: {out!r} already exists; choose another file")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise SqlanonError(f"--out: cannot write {out!r}: {e.strerror or e}") from None
    click.echo(f"wrote {out}", err=True)


@main.command()
@click.option("--db", "db", required=True, help=DB_PATH)
@click.option("--table", required=True, help="The table to profile, e.g. main.people.")
@click.option(
    "--k", "k", default=5, show_default=True, type=click.IntRange(min=1), help="The k to start from."
)
@click.option("--out", default=None, help="Write the policy to this new file (default: print it).")
@_errors
def init(db: str, table: str, k: int, out: str | None) -> None:
    """Profile a table in SQL and write a commented starting policy to review."""
    _write_new(out, api.init_policy(table, db, k=k))


@main.command()
@click.option("--db", "db", required=True, help=DB_PATH)
@click.option("--table", required=True, help="The table, e.g. main.people.")
@click.option("--column", required=True, help="The quasi-identifier to build a hierarchy for.")
@click.option("--intervals", default=None, help="Nested interval widths, e.g. 5,10,20 (numbers).")
@click.option("--start", default=0.0, show_default=True, type=float, help="Where the intervals start.")
@click.option("--mask", type=click.Choice(["right"]), default=None, help="Mask characters from the right.")
@click.option("--levels", type=click.IntRange(1, 64), default=None, help="Masked characters (with --mask).")
@click.option("--dates", default=None, help="Date units from fine to coarse, e.g. month,year.")
@click.option("--out", default=None, help="Write the CSV to this new file (default: print it).")
@_errors
def hierarchy(
    db: str,
    table: str,
    column: str,
    intervals: str | None,
    start: float,
    mask: str | None,
    levels: int | None,
    dates: str | None,
    out: str | None,
) -> None:
    """Write an ARX-format hierarchy file covering every value of a column, to review and edit."""
    widths = None
    if intervals:
        try:
            widths = [float(w) if "." in w else int(w) for w in intervals.split(",") if w.strip()]
        except ValueError:
            raise SqlanonError(f"--intervals: expected numbers like 5,10,20, got {intervals!r}") from None
    if mask and not levels:
        raise SqlanonError("--levels: give the number of characters to mask with --mask right")
    units = [u.strip() for u in dates.split(",")] if dates else None
    try:
        text, nulls = api.hierarchy_file(
            table,
            column,
            db,
            intervals=widths,
            start=start,
            mask_levels=levels if mask else None,
            dates=units,
        )
    except SqlanonError as e:
        raise SqlanonError(_as_option(str(e))) from None
    _write_new(out, text)
    if nulls:
        click.echo(f"note: {nulls} row(s) have NULL in {column}; the file's NULL row covers them", err=True)


#: The hierarchy spec's keys (sqlanon.policy) and the ``hierarchy`` options that set them.
_HIERARCHY_OPTIONS = {
    "interval.widths": "--intervals",
    "interval.start": "--start",
    "interval": "--intervals",
    "levels": "--levels",
    "mask": "--mask",
    "date": "--dates",
}
_HIERARCHY_KEY = re.compile(r"""policy key (['"])columns\..*\.hierarchy(?:\.([a-z.]+))?\1""", re.S)


def _as_option(message: str) -> str:
    """``hierarchy`` builds a policy spec from its options: an error names the option the user
    typed, not a policy key they never wrote (issue 34: ``--intervals 5,7`` reported
    ``policy key 'columns.age.hierarchy.interval.widths'``)."""

    def option(m: re.Match[str]) -> str:
        return _HIERARCHY_OPTIONS.get(m[2] or "", "the hierarchy options")

    return _HIERARCHY_KEY.sub(option, message, count=1)


@main.command(name="dbt")
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--db", "db", required=True, help=DB_PATH)
@click.option("--project", required=True, help="The dbt project's folder (holding dbt_project.yml).")
@click.option("--levels", default=None, help="Skip the search: this node, e.g. 'Postcode=2,Age=1'.")
@click.option("--source", default=None, help="SOURCE.TABLE: the model reads source('SOURCE', 'TABLE').")
@click.option("--ref", default=None, help="The model reads ref('MODEL') instead of a source.")
@click.option("--replace", is_flag=True, help="Overwrite files of those names that sqlanon did not write.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@_errors
def dbt(
    policy: str,
    db: str,
    project: str,
    levels: str | None,
    source: str | None,
    ref: str | None,
    replace: bool,
    as_json: bool,
) -> None:
    """Write the release into a dbt project: a model, its tests (the policy's) and the test macros."""
    result = api.dbt_project(
        policy, db, project=project, levels=levels, source=source, ref=ref, replace=replace
    )
    if as_json:
        _emit_json(result)
        return

    def shown(text: str) -> str:  # a column or folder name is data: no control character reaches the terminal
        return "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)

    node = ", ".join(f"{shown(k)}={v}" for k, v in result["node"].items())
    click.echo(
        f"model {result['model']} ({result['materialized']}) reads {result['source']} "
        + (f"at {node}" if node else "as Mondrian's partitions")
    )
    for f in result["files"]:
        click.echo(f"{f['status']:<9} {shown(f['path'])}")
    click.echo(f"tests: {', '.join(result['tests']) or 'none'}; run `dbt build` in the project")


@main.command()
@click.option("--db", "db", required=True, help=DB_PATH)
@click.option("--drop", is_flag=True, help="Drop the leftovers found (default: only list them).")
@_errors
def cleanup(db: str, drop: bool) -> None:
    """List (and with --drop remove) staging relations left by interrupted runs of older versions."""
    found = api.cleanup(db, drop=drop)
    for name in found:
        click.echo(f"{'dropped' if drop else 'leftover'} {name}")
    if not found:
        click.echo("no leftover staging relations")
    elif not drop:
        click.echo(f"{len(found)} leftover(s); run again with --drop to remove them", err=True)
