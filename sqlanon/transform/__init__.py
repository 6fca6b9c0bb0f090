"""Transformations of the data: generalisation hierarchies and the release SQL of a node
(perturbation goes here next)."""

from sqlanon.transform.build import build_hierarchy
from sqlanon.transform.hierarchy import Hierarchy
from sqlanon.transform.release import check_hash_release, internal_prefix, release_context, release_sql

__all__ = [
    "Hierarchy",
    "build_hierarchy",
    "check_hash_release",
    "internal_prefix",
    "release_context",
    "release_sql",
]
