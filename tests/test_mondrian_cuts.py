"""Issue 34 items 6 and 10: Mondrian publishes NULL as NULL, and cuts a text QI whenever a cut
of its value order can leave both halves with k records.

LeFevre, DeWitt and Ramakrishnan (2006) cut each attribute on a total order of its domain; for a
text QI without a hierarchy that order is the value order (NULL last). The reference here is brute
force over every cut point of that order, written from the definition: a partition where some cut
point leaves both halves with >= k records must not be a final class (k only: that is exactly
when a cut is allowable). Set labels are read back with a parser of PostgreSQL's array literal
written here from its documentation (*Arrays*, "Array Value Input"), and on PostgreSQL by
``label::text[]`` itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlanon


def _policy(path: Path, qis: list[str], k: int, source: str, target: str) -> Path:
    cols: dict[str, Any] = {"id": "insensitive", **{q: "quasi" for q in qis}}
    doc = {
        "source": source,
        "target": target,
        "columns": cols,
        "privacy": {"k": k},
        "search": {"algorithm": "mondrian"},
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _classes(db, target: str, qis: list[str]) -> list[list[int]]:  # noqa: ANN001
    cols = ", ".join(f'"{q}"' for q in qis)
    groups: dict[tuple, list[int]] = {}
    for row in db.sql(f"SELECT id, {cols} FROM {target}"):
        groups.setdefault(tuple(row[1:]), []).append(int(row[0]))
    return list(groups.values())


def _order(v: Any) -> tuple[int, Any]:
    """Value order, NULL last (Python's str order is the C collation; the test values are ASCII
    letters of one case, ordered the same by every collation)."""
    return (1, "") if v is None else (0, v)


def cuttable(values: list[Any], k: int) -> bool:
    """Whether some cut point of the value order leaves both halves with >= k records."""
    counts: dict[Any, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    run, n = 0, len(values)
    for v in sorted(counts, key=_order)[:-1]:
        run += counts[v]
        if k <= run <= n - k:
            return True
    return False


@pytest.fixture(scope="module")
def cdb(mdb):  # noqa: ANN001, ANN201
    return mdb


_text = st.sampled_from(["a", "b", "c", "d", "e", None])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(st.tuples(_text, st.sampled_from(["f", "m"]), _text), min_size=4, max_size=60),
    skew=st.sampled_from(["e", "m", None]),
    k=st.integers(min_value=2, max_value=6),
)
def test_a_cut_whenever_the_value_order_allows_one(cdb, tmp_path_factory, data, skew, k):  # noqa: ANN001
    """No class below k, and no final class that a cut point of some QI's value order could
    split into two halves of >= k records (brute force). ``skew`` makes the most common value
    also the last of its QI (the case the lower median alone refused)."""
    rows = [[i, a, s, c] for i, (a, s, c) in enumerate(data)]
    if skew is not None:  # a block of the last value ("e" of a, "m" of s) most common
        rows += [[len(rows) + i, "e", "m", skew if skew != "m" else "a"] for i in range(len(rows))]
    if len(rows) < k:
        return
    cdb.load("tc", ["id", "a", "s", "c"], rows, ["BIGINT", "VARCHAR", "VARCHAR", "VARCHAR"])
    path = _policy(tmp_path_factory.mktemp("c") / "p.yaml", ["a", "s", "c"], k, "main.tc", "main.tc_m")
    sqlanon.anonymise(path, cdb.url, replace=True, publish_as="table")
    classes = _classes(cdb, "main.tc_m", ["a", "s", "c"])
    assert sum(len(c) for c in classes) == len(rows)  # nothing suppressed: Mondrian cuts, never drops
    for ids in classes:
        assert len(ids) >= k
        for j in (1, 2, 3):
            assert not cuttable([rows[i][j] for i in ids], k), (ids, j)


def test_most_common_value_last(cdb, tmp_path):  # noqa: ANN001
    """Issue 34 item 10's regression: 30 'Male' after 10 'Female' (k = 5) were one class, the
    lower median (Male) leaving the right half empty; and a, b (3 each) before c (30): the cut
    between b and c is the one that keeps both halves >= 5."""
    rows = [[i, "Female" if i < 10 else "Male", "ab"[i % 2] if i < 6 else "c"] for i in range(40)]
    cdb.load("tr", ["id", "sex", "x"], rows, ["BIGINT", "VARCHAR", "VARCHAR"])
    p = _policy(tmp_path / "p.yaml", ["sex"], 5, "main.tr", "main.tr_m")
    r = sqlanon.anonymise(p, cdb.url, replace=True, publish_as="table").to_dict()
    assert r["partitions"] == 2
    assert sorted(cdb.sql('SELECT DISTINCT "sex" FROM main.tr_m')) == [("Female",), ("Male",)]
    p = _policy(tmp_path / "p.yaml", ["x"], 5, "main.tr", "main.tr_x")
    sqlanon.anonymise(p, cdb.url, replace=True, publish_as="table")
    got = {tuple(r) for r in cdb.sql('SELECT "x", COUNT(*) FROM main.tr_x GROUP BY 1')}
    assert got == {("{a,b}", 6), ("c", 34)}


def parse_array(text: str) -> list[str | None]:
    """A one-dimensional PostgreSQL array literal's elements (unquoted NULL is NULL)."""
    assert text[0] == "{" and text[-1] == "}", text
    out: list[str | None] = []
    i, body = 0, text[1:-1]
    while i < len(body):
        if body[i] == '"':
            i, buf = i + 1, []
            while body[i] != '"':
                if body[i] == "\\":
                    i += 1
                buf.append(body[i])
                i += 1
            out.append("".join(buf))
            i += 1
        else:
            j = body.find(",", i)
            j = len(body) if j < 0 else j
            word = body[i:j].strip()
            out.append(None if word.upper() == "NULL" else word)
            i = j
        assert i == len(body) or body[i] == ",", text
        i += 1
    return out


# NULL and the text 'NULL' (and 'null'), with values that need quoting, a few of each so that
# Mondrian keeps some apart and some together (k = 3 on one QI).
_NULLS = [None] * 3 + ["NULL"] * 3 + ["null", 'say "hi"', "a,b", " lead", "x\\y", "{z}", ""] + ["French"] * 3


def test_null_is_null_and_the_text_null_is_text(cdb, tmp_path):  # noqa: ANN001
    rows = [[i, v] for i, v in enumerate(_NULLS)]
    cdb.load("tn", ["id", "lang"], rows, ["BIGINT", "VARCHAR"])
    for k, target in ((3, "main.tn_3"), (len(rows), "main.tn_all")):
        p = _policy(tmp_path / "p.yaml", ["lang"], k, "main.tn", target)
        sqlanon.anonymise(p, cdb.url, replace=True, publish_as="table")
        labels = dict(cdb.sql(f'SELECT id, "lang" FROM {target}'))
        by_label: dict[Any, set[Any]] = {}
        for i, v in rows:
            by_label.setdefault(labels[i], set()).add(v)
        for label, values in by_label.items():
            if len(values) == 1:  # a value alone is itself: NULL stays NULL, 'NULL' is text
                assert label == next(iter(values)), (label, values)
            else:
                assert set(parse_array(label)) == values, (label, values)
                if cdb.kind == "postgres":  # the engine reads it back the same
                    back = cdb.sql(f"SELECT CAST({_quote(label)} AS TEXT[])")[0][0]
                    assert set(back) == values
        if k == len(rows):
            assert len(by_label) == 1
            (label,) = by_label
            assert label.endswith(",NULL}") and '"NULL"' in label and '"null"' in label


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
