"""The machine-learning utility and report commands (issue 14), registered on the main group."""

from __future__ import annotations

import click

from sqlanon import api_ml as api
from sqlanon.cli.commands import (
    DB_HELP,
    _emit_json,
    _errors,
    _metric_help,
    _progress_bar,
    _quiet,
    _quiet_option,
    main,
)
from sqlanon.policy import ALGORITHMS
from sqlanon.report import make_console
from sqlanon.report.html import check_out, write_report
from sqlanon.report.mlconsole import print_utility

TRAINERS_HELP = "Comma-separated: naive_bayes (SQL), logistic_regression, gradient_boosting (scikit-learn)."


@main.command(name="utility")
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--label", required=True, help="The column to predict (a declared, released column).")
@click.option("--k", "ks", default="2,3,4,5,6,7,8,9,10", show_default=True, help="The k values.")
@click.option(
    "--sample",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=10),
    help="At most this many rows per release are read for the scikit-learn trainers.",
)
@click.option("--trainers", default=None, help=TRAINERS_HELP + " Default: all three.")
@click.option("--metric", default=None, help=_metric_help())
@click.option(
    "--algorithm",
    type=click.Choice(list(ALGORITHMS)),
    default=None,
    help="How each release is made (default: policy search.algorithm; mondrian: Mondrian's).",
)
@click.option("--db", "db", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON object.")
@_quiet_option
@_errors
def utility_cmd(
    policy: str,
    label: str,
    ks: str,
    sample: int,
    trainers: str | None,
    metric: str | None,
    algorithm: str | None,
    db: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Per k, classifiers trained on the release against one trained on the original (Marchand 2019)."""
    bar, update = _progress_bar(make_console(stderr=True))
    with bar:
        result = api.utility(
            policy,
            db,
            label=label,
            ks=ks,
            sample=sample,
            algorithm=algorithm,
            metric=metric,
            trainers=trainers,
            progress=update,
        ).to_dict()
    if as_json:
        _emit_json(result)
    else:
        print_utility(result, make_console(), quiet=_quiet(quiet))


@main.command(name="report")
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--pdf", is_flag=True, help="Also print the page to a PDF beside it (headless Chromium).")
@click.option("--levels", default=None, help="Report this node, e.g. 'Postcode=2,Age=1' (no search).")
@click.option(
    "--algorithm",
    type=click.Choice(list(ALGORITHMS)),
    default=None,
    help="Search algorithm (default: policy search.algorithm).",
)
@click.option("--metric", default=None, help=_metric_help())
@click.option("--k", "ks", default="2,3,5,10,20", show_default=True, help="The k of the trade-off chart.")
@click.option("--label", default=None, help="Add the machine-learning utility section for this column.")
@click.option("--ml-k", "ml_ks", default=None, help="The k values of that section (default: --k).")
@click.option(
    "--sample",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=10),
    help="Rows per release for the scikit-learn trainers.",
)
@click.option("--trainers", default=None, help=TRAINERS_HELP + " Default: naive_bayes.")
@click.option("--db", "db", default=None, help=DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Also print the report's data as JSON.")
@_errors
def report_cmd(
    policy: str,
    out: str,
    pdf: bool,
    levels: str | None,
    algorithm: str | None,
    metric: str | None,
    ks: str,
    label: str | None,
    ml_ks: str | None,
    sample: int,
    trainers: str | None,
    db: str | None,
    as_json: bool,
) -> None:
    """Write one self-contained HTML page (charts inline, opens offline) about the release."""
    check_out(out, pdf)
    bar, update = _progress_bar(make_console(stderr=True))
    with bar:
        data = api.report_data(
            policy,
            db,
            levels=levels,
            algorithm=algorithm,
            metric=metric,
            ks=ks,
            label=label,
            ml_ks=ml_ks,
            sample=sample,
            trainers=trainers,
            progress=update,
        ).to_dict()
    written = write_report(data, out, pdf=pdf)
    _emit_json(data) if as_json else click.echo("\n".join(f"wrote {p}" for p in written))


if __name__ == "__main__":  # pragma: no cover
    main()
