"""Property tests on small random tables (hypothesis), on DuckDB and PostgreSQL:
assess agrees with the brute-force reference; Incognito's minimal nodes equal the exhaustive
search's; Datafly's node satisfies the policy (checked in pure Python)."""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlanon.engines import session
from sqlanon.errors import SqlanonError
from sqlanon.lattice import Evaluator, algorithms, evaluator, prepare, run_search
from sqlanon.measure.assessment import assess
from sqlanon.metrics.optimum import choose, search
from sqlanon.policy import parse_policy
from tests import reference as ref
from tests.conftest import TestDB, _make_db

COUNTER = itertools.count()
SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Two QIs with small hierarchies (map: value -> [level1]) and a sensitive attribute.
A_VALUES = ["a1", "a2", "a3", "a4"]
A_LEVEL1 = {"a1": "A12", "a2": "A12", "a3": "A34", "a4": "A34"}
B_VALUES = [10, 11, 12, 20, 21]
B_LEVEL1 = {10: "1x", 11: "1x", 12: "1x", 20: "2x", 21: "2x"}
S_VALUES = ["s1", "s2", "s3", None]

row = st.tuples(st.sampled_from(A_VALUES), st.sampled_from(B_VALUES), st.sampled_from(S_VALUES))
tables = st.lists(row, min_size=2, max_size=40)


def _load(db, rows):  # noqa: ANN001, ANN202
    name = f"r{next(COUNTER)}"
    db.load(name, ["a", "b", "s"], rows, ["VARCHAR", "INTEGER", "VARCHAR"])
    return name


def _dicts(rows):  # noqa: ANN001, ANN202
    return [dict(zip(["a", "b", "s"], r, strict=True)) for r in rows]


@SETTINGS
@given(rows=tables)
def test_assess_matches_reference(db, rows):  # noqa: ANN001
    name = _load(db, rows)
    pol = parse_policy(
        {
            "source": f"main.{name}",
            "columns": {"a": "quasi", "b": "quasi", "s": "sensitive"},
            "privacy": {"k": 2},
        }
    )  # recursive c_min is reported for l = 2 regardless
    with session(db.url) as be:
        a = assess(be, pol)
    d, qis = _dicts(rows), ["a", "b"]
    assert a["k"] == ref.k_anonymity(d, qis)
    assert a["records_below_k"] == ref.records_below_k(d, qis, 2)
    assert a["l_diversity"]["s"]["distinct"] == ref.distinct_l(d, qis, "s")
    assert a["l_diversity"]["s"]["entropy"] == pytest.approx(ref.entropy_l(d, qis, "s"))
    c_min = ref.recursive_c_min(d, qis, "s", 2)
    got = a["l_diversity"]["s"]["recursive"]["c_min"]
    assert (got is None and c_min is None) or got == pytest.approx(c_min)
    assert a["t_closeness"]["s"]["emd_equal"] == pytest.approx(ref.emd_equal(d, qis, "s"), abs=1e-9)
    assert a["t_closeness"]["s"]["emd_ordered"] == pytest.approx(ref.emd_ordered(d, qis, "s"), abs=1e-9)
    assert a["t_closeness"]["s"]["kl"] == pytest.approx(ref.kl_max(d, qis, "s"), abs=1e-9)
    assert a["information"]["s"]["mutual_information"] == pytest.approx(
        ref.mutual_information(d, qis, "s"), abs=1e-9
    )


def _mapped_policy(name: str, privacy: dict) -> dict:
    """The policy over table ``name``: a and b quasi-identifiers with the one-level maps that
    :func:`_generalise` applies, s sensitive."""
    return {
        "source": f"main.{name}",
        "columns": {
            "a": {"role": "quasi", "hierarchy": {"map": {v: [A_LEVEL1[v]] for v in A_VALUES}}},
            "b": {"role": "quasi", "hierarchy": {"map": {v: [B_LEVEL1[v]] for v in B_VALUES}}},
            "s": {"role": "sensitive"},
        },
        "privacy": privacy,
    }


