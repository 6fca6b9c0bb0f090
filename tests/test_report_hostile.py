"""The report and the console show only what the release shows (issue 32, findings 6 to 8).

* Examples of a node's levels come from a class the release kept, at the chosen level or a
  coarser one, the same on every run, never a value: a unique outlier that the release suppresses
  (zip 99991, age 97, loaded first so that an unordered ``LIMIT 1`` reads it) leaves none of its
  labels (``9999*`` ... ``9****``, ``[95-100)`` ... ``[80-100)``) in the page, the JSON or the
  console, on DuckDB and PostgreSQL. The expected labels are worked out by hand from the data.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from tests.conftest import TestDB
from tests.helpers import cli, write_policy

COLUMNS = ["id", "zip", "age", "disease"]
TYPES = ["INTEGER", "VARCHAR", "INTEGER", "VARCHAR"]
DISEASES = ["flu", "asthma", "cancer", "diabetes"]
#: Every label of the outlier below the top: at no chosen node (k = 5) is it in a kept class.
OUTLIER_LABELS = ["99991", "9999*", "999**", "99***", "9****", "[95-100)", "[90-100)", "[80-100)"]


def _rows() -> list[list[Any]]:
    """The outlier first, then 199 people with zips 47600-47699 and ages 20-59. The largest class
    at zip=3, age=2 (47***, a decade) is the decade with most people: counted in the test."""
    rnd = random.Random(5)
    rows: list[list[Any]] = [[1, "99991", 97, "ebola"]]
    for i in range(2, 201):
        rows.append([i, f"476{rnd.randrange(100):02d}", rnd.randrange(20, 60), rnd.choice(DISEASES)])
    return rows


def _policy(tmp_path: Path, db: TestDB) -> str:
    pol = {
        "source": f"{db.schema}.clinic",
        "target": f"{db.schema}.clinic_anon",
        "columns": {
            "id": {"role": "identifier", "action": "drop"},
            "zip": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
            "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [5, 10, 20]}}},
            "disease": {"role": "sensitive"},
        },
        "privacy": {"k": 5, "l": {"disease": 2}, "suppression": 0.05},
        "search": {"algorithm": "flash", "metric": "precision"},
    }
    return str(write_policy(tmp_path, pol))


def _clean(text: str, where: str) -> None:
    for label in OUTLIER_LABELS:
        assert label not in text, f"{where} shows the suppressed outlier's {label!r}"


def _ok(*args: str) -> str:
    code, out, err = cli(*args)
    assert code in (0, 1), err
    return out + err  # a dry run's summary is on stderr (issue 34: stdout is the SQL alone)


def test_examples_come_from_the_release_only(db: TestDB, tmp_path: Path) -> None:
    rows = _rows()
    db.load("clinic", COLUMNS, rows, TYPES)
    policy = _policy(tmp_path, db)
    # The largest class at zip=3, age=2 (ties: the smallest label): by hand, from the rows.
    decades: dict[int, int] = {}
    for _, _z, a, _ in rows[1:]:
        decades[a // 10] = decades.get(a // 10, 0) + 1
    top = min(decades, key=lambda d: (-decades[d], f"[{d * 10}-{d * 10 + 10})"))
    decade = f"[{top * 10}-{top * 10 + 10})"
    twenty = f"[{top // 2 * 20}-{top // 2 * 20 + 20})"
    node = "zip=3,age=2"

    outputs = []
    for argv in (
        ("anonymise", policy, "--db", db.url, "--dry-run", "--levels", node),
        ("evaluate", policy, "--db", db.url, "--levels", node),
        ("profile", policy, "--db", db.url, "--k", "5,10"),
        ("anonymise", policy, "--db", db.url, "--dry-run"),
    ):
        first, again = _ok(*argv), _ok(*argv)
        _clean(first, argv[0])
        assert first == again, f"{argv[0]}: the examples changed between runs"
        outputs.append(first)
    assert f"zip=3 (47***), age=2 ({decade})" in outputs[0]
    assert f"node zip=3 (47***), age=2 ({decade})" in outputs[1]
    # Level 0 is the value itself: never printed, even from a class of the release.
    out = _ok("evaluate", policy, "--db", db.url, "--levels", "zip=3,age=0")
    assert re.search(r"age=0 on ", out) and "age=0 (" not in out

    out = _ok("anonymise", policy, "--db", db.url, "--levels", node, "--as", "table")
    _clean(out, "anonymise (published)")
    assert f"zip=3 (47***), age=2 ({decade})" in out

    page = tmp_path / "report.html"
    code, data, err = cli("report", policy, "--db", db.url, "--out", str(page), "--levels", node, "--json")
    assert code == 0, err
    html = page.read_text(encoding="utf-8")
    _clean(html, "the page")
    levels = json.loads(data[data.index("{") :])["levels"]
    _clean(json.dumps(levels), "the JSON's levels")
    # The chosen level and the coarser ones only, from the kept class; '*' at the top.
    assert levels["zip"]["examples"] == {"3": "47***", "4": "4****", "5": "*"}
    assert levels["age"]["examples"] == {"2": decade, "3": twenty, "4": "*"}


# -- finding 8: names that crashed the charts, re-parsed labels, bidi overrides, planted links -----

MATH, POWER, COLON, BRACKET = "$\\notacommand{$", "$x^2$", "a: b", "c]d"
RLO_TABLE = "clinic\u202eevil"
HOSTILE_COLUMNS = ["id", "zip", "age", MATH, POWER, COLON, BRACKET]


@pytest.fixture(scope="module")
def hostile_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``report --json`` of a table named with a RIGHT-TO-LEFT OVERRIDE whose four sensitive
    columns are named like TeX, with ": " and with "]", each with a t requirement (DuckDB)."""
    import duckdb

    tmp = tmp_path_factory.mktemp("hostile")
    path = tmp / "h.duckdb"
    con = duckdb.connect(str(path))
    cols = ", ".join(
        f'"{c}" {t}'
        for c, t in zip(HOSTILE_COLUMNS, ["INTEGER", "VARCHAR", "INTEGER"] + ["VARCHAR"] * 4, strict=True)
    )
    con.execute(f'CREATE TABLE main."{RLO_TABLE}" ({cols})')
    rnd = random.Random(3)
    rows = [
        [i, f"476{rnd.randrange(10)}{rnd.randrange(10)}", rnd.randrange(20, 60)]
        + [rnd.choice(DISEASES) for _ in range(4)]
        for i in range(300)
    ]
    con.executemany(f'INSERT INTO main."{RLO_TABLE}" VALUES ({", ".join("?" * 7)})', rows)
    con.close()
    pol = {
        "source": f'main."{RLO_TABLE}"',
        "columns": {
            "id": {"role": "identifier", "action": "drop"},
            "zip": {"role": "quasi", "hierarchy": {"mask": "right", "levels": 5}},
            "age": {"role": "quasi", "hierarchy": {"interval": {"widths": [10, 20]}}},
            **{c: {"role": "sensitive"} for c in HOSTILE_COLUMNS[3:]},
        },
        "privacy": {
            "k": 5,
            "l": {MATH: 2, BRACKET: 2},
            "t": {
                MATH: 0.9,
                POWER: 0.9,
                COLON: {"measure": "emd-ordered", "t": 0.8},
                BRACKET: {"measure": "kl", "t": 0.7},
            },
            "suppression": 0.05,
        },
    }
    policy = str(write_policy(tmp, pol))
    out = tmp / "report.html"
    code, text, err = cli("report", policy, "--db", str(path), "--out", str(out), "--k", "5", "--json")
    assert code == 0, err  # the mathtext crash and the KeyError were tracebacks here
    return {"data": json.loads(text[text.index("{") :]), "html": out.read_text(encoding="utf-8")}


