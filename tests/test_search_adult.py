"""Adult with its nine ARX hierarchies (12,960 nodes): Incognito and Flash find exactly the minimal
nodes that the exhaustive search (MinGen) finds, on DuckDB and PostgreSQL; Datafly's node satisfies
the policy.

Independent check: each minimal node is re-verified in pure Python (tests/reference.py on the rows
generalised with the ARX files read here): it satisfies the policy within the suppression limit and
none of its direct predecessors does.

Exhaustive search over all nodes costs ~30 s on DuckDB and 2-3 min on PostgreSQL per policy, and
a search on PostgreSQL is several times slower than on DuckDB (the CI budget is 45 minutes on two
cores). So DuckDB runs the cases below, and PostgreSQL those that prove the most (Incognito at
k = 5, Flash with suppression and with t; l under suppression on PostgreSQL is in
test_properties.py), each against the DuckDB exhaustive set (the same
rows, so the same expected set; PostgreSQL's own exhaustive search, 2-3 minutes, agreed with it on
k = 5 when this was last measured). The SQL is the same templates on both engines.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from functools import cache

import pytest

from sqlanon.engines import session
from sqlanon.lattice import algorithms, node_map, predecessors, prepare, run_search
from sqlanon.metrics.optimum import choose, search
from sqlanon.policy import parse_policy
from tests import reference as ref
from tests.conftest import ADULT_COLUMNS, ADULT_DIR, _make_db, read_adult

pytestmark = pytest.mark.slow

# Each case costs one exhaustive search (~30 s on DuckDB); Incognito (40-80 s with its Python
# re-check) runs where it proves the most: k with and without suppression, and distinct l with
# suppression (not monotone: the relaxed walk plus the full policy's pass).
K_CASES = [(5, 0.0, "incognito"), (5, 0.0, "flash"), (5, 0.05, "incognito"), (5, 0.05, "flash")]
# (k = 2 without suppression, 90 s in CI, was dropped for time: k = 5 covers Flash at 0 %.)
K_CASES += [(10, 0.05, "flash")]
LT_CASES = [("l3", 0.05, "incognito"), ("l3", 0.05, "flash"), ("t02", 0.0, "flash"), ("t02", 0.05, "flash")]
#: PostgreSQL's cases: (algorithm, k, suppression, l/t).
PG_CASES = [
    ("incognito", 5, 0.0, None),
    ("flash", 5, 0.05, None),
    # Flash with distinct l = 3 and 5 % (monotone: the walk evaluates the distinct values per
    # class on PostgreSQL).
    ("flash", None, 0.05, "l3"),
    ("flash", None, 0.0, "t02"),
]
EXHAUSTIVE: dict[tuple, frozenset] = {}
EXHAUSTIVE_RESULTS: dict[tuple, object] = {}


@pytest.fixture(scope="module", autouse=True)
def _rollups_kept() -> Iterator[None]:
    """Flash keeps rollups only over a table of KEEP_MIN_ROWS rows or more; Adult's coded table is
    smaller, so here that floor is 0 and every Flash case below also checks nodes rolled up from
    kept rollups (the smaller tables of tests/test_properties.py run without them)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(algorithms, "KEEP_MIN_ROWS", 0)
        yield


def _policy(k: int | None, supp: float, extra: str | None = None) -> dict:
    cols: dict = {}
    for c in ADULT_COLUMNS:
        if extra and c == "occupation":
            cols[c] = {"role": "sensitive"}
        else:
            cols[c] = {"role": "quasi", "hierarchy": {"file": str(ADULT_DIR / f"adult_hierarchy_{c}.csv")}}
    privacy: dict = {"suppression": supp}
    if k:
        privacy["k"] = k
    if extra == "l3":
        privacy["l"] = {"occupation": {"kind": "distinct", "l": 3}}
    if extra == "t02":
        privacy["t"] = {"occupation": {"measure": "emd-equal", "t": 0.2}}
    return {"source": "main.adult", "columns": cols, "privacy": privacy}


def _load(db):  # noqa: ANN001, ANN202
    rows = read_adult()
    types = ["VARCHAR", "INTEGER"] + ["VARCHAR"] * 7
    db.load("adult", ADULT_COLUMNS, [[r[c] for c in ADULT_COLUMNS] for r in rows], types)
    return db


@pytest.fixture(scope="module")
def adult(request, tmp_path_factory):  # noqa: ANN001, ANN201
    """Adult on DuckDB (the whole matrix)."""
    for db in _make_db("duckdb", request, tmp_path_factory.mktemp("duckdb")):
        yield _load(db)


@pytest.fixture(scope="module")
def pg_adult(request, tmp_path_factory):  # noqa: ANN001, ANN201
    """Adult on PostgreSQL (PG_CASES)."""
    for db in _make_db("postgres", request, tmp_path_factory.mktemp("postgres")):
        yield _load(db)


