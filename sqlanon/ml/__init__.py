"""The machine-learning utility of a release (issue 14, seed 002 section 5) and the evidence the
HTML report is drawn from: does a classifier trained on the release do as well as one trained on
the original? Everything that touches rows runs in the database (the split, the release, naive
Bayes); only a bounded sample reaches Python, for the scikit-learn trainers."""

from sqlanon.ml.evidence import report_data
from sqlanon.ml.experiment import utility

__all__ = ["report_data", "utility"]
