"""Measuring awkward inputs (issue 15): nodes at the top level, populations at generalised nodes,
Datafly's stopping rule, honest progress, data that looks like markup, columns that cannot be
grouped, and source columns named like sqlanon's own aliases.

Every figure is checked against a count made here, in Python, from the rows the test loaded (a
brute force over the classes), never against another sqlanon command.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import sqlanon
from tests.conftest import TestDB, _make_db, patients_rows, with_patients
from tests.helpers import cli, write_policy

Row = dict[str, Any]


@pytest.fixture
def patients(db: TestDB) -> TestDB:
    return with_patients(db)


def _patient_dicts() -> list[Row]:
    cols, rows = patients_rows()
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _band(age: int, cuts: Sequence[int] = (30, 41)) -> int:
    return sum(age >= c for c in cuts)


def _patient_key(row: Row, node: dict[str, int]) -> tuple:
    """A patient's class at a node, by hand: Postcode masked from the right (5 levels, the fifth
    '*'), Age by the cuts 30 and 41 (level 1) and '*' (level 2)."""
    pc, age = node.get("Postcode", 0), node.get("Age", 0)
    postcode = "*" if pc == 5 else row["Postcode"][: 5 - pc]
    band = row["Age"] if age == 0 else _band(row["Age"]) if age == 1 else "*"
    return postcode, band


def _classes(rows: list[Row], key: Callable[[Row], tuple]) -> dict[tuple, list[Row]]:
    out: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return out


def _run(*args: str) -> tuple[int, dict]:
    code, out, err = cli(*args, "--json")
    assert code in (0, 1), (args, code, err)
    return code, json.loads(out)


# --------------------------------------------------------------------------------------------------
# 1. evaluate at a node with a quasi-identifier at its top level '*'
# --------------------------------------------------------------------------------------------------


def _evaluate_policy(**extra: object) -> dict:
    pol: dict = {
        "source": "main.patients",
        "target": "main.patients_out",
        "columns": {
            "PatientID": {"role": "identifier"},
            "Postcode": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
            "Age": {"role": "quasi", "hierarchy": {"interval": {"cuts": [30, 41]}}},
            "Disease": {"role": "sensitive"},
        },
        "privacy": {"k": 2, "l": {"Disease": 2}, "suppression": 0.5},
        "label": "Disease",
    }
    pol.update(extra)
    return pol


@pytest.mark.parametrize(
    "node",
    [
        {"Postcode": 5, "Age": 0},
        {"Postcode": 5, "Age": 1},
        {"Postcode": 0, "Age": 2},
        {"Postcode": 5, "Age": 2},
    ],
    ids=lambda n: ",".join(f"{q}={lvl}" for q, lvl in n.items()),
)
def test_evaluate_at_a_top_level_node_matches_a_brute_force_count(
    patients: TestDB, tmp_path: Path, node: dict[str, int]
) -> None:
    """PostgreSQL refused the GROUP BY of the constant '*' ("non-integer constant in GROUP BY")."""
    path = write_policy(tmp_path, _evaluate_policy())
    levels = ",".join(f"{q}={lvl}" for q, lvl in node.items())
    code, r = _run("evaluate", str(path), "--db", patients.url, "--levels", levels)

    rows = _patient_dicts()
    n_rows, k, heights = len(rows), 2, {"Postcode": 5, "Age": 2}
    classes = _classes(rows, lambda x: _patient_key(x, node))
    bad = {
        c for c, members in classes.items() if len(members) < k or len({m["Disease"] for m in members}) < 2
    }
    suppressed = sum(len(classes[c]) for c in bad)
    kept = [members for c, members in classes.items() if c not in bad]
    allowed = math.floor(0.5 * n_rows)

    assert (code == 0) == (suppressed <= allowed) == r["satisfies"]
    assert r["rows"] == n_rows
    assert (r["classes"], r["suppressed_records"], r["suppressed_classes"]) == (
        len(kept),
        suppressed,
        len(bad),
    )
    a = r["assess"]  # the source generalised to the node, before suppression
    assert a["classes"] == len(classes) and a["k"] == min(len(m) for m in classes.values())
    assert a["class_sizes"] == {str(s): c for s, c in sorted(Counter(map(len, classes.values())).items())}
    assert a["l_diversity"]["Disease"]["distinct"] == min(
        len({m["Disease"] for m in v}) for v in classes.values()
    )
    m = r["metrics"]
    assert m["height"] == sum(node.values())
    assert m["discernibility"] == sum(len(e) ** 2 for e in kept) + suppressed * n_rows
    loss = sum(len(e) for e in kept) * sum(node[q] / heights[q] for q in heights) + suppressed * len(heights)
    assert m["precision"] == pytest.approx(1 - loss / (len(heights) * n_rows))
    majority = sum(len(e) - max(Counter(x["Disease"] for x in e).values()) for e in kept)
    assert m["cm"] == pytest.approx((majority + suppressed) / n_rows)
    assert m["avg_class_size"] == pytest.approx(n_rows / (len(kept) + (1 if suppressed else 0)) / k)


# --------------------------------------------------------------------------------------------------
# 2. journalist risk with a population at a generalised node
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "node", [{"Postcode": 2, "Age": 1}, {"Postcode": 5, "Age": 1}, {"Postcode": 3, "Age": 2}]
)
def test_journalist_risk_at_a_generalised_node(
    patients: TestDB, tmp_path: Path, node: dict[str, int]
) -> None:
    """The population was grouped by its raw values and joined to the release's labels: DuckDB
    failed with "Could not convert string '*' to INT32"."""
    rows = _patient_dicts()
    extra = [
        {"Postcode": "47611", "Age": 25},  # joins the 476** / under-30 class
        {"Postcode": "47999", "Age": 44},
        {"Postcode": "10000", "Age": 90},  # a class absent from the sample: not counted
    ]
    population = rows + rows + extra
    # Another column order, a wider integer type and a column the source lacks.
    patients.load(
        "census",
        ["Region", "Age", "Postcode"],
        [["r", p["Age"], p["Postcode"]] for p in population],
        ["VARCHAR", "BIGINT", "VARCHAR"],
    )
    path = write_policy(tmp_path, _evaluate_policy(population="main.census"))
    levels = ",".join(f"{q}={lvl}" for q, lvl in node.items())
    _, r = _run("evaluate", str(path), "--db", patients.url, "--levels", levels)

    sample = Counter(_patient_key(x, node) for x in rows)
    big = Counter(_patient_key(x, node) for x in population)
    journalist = 1 / min(big[c] for c in sample)
    marketer = sum(f / big[c] for c, f in sample.items()) / len(rows)
    assert r["assess"]["risk"]["journalist"] == pytest.approx(journalist, abs=1e-12)
    assert r["assess"]["risk"]["marketer"] == pytest.approx(marketer, abs=1e-12)


# --------------------------------------------------------------------------------------------------
# 3. Datafly's stopping rule (seed 002 Alg. 2), within the policy's suppression limit
# --------------------------------------------------------------------------------------------------

# One quasi-identifier, four cut levels: bands of 10, of 20, below/above 40, then '*'.
DATAFLY_CUTS = [[20, 30, 40, 50, 60, 70, 80], [20, 40, 60, 80], [40]]
DATAFLY_AGES = [21, 22, 23, 31, 32, 41, 42, 55, 65, 85]


def _datafly_bad(level: int, k: int) -> int:
    """Records in classes smaller than k at ``level`` (counted by hand)."""
    if level == len(DATAFLY_CUTS) + 1:
        sizes = Counter("*" for _ in DATAFLY_AGES)
    else:
        key = (lambda a: a) if level == 0 else (lambda a: _band(a, DATAFLY_CUTS[level - 1]))
        sizes = Counter(key(a) for a in DATAFLY_AGES)
    return sum(n for n in sizes.values() if n < k)


def _sweeney_stop(k: int) -> int:
    """The level where Sweeney's rule stops: the first with at most k records in small classes."""
    return next(lvl for lvl in range(len(DATAFLY_CUTS) + 2) if _datafly_bad(lvl, k) <= k)


