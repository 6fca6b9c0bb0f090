"""The command-line interface: a thin click layer over :mod:`sqlanon.api` (the core commands in
:mod:`sqlanon.cli.commands`, the report and utility commands in :mod:`sqlanon.cli.ml`)."""

from sqlanon.cli import ml  # noqa: F401 - registers `report` and `utility` on the group
from sqlanon.cli.commands import main

__all__ = ["main"]
