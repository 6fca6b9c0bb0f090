"""Measuring a relation: the privacy models (k, l, t), risks and per-class information (seed 000
sections 3 and 5, seed 004), and a release measured against its policy."""

from sqlanon.measure.assessment import FrequencyTables, assess, build_frequency_tables, requirement_checks
from sqlanon.measure.release import release_check

__all__ = ["FrequencyTables", "assess", "build_frequency_tables", "release_check", "requirement_checks"]