@pytest.mark.parametrize(
    ("suppression", "level", "suppressed"),
    [
        # The policy allows 3 records, more than k = 2: Datafly stops as soon as the violating
        # records fit that budget (level 1, 3 records), before Sweeney's p <= k (level 2).
        (0.3, 1, 3),
        # The policy allows exactly k = 2: the same node as Sweeney's rule.
        (0.2, 2, 2),
        # No suppression allowed: Sweeney's rule would stop at level 2 and suppress 2 records the
        # policy forbids; Datafly goes on to the first node that needs none.
        (0.0, 3, 0),
    ],
)
def test_datafly_stops_within_the_policy(
    db: TestDB, tmp_path: Path, suppression: float, level: int, suppressed: int
) -> None:
    k = 2
    assert [_datafly_bad(lvl, k) for lvl in range(5)] == [10, 3, 2, 0, 0]  # the table's design
    assert _sweeney_stop(k) == 2
    db.load("ages", ["id", "age"], [[i, a] for i, a in enumerate(DATAFLY_AGES)], ["INTEGER", "INTEGER"])
    pol = {
        "source": "main.ages",
        "target": "main.ages_out",
        "columns": {
            "id": {"role": "identifier"},
            "age": {"role": "quasi", "hierarchy": {"interval": {"cuts": DATAFLY_CUTS}}},
        },
        "privacy": {"k": k, "suppression": suppression},
    }
    path = write_policy(tmp_path, pol)
    _, r = _run("anonymise", str(path), "--db", db.url, "--dry-run", "--algorithm", "datafly")
    allowed = math.floor(suppression * len(DATAFLY_AGES) + 1e-9)
    assert r["node"] == {"age": level}
    assert r["suppressed_records"] == suppressed == _datafly_bad(level, k) <= allowed
    # Stopped at the first such node on its path: the level below needs more than the policy allows.
    assert _datafly_bad(level - 1, k) > allowed


