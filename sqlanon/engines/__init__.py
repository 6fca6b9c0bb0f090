"""Engines: one live connection per command and the sqlglot dialect of its database.

``base`` holds the connection (:class:`Backend`), its statements and its temporary tables;
``catalog`` resolves relations to their catalogue identity and reads dependencies and grants.
A new engine (Spark next) goes here, behind the same :class:`Backend` interface.
"""

from sqlanon.engines.base import Backend, Column, connect, normalise_url, redact, session

__all__ = ["Backend", "Column", "connect", "normalise_url", "redact", "session"]