def _generalise(rows: list[dict], la: int, lb: int) -> list[dict]:
    def ga(v):  # noqa: ANN001, ANN202
        return v if la == 0 else (A_LEVEL1[v] if la == 1 else "*")

    def gb(v):  # noqa: ANN001, ANN202
        return v if lb == 0 else (B_LEVEL1[v] if lb == 1 else "*")

    return [{"a": ga(r["a"]), "b": gb(r["b"]), "s": r["s"]} for r in rows]


def _ok(rows: list[dict], node: tuple, k: int, l: int, supp: float, c: float | None = None) -> bool:  # noqa: E741
    """The node satisfies k and distinct l, or recursive (c, l) where ``c`` is given: the most
    frequent value's count r1 < c * (r_l + ... + r_m), counts in descending order (seed 000
    section 3.2)."""
    return _bad(rows, node, k, l, c) <= math.floor(supp * len(rows) + 1e-9)


def _bad(rows: list[dict], node: tuple, k: int, l: int, c: float | None) -> int:  # noqa: E741
    """The records in classes that violate k or l (:func:`_ok`) at ``node``."""
    gen = _generalise(rows, *node)

    def diverse(cls: list[dict]) -> bool:
        counts = sorted(collections.Counter(r["s"] for r in cls).values(), reverse=True)
        if c is None:
            return len(counts) >= l
        return l <= 1 or counts[0] < c * sum(counts[l - 1 :])

    def good(cls: list[dict]) -> bool:
        return len(cls) >= k and diverse(cls)

    return ref.violating_records(gen, ["a", "b"], good)


@SETTINGS
@given(
    rows=tables,
    k=st.integers(1, 5),
    l=st.integers(1, 3),
    supp=st.sampled_from([0.0, 0.1, 0.3]),
    c=st.sampled_from([None, 1.5, 3.0]),
)
def test_incognito_and_flash_equal_exhaustive_and_datafly_satisfies(db, rows, k, l, supp, c):  # noqa: ANN001, E741
    name = _load(db, rows)
    d = _dicts(rows)
    if l > len({r["s"] for r in d}):
        return  # refused up front (tested in test_bad_input)
    l_spec = {"s": l if c is None else {"kind": "recursive", "l": l, "c": c}} if l > 1 else {}
    policy = _mapped_policy(name, {"k": k, "suppression": supp, **({"l": l_spec} if l_spec else {})})
    with session(db.url) as be:
        plan = prepare(be, parse_policy(policy))
        # Distinct l with suppression is monotone (a merged class violates only if both parts do);
        # recursive l is not: the searches below check both claims against the definition.
        assert plan.monotone == (supp == 0 or c is None or l <= 1)
        inc = run_search(plan, "incognito")
        exh = run_search(plan, "exhaustive")
        assert set(inc.minimal) == set(exh.minimal)
        fl = run_search(plan, "flash")
        assert set(fl.minimal) == set(exh.minimal)
        assert fl.satisfying == exh.satisfying
        # Flash keeping the meet of each round's nodes first (forced here on a small table, one
        # node being its own meet) walks the same nodes to the same results.
        met = _flash_with_meets(plan)
        assert met.satisfying == fl.satisfying and met.results == fl.results
        # Rolling up from kept tables (with the sensitive ranks when l applies) gives what rolling
        # up from the coded base table gives.
        ev = Evaluator(plan)
        ev.keep((1, 0))
        ev.keep((0, 1))
        above = [n for n in itertools.product(range(3), range(3)) if n != (0, 0)]
        assert ev.evaluate(above) == Evaluator(plan).evaluate(above)
        assert {ev.source_for(n).node for n in above} == {(1, 0), (0, 1)}
        # A class's number by rank (where gid * radix + key could overflow) gives the same.
        nodes = list(itertools.product(range(3), range(3)))
        by_radix = Evaluator(plan).evaluate(nodes)
        with mock.patch.object(evaluator, "CID_RADIX_MAX", 0):
            assert Evaluator(plan).evaluate(nodes) == by_radix
        # Class sizes by keyed branches (evaluator.KEYED, DuckDB's default) and by GROUPING SETS
        # (the other engines'), each run here on this engine, give the same; so does the keyed
        # form's fallback to GROUPING SETS where a key would pass CID_RADIX_MAX.
        sizes = {}
        for keyed, radix_max in (
            (frozenset({be.dialect}), 2**62),
            (frozenset(), 2**62),
            (frozenset({be.dialect}), 1),
        ):
            with (
                mock.patch.object(evaluator, "KEYED", keyed),
                mock.patch.object(evaluator, "CID_RADIX_MAX", radix_max),
            ):
                ev_k = Evaluator(plan, relaxed=True)
                sizes[(keyed, radix_max)] = ev_k.evaluate(nodes)
                assert ev_k.queries == 1
                assert ("AS mask" in be.log[-1]) == (not keyed or radix_max == 1)
        assert len({tuple(sorted(s.items())) for s in sizes.values()}) == 1
        # Parts of PART nodes (what a large source gets) give what one wide part gives.
        with mock.patch.object(evaluator, "PART_WIDE_BELOW", 0):
            assert Evaluator(plan).evaluate(nodes) == by_radix
        expected_sat = {n for n in nodes if _ok(d, n, k, l, supp, c)}
        assert exh.satisfying == expected_sat
        # Flash for the optimum (pruning by precision's bound), its walk reading the relaxation
        # from full evaluations from the first round on (the fused walk, where recursive l with
        # suppression is not monotone): the optimum exhaustive's candidates give.
        if expected_sat:
            with (
                mock.patch.object(algorithms, "FUSE_AFTER", 0),
                mock.patch.object(algorithms, "FUSE_SHARE", 0.0),
                mock.patch.object(algorithms, "NO_FUSE", frozenset()),
            ):
                fused = search(plan, "flash", "precision")
            assert fused.satisfying <= expected_sat and set(fused.minimal) <= set(exh.minimal)
            assert choose(plan, fused, "precision")[0] == choose(plan, exh, "precision")[0]
        if expected_sat:
            try:
                (node,) = run_search(plan, "datafly").minimal
            except SqlanonError as e:
                # Greedy: with a non-monotone policy its one path may miss every satisfying node.
                assert not plan.monotone and "greedy path" in str(e)
            else:
                assert _ok(d, node, k, l, supp, c)