# --------------------------------------------------------------------------------------------------
# 4. progress: never more nodes checked than exist
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["flash", "incognito", "datafly", "exhaustive"])
@pytest.mark.parametrize(
    "privacy",
    [{"k": 3}, {"k": 2, "l": {"Disease": 2}, "suppression": 0.3}],  # monotone; l with suppression is not
    ids=["monotone", "non-monotone"],
)
def test_progress_never_reports_more_nodes_than_exist(
    duck_patients: TestDB, algorithm: str, privacy: dict
) -> None:
    pol = _evaluate_policy(privacy=privacy)
    del pol["label"]
    calls: list[tuple[int, int, int]] = []
    result = sqlanon.search(pol, duck_patients.url, algorithm=algorithm, progress=lambda *a: calls.append(a))
    heights = [5, 2]
    lattice = math.prod(h + 1 for h in heights)
    assert result.nodes_total == lattice
    # Incognito walks the subset lattices too: each QI at one of its levels or outside the subset.
    space = math.prod(h + 2 for h in heights) - 1 if algorithm == "incognito" else lattice
    assert calls
    for checked, pruned, remaining in calls:
        assert 0 <= checked <= space and pruned >= 0 and remaining >= 0, calls
        assert checked + pruned + remaining == space, calls
    assert [c[0] for c in calls] == sorted(c[0] for c in calls), calls  # never goes back
    assert calls[-1][2] == 0, calls  # ends with nothing remaining


# --------------------------------------------------------------------------------------------------
# 5. data and policy text that looks like rich markup
# --------------------------------------------------------------------------------------------------


