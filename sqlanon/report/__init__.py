"""Reports for people: console summaries of the commands' JSON (``console``, ``mlconsole``) and the
HTML report with its charts (``html``, ``charts``, ``mlcharts``), all drawn from the API's dictionaries."""

from sqlanon.report.console import (
    class_labels,
    make_console,
    node_text,
    print_anonymise,
    print_assess,
    print_evaluate,
    print_profile,
)

__all__ = [
    "class_labels",
    "make_console",
    "node_text",
    "print_anonymise",
    "print_assess",
    "print_evaluate",
    "print_profile",
]
