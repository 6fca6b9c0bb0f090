"""Transitional alias of :mod:`sqlanon.engines` while the tree moves (removed when it has)."""

from sqlanon.engines.base import *  # noqa: F403
from sqlanon.engines.base import Backend, Column, connect, normalise_url, redact, session  # noqa: F401
