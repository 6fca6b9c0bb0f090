"""Perturbation (issue 10) against hostile data, names and policies, on DuckDB and PostgreSQL.

Every expected value comes from the definitions (the README's formulas, the reference of
``tests/test_perturb.py`` written from them, scipy, or a count by hand), never from the code under
test: hostile column names (the chain's own helper names), a row key that is NULL or repeats, the
default row key's separator inside a value, numbers a double cannot hold, PostgreSQL's booleans,
k-PRAM's borders, k-noise's closed neighbourhoods, and read-only connections.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from scipy import stats

import sqlanon
from sqlanon.errors import SqlanonError
from sqlanon.relation import Relation
from sqlanon.sql.compile import ident, lit
from tests.conftest import TestDB, _make_db
from tests.helpers import cli, cli_json, write_policy
from tests.test_perturb import reference, u, whole

HOSTILE: dict[str, dict[str, Any]] = {
    "delta": {"method": "k-noise", "k": 3},  # k-noise's own helper column was "delta"
    "n": {"method": "microaggregate", "k": 3},  # the count of microaggregation and k-PRAM
    "lo": {"method": "k-pram", "width": 4},  # the minimum, k-PRAM's default start
    "m": {"method": "swap", "p": 20},  # the block of rank swapping
    "__sqlanon_p_key": {"method": "noise", "distribution": "uniform", "scale": 2},  # the chain's own prefix
    "grp": {"method": "k-pram", "k": 4, "retain": 0.2},  # PRAM's group column
    "a b;c\"'": {"method": "pram", "retain": 0.3},  # quotes, a space, a semicolon
}


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def test_hostile_names_in_a_view_of_an_odd_schema(db: TestDB) -> None:
    """Columns named like the chain's helpers, read through a view in a schema with a space,
    published (a table: perturbation needs the key): every value is the definition's (the names
    used to be ambiguous), computed values of integer columns rounded to whole numbers."""
    names = list(HOSTILE)
    rows = []
    for i in range(1, 41):
        row: dict[str, Any] = {"id": i, "q": "ab"[i % 2]}
        for j, nm in enumerate(names):
            row[nm] = None if i % 11 == j else (i * (j + 3)) % 17 - 5
        row["a b;c\"'"] = ["it's", "ünï", "x;y", 'q"q'][i % 4]
        rows.append(row)
    cols = ["id", "q", *names]
    types = ["BIGINT", "TEXT"] + ["BIGINT"] * (len(names) - 1) + ["TEXT"]
    db.load("src t", cols, [[r[c] for c in cols] for r in rows], types, schema="odd sch")
    db.sql('CREATE VIEW "odd sch"."v;w" AS SELECT * FROM "odd sch"."src t"')
    columns: dict[str, Any] = {"id": "insensitive", "q": "quasi"}
    columns.update({nm: {"role": "insensitive", "perturb": spec} for nm, spec in HOSTILE.items()})
    policy = {
        "source": {"schema": "odd sch", "name": "v;w"},
        "target": {"schema": "odd sch", "name": "out view"},
        "key": "id",
        "columns": columns,
        "privacy": {"k": 2},
    }
    sqlanon.anonymise(policy, db.url)
    got = db.sql(f'SELECT id, {", ".join(_q(n) for n in names)} FROM "odd sch"."out view" ORDER BY id')
    assert len(got) == len(rows)
    for j, nm in enumerate(names):
        want = reference(rows, nm, HOSTILE[nm])
        if HOSTILE[nm]["method"] in ("noise", "k-noise", "microaggregate"):
            want = {i: whole(v) for i, v in want.items()}
        bad = [(g[0], g[j + 1], want[g[0]]) for g in got if not _close(g[j + 1], want[g[0]])]
        assert not bad, f"{nm}: {len(bad)} rows differ, e.g. {bad[:3]}"


def _keyed(db: TestDB, tmp_path: Path, key_values: list[Any]) -> tuple[int, str, str]:
    db.load(
        "t",
        ["kid", "q", "x"],
        [[k, "ab"[i % 2], i % 7] for i, k in enumerate(key_values)],
        ["BIGINT", "TEXT", "BIGINT"],
    )
    pol = {
        "source": "main.t",
        "target": "main.t_anon",
        "key": "kid",
        "columns": {
            "kid": "identifier",
            "q": "quasi",
            "x": {"role": "insensitive", "perturb": {"method": "noise", "scale": 1}},
        },
        "privacy": {"k": 2},
    }
    before = db.snapshot()
    out = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url)
    assert db.snapshot() == before  # nothing written
    return out


def test_row_key_null_or_repeated_is_refused(db: TestDB, tmp_path: Path) -> None:
    """A NULL key draws NULL random numbers (the value silently became NULL) and a repeated one
    draws the same numbers for two records: both refused in one line, exit 2, nothing written."""
    keys = [1, 2, None, 4, 4, 4, None, 8, 9, 10]  # 2 NULL; 4 three times: 2 repeat an earlier one
    code, out, err = _keyed(db, tmp_path, keys)
    assert code == 2 and err.count("\n") == 1, err
    assert "key: 'kid' is NULL in 2 rows and repeated in 2 rows" in err
    code, _, err = _keyed(db, tmp_path, [1, 2, 3, 4, 5, 6, 7, 8, 9, None])
    assert code == 2 and "key: 'kid' is NULL in 1 rows;" in err, err


def _default_key(values: list[Any]) -> str:
    """The README's default row key: per declared column 'n' for NULL, else 'v' and its text with
    '~' doubled and '|' written '~!', joined by '|'; then '#' and the row's number among
    identical rows."""
    parts = ["n" if v is None else "v" + str(v).replace("~", "~~").replace("|", "~!") for v in values]
    return "|".join(parts) + "#1"


def test_default_row_key_escapes_its_separator(db: TestDB, tmp_path: Path) -> None:
    """('x|vy', 'z') and ('x', 'y|vz') once gave the same row text, so which of the two drew which
    numbers was left to the engine; each row now has its own key, the same on both engines."""
    rows = [(1, "x|vy", "z"), (2, "x", "y|vz"), (3, "~!", None), (4, "|", None), (5, "~", "!")]
    rows += [(6, "x|vy", "z"), (7, "g", "h")]
    data = [(i, a, b, "ab"[i % 2], 10 * i) for i, a, b in rows]
    db.load("t", ["id", "a", "b", "q", "w"], data, ["BIGINT", "TEXT", "TEXT", "TEXT", "BIGINT"])
    pol = {
        "source": "main.t",
        "target": "main.t_anon",
        "columns": {
            "id": "insensitive",
            "a": "insensitive",
            "b": "insensitive",
            "q": "quasi",
            "w": {"role": "insensitive", "perturb": {"method": "noise", "scale": 3}},
        },
        "privacy": {"k": 2},
    }
    sqlanon.anonymise(pol, db.url, publish_as="table")
    got = dict(db.sql("SELECT id, w FROM main.t_anon"))
    for row in data:
        key = _default_key(list(row))
        assert got[row[0]] == whole(row[4] + 3 * (2 * u("w", "a", key) - 1)), (row, key)


def test_numbers_a_double_cannot_hold_are_refused(db: TestDB, tmp_path: Path) -> None:
    """NaN and infinity (k-noise's delta and every mean would be NaN), and whole numbers beyond
    2^53 (noise and k-noise's gaps vanish in a double): one line naming the column, exit 2."""
    big = 2**63 - 100
    rows = [
        [i, "ab"[i % 2], big + i, float("nan") if i == 3 else i * 0.5, float("inf") if i == 4 else 1.0]
        for i in range(1, 21)
    ]
    types = ["BIGINT", "TEXT", "BIGINT", "DOUBLE PRECISION", "DOUBLE PRECISION"]
    db.load("t", ["id", "q", "big", "fnan", "finf"], rows, types)
    db.sql("UPDATE main.t SET fnan = CAST('NaN' AS DOUBLE PRECISION) WHERE id = 3")  # a loader's NULL
    cases = [
        ("big", {"method": "k-noise", "k": 3}, "only up to 2^53; big reaches"),
        ("big", {"method": "noise", "scale": 1}, "only up to 2^53"),
        ("fnan", {"method": "pram", "retain": 0.5}, "fnan holds NaN or infinite values"),
        ("finf", {"method": "microaggregate", "k": 3}, "finf holds NaN or infinite values"),
    ]
    for col, spec, msg in cases:
        pol = {
            "source": "main.t",
            "key": "id",
            "columns": {"id": "insensitive", "q": "quasi", col: {"role": "insensitive", "perturb": spec}},
            "privacy": {"k": 2},
        }
        code, _, err = cli("anonymise", str(write_policy(tmp_path, pol)), "--db", db.url, "--dry-run")
        assert code == 2 and err.count("\n") == 1 and f"columns.{col}.perturb: " in err and msg in err, err


def test_methods_that_only_move_values_take_any_range_and_booleans(db: TestDB, tmp_path: Path) -> None:
    """Rank swapping of whole numbers a double cannot tell apart (the binned range had width 0:
    PostgreSQL's division by zero), and PRAM of a boolean (PostgreSQL has no MIN(boolean)): the
    values are the definition's and the KS statistic and chi-square are scipy's."""
    big = 2**62
    rows = [{"id": i, "q": "ab"[i % 2], "big": big + i % 5, "bo": i % 3 == 0} for i in range(1, 31)]
    db.load(
        "t",
        ["id", "q", "big", "bo"],
        [list(r.values()) for r in rows],
        ["BIGINT", "TEXT", "BIGINT", "BOOLEAN"],
    )
    specs = {"big": {"method": "swap", "p": 30}, "bo": {"method": "pram", "retain": 0.4}}
    cols: dict[str, Any] = {"id": "insensitive", "q": "quasi"}
    cols.update({c: {"role": "insensitive", "perturb": s} for c, s in specs.items()})
    pol = {"source": "main.t", "target": "main.t_anon", "key": "id", "columns": cols}
    res = sqlanon.anonymise({**pol, "privacy": {"k": 2}}, db.url, publish_as="table").to_dict()
    got = {r[0]: r[1:] for r in db.sql("SELECT id, big, bo FROM main.t_anon")}
    for j, col in enumerate(specs):
        want = reference(rows, col, specs[col])
        assert all(got[r["id"]][j] == want[r["id"]] for r in rows), col
    m = res["perturbation"]
    xs = [float(r["big"]) for r in rows]
    ys = [float(v) for v in reference(rows, "big", specs["big"]).values()]
    assert m["big"]["ks"]["statistic"] == pytest.approx(stats.ks_2samp(xs, ys).statistic, abs=1e-12)
    ref = reference(rows, "bo", specs["bo"])
    ox = [sum(1 for r in rows if r["bo"] is v) for v in (False, True)]
    oy = [sum(1 for r in rows if ref[r["id"]] is v) for v in (False, True)]
    chi = sum((y - x) ** 2 / x for x, y in zip(ox, oy, strict=True))
    assert m["bo"]["chi_square"] == {"statistic": pytest.approx(chi, rel=1e-12), "df": 1}


def test_k_pram_width_on_borders_and_start_above_the_minimum(db: TestDB, tmp_path: Path) -> None:
    """Groups floor((x - start) / width): a value on a border opens the next group, values below
    start fall in negative groups; NULL stays NULL."""
    values = [-7, -3, -2, 3, 3, 8, 8, 12, 13, 18, None, 23, -8, -3]
    rows = [{"id": i, "q": "ab"[i % 2], "x": v} for i, v in enumerate(values, 1)]
    db.load("t", ["id", "q", "x"], [list(r.values()) for r in rows], ["BIGINT", "TEXT", "BIGINT"])
    spec = {"method": "k-pram", "width": 5, "start": 3}
    pol = {
        "source": "main.t",
        "target": "main.t_anon",
        "key": "id",
        "columns": {"id": "insensitive", "q": "quasi", "x": {"role": "insensitive", "perturb": spec}},
        "privacy": {"k": 1},
    }
    res = sqlanon.anonymise(pol, db.url, publish_as="table").to_dict()
    groups = {math.floor((v - 3) / 5) for v in values if v is not None}  # by hand: -3..4
    assert groups == {-3, -2, -1, 0, 1, 2, 3, 4}
    assert res["perturbation"]["x"]["risk"]["groups"] == len(groups)
    got = dict(db.sql("SELECT id, x FROM main.t_anon"))
    want = reference(rows, "x", spec)
    assert got == want
    for r in rows:  # each value stays in its own group
        if r["x"] is not None:
            assert math.floor((got[r["id"]] - 3) / 5) == math.floor((r["x"] - 3) / 5)


def _rows_rel(db: TestDB, pairs: list[tuple[Any, Any]]) -> tuple[Relation, dict[str, Any]]:
    db.load("xy", ["x0", "y", "aux"], [[x, y, None] for x, y in pairs], ["DOUBLE PRECISION"] * 3)
    return Relation("xy", "main"), {"x": ident("x0"), "y": ident("y"), "aux": ident("aux")}


def test_k_noise_neighbourhoods_are_closed(db: TestDB) -> None:
    """#{j : |Y_j - x| <= 2 delta} counted by hand, with perturbed values exactly on both ends."""
    from sqlanon.engines import session

    pairs = [(0.0, 2.0), (1.0, -2.0), (5.0, 3.0), (9.0, 7.0), (None, 100.0)]
    rel, ctx = _rows_rel(db, pairs)
    # reach 2: x=0 -> {2, -2}; x=1 -> {2, 3}; x=5 -> {3, 7}; x=9 -> {7}: min 1, one of four below 2.
    with session(db.url) as be:
        got = be.query("perturb/neighbours", source=rel, reach=lit(2.0), k=lit(2), half=lit(1.0), **ctx)[0]
    assert (int(got[0]), float(got[1]), float(got[2])) == (1, 0.25, 0.0)


def test_goodness_of_fit_on_ties_and_one_value(db: TestDB) -> None:
    """The two-sample KS statistic against scipy's on ties and on a single value."""
    from sqlanon.engines import session

    for pairs in ([(1.0, 1.0), (1.0, 2.0), (2.0, 2.0), (3.0, 5.0), (None, 9.0)], [(4.0, 4.5)]):
        rel, ctx = _rows_rel(db, pairs)
        xs = [x for x, _ in pairs if x is not None]
        ys = [y for x, y in pairs if x is not None]
        with session(db.url) as be:
            d, _ = be.query("perturb/ks", source=rel, bins=10, lo=lit(min(xs)), hi=lit(max(xs) + 1), **ctx)[0]
        assert float(d) == pytest.approx(stats.ks_2samp(xs, ys).statistic, abs=1e-12)


@pytest.fixture
def pg_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDB]:
    """A PostgreSQL database alone (TEMP privilege is PostgreSQL's)."""
    yield from _make_db("postgres", request, tmp_path)


def test_read_only_postgres_refuses_perturbation(pg_db: TestDB, tmp_path: Path) -> None:
    """Without TEMP privilege there is nowhere to hold the perturbation key but the statement
    text (which the server may log): perturbation is refused in one line, nothing written."""
    db = pg_db
    rows = [[i, "ab"[i % 2], i % 17, "xyz"[i % 3]] for i in range(1, 41)]
    db.load("t", ["id", "q", "a", "c"], rows, ["BIGINT", "TEXT", "BIGINT", "TEXT"])
    cols = {
        "id": "insensitive",
        "q": "quasi",
        "a": {"role": "insensitive", "perturb": {"method": "k-noise", "k": 8}},
        "c": {"role": "sensitive", "perturb": {"method": "k-pram", "k": 4}},
    }
    path = write_policy(tmp_path, {"source": "main.t", "columns": cols, "privacy": {"k": 2}})
    assert cli_json("assess", str(path), "--db", db.url)["perturbation"]["a"]["method"] == "k-noise"
    role = f"ro_{db._dbname}"
    db.sql(f"CREATE ROLE {role} LOGIN")
    try:
        db.sql(f"GRANT USAGE ON SCHEMA main TO {role}")
        db.sql(f"GRANT SELECT ON main.t TO {role}")
        db.sql(f"REVOKE TEMPORARY ON DATABASE {db._dbname} FROM PUBLIC")
        assert db._pg is not None
        url = db.url.replace(f"{db._pg.user}@", f"{role}@")
        code, _, err = cli("assess", str(path), "--db", url)
    finally:
        db.sql(f"DROP OWNED BY {role}")
        db.sql(f"DROP ROLE {role}")
    assert code == 2 and err.count("\n") == 1 and "may not create a temporary table" in err, err


def test_table_is_the_definition_and_another_key_moves_every_value(
    db: TestDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On both engines: a perturbed release is a table by default (a view is refused), it holds the
    definition's values, and another secret key moves every value differently."""
    rows = [{"id": i, "q": "ab"[i % 2], "a": float(i % 23)} for i in range(1, 41)]
    db.load("t", ["id", "q", "a"], [list(r.values()) for r in rows], ["BIGINT", "TEXT", "DOUBLE PRECISION"])
    spec = {"method": "noise", "distribution": "laplace", "scale": 2}
    cols = {"id": "insensitive", "q": "quasi", "a": {"role": "insensitive", "perturb": spec}}
    base = {"source": "main.t", "key": "id", "columns": cols, "privacy": {"k": 3}}
    before = db.snapshot()
    with pytest.raises(SqlanonError, match="needs publishing as a table"):
        sqlanon.anonymise({**base, "target": "main.v"}, db.url, levels="q=0", publish_as="view")
    assert db.snapshot() == before
    sqlanon.anonymise({**base, "target": "main.tab"}, db.url, levels="q=0")
    monkeypatch.setenv("SQLANON_PERTURB_KEY", "another-secret-key-0123456789")
    sqlanon.anonymise({**base, "target": "main.other"}, db.url, levels="q=0")
    q = "SELECT id, q, a FROM main.{} ORDER BY id"
    table = db.sql(q.format("tab"))
    want = reference(rows, "a", spec)
    assert all(_close(a, want[i]) for i, _, a in table)
    other = dict((i, a) for i, _, a in db.sql(q.format("other")))
    assert all(other[i] != a for i, _, a in table)


def test_bad_k_pram_keys_are_one_line(tmp_path: Path) -> None:
    for spec, msg in [
        ({"method": "k-pram", "k": 3, "width": 5}, "'columns.x.perturb.width': give k"),
        ({"method": "k-pram", "k": 3, "retain": 1}, "'columns.x.perturb.retain': 1 keeps every value"),
    ]:
        pol = {
            "source": "t",
            "columns": {"q": "quasi", "x": {"role": "insensitive", "perturb": spec}},
            "privacy": {"k": 2},
        }
        code, _, err = cli("assess", str(write_policy(tmp_path, pol)), "--db", str(tmp_path / "none.duckdb"))
        assert code == 2 and err.count("\n") == 1 and msg in err, err


def test_compile_of_every_method_parses_as_tsql_and_spark(tmp_path: Path) -> None:
    cols: dict[str, Any] = {"id": "insensitive", "q": "quasi"}
    cols.update({nm: {"role": "insensitive", "perturb": s} for nm, s in HOSTILE.items()})
    cols["lo"] = {
        "role": "insensitive",
        "perturb": {"method": "noise", "distribution": "gaussian", "scale": 1},
    }
    path = write_policy(tmp_path, {"source": "main.t", "columns": cols, "privacy": {"k": 2}})
    for dialect in ("tsql", "spark"):
        code, out, err = cli("compile", str(path), "--dialect", dialect, "--levels", "q=0")
        assert code == 0, err
        tree = sqlglot.parse_one(out, read=dialect)
        assert tree is not None and "SQLANON_HMAC" not in out and "SQLANON_KEYED" not in out
        assert "MD5" not in out.upper()
        assert "sqlanon_secret" in out and "SHA" in out.upper()  # the key's pads are read, never written
        assert "___sqlanon_p_key" in out  # a source column has the chain's prefix: one more _
