"""``privacy.suppression_mode: mask`` (issue 11; seed 001's '*', ARX's record suppression): the
records of violating classes are kept with every generalised QI replaced by '*', as one class of
their own that must itself satisfy every requirement (else they are removed as in ``remove``).
Hand-computed on seed 001's nine patients, on DuckDB and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

import sqlanon
from tests.conftest import with_patients


def _policy(k: int, mode: str, target: str) -> dict[str, Any]:
    return {
        "source": "main.patients",
        "target": target,
        "columns": {
            "PatientID": "insensitive",
            "Postcode": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
            "Age": {
                "role": "quasi",
                "hierarchy": {"interval": {"cuts": [30, 41]}, "labels": ["Under 30", "30 to 40", "Over 40"]},
            },
            "Disease": "sensitive",
        },
        "privacy": {"k": k, "suppression": 0.34, "suppression_mode": mode},
    }


@pytest.mark.parametrize("kind", ["view", "table"])
def test_masked_records_are_kept_as_one_class(db, kind):  # noqa: ANN001
    """Node Postcode=1, Age=1: (4767*, Under 30) = Alice, Bob, Caroline; (4790*, Over 40) = David,
    Eleanor, Frank; Geri and Ingrid (4760*, 30 to 40) and Harry (4767*, 30 to 40) violate k = 3.
    Their 3 records form a masked class of 3 >= k: kept, QIs '*'; remove mode drops them."""
    db = with_patients(db)
    r = sqlanon.anonymise(_policy(3, "mask", "main.m"), db.url, levels="Postcode=1,Age=1", publish_as=kind)
    rows = sorted(db.sql('SELECT "PatientID", "Postcode", "Age", "Disease" FROM main.m'))
    assert [x[:3] for x in rows if x[0] in (7, 8, 9)] == [(7, "*", "*"), (8, "*", "*"), (9, "*", "*")]
    assert {x[1:3] for x in rows if x[0] in (1, 2, 3)} == {("4767*", "Under 30")}
    assert len(rows) == 9
    assert r.to_dict()["published"]["k"] == 3
    sqlanon.anonymise(_policy(3, "remove", "main.r"), db.url, levels="Postcode=1,Age=1", publish_as=kind)
    assert sorted(x[0] for x in db.sql('SELECT "PatientID" FROM main.r')) == [1, 2, 3, 4, 5, 6]


def test_a_masked_class_smaller_than_k_is_removed(db):  # noqa: ANN001
    """Node Postcode=1, Age=2: 4767* holds Alice, Bob, Caroline, Harry (4); 4790* David, Eleanor,
    Frank (3); Geri and Ingrid (4760*) violate k = 3, and 2 masked records would be a class of 2
    (whoever is known to be in the table and in no other class is one of them): removed."""
    db = with_patients(db)
    sqlanon.anonymise(_policy(3, "mask", "main.m2"), db.url, levels="Postcode=1,Age=2")
    ids = sorted(x[0] for x in db.sql('SELECT "PatientID" FROM main.m2'))
    assert ids == [1, 2, 3, 4, 5, 6, 8]
