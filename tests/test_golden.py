"""Golden SQL snapshots: every template, rendered with the contexts of a real run, generated for
duckdb, postgres, tsql and spark. T-SQL cannot be executed here (no server); its SQL is checked by
these snapshots and by re-parsing it with sqlglot's T-SQL reader. Update the snapshots with
``SQLANON_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`` and review the diff."""

from __future__ import annotations

import dataclasses
import itertools
import os
import uuid
from pathlib import Path

import pytest
import sqlglot

import sqlanon.engines.base as engine_mod
import sqlanon.transform.release as release_mod
from sqlanon.errors import SqlanonError
from sqlanon.sql import compile as compile_mod
from sqlanon.sql import shapes
from sqlanon.sql.compile import template_names
from tests.conftest import PATIENT_TYPES, TEST_HASH_KEY, TEST_PERTURB_KEY, patients_rows

GOLDEN = Path(__file__).resolve().parent / "golden"
DIALECTS = ["duckdb", "postgres", "tsql", "spark"]
UPDATE = os.environ.get("SQLANON_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    text = text.strip() + "\n"
    if UPDATE or not path.exists():
        if not UPDATE and os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"golden file {name} is missing; run with SQLANON_UPDATE_GOLDEN=1 and commit it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.read_text(encoding="utf-8") == text, f"SQL for {name} changed; review and update the golden"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):  # noqa: ANN001, ANN201
    """Run assess and anonymise (with l, t and recursive l) on DuckDB, recording each template's
    first context; temporary names are made deterministic."""
    import duckdb

    from sqlanon.engines import session
    from sqlanon.lattice import prepare
    from sqlanon.measure.assessment import assess
    from sqlanon.policy import load_policy, parse_policy
    from sqlanon.publish import anonymise

    path = tmp_path_factory.mktemp("golden") / "g.duckdb"
    cols, rows = patients_rows()
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE main.patients ("
        + ", ".join(f'"{c}" {t}' for c, t in zip(cols, PATIENT_TYPES, strict=True))
        + ")"
    )
    con.executemany("INSERT INTO main.patients VALUES (?, ?, ?, ?, ?)", rows)
    con.close()
    policy_path = path.parent / "p.yaml"
    policy_path.write_text(
        """
source: main.patients
target: main.patients_anon
columns:
  PatientID: {role: identifier, action: hash}
  PatientName: {role: identifier, action: mask}
  Postcode: {role: quasi, hierarchy: {mask: right, levels: 5}}
  Age: {role: quasi, hierarchy: {interval: {cuts: [[30, 41]]}, labels: [["<30", "30-40", ">40"]]}}
  Disease: {role: sensitive, order: [Flu, Heart Disease, Cancer]}
privacy:
  k: 2
  l: {Disease: {kind: recursive, c: 3, l: 2}}
  t: {Disease: {measure: emd-ordered, t: 0.6}}
  suppression: 0.2
  risk: {prosecutor: 0.5}
search: {metric: precision}  # precision builds no metric tables: metrics/coded is snapshotted from compute()
""",
        encoding="utf-8",
    )
    seen: dict[str, dict] = {}
    real = compile_mod.to_sql

    def spy(name, dialect, /, *, kind="select", **ctx):  # noqa: ANN001, ANN003, ANN202
        key = name
        if name == "ddl/create_temp":  # one snapshot per wrapped template
            key = f"{name}:{ctx['_template'].removesuffix('.sql.j2')}"
            if key.endswith("freq/base") and ctx.get("class_check"):  # a view measured from its source
                key += ":one_pass"
            if key.endswith("search/coded") and any(q.get("pred") for q in ctx["qis"]):  # coverage bits
                key += ":flagged"
        if name == "search/evaluate" and any(a.get("distinct_only") for a in ctx.get("attrs", [])):
            key += ":distinct"  # distinct l alone: distinct values per class, no statistics
        seen.setdefault(key, {"name": name, "kind": kind, "ctx": ctx})
        return real(name, dialect, kind=kind, **ctx)

    counter = itertools.count()
    mp = pytest.MonkeyPatch()
    mp.setattr(engine_mod, "to_sql", spy)
    mp.setattr(release_mod, "to_sql", spy)
    mp.setattr(engine_mod.uuid, "uuid4", lambda: uuid.UUID(int=next(counter)))
    mp.setenv("SQLANON_HASH_KEY", TEST_HASH_KEY)
    mp.setenv("SQLANON_PERTURB_KEY", TEST_PERTURB_KEY)
    try:
        pol = load_policy(policy_path)
        with session(f"duckdb:///{path}") as be:
            assess(be, pol)
            anonymise(be, pol, replace=True, publish_as="table")  # hash: tables only
            masked = tuple(
                dataclasses.replace(c, action="mask") if c.action == "hash" else c for c in pol.columns
            )
            anonymise(be, dataclasses.replace(pol, columns=masked), replace=True, publish_as="view")
            # A listed (map) hierarchy, so the coverage check runs too.
            ages = {a: ["young" if a < 40 else "old"] for a in range(0, 120)}
            spec = dict(pol.quasi[1].hierarchy or {})
            spec.clear()
            spec["map"] = ages
            cols = tuple(
                dataclasses.replace(c, hierarchy=spec) if c.name == "Age" else c for c in pol.columns
            )
            mapped = prepare(be, dataclasses.replace(pol, columns=cols))
            # The coverage check of `sqlanon assess` (the search tests it on its coded table).
            from sqlanon.lattice import check_coverage

            check_coverage(be, mapped.hierarchies, mapped.base)
        # The metrics templates: every metric of one node (with a label, so CM is rendered too).
        # A session of its own, so that the first session's snapshots are recorded unchanged.
        from sqlanon.metrics import compute

        with session(f"duckdb:///{path}") as be:
            plan = prepare(be, dataclasses.replace(pol, label_column="Disease"))
            compute(plan, [tuple(1 for _ in plan.heights)])
            # A kept rollup (with the sensitive ranks) and an evaluation from it.
            from sqlanon.lattice import Evaluator

            ev = Evaluator(plan)
            ev.keep(tuple(1 for _ in plan.heights))
            ev.evaluate([tuple(plan.heights)])
            # Distinct l alone (the distinct values per class, no statistics), with the records in
            # classes below the relaxed k that a fused Flash walk reads.
            import yaml

            dpol = yaml.safe_load(policy_path.read_text(encoding="utf-8"))
            dpol["privacy"] = {"k": 2, "l": {"Disease": 2}, "suppression": 0.2}
            dplan = prepare(be, parse_policy(dpol, base_dir=policy_path.parent))
            Evaluator(dplan, size_k=2).evaluate([tuple(1 for _ in dplan.heights)])
            # Class sizes as the engines outside evaluator.KEYED evaluate them (GROUPING SETS; on
            # DuckDB the search above ran search/evaluate_keys).
            from sqlanon.lattice import evaluator as evaluator_mod

            with pytest.MonkeyPatch.context() as keyed:
                keyed.setattr(evaluator_mod, "KEYED", frozenset())
                Evaluator(plan, relaxed=True).evaluate([tuple(1 for _ in plan.heights)])
            # `sqlanon init` and `sqlanon hierarchy`.
            from sqlanon.relation import Relation
            from sqlanon.scaffold import hierarchy_csv, init_policy

            init_policy(be, Relation("patients", "main"))
            from sqlanon.hipaa import warnings as hipaa_warnings  # assess: an age column's maximum

            hipaa_warnings(be, plan.policy)
            hierarchy_csv(be, Relation("patients", "main"), "Age", {"interval": {"widths": [10, 20]}})
            # The example labels of a node: the largest class of its release (issues 16, 32).
            from sqlanon.transform.examples import release_labels

            release_labels(be, plan.policy, plan.hierarchies, {"Postcode": 2, "Age": 1}, coarser=True)
            # The local walk's copy of the coded table (search/rows; issue 33).
            from sqlanon.lattice.local import local_plan

            with local_plan(plan) as walked:
                assert walked.n_rows == plan.n_rows
        # Perturbation: every method in one chain (templates/_macros/perturb.sql.j2) and every
        # measuring template; the default row key (the whole row), so its SQL is recorded too.
        con = duckdb.connect(str(path))
        con.execute(
            "CREATE TABLE main.wide AS SELECT i AS id, 'g' AS grp, i % 50 AS a, i % 7 AS b, i % 11 AS c,"
            " i % 13 AS d, 'v' || (i % 5) AS e, 'w' || (i % 9) AS f, i * 1.5 AS h FROM range(40) t(i)"
        )
        con.close()
        perturb = {
            "a": {"method": "noise", "distribution": "laplace", "scale": 2},
            "b": {"method": "k-noise", "k": 13},  # delta 1 (3 gives 0.5, cancelled by rounding)
            "c": {"method": "microaggregate", "k": 3},
            "d": {"method": "k-pram", "width": 5},
            "e": {"method": "pram", "retain": 0.5},
            "f": {"method": "k-pram", "k": 4},
            "h": {"method": "swap", "p": 10},
        }
        cols_spec: dict = {"id": "insensitive", "grp": "quasi"}
        cols_spec.update({c: {"role": "insensitive", "perturb": s} for c, s in perturb.items()})
        wide = parse_policy({"source": "main.wide", "columns": cols_spec, "privacy": {"k": 2}})
        with session(f"duckdb:///{path}") as be:
            anonymise(be, wide, dry_run=True)
        # Mondrian (its rounds with the l and t statistics of the policy).
        from sqlanon.policy import Search

        with session(f"duckdb:///{path}") as be:
            anonymise(
                be, dataclasses.replace(pol, search=Search("mondrian")), dry_run=True, publish_as="table"
            )
            # Published as a table (the partition map), with a QI cut on its value order (the
            # medians' dictionary).
            from sqlanon.relation import Relation

            plain = tuple(
                dataclasses.replace(c, hierarchy=None) if c.name == "Postcode" else c for c in pol.columns
            )
            mon = dataclasses.replace(
                pol, columns=plain, search=Search("mondrian"), target=Relation("patients_m", "main")
            )
            anonymise(be, mon, replace=True, publish_as="table")
            # k = 3 alone: a partition is done while another is cut (its rows set aside, then unioned).
            konly = dataclasses.replace(pol.privacy, k=3, l=(), t=(), risk={})
            anonymise(be, dataclasses.replace(pol, search=Search("mondrian"), privacy=konly), dry_run=True)
        # issue 14: the machine-learning utility (the keyed split, a release's rows, naive Bayes in
        # SQL, the scikit-learn sample) and the report (the spreads of l and t over the classes).
        from sqlanon.ml import report_data, utility

        with session(f"duckdb:///{path}") as be:
            free = dataclasses.replace(pol, privacy=dataclasses.replace(pol.privacy, l=(), t=(), risk={}))
            trainers = ["naive_bayes", "logistic_regression"]
            utility(be, free, label="Disease", ks=[2], trainers=trainers, sample=50)
            report_data(be, dataclasses.replace(pol, publish_as="table"), ks=[2])
            # A view whose classes need only their size, verified from its source in one pass
            # (last: the temporary names recorded above stay as they were).
            anonymise(
                be,
                dataclasses.replace(free, columns=masked, target=Relation("patients_free", "main")),
            )
            # A listed hierarchy that leaves ages uncovered: the flagged column's sample is read.
            short = {a: ["young"] for a in range(0, 30)}
            gaps = tuple(
                dataclasses.replace(c, hierarchy={"map": short}) if c.name == "Age" else c
                for c in pol.columns
            )
            with pytest.raises(SqlanonError, match="not covered"):
                prepare(be, dataclasses.replace(pol, columns=gaps))
            # emd-hierarchical (issue 35 item 2): its coverage check and its figure.
            from sqlanon.policy import TRequirement

            dis = {"map": {"Flu": ["infection"], "Heart Disease": ["chronic"], "Cancer": ["chronic"]}}
            hcols = tuple(
                dataclasses.replace(c, hierarchy=dis) if c.name == "Disease" else c for c in pol.columns
            )
            hpriv = dataclasses.replace(pol.privacy, t=(TRequirement("Disease", "emd-hierarchical", 0.6),))
            assess(be, dataclasses.replace(pol, columns=hcols, privacy=hpriv))
            # delta-presence and k-map (issue 35 item 3): the classes joined with the population.
            from sqlanon.presence import DeltaPresence, KMap, Presence

            ppriv = dataclasses.replace(pol.privacy, presence=Presence(DeltaPresence(0.1, 0.9), KMap(2)))
            assess(be, dataclasses.replace(pol, population=pol.source, privacy=ppriv))
            # SafePub (issue 35 item 1): the keyed sample, by the whole row's key.
            from sqlanon.safepub import DPRequirement
            from sqlanon.transform.safepub import materialise_sample

            dpriv = dataclasses.replace(pol.privacy, dp=DPRequirement(1.0, 1e-5))
            materialise_sample(be, dataclasses.replace(pol, privacy=dpriv))
            # Profitability with attack (issue 35 item 6): per-class payouts against the population.
            from sqlanon.profitability import Profitability

            game = Profitability("journalist", True, 1200.0, 300.0, 300.0, 4.0)
            qcols = tuple(
                dataclasses.replace(c, role="insensitive", hierarchy=None) if c.name == "Postcode" else c
                for c in cols
            )
            gpriv = dataclasses.replace(pol.privacy, profitability=game)
            assess(be, dataclasses.replace(pol, columns=qcols, population=pol.source, privacy=gpriv))
    finally:
        mp.undo()
    return seen


def test_every_template_is_covered(recorded):  # noqa: ANN001
    exempt = {
        "fixtures/patients_create",
        "demo/rows",  # the demo's 9 rows, shown; tests/test_scaffold.py runs it
        "fixtures/patients_insert",
        "assess/population",
        "publish/grant",  # PostgreSQL only: tests/test_hostile_publish.py runs it
        "catalog/can_create_temp",  # PostgreSQL only, at connect time
        "catalog/collations",  # PostgreSQL only, from 1e5 rows: tests/test_local_measure.py runs it
        "catalog/pages",  # PostgreSQL only: tests/test_pgparts.py runs it
        "search/at_least",  # PostgreSQL only, the local walk's threshold: tests/test_local_freq.py runs it
        "ddl/drop_view",
        "assess/order_check",
    }
    # dbt/*: rendered with placeholders into dbt_package/macros/sqlanon_sql.sql, itself checked
    # against a fresh generation by tests/test_dbt.py (and run by dbt there).
    exempt |= {t for t in template_names() if t.startswith("dbt/")}
    covered = {k.split(":")[-1] for k in recorded} | {r["name"] for r in recorded.values()}
    missing = [t for t in template_names() if t not in covered and t not in exempt]
    assert not missing, f"templates without a golden snapshot: {missing}"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_sql(recorded, dialect):  # noqa: ANN001
    for key, rec in sorted(recorded.items()):
        name = rec["name"]
        ctx = rec["ctx"]
        if dialect == "tsql" and isinstance(ctx.get("_target"), shapes.Hole):  # T-SQL's #name
            ctx = {**ctx, "_target": shapes._VALUES[ctx["_target"]]}  # (a round's table, issue 33)
        sql = compile_mod.to_sql(name, dialect, kind=rec["kind"], **ctx)
        check_golden(f"{key.replace('/', '__').replace(':', '--')}.{dialect}.sql", sql)
        if dialect == "tsql":
            sqlglot.parse(sql, read="tsql")  # T-SQL text must at least parse as T-SQL
            # SQL Server 2017 is the oldest supported (README): no GREATEST/LEAST (2022).
            for bad in ("LIMIT ", "LOG2(", "MEDIAN(", "GROUP BY 1", "GREATEST(", "LEAST(", "PERCENTILE_"):
                assert bad not in sql.upper(), f"{name}: {bad!r} is not T-SQL"
        if dialect == "postgres":
            assert "LOG(2," not in sql.upper().replace(" ", "")
