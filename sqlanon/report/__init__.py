"""Reports for people: console summaries of the commands' JSON (the HTML report goes here next)."""

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
