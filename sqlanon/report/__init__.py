"""Reports for people: console summaries of the commands' JSON (the HTML report goes here next)."""

from sqlanon.report.console import print_anonymise, print_assess, print_evaluate, print_profile

__all__ = ["print_anonymise", "print_assess", "print_evaluate", "print_profile"]