def _search(db, policy: dict, algorithm: str):  # noqa: ANN001, ANN202
    with session(db.url) as be:
        plan = prepare(be, parse_policy(policy))
        result = run_search(plan, algorithm)
        names = plan.qi_names
        return result, names, plan.heights, plan.allowed


@cache
def _arx(column: str) -> dict[str, list[str]]:
    with (ADULT_DIR / f"adult_hierarchy_{column}.csv").open(encoding="utf-8") as f:
        return {r[0].strip(): [c.strip() for c in r] for r in csv.reader(f, delimiter=";") if r}


def _generalise(rows: list[dict], levels: dict[str, int]) -> list[dict]:
    out = []
    for r in rows:
        g = dict(r)
        for c, lvl in levels.items():
            g[c] = _arx(c)[str(r[c])][lvl]
        out.append(g)
    return out


def _ok(rows: list[dict], levels: dict[str, int], policy: dict) -> bool:
    """Pure-Python check: records in violating classes <= the suppression limit."""
    priv = policy["privacy"]
    gen = _generalise(rows, levels)
    qis = list(levels)
    k = priv.get("k", 1)
    lreq = priv.get("l", {}).get("occupation")
    treq = priv.get("t", {}).get("occupation")
    whole = ref._distribution(rows, "occupation") if treq else None  # noqa: SLF001

    def good(cls: list[dict]) -> bool:
        if len(cls) < k:
            return False
        if lreq and len({r["occupation"] for r in cls}) < lreq["l"]:
            return False
        if treq:
            q = ref._distribution(cls, "occupation")  # noqa: SLF001
            emd = 0.5 * sum(abs(q.get(v, 0.0) - p) for v, p in whole.items())
            if emd > treq["t"] + 1e-9:
                return False
        return True

    bad = ref.violating_records(gen, qis, good)
    return bad <= math.floor(priv["suppression"] * len(rows) + 1e-9)


def _check_minimal_independently(minimal: list[dict], policy: dict) -> None:
    rows = read_adult()
    names = [c for c in ADULT_COLUMNS if policy["columns"][c]["role"] == "quasi"]
    for levels in minimal:
        assert _ok(rows, levels, policy), f"minimal node {levels} fails the reference check"
        node = tuple(levels[n] for n in names)
        for p in predecessors(node):
            assert not _ok(rows, dict(zip(names, p, strict=True)), policy), (
                f"predecessor {p} of minimal node {levels} also satisfies"
            )


def _exhaustive_set(adult, key: tuple, policy: dict) -> frozenset:  # noqa: ANN001
    if key not in EXHAUSTIVE:
        result, names, _, _ = _search(adult, policy, "exhaustive")
        EXHAUSTIVE_RESULTS[key] = result
        EXHAUSTIVE[key] = frozenset(tuple(sorted(node_map_names(names, n).items())) for n in result.minimal)
    return EXHAUSTIVE[key]


def node_map_names(names: list[str], node: tuple) -> dict[str, int]:
    return dict(zip(names, node, strict=True))


@pytest.mark.parametrize(("k", "supp", "algorithm"), K_CASES)
def test_search_equals_exhaustive_for_k(adult, k, supp, algorithm, monkeypatch):  # noqa: ANN001
    policy = _policy(k, supp)
    meets: list[int] = []  # Flash's kept meets (algorithms._keep_meets), by the nodes they serve
    real = algorithms._keep_meets

    def spy(ev, batch, classes):  # noqa: ANN001, ANN202
        before = len(ev.sources)
        real(ev, batch, classes)
        for src in ev.sources[before:]:
            meets.append(sum(1 for n in batch if src.serves(n)))

    monkeypatch.setattr(algorithms, "_keep_meets", spy)
    result, names, heights, _ = _search(adult, policy, algorithm)
    if algorithm == "flash" and supp == 0:
        # With KEEP_MIN_ROWS at 0 (this module) Flash keeps meets of several nodes here, and the
        # minimal nodes below still equal exhaustive's.
        assert any(m >= 2 for m in meets), meets
    assert math.prod(h + 1 for h in heights) == 12960
    got = frozenset(tuple(sorted(node_map_names(names, n).items())) for n in result.minimal)
    expected = _exhaustive_set(adult, (k, supp, None), policy)
    assert got and got == expected
    if algorithm == "incognito":
        _check_minimal_independently([dict(m) for m in sorted(got)][:6], policy)


@pytest.mark.parametrize(("extra", "supp", "algorithm"), LT_CASES)
def test_search_equals_exhaustive_for_l_and_t(adult, extra, supp, algorithm):  # noqa: ANN001
    policy = _policy(None, supp, extra)
    result, names, heights, _ = _search(adult, policy, algorithm)
    assert math.prod(h + 1 for h in heights) == 4320  # eight QIs, occupation sensitive
    got = frozenset(tuple(sorted(node_map_names(names, n).items())) for n in result.minimal)
    expected = _exhaustive_set(adult, (None, supp, extra), policy)
    assert got and got == expected
    if algorithm == "incognito":
        _check_minimal_independently([dict(m) for m in sorted(got)][:4], policy)


