"""The machine-learning utility of issue 14 (seed 002 section 5), on DuckDB and PostgreSQL.

* The split: every row's u is the MD5 of its key computed independently here (hashlib), and the
  test set is u < 0.1; the same keys are test keys on both engines.
* The in-SQL naive Bayes: its predictions, posteriors, balanced accuracy and AUROC equal those of
  a naive Bayes written here from the definition (same Laplace smoothing), on a generalised
  release with NULLs and three classes.
* ``utility`` end to end: the original and one release per k, naive Bayes identical on both
  engines, the scikit-learn trainers bounded by --sample, bad input refused in one line.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

import sqlanon
from sqlanon.cli import main
from sqlanon.engines import session
from sqlanon.lattice import prepare
from sqlanon.ml.bayes import naive_bayes
from sqlanon.ml.rows import keyed_source, release_rows
from sqlanon.policy import parse_policy
from tests.conftest import _make_db

COLUMNS = ["id", "age", "zip", "sex", "job", "y"]
TYPES = ["INTEGER", "INTEGER", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"]
POLICY = {
    "source": "main.people",
    "target": "main.people_anon",
    "columns": {
        "id": {"role": "identifier", "action": "drop"},
        "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [10, 20], "start": 0}}},
        "zip": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 3}},
        "sex": {"role": "quasi"},
        "job": "insensitive",
        "y": "insensitive",
    },
    "privacy": {"k": 3},
}


def people(n: int = 1000, seed: int = 14) -> list[list]:
    """Rows whose label depends on age, sex and job (so a model has something to learn), with
    NULLs in a QI, a feature and the label."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        age = rnd.randint(18, 79)
        sex = rnd.choice(["F", "M", "M", None])
        job = rnd.choice(["clerk", "nurse", "driver", "teacher", None])
        score = (age > 45) + (sex == "M") + (job in ("teacher", "nurse")) + rnd.random() * 1.5
        y = None if rnd.random() < 0.03 else ("low" if score < 1.2 else "mid" if score < 2.2 else "high")
        rows.append([i, age, rnd.choice(["10115", "10117", "10243", "20095", "20099"]), sex, job, y])
    return rows


@pytest.fixture(scope="module")
def pdb(mdb):  # noqa: ANN001
    mdb.load("people", COLUMNS, people(), TYPES)
    return mdb


def row_key(row: list) -> str:
    """The default row key (sqlanon.transform.perturb): each declared column 'n' for NULL or 'v'
    and its text (~ doubled, | as ~!), joined by '|', then '#' and the number among identical rows
    (1: every row here is unique, by its id)."""
    parts = ["n" if v is None else "v" + str(v).replace("~", "~~").replace("|", "~!") for v in row]
    return "|".join(parts) + "#1"


def md5_uniform(text: str) -> float:
    return (int(hashlib.md5(text.encode()).hexdigest()[:8], 16) + 0.5) / 2**32


def test_split_is_the_md5_of_the_row_key(pdb) -> None:  # noqa: ANN001
    pol = parse_policy(POLICY)
    expected = {row_key(r): md5_uniform("sqlanon-split|" + row_key(r)) for r in people()}
    with session(pdb.url) as be:
        keyed = keyed_source(be, pol)
        got = {
            str(k): float(u) for k, u in be._run(f"SELECT {keyed.key}, {keyed.u} FROM {keyed.rel}").fetchall()
        }
    assert got.keys() == expected.keys()
    assert all(math.isclose(got[k], expected[k], abs_tol=1e-12) for k in got)
    test = {k for k, u in expected.items() if u < 0.1}
    assert {k for k, u in got.items() if u < 0.1} == test
    assert 60 <= len(test) <= 140  # about 10 % of 1000