def _flash_with_meets(plan):  # noqa: ANN001, ANN202
    """Flash with every round's meets kept (algorithms._keep_meets with no size floor, any
    estimate or bound, one node a chunk, so each node is its own meet), asserting that each node the walk
    evaluates above the bottom rolls up from the table kept for it."""
    real = algorithms._keep_meets

    def spy(ev, batch, classes):  # noqa: ANN001, ANN202
        real(ev, batch, classes)
        for n in batch:
            if any(n):
                assert ev.source_for(n).node == n

    with mock.patch.multiple(
        algorithms, KEEP_MIN_ROWS=0, KEEP_RATIO=0, MEET_RATIO=0, MEET_MIN=1, MEET_CHUNK=1, _keep_meets=spy
    ):
        return run_search(plan, "flash")


@SETTINGS
@given(rows=tables, k=st.integers(1, 4), l=st.integers(2, 3), supp=st.sampled_from([0.1, 0.3]))
def test_staged_flash_equals_the_definition(db, rows, k, l, supp):  # noqa: ANN001, E741
    """Distinct l with suppression walked in two stages per round, class sizes first and the full
    policy only where they hold, its tags taken from the full policy (PostgreSQL's walk, forced
    here on every engine): the satisfying and minimal nodes of the definition, and the optimum by
    precision that exhaustive's candidates give."""
    name = _load(db, rows)
    d = _dicts(rows)
    if l > len({r["s"] for r in d}):
        return  # refused up front (tested in test_bad_input)
    policy = _mapped_policy(name, {"k": k, "suppression": supp, "l": {"s": l}})
    nodes = list(itertools.product(range(3), range(3)))
    expected = {n for n in nodes if _ok(d, n, k, l, supp)}
    with session(db.url) as be:
        plan = prepare(be, parse_policy(policy))
        assert plan.monotone
        with mock.patch.object(algorithms, "STAGED", frozenset({be.dialect})):
            staged = run_search(plan, "flash")
            best = search(plan, "flash", "precision") if expected else None
        assert staged.satisfying == expected
        below = {n for n in expected for m in expected if m != n and m[0] <= n[0] and m[1] <= n[1]}
        assert set(staged.minimal) == expected - below
        exh = run_search(plan, "exhaustive")
        # The results callers read (bad_records for scoring and publishing) are the full policy's.
        assert all(staged.results[n] == exh.results[n] for n in staged.results)
        if best is not None:
            assert best.satisfying <= expected
            assert all(best.results[n] == exh.results[n] for n in best.results)
            assert choose(plan, best, "precision")[0] == choose(plan, exh, "precision")[0]