@pytest.mark.parametrize(("algorithm", "k", "supp", "extra"), PG_CASES)
def test_postgres_search_equals_exhaustive(pg_adult, adult, algorithm, k, supp, extra):  # noqa: ANN001
    """The same minimal nodes on PostgreSQL as DuckDB's exhaustive search finds on the same rows."""
    policy = _policy(k, supp, extra)
    result, names, _, _ = _search(pg_adult, policy, algorithm)
    got = frozenset(tuple(sorted(node_map_names(names, n).items())) for n in result.minimal)
    assert got and got == _exhaustive_set(adult, (k, supp, extra), policy)


def test_read_only_postgres_flash_equals_exhaustive(pg_adult, adult):  # noqa: ANN001
    """In a read-only PostgreSQL session (Backend.inline: every working table a CTE) Flash runs
    one more search in step per node checked and keeps no tables: the same minimal nodes as
    DuckDB's exhaustive search, with 5 % suppression."""
    policy = _policy(5, 0.05)
    read_only = "options=-c%20default_transaction_read_only%3Don"
    ro = pg_adult.url + ("&" if "?" in pg_adult.url else "?") + read_only
    with session(ro) as be:
        assert be.inline
        plan = prepare(be, parse_policy(policy))
        result = run_search(plan, "flash")
        names = plan.qi_names
    got = frozenset(tuple(sorted(node_map_names(names, n).items())) for n in result.minimal)
    assert got and got == _exhaustive_set(adult, (5, 0.05, None), policy)


@pytest.mark.parametrize("k", [5, 10])
def test_datafly_result_satisfies(adult, k):  # noqa: ANN001
    policy = _policy(k, 0.02)
    result, names, _, _ = _search(adult, policy, "datafly")
    (node,) = result.minimal
    assert _ok(read_adult(), node_map_names(names, node), policy)


def test_node_map_skips_absent_levels():
    class P:
        qi_names = ["a", "b"]

    assert node_map(P(), (1, None)) == {"a": 1}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("engine", "case"),
    [
        ("duckdb", (5, 0.05, None)),
        ("postgres", (5, 0.05, None)),
        ("duckdb", (None, 0.05, "l3")),
        ("postgres", (None, 0.05, "l3")),
        ("duckdb", (5, 0.05, "t02")),
    ],
    ids=["duckdb-k5", "postgres-k5", "duckdb-l3", "postgres-l3", "duckdb-k5_t02"],
)
def test_flash_with_pruning_finds_the_exhaustive_optimum(adult, pg_adult, engine, case):  # noqa: ANN001
    """``search.scope: optimum`` (the default): Flash skips the nodes whose precision bound loses
    to a satisfying node it has checked (ARX's pruning) and still returns the optimum computed here
    from the definition (Prec, seed 002 eq. 3) over every satisfying node of the exhaustive search;
    the minimal nodes it lists are exhaustive minimal nodes, the optimum among them for k. k = 5
    with t = 0.2 and 5 % is not monotone: Flash walks the class-size relaxation, reading it from
    full evaluations once most walked nodes pass it (the fused walk), with the bound of nodes that
    truly satisfy, then evaluates the full policy on what it let through in order of bound; the
    optimum need not be minimal there, but it is among the satisfying nodes Flash returns."""
    k, supp, extra = case
    policy = _policy(k, supp, extra)
    key = (k, supp, extra)
    _exhaustive_set(adult, key, policy)
    exh = EXHAUSTIVE_RESULTS[key]
    with session((adult if engine == "duckdb" else pg_adult).url) as be:
        plan = prepare(be, parse_policy(policy))
        res = search(plan, "flash", "precision")
        node, best = choose(plan, res, "precision")
        heights, n, allowed = plan.heights, plan.n_rows, plan.allowed

    def loss(nd: tuple) -> float:  # Prec's loss: suppressed cells count as fully generalised
        s = exh.results[nd].bad_records
        share = sum(lvl / h for lvl, h in zip(nd, heights, strict=True) if h)
        return ((n - s) * share + s * sum(1 for h in heights if h)) / (len(heights) * n)

    sat = [nd for nd, r in exh.results.items() if r.bad_records <= allowed]
    want = min(sat, key=lambda nd: (loss(nd), sum(nd), nd))
    assert node == want and best["value"] == pytest.approx(1 - loss(want), abs=1e-12)
    assert res.scope == "optimum" and res.pruned > 0
    assert want in res.satisfying and set(res.minimal) <= set(exh.minimal)
    assert res.satisfying <= set(sat)
    if extra is None:
        assert want in res.minimal