def _reference_nb(rows: list[dict], feats: list[str], alpha: float = 1.0) -> dict[str, dict[str, float]]:
    """Naive Bayes from the definition: P(y) = n_y / N over the training rows (u >= 0.1, label not
    NULL), P(v | y) = (n_{j,v,y} + alpha) / (n_y + alpha V_j), V_j = distinct values of feature j
    (NULL one of them) over all rows; posterior = normalised exp of the log scores."""
    train = [r for r in rows if r["u"] >= 0.1 and r["y"] is not None]
    test = [r for r in rows if r["u"] < 0.1 and r["y"] is not None]
    n_y = Counter(r["y"] for r in train)
    big_n = sum(n_y.values())
    counts: dict[tuple, int] = defaultdict(int)
    for r in train:
        for f in feats:
            counts[(f, r[f], r["y"])] += 1
    v = {f: len({r[f] for r in rows}) for f in feats}
    out = {}
    for r in test:
        scores = {
            c: math.log(n / big_n)
            + sum(math.log((counts[(f, r[f], c)] + alpha) / (n + alpha * v[f])) for f in feats)
            for c, n in n_y.items()
        }
        m = max(scores.values())
        z = sum(math.exp(s - m) for s in scores.values())
        out[r["key"]] = {c: math.exp(s - m) / z for c, s in scores.items()} | {"__scores": scores}
    return out


def _auc(pairs: list[tuple[float, bool]]) -> float:
    """Mann-Whitney AUROC with ties at their average rank."""
    pairs = sorted(pairs)
    ranks, i = [], 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        ranks += [(i + 1 + j) / 2] * (j - i)
        i = j
    pos = sum(1 for _, p in pairs if p)
    neg = len(pairs) - pos
    rs = sum(r for r, (_, p) in zip(ranks, pairs, strict=True) if p)
    return (rs - pos * (pos + 1) / 2) / (pos * neg)


def test_naive_bayes_in_sql_equals_the_definition(pdb) -> None:  # noqa: ANN001
    pol = parse_policy(POLICY)
    feats = ["age", "zip", "sex", "job"]
    with session(pdb.url) as be:
        plan = prepare(be, pol)
        keyed = keyed_source(be, pol)
        rel = release_rows(be, pol, plan, keyed, (1, 2, 0), numeric_qis=["age"])
        nb = naive_bayes(be, rel, features=feats, label="y", key=keyed.key, u=keyed.u, test_share=0.1)
        cols = ", ".join(f'CAST("{f}" AS TEXT)' for f in feats)
        data = be._run(f'SELECT {keyed.key}, {keyed.u}, {cols}, "y" FROM {rel}').fetchall()
        scored = be._run(f"SELECT rid, y, rk, p FROM {nb.scores}").fetchall()
    rows = [dict(zip(["key", "u", *feats, "y"], [str(r[0]), float(r[1]), *r[2:]], strict=True)) for r in data]
    assert {r["age"] for r in rows} >= {"[20-30)", "[70-80)"}
    assert {r["zip"] for r in rows} == {"101**", "102**", "200**"}
    ref = _reference_nb(rows, feats)
    sql_pred = {str(rid): y for rid, y, rk, _ in scored if rk == 1}
    sql_post = {(str(rid), y): float(p) for rid, y, _, p in scored}
    assert sql_pred.keys() == ref.keys() and len(ref) > 50
    for key, post in ref.items():
        scores = post.pop("__scores")
        best = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        if best[0][1] - best[1][1] > 1e-9:  # a tie to the last bit may go either way
            assert sql_pred[key] == best[0][0], key
        for c, p in post.items():
            assert math.isclose(sql_post[(key, c)], p, abs_tol=1e-11)
    truth = {r["key"]: r["y"] for r in rows if r["u"] < 0.1 and r["y"] is not None}
    classes = sorted(set(truth.values()))
    recalls = [
        sum(1 for k, t in truth.items() if t == c and sql_pred[k] == c)
        / sum(1 for t in truth.values() if t == c)
        for c in classes
    ]
    assert nb.balanced_accuracy == pytest.approx(sum(recalls) / len(recalls), abs=1e-12)
    aucs = [_auc([(round(ref[k][c], 12), t == c) for k, t in truth.items()]) for c in classes]
    assert nb.auroc == pytest.approx(sum(aucs) / len(aucs), abs=1e-9)
    assert 0.4 < nb.balanced_accuracy < 1 and nb.test_rows == len(truth)
    assert nb.train_rows == sum(1 for r in rows if r["u"] >= 0.1 and r["y"] is not None)