@pytest.mark.parametrize("l", [2.0, 2.0000000012, 2.5])
def test_entropy_l_relaxation_never_exceeds_the_policy(db, l):  # noqa: ANN001, E741
    """Entropy l accepts H >= log2(l) - EPS, so l just above 2 still accepts a class of two
    records with two values: the class-size relaxation (relaxed_k) must not ask for three. Two
    bottom classes hold two records with two values (H = 1 bit), one three with three: the bottom
    satisfies l = 2 and l = 2.0000000012, not 2.5; Flash (walking in two stages without
    suppression, or on the relaxation with it) must return what exhaustive does."""
    rows = [("a1", 10, "s1"), ("a1", 10, "s2"), ("a2", 20, "s1"), ("a2", 20, "s2")]
    rows += [("a3", 12, "s1"), ("a3", 12, "s2"), ("a3", 12, "s3")]
    name = _load(db, rows)
    for supp in (0.0, 0.25):
        policy = _mapped_policy(name, {"suppression": supp, "l": {"s": {"kind": "entropy", "l": l}}})
        with session(db.url) as be:
            plan = prepare(be, parse_policy(policy))
            assert evaluator.relaxed_k(plan.policy) == (2 if l < 2.5 else 3)
            exh = run_search(plan, "exhaustive")
            assert ((0, 0) in exh.minimal) == (l < 2.5)
            assert set(run_search(plan, "flash").minimal) == set(exh.minimal)
            assert set(run_search(plan, "incognito").minimal) == set(exh.minimal)
    # The up-front refusal (l above the attribute's three distinct values) takes the same
    # tolerance, in the search and in assess.
    for ent, refused in ((3.0000000012, False), (3.5, True)):
        policy = _mapped_policy(name, {"l": {"s": {"kind": "entropy", "l": ent}}})
        with session(db.url) as be:
            for run in (lambda p: prepare(be, p), lambda p: assess(be, p)):
                if refused:
                    with pytest.raises(SqlanonError, match="exceeds the 3 distinct value"):
                        run(parse_policy(policy))
                else:
                    run(parse_policy(policy))