def _figure_of(html: str, name: str, measure_words: str) -> str:
    """The figure (svg and caption) whose axis label holds ``measure_words`` and ``name``."""
    for fig in re.findall(r"<figure>.*?</figure>", html, flags=re.S):
        if measure_words in fig and escape(name) in fig:
            return fig
    raise AssertionError(f"no figure of {name!r} by {measure_words!r}")


def test_hostile_names_draw_as_written(hostile_data: dict[str, Any]) -> None:
    html = hostile_data["html"]
    # Math text is off: the names are drawn as written (the SVG keeps text as text).
    for name in (MATH, POWER):
        assert f">{escape(name)}" in html or escape(name) in html
        assert "distinct values of " + escape(name) in html
    # Each t chart has its own measure and bound, from the requirements as data.
    fig = _figure_of(html, BRACKET, "information the class gives about")  # kl: I1 bits
    assert "the policy asks 0.7" in fig
    fig = _figure_of(html, COLON, "ordered distance of the class")
    assert "the policy asks 0.8" in fig
    checks = {(c["kind"], c.get("attribute")): c for c in hostile_data["data"]["policy"]["checks"]}
    assert checks[("t", BRACKET)] == {
        "kind": "t", "attribute": BRACKET, "measure": "kl", "bound": 0.7, "label": f"t[{BRACKET}]: kl <= 0.7"
    }  # fmt: skip


