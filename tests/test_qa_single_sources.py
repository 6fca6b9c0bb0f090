"""One source for what several places read (a read-through of the dbt/likeness change):

* the l requirements' view of a sensitive attribute (the recursive rank and whether Grassberger's
  estimate is asked) is a plain frozen value, sqlanon.risk_extra.LRank, not an int carrying an
  attribute set after construction;
* the columns a release needs a secret key for are listed once (sqlanon.policy.keyed_columns):
  the parser's default ``publish.as`` and check_hash_release's refusal of a view read the same;
* the dbt tests' ``dbt deps`` + ``dbt build`` is tests/helpers.py's dbt_build, not a copy per file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from sqlanon.errors import SqlanonError
from sqlanon.policy import parse_policy
from sqlanon.risk_extra import LRank, l_rank_of
from sqlanon.transform.release import check_hash_release

TESTS = Path(__file__).resolve().parent
NOISE = {"method": "noise", "distribution": "laplace", "scale": 3}


def _policy(columns: dict[str, Any], privacy: dict[str, Any] | None = None) -> Any:
    cols = {"Postcode": {"role": "quasi"}, "Disease": {"role": "sensitive"}, **columns}
    return parse_policy({"source": "main.patients", "columns": cols, "privacy": privacy or {"k": 2}})


def test_l_rank_is_a_frozen_value() -> None:
    pol = _policy({}, {"k": 2, "l": {"Disease": {"kind": "entropy", "l": 1.5, "estimator": "grassberger"}}})
    got = l_rank_of(2, pol, "Disease")
    assert got == LRank(rank=2, grassberger=True) and not isinstance(got, int)
    assert l_rank_of(3, pol, "Postcode") == LRank(3, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.grassberger = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("columns", "keyed"),
    [
        ({}, []),
        ({"PatientName": {"role": "identifier", "action": "hash"}}, ["PatientName"]),
        ({"Age": {"role": "insensitive", "perturb": NOISE}}, ["Age"]),
        (
            {
                "Age": {"role": "insensitive", "perturb": NOISE},
                "PatientName": {"role": "identifier", "action": "hash"},
            },
            ["PatientName", "Age"],
        ),
        ({"PatientName": {"role": "identifier", "action": "mask"}}, []),
    ],
)
def test_one_list_of_keyed_columns(columns: dict[str, Any], keyed: list[str]) -> None:
    pol = _policy(columns)
    assert pol.secret_columns == keyed
    assert pol.publish_as == ("table" if keyed else "view")
    if keyed:
        with pytest.raises(SqlanonError, match=rf"^columns\.{keyed[0]}\."):
            check_hash_release(pol, "view")
    else:
        check_hash_release(pol, "view")


def test_dbt_build_is_written_once() -> None:
    users = [
        p.name for p in sorted(TESTS.glob("test_dbt*.py")) if "= dbt_build(" in p.read_text(encoding="utf-8")
    ]
    assert users == ["test_dbt.py", "test_dbt_likeness.py"]
    build = '["build", *' + "common"  # dbt's build command line, spelt so that this file lacks it
    for p in TESTS.glob("test_*.py"):
        assert build not in p.read_text(encoding="utf-8"), p.name
    assert build in (TESTS / "helpers.py").read_text(encoding="utf-8")