def test_wide_class_keys_do_not_overflow_integer_codes(db):  # noqa: ANN001
    """The coded table's codes are 4-byte INTEGERs (plan.INT_CODES_BELOW); a class key, sum(code
    * weight) in mixed radix, can pass 2^31 where weights still fit an INTEGER. Four QIs of 400
    values each (no hierarchy): the bottom node's radix is 400^4 = 2.56e10, the first QI's weight
    64e6 and its top code 399. With l checked the evaluator builds those keys in SQL (DuckDB and
    PostgreSQL raise on INTEGER overflow); the result must be the brute-force count, and the same
    with BIGINT codes."""
    rng = __import__("random").Random(7)
    perms = [rng.sample(range(400), 400) for _ in range(4)]
    rows = []
    for i in range(800):  # pairs of rows share their QIs: 400 classes of 2
        rows.append((*(p[i // 2] for p in perms), "s1" if i % 2 or i % 6 == 0 else "s2"))
    name = f"w{next(COUNTER)}"
    db.load(name, ["q0", "q1", "q2", "q3", "s"], rows, ["INTEGER"] * 4 + ["VARCHAR"])
    classes = collections.defaultdict(set)
    for *q, s in rows:
        classes[tuple(q)].add(s)
    bad = [c for c in classes.values() if len(c) < 2]
    policy = {
        "source": f"main.{name}",
        "columns": {**{f"q{j}": "quasi" for j in range(4)}, "s": "sensitive"},
        "privacy": {"l": {"s": 2}},
    }
    bottom = (0, 0, 0, 0)
    with session(db.url) as be:
        plan = prepare(be, parse_policy(policy))
        assert math.prod(plan.card[(j, 0)] for j in range(4)) > 2**31
        res = Evaluator(plan).evaluate([bottom])[bottom]
        assert (res.rows, res.classes) == (800, 400) == (len(rows), len(classes))
        assert (res.bad_records, res.bad_classes) == (2 * len(bad), len(bad)) and bad
        with mock.patch("sqlanon.lattice.plan.INT_CODES_BELOW", 0):
            wide = prepare(be, parse_policy(policy))
            assert Evaluator(wide).evaluate([bottom])[bottom] == res
        # Class sizes alone, as keyed branches (evaluator.KEYED) on this engine: the key, the codes
        # in mixed radix, passes 2^31 too (each code widened before its product).
        with mock.patch.object(evaluator, "KEYED", frozenset({be.dialect})):
            sizes = Evaluator(plan, relaxed=True)
            got = sizes.evaluate([bottom])[bottom]
            assert (got.rows, got.classes, got.bad_records) == (800, 400, 0) and sizes.queries == 1
            assert "AS mask" not in be.log[-1] and "AS BIGINT" in be.log[-1]


@SETTINGS
@given(
    rows=tables,
    k=st.integers(1, 4),
    l=st.integers(2, 3),
    c=st.sampled_from([1.5, 3.0]),
    supp=st.sampled_from([0.1, 0.3]),
)
def test_fused_flash_finds_the_optimum_of_a_non_monotone_policy(db, rows, k, l, c, supp):  # noqa: ANN001, E741
    """Recursive (c, l) with suppression is not monotone: Flash for the optimum by precision walks
    the class-size relaxation, here read from full evaluations from the first round on (the fused
    walk), and must still return the optimum of the definition: the least Prec loss (seed 002
    eq. 3, suppressed records counted as fully generalised) over every node that satisfies by
    brute force, ties broken by height then node."""
    name = _load(db, rows)
    d = _dicts(rows)
    if l > len({r["s"] for r in d}):
        return  # refused up front (tested in test_bad_input)
    policy = _mapped_policy(
        name, {"k": k, "suppression": supp, "l": {"s": {"kind": "recursive", "l": l, "c": c}}}
    )
    nodes = list(itertools.product(range(3), range(3)))
    sat = {n: _bad(d, n, k, l, c) for n in nodes if _ok(d, n, k, l, supp, c)}
    with session(db.url) as be:
        plan = prepare(be, parse_policy(policy))
        assert not plan.monotone
        with (
            mock.patch.object(algorithms, "FUSE_AFTER", 0),
            mock.patch.object(algorithms, "FUSE_SHARE", 0.0),
            mock.patch.object(algorithms, "NO_FUSE", frozenset()),
        ):
            res = search(plan, "flash", "precision")
        assert res.satisfying <= set(sat)
        if not sat:
            return
        node, _ = choose(plan, res, "precision")

    def loss(n: tuple) -> float:
        s, share = sat[n], (n[0] + n[1]) / 2
        return ((len(d) - s) * share + s * 2) / (2 * len(d))

    assert node == min(sat, key=lambda n: (round(loss(n), 12), sum(n), n))


@settings(max_examples=300, deadline=None)
@given(
    heights=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    picks=st.lists(st.integers(0, 10**6), max_size=12),
    close=st.booleans(),
)
def test_minimal_matches_its_definition(heights, picks, close):  # noqa: ANN001
    """``minimal`` (pure Python, shared by every search and by the exhaustive oracle) against its
    definition read pairwise: a satisfying node with no satisfying node strictly below it. Random
    sets, closed upwards (a monotone search's result, the fast path) or not (the general walk),
    small enough that both sides sit on either side of half the lattice."""
    from sqlanon.lattice import all_nodes, minimal

    universe = all_nodes(heights)
    sat = {universe[p % len(universe)] for p in picks}
    if close:
        sat = {n for n in universe if any(all(a >= b for a, b in zip(n, s, strict=True)) for s in sat)}

    def strictly_below(a, b):  # noqa: ANN001, ANN202
        return a != b and all(x <= y for x, y in zip(a, b, strict=True))

    expected = sorted(
        (n for n in sat if not any(strictly_below(m, n) for m in sat)), key=lambda n: (sum(n), n)
    )
    assert minimal(sat, universe) == expected
    assert minimal(sat, set(universe)) == expected


@SETTINGS
@given(
    mapping=st.dictionaries(st.integers(-3, 12), st.sampled_from(["x", "y", "z"]), min_size=1),
    values=st.lists(st.one_of(st.none(), st.integers(-5, 15)), min_size=1, max_size=20),
)
def test_map_as_ranges_equals_the_simple_case(db, mapping, values):  # noqa: ANN001
    """A map over whole numbers on an integer column is compiled as ranges of consecutive values
    with one label (``_range_case``); on the engine it must label every value exactly as the
    simple ``CASE v WHEN ...`` does (which a DOUBLE column keeps): listed values, values between
    or beyond the listed ones, and NULL (all '*' unless listed)."""
    from pathlib import Path

    from sqlalchemy import text
    from sqlglot import exp

    from sqlanon.sql.compile import generate, parse_one_statement
    from sqlanon.transform.build import build_hierarchy

    spec = {"map": {v: [label] for v, label in mapping.items()}}
    ranged = build_hierarchy("v", spec, numeric=True, base_dir=Path("."), type_name="INTEGER")
    plain = build_hierarchy("v", spec, numeric=True, base_dir=Path("."), type_name="DOUBLE")
    assert ranged.integral and not plain.integral
    name = f"r{next(COUNTER)}"
    db.load(name, ["v"], [[v] for v in values], ["INTEGER"])
    col = exp.column("v", quoted=True)
    canonical = f"SELECT v, {ranged.sql(1, col)} AS r, {plain.sql(1, col)} AS p FROM {db.rel(name)}"
    with session(db.url) as be:
        sql = generate(parse_one_statement(canonical, "select"), be.dialect)
        rows = be._conn.execute(text(sql)).fetchall()
    expected = {v: mapping.get(v, "*") if v is not None else "*" for v in values}
    assert sorted((r[0] is None, r[0] or 0, r[1], r[2]) for r in rows) == sorted(
        (v is None, v or 0, expected[v], expected[v]) for v in values
    )


@pytest.fixture
def pg_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestDB]:
    """A PostgreSQL database alone (read-only sessions are PostgreSQL's)."""
    yield from _make_db("postgres", request, tmp_path)


def test_read_only_flash_keeps_no_tables_and_finds_the_same(pg_db):  # noqa: ANN001
    """In a read-only PostgreSQL session every "temporary table" is a CTE recomputed by each
    statement that reads it (Backend.inline), so Flash keeps neither failing nodes' rollups nor
    meets there, even where (forced here) it would keep both on a writable connection; the walk
    finds the same satisfying and minimal nodes with the same counts."""
    db = pg_db
    rows = [(a, b, s) for a in A_VALUES for b in B_VALUES for s in ("s1", "s2") if (len(a) + b) % 3]
    name = _load(db, rows)
    policy = parse_policy(_mapped_policy(name, {"k": 3}))
    force = {"KEEP_MIN_ROWS": 0, "KEEP_RATIO": 0, "MEET_RATIO": 0, "MEET_MIN": 1, "MEET_CHUNK": 1}
    kept: list[int] = []
    real_keep = Evaluator.keep

    def keep(self, node, rows=None):  # noqa: ANN001, ANN202
        kept.append(1)
        return real_keep(self, node, rows)

    with mock.patch.multiple(algorithms, **force), mock.patch.object(Evaluator, "keep", keep):
        with session(db.url) as be:
            writable = run_search(prepare(be, policy), "flash")
        assert kept, "the forced thresholds keep tables on a writable connection"
        kept.clear()
        ro = db.url + ("&" if "?" in db.url else "?") + "options=-c%20default_transaction_read_only%3Don"
        with session(ro) as be:
            assert be.inline
            read_only = run_search(prepare(be, policy), "flash")
    assert kept == []
    # Read-only, more searches run in step (FLASH_LANE_EVERY_INLINE): other nodes may be checked,
    # but the tags, the minimal nodes and every shared node's counts are the same.
    assert read_only.satisfying == writable.satisfying and set(read_only.minimal) == set(writable.minimal)
    shared = read_only.results.keys() & writable.results.keys()
    assert shared and all(read_only.results[n] == writable.results[n] for n in shared)