def test_markup_in_values_and_names_is_printed_literally(
    db: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rich read ``[/red]`` as a closing tag (MarkupError, a traceback) and swallowed ``[b]``; a
    metric's range ``[mean_j H(Y|X_j), H(Y)]`` vanished from the evaluate table."""
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping: the literal text stays on one line
    _, rows = patients_rows()
    rows = [[r[0], "[/red]" if i % 2 else "[b]x", r[4]] for i, r in enumerate(rows)]
    db.load("marked", ["PatientID", "[i]zone", "Disease"], rows, ["INTEGER", "VARCHAR", "VARCHAR"])
    pol = {
        "source": "main.marked",
        "target": "main.marked_out",
        "columns": {
            "PatientID": {"role": "identifier"},
            "[i]zone": {"role": "quasi"},
            "Disease": {"role": "sensitive"},
        },
        "privacy": {"k": 2},
    }
    path = write_policy(tmp_path, pol)
    outputs = {}
    for args in (("assess",), ("evaluate", "--levels", "[i]zone=0"), ("profile", "--k", "2")):
        code, out, err = cli(args[0], str(path), "--db", db.url, *args[1:])
        assert code == 0, (args, code, out, err)
        assert "Traceback" not in out + err
        outputs[args[0]] = out
    for text in ("[/red]", "[b]x", "[i]zone"):  # assess's most disclosive classes name the values
        assert text in outputs["assess"], (text, outputs["assess"])
    # evaluate prints no class values (its classes are those before suppression, issue 32)
    assert "[i]zone" in outputs["evaluate"]
    assert "[mean_j H(Y|X_j), H(Y)]" in outputs["evaluate"]
    assert "[i]zone" in outputs["profile"]


# --------------------------------------------------------------------------------------------------
# 6. columns that cannot be grouped
# --------------------------------------------------------------------------------------------------

UNGROUPABLE = {
    # type SQL, a value, the text the one-line error must contain
    "json[]": ("JSON[]", "ARRAY['{\"a\": 1}'::json]", "json[]"),
    "composite": ("main.doc_t", "ROW(1, '{\"a\": 1}'::json)::main.doc_t", "doc_t"),
    "txid_snapshot": ("TXID_SNAPSHOT", "txid_current_snapshot()", "txid_snapshot"),
    "box": ("BOX", "'((0,0),(1,1))'::box", "box"),
}


@pytest.mark.parametrize("kind", list(UNGROUPABLE))
@pytest.mark.parametrize("role", ["quasi", "sensitive"])
@pytest.mark.parametrize("command", ["assess", "evaluate", "anonymise"])
def test_ungroupable_column_on_postgres_is_named(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, role: str, command: str
) -> None:
    """A vague driver error ("could not identify an equality operator for type json[]", from the
    base frequency table's query) instead of one line naming the column."""
    type_sql, value, needle = UNGROUPABLE[kind]
    for db in _make_db("postgres", request, tmp_path):
        db.sql('CREATE TYPE "main"."doc_t" AS ("a" INT, "j" JSON)')
        db.sql(f'CREATE TABLE "main"."docs" ("id" INT, "meta" {type_sql}, "d" TEXT)')
        db.sql(f"""INSERT INTO "main"."docs" VALUES (1, {value}, 'x'), (2, {value}, 'y')""")
        other = "sensitive" if role == "quasi" else "quasi"
        pol = {
            "source": "main.docs",
            "target": "main.docs_out",
            "columns": {"meta": role, "d": other},
            "privacy": {"k": 1},
        }
        before = db.snapshot()
        args = {
            "assess": (),
            "evaluate": ("--levels", "d=0" if other == "quasi" else "meta=0"),
            "anonymise": ("--dry-run",),
        }
        code, out, err = cli(command, str(write_policy(tmp_path, pol)), "--db", db.url, *args[command])
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (code, out, err)
        assert lines[0].startswith("error: columns.meta: type "), lines
        assert needle in lines[0] and "cast it to text" in lines[0], lines
        assert db.snapshot() == before


def test_json_column_on_duckdb_is_measured(duck_patients: TestDB, tmp_path: Path) -> None:
    """DuckDB's JSON is text underneath and groups: it is measured, not refused as PostgreSQL's is."""
    duck_patients.sql(
        'CREATE TABLE "main"."docs" AS SELECT * FROM (VALUES (1, \'{"a": 1}\'::JSON, \'x\'), '
        '(2, \'{"a": 1}\'::JSON, \'y\'), (3, \'{"a": 2}\'::JSON, \'x\')) AS t("id", "meta", "d")'
    )
    pol = {"source": "main.docs", "columns": {"meta": "quasi", "d": "sensitive"}, "privacy": {"k": 1}}
    _, a = _run("assess", str(write_policy(tmp_path, pol)), "--db", duck_patients.url)
    assert (a["rows"], a["classes"], a["k"]) == (3, 2, 1)


# --------------------------------------------------------------------------------------------------
# 7. source columns named like sqlanon's internal aliases
# --------------------------------------------------------------------------------------------------

#: QIs named like the aliases the base frequency table gives them, crossed (the first QI is
#: aliased q_0, the second q_1), like its count (cnt) and the population's (big_n); sensitive
#: attributes named like the value and rank aliases (s_0, sid_0); the label named cid.
ALIAS_COLUMNS = ["q_1", "q_0", "cnt", "big_n", "sid_0", "s_0", "cid", "gid"]
ALIAS_TYPES = ["INTEGER", "VARCHAR", "VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "VARCHAR", "INTEGER"]


def _alias_row(i: int) -> list:
    return [
        5 + (i % 4) * 4,
        f"{'xy'[i % 2]}{i % 3}",
        "ab"[i // 8],
        (i // 3) % 2,
        "ABC"[i % 3],
        "uv"[(i // 2) % 2],
        "yn"[i % 5 % 2],
        i,
    ]


def _alias_key(r: Row, node: dict[str, int]) -> tuple:
    q1 = r["q_1"] if node["q_1"] == 0 else _band(r["q_1"], [10]) if node["q_1"] == 1 else "*"
    q0 = r["q_0"][: 2 - node["q_0"]] if node["q_0"] < 2 else "*"
    return q1, q0, r["cnt"] if node["cnt"] == 0 else "*", r["big_n"] if node["big_n"] == 0 else "*"


@pytest.mark.parametrize(
    "node", [{"q_1": 0, "q_0": 0, "cnt": 0, "big_n": 0}, {"q_1": 1, "q_0": 1, "cnt": 1, "big_n": 0}]
)
def test_columns_named_like_internal_aliases_are_measured_right(
    db: TestDB, tmp_path: Path, node: dict[str, int]
) -> None:
    rows = [_alias_row(i) for i in range(16)]
    db.load("odd", ALIAS_COLUMNS, rows, ALIAS_TYPES)
    db.load("odd_pop", ALIAS_COLUMNS, rows + rows + [_alias_row(i) for i in (3, 7)], ALIAS_TYPES)
    pol = {
        "source": "main.odd",
        "target": "main.odd_out",
        "population": "main.odd_pop",
        "columns": {
            "gid": {"role": "identifier"},
            "q_1": {"role": "quasi", "hierarchy": {"interval": {"cuts": [10]}}},
            "q_0": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 2}},
            "cnt": "quasi",
            "big_n": "quasi",
            "sid_0": "sensitive",
            "s_0": "sensitive",
            "cid": "insensitive",
        },
        "privacy": {"k": 2, "l": {"sid_0": 2}, "suppression": 0.5},
        "label": "cid",
    }
    path = write_policy(tmp_path, pol)
    levels = ",".join(f"{q}={lvl}" for q, lvl in node.items())
    _, r = _run("evaluate", str(path), "--db", db.url, "--levels", levels)

    dicts = [dict(zip(ALIAS_COLUMNS, x, strict=True)) for x in rows]
    pop = [dict(zip(ALIAS_COLUMNS, x, strict=True)) for x in rows + rows + [_alias_row(i) for i in (3, 7)]]
    classes = _classes(dicts, lambda x: _alias_key(x, node))
    bad = {c for c, e in classes.items() if len(e) < 2 or len({x["sid_0"] for x in e}) < 2}
    kept = [e for c, e in classes.items() if c not in bad]
    suppressed = sum(len(classes[c]) for c in bad)
    assert (r["rows"], r["classes"], r["suppressed_records"]) == (16, len(kept), suppressed)
    a = r["assess"]
    assert (a["classes"], a["k"]) == (len(classes), min(map(len, classes.values())))
    for s in ("sid_0", "s_0"):
        assert a["l_diversity"][s]["distinct"] == min(len({x[s] for x in e}) for e in classes.values())
    big = Counter(_alias_key(x, node) for x in pop)
    assert a["risk"]["journalist"] == pytest.approx(1 / min(big[c] for c in classes), abs=1e-12)
    majority = sum(len(e) - max(Counter(x["cid"] for x in e).values()) for e in kept)
    assert r["metrics"]["cm"] == pytest.approx((majority + suppressed) / 16)
    assert r["metrics"]["discernibility"] == sum(len(e) ** 2 for e in kept) + suppressed * 16