def test_every_name_is_isolated(hostile_data: dict[str, Any]) -> None:
    html = hostile_data["html"]
    assert "\u202e" in html
    title = re.search(r"<title>([^<]*)</title>", html)
    assert title and re.fullmatch(r"sqlanon report: \u2068[^\u2069]*\u202e[^\u2069]*\u2069", title.group(1))
    body = html[html.index("<body>") :]
    outside = re.sub(r"<bdi>[^<]*</bdi>", "", body)
    assert "\u202e" not in outside  # every occurrence is inside a <bdi>
    assert re.search(r"<h1>Anonymisation report: <bdi>[^<]*\u202e[^<]*</bdi></h1>", body)


def test_the_page_never_follows_a_planted_link(
    hostile_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from sqlanon.report.html import write_report

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    out = tmp_path / "report.html"
    (tmp_path / ".report.html.tmp").symlink_to(victim)  # the old fixed temporary name
    # A random temporary name, planted: the first candidate the generator gives.
    names = iter(["planted", *(f"n{i}" for i in range(100))])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    (tmp_path / ".report.html.plantedtmp").symlink_to(victim)
    (tmp_path / ".report.html.planted.tmp").symlink_to(victim)
    assert write_report(hostile_data["data"], out) == [str(out)]
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert out.is_file() and not out.is_symlink() and "<bdi>" in out.read_text(encoding="utf-8")
    # A link at the page's own name is replaced, never written through.
    out.unlink()
    out.symlink_to(victim)
    write_report(hostile_data["data"], out)
    assert victim.read_text(encoding="utf-8") == "keep me" and not out.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()] == []


# -- finding 7: --pdf prints offline, sandboxed where the machine allows --------------------------

FAKE_CHROMIUM = """#!{python}
import json, os, sys
args = sys.argv[1:]
profile = next(a.split("=", 1)[1] for a in args if a.startswith("--user-data-dir="))
with open({log!r}, "a") as f:
    f.write(json.dumps({{"args": args, "profile": os.listdir(profile)}}) + "\\n")
if {refuse} and "--no-sandbox" not in args:
    print("Running as root without --no-sandbox is not supported.", file=sys.stderr)
    sys.exit(1)
pdf = next(a.split("=", 1)[1] for a in args if a.startswith("--print-to-pdf="))
open(pdf, "wb").write(b"%PDF-1.4 fake")
"""


def _fake_chromium(tmp_path: Path, refuse_sandbox: bool) -> tuple[Path, Path]:
    import sys

    log = tmp_path / f"argv-{refuse_sandbox}.jsonl"
    exe = tmp_path / f"chromium-{refuse_sandbox}"
    exe.write_text(FAKE_CHROMIUM.format(python=sys.executable, log=str(log), refuse=refuse_sandbox))
    exe.chmod(0o755)
    return exe, log


@pytest.mark.parametrize("refuse_sandbox", [False, True])
def test_pdf_launch_is_offline_and_sandboxed_first(
    hostile_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse_sandbox: bool
) -> None:
    from sqlanon.report.html import write_report

    exe, log = _fake_chromium(tmp_path, refuse_sandbox)
    monkeypatch.setenv("SQLANON_CHROMIUM", str(exe))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    out = tmp_path / "r.html"
    out.with_suffix(".pdf").symlink_to(victim)  # a planted link at the PDF's name
    write_report(hostile_data["data"], out, pdf=True)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == (2 if refuse_sandbox else 1)
    assert "--no-sandbox" not in calls[0]["args"]  # the sandbox is tried first
    for call in calls:
        args = call["args"]
        assert call["profile"] == []  # a fresh, empty profile
        for flag in (
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-default-apps",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--metrics-recording-only",
            "--no-pings",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
        ):
            assert flag in args, flag
        assert args[-1] == out.resolve().as_uri()
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert out.with_suffix(".pdf").read_bytes() == b"%PDF-1.4 fake"


def test_chromium_contacts_nothing(tmp_path: Path) -> None:
    """A page that asks for a loopback server, localhost and a public host: printed by the real
    Chromium with sqlanon's arguments, the server sees no request (a plain launch of the same
    page reaches it, so the check can see one)."""
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from sqlanon.report.html import print_pdf
    from tests.test_report import _browser_or_skip

    browser = _browser_or_skip()
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = tmp_path / "p.html"
        page.write_text(
            f'<html><body><p>x</p><img src="http://127.0.0.1:{port}/a"><img src="http://localhost:{port}/b">'
            f'<link rel="stylesheet" href="http://example.com/c.css"></body></html>',
            encoding="utf-8",
        )
        print_pdf(browser, page, tmp_path / "p.pdf")
        assert (tmp_path / "p.pdf").read_bytes()[:5] == b"%PDF-"
        assert hits == []
        plain = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'prof'}",
        ]
        plain += [f"--print-to-pdf={tmp_path / 'q.pdf'}", page.as_uri()]
        subprocess.run(plain, capture_output=True, timeout=120, check=False)
        assert hits, "the control launch reached no server: the check could not see a request"
    finally:
        server.shutdown()
