"""sqlanon: a SQL-pushdown anonymiser. The public Python API is re-exported here (see
:mod:`sqlanon.api` and docs/api.md)."""

from sqlanon.api import (
    AnonymiseResult,
    AssessResult,
    Connection,
    EvaluateResult,
    ProfileResult,
    SearchResult,
    anonymise,
    assess,
    cleanup,
    compile,
    connect,
    dbt_project,
    evaluate,
    hierarchy_file,
    init_policy,
    load_demo_data,
    load_policy,
    profile,
    search,
)
from sqlanon.api_ml import ReportResult, UtilityResult, report_data, utility
from sqlanon.errors import PolicyError, SqlanonError
from sqlanon.report.html import write_report

__version__ = "0.1.0"

__all__ = [
    "AnonymiseResult",
    "AssessResult",
    "Connection",
    "EvaluateResult",
    "PolicyError",
    "ProfileResult",
    "ReportResult",
    "SearchResult",
    "SqlanonError",
    "UtilityResult",
    "anonymise",
    "assess",
    "cleanup",
    "compile",
    "connect",
    "dbt_project",
    "evaluate",
    "hierarchy_file",
    "init_policy",
    "load_demo_data",
    "load_policy",
    "profile",
    "report_data",
    "search",
    "utility",
    "write_report",
]
