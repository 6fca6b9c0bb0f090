"""Everything shown about a release is computed from the release, never from source rows it
dropped (README: "Never leak what the release hides"; reviewer's findings H1 and M1).

The attacker's way: two sources that differ only in two records the release suppresses (the same
postcode, found nowhere else; their diagnoses flu/flu in one source and flu/HIV in the other)
publish the same rows. Every figure about the release must then be the same too: the whole
``published`` section and the console's page of it. Before the fix the published figures took
p(w) from the source (``distinct_values`` 3 against 4: a reader learned that a fourth diagnosis
exists only among the dropped records; H(W), l_max, mutual information, the t distances and
beta-likeness differed), and ``published.verified_in.rows_transferred`` counted the source's
frequency rows (one more where the dropped pair differ). Both search.where paths, DuckDB and
PostgreSQL, with and without requirements (t-closeness, beta-likeness) whose verdict compares
with the source's distribution, as ARX's does.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from sqlanon.lattice import local_measure
from sqlanon.report.console import print_anonymise
from tests.conftest import TestDB
from tests.helpers import cli_json, write_policy

COLUMNS = ["id", "zip", "age", "diag", "score"]
TYPES = ["INTEGER", "TEXT", "INTEGER", "TEXT", "DOUBLE PRECISION"]
SECRET = "SECRETZIP99"

POLICIES: dict[str, dict[str, Any]] = {
    "k": {"privacy": {"k": 3, "suppression": 0.02}},
    "t_likeness": {
        "privacy": {
            "k": 3,
            "suppression": 0.02,
            "l": {"diag": {"kind": "distinct", "l": 2}},
            "t": {"diag": {"measure": "emd-equal", "t": 0.9}},
            "beta_likeness": {"diag": {"beta": 50.0}},
        }
    },
}


def _rows(dropped: tuple[str, str]) -> list[list[Any]]:
    """300 people over five postcodes, then the two records the release suppresses (a class of
    two under k = 3, both aged 40-49: the same class at every age level)."""
    rnd = random.Random(11)
    zips = ["10115", "10117", "10119", "20095", "20097"]
    rows: list[list[Any]] = [
        [
            i,
            rnd.choice(zips),
            rnd.randint(18, 80),
            rnd.choice(["flu", "cold", "cancer"]),
            0.1 * rnd.randint(1, 4),
        ]
        for i in range(300)
    ]
    rows += [[300, SECRET, 40, dropped[0], 0.2], [301, SECRET, 45, dropped[1], 0.3]]
    return rows


def _policy(db: TestDB, source: str, name: str, where: str) -> dict[str, Any]:
    return {
        "source": f"{db.schema}.{source}",
        "target": f"{db.schema}.{source}_anon",
        "columns": {
            "id": {"role": "identifier", "action": "drop"},
            "zip": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
            "age": {"role": "quasi", "hierarchy": {"interval": {"cuts": [30, 50, 70]}}},
            "diag": "sensitive",
            "score": "insensitive",
        },
        **POLICIES[name],
        "search": {"algorithm": "flash", "metric": "precision", "where": where},
        "publish": {"as": "view"},
    }


def _page(r: dict[str, Any]) -> list[str]:
    """The console's page of ``anonymise``, but the search's own line (the operator's: where the
    lattice was walked and how many source rows crossed)."""
    out = io.StringIO()
    print_anonymise(r, Console(file=out, width=100_000, soft_wrap=True, color_system=None))
    return [line for line in out.getvalue().splitlines() if "node checks over a lattice" not in line]


def _normalised(r: dict[str, Any], source: str) -> dict[str, Any]:
    """``r`` with the names the test gave (source and target) as one placeholder."""
    return json.loads(json.dumps(r).replace(f"{source}_anon", "REL_anon"))


@pytest.mark.parametrize("where", ["local", "database"])
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_sources_differing_in_dropped_records_show_the_same_release(
    db: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, where: str
) -> None:
    monkeypatch.setitem(local_measure.MIN_ROWS, "postgres", 0)  # the test table is small
    out = {}
    for source, dropped in (("pa", ("flu", "flu")), ("pb", ("flu", "HIV"))):
        db.load(source, COLUMNS, _rows(dropped), TYPES)
        pol = write_policy(tmp_path, _policy(db, source, name, where), f"{source}.yaml")
        out[source] = _normalised(cli_json("anonymise", str(pol), "--db", db.url), source)
    a, b = out["pa"], out["pb"]
    assert a["suppressed_records"] == b["suppressed_records"] == 2  # the same release of the same rows
    assert a["node"] == b["node"]
    assert "HIV" not in {row[0] for row in db.sql(f'SELECT DISTINCT diag FROM "{db.schema}"."pb_anon"')}
    assert a["published"] == b["published"]  # the whole section, every figure
    assert a["published"]["information"]["diag"]["distinct_values"] == 3  # flu, cold, cancer
    assert _page(a) == _page(b)
    assert "verified_in" not in a["published"] and a["verified_in"]["location"] in ("local", "database")
    if where == "local":  # the operator's figures about the search still say what crossed
        assert a["rows_transferred"] > 0
    if where == "local" and db.kind == "postgres" and name == "k":
        # Without a t or likeness verdict the source's frequency table never crosses: only the
        # release's grouped rows (before: 325, with the source's 266).
        grouped = f'SELECT COUNT(*) FROM (SELECT DISTINCT zip, age, diag FROM "{db.schema}"."pa_anon") AS d'
        assert a["verified_in"] == {"location": "local", "rows_transferred": db.sql(grouped)[0][0]}


def test_the_reports_release_is_the_releases_own(db: TestDB, tmp_path: Path) -> None:
    """``sqlanon report``: its *after* (the release measured) and the release's per-class
    distributions (t against p(w)) are the same for the two sources; only its *before* is the
    source's, by design (the report compares the two)."""
    import sqlanon

    data = {}
    for source, dropped in (("pa", ("flu", "flu")), ("pb", ("flu", "HIV"))):
        db.load(source, COLUMNS, _rows(dropped), TYPES)
        pol = write_policy(tmp_path, _policy(db, source, "t_likeness", "database"), f"{source}.yaml")
        data[source] = _normalised(sqlanon.report_data(str(pol), db.url, ks=[3]).to_dict(), source)
    a, b = data["pa"], data["pb"]
    assert a["before"]["information"]["diag"]["distinct_values"] == 3
    assert b["before"]["information"]["diag"]["distinct_values"] == 4  # the source, as the report says
    assert {**a["after"], "source": None} == {**b["after"], "source": None}  # source: a temporary name
    assert a["distributions"]["after"] == b["distributions"]["after"]