def test_utility_is_the_same_on_both_engines(request, tmp_path: Path) -> None:  # noqa: ANN001
    """The same split and the same in-SQL model on DuckDB and PostgreSQL: identical figures."""
    results = []
    for kind in ("duckdb", "postgres"):
        gen = _make_db(kind, request, tmp_path / kind)
        (tmp_path / kind).mkdir()
        db = next(gen)
        try:
            db.load("people", COLUMNS, people(400, seed=3), TYPES)
            r = sqlanon.utility(POLICY, db.url, label="y", ks=[2, 5], trainers="naive_bayes")
            results.append(r.to_dict())
        finally:
            gen.close()
    duck, pg = results
    assert [e["k"] for e in duck["releases"]] == [None, 2, 5]
    for a, b in zip(duck["releases"], pg["releases"], strict=True):
        assert a["node"] == b["node"]
        ma, mb = a["models"]["naive_bayes"], b["models"]["naive_bayes"]
        assert (ma["train_rows"], ma["test_rows"]) == (mb["train_rows"], mb["test_rows"])
        assert ma["balanced_accuracy"] == pytest.approx(mb["balanced_accuracy"], abs=1e-12)
        assert ma["auroc"] == pytest.approx(mb["auroc"], abs=1e-9)
    orig = duck["releases"][0]
    assert orig["metrics"]["ncp"] == pytest.approx(0) and orig["metrics"]["entropy_loss"] == pytest.approx(0)


@pytest.mark.parametrize("mdb", ["duckdb"], indirect=True)  # the CLI on DuckDB; PostgreSQL above
def test_utility_cli_with_scikit_learn_and_bounded_sample(pdb) -> None:  # noqa: ANN001
    path = Path(pdb._duck_path or ".").parent / "people.yaml"
    path.write_text(json.dumps(POLICY), encoding="utf-8")
    r = CliRunner().invoke(
        main, ["utility", str(path), "--db", pdb.url, "--label", "y", "--k", "3", "--sample", "300", "--json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["sample"] == 300 and out["trainers"] == [
        "naive_bayes",
        "logistic_regression",
        "gradient_boosting",
    ]
    assert out["features"] == {
        "categorical": ["zip", "sex", "job"],
        "numeric": [],
        "interval_bounds": ["age"],
    }
    for e in out["releases"]:
        assert e["sample_rows"] == 300
        for name in ("logistic_regression", "gradient_boosting"):
            m = e["models"][name]
            assert m["train_rows"] + m["test_rows"] == 300 and 0 <= m["balanced_accuracy"] <= 1
            assert 0.5 < m["auroc"] <= 1
    text = CliRunner().invoke(
        main, ["utility", str(path), "--db", pdb.url, "--label", "y", "--k", "3", "--trainers", "naive_bayes"]
    )
    assert text.exit_code == 0 and "original" in text.output and "naive_bayes" in text.output
    for args, culprit in (
        (["--label", "nope"], "--label: 'nope'"),
        (["--label", "y", "--trainers", "svm"], "--trainers: unknown trainer 'svm'"),
        (["--label", "y", "--k", "0"], "--k"),
    ):
        bad = CliRunner().invoke(main, ["utility", str(path), "--db", pdb.url, *args])
        assert bad.exit_code == 2 and culprit in bad.output and "Traceback" not in bad.output
        assert len(bad.output.strip().splitlines()) == 1
