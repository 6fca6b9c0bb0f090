"""``sqlanon report``: one self-contained HTML page (issue 14) drawn from the dictionary of
:func:`sqlanon.ml.evidence.report_data` (the JSON of ``sqlanon report --json``), and its PDF.

The page opens offline: its CSS is inline, its charts are inline SVG (:mod:`sqlanon.report.charts`,
matplotlib), and it loads nothing (no script, no font, no CDN). The template is
``templates/report/page.html.j2`` (Jinja2, autoescaped). ``--pdf`` prints the same page with
headless Chromium (``chromium --headless --print-to-pdf``; Debian's package ``chromium``), offline
and sandboxed where the machine allows (:func:`print_pdf`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from sqlanon.errors import SqlanonError
from sqlanon.report import charts, mlcharts
from sqlanon.report.console import make_console, number
from sqlanon.sql.compile import TEMPLATES_DIR

CHROMIUM_ENV = "SQLANON_CHROMIUM"
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str:
    """The headless browser that prints the PDF: ``$SQLANON_CHROMIUM``, else the first of
    ``chromium``, ``chromium-browser``, ``google-chrome`` on PATH."""
    env = os.environ.get(CHROMIUM_ENV)
    if env:
        if not Path(env).is_file():
            raise SqlanonError(f"--pdf: {CHROMIUM_ENV}={env!r} is not a file")
        return env
    for name in CHROMIUMS:
        found = shutil.which(name)
        if found:
            return found
    raise SqlanonError("--pdf: no Chromium found (apt-get install chromium, or set SQLANON_CHROMIUM)")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["bdi"] = charts.bdi
    env.filters["pct"] = lambda v: "n/a" if v is None else f"{100 * float(v):.2f} %"
    return env


def _num(v: Any) -> str:
    """The console's one number format (:func:`sqlanon.report.console.number`)."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    return number(v, none="n/a")


def _figure(pair: tuple[str, str]) -> dict[str, Any]:
    return {"svg": Markup(pair[0]), "caption": pair[1]}


def _requirements(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = [k for k in before.get("satisfied", {}) if k != "all"]
    keys += [k for k in after.get("satisfied", {}) if k != "all" and k not in keys]
    return [
        {
            # The JSON key "k" read as a bare "k" on the page: the requirement is k >= the policy's.
            "name": f"k >= {before.get('policy_k')}" if k == "k" else k,
            "before": before.get("satisfied", {}).get(k),
            "after": after.get("satisfied", {}).get(k),
            "records": before.get("violations", {}).get(k),
        }
        for k in keys
    ]


def _checks(data: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The policy's requirements of one kind as data (``policy.checks``: kind, attribute, measure,
    bound, label), never parsed back from their labels: a name holding ``": "`` raised KeyError and
    one holding ``]`` drew the wrong measure and no bound (issue 32)."""
    return [c for c in data["policy"].get("checks", []) if c.get("kind") == kind]


def _sensitive(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    dist = data["distributions"]
    l_req = {c["attribute"]: c for c in _checks(data, "l")}
    t_req = {c["attribute"]: c for c in _checks(data, "t")}
    keys = {"emd-equal": "emd_equal", "emd-ordered": "emd_ordered", "kl": "kl"}
    keys["emd-hierarchical"] = "emd_hier"
    for attr in data["after"].get("sensitive", []):
        before, after = dist["before"].get(attr, {}), dist["after"].get(attr, {})
        t = t_req.get(attr)
        measure, bound = (t["measure"], float(t["bound"])) if t else ("emd-equal", None)
        key = keys[measure]
        lr = l_req.get(attr)
        l_bound = float(lr["bound"]) if lr and lr["measure"] == "distinct" else None
        figs = [
            _figure(
                charts.spread(
                    attr, "distinct", before.get("distinct", []), after.get("distinct", []), l_bound, True
                )
            ),
            _figure(charts.spread(attr, key, before.get(key, []), after.get(key, []), bound, False)),
        ]
        info = data["after"]["information"].get(attr, {})
        out.append(
            {
                "name": attr,
                "figures": figs,
                "requirements": [c["label"] for c in (lr, t) if c],
                "l": data["after"]["l_diversity"].get(attr, {}),
                "t": data["after"]["t_closeness"].get(attr, {}),
                "info": info,
                "info_before": data["before"]["information"].get(attr, {}),
            }
        )
    return out


def k_scope(data: Mapping[str, Any]) -> dict[str, Any]:
    """The QIs the release's k is over, and each perturbed QI left out of it with its perturbation
    (issue 34: a perturbed QI was out of k silently; the page says so beside k)."""
    over = list(data["after"].get("quasi_identifiers") or [])
    quasi = [c["name"] for c in data["policy"]["columns"] if c.get("role") == "quasi"]
    pert = data["search"].get("perturbation") or {}
    left = {q: (pert.get(q) or {}).get("describe") or "perturbation" for q in quasi if q not in over}
    return {"over": over, "perturbed": left}


def render(data: Mapping[str, Any]) -> str:
    """The page's HTML text."""
    before, after = data["before"], data["after"]
    k = before.get("policy_k")
    bound = next((float(c["bound"]) for c in _checks(data, "risk") if c["measure"] == "prosecutor"), None)
    ctx: dict[str, Any] = {
        "d": data,
        "requirements": _requirements(before, after),
        "fig_classes": _figure(charts.class_sizes(before, after, k)),
        "fig_risk": _figure(charts.prosecutor(before, after, bound)),
        "sensitive": _sensitive(data),
        "k_scope": k_scope(data),
        "fig_tradeoff": _figure(charts.tradeoff(data["profile"], data["metric_info"])),
        "ml": None,
    }
    u = data.get("utility")
    if u:
        ctx["ml"] = {
            "u": u,
            "figures": [
                _figure(mlcharts.performance_vs_k(u)),
                _figure(mlcharts.loss_vs_k(u)),
                _figure(mlcharts.performance_vs_loss(u)),
            ],
        }
    return _env().get_template("report/page.html.j2").render(**ctx)


def check_out(out: str | Path, pdf: bool = False) -> str | None:
    """Refuse an ``--out`` that cannot be written (a folder, a missing folder, not ``.html``) and
    a ``--pdf`` without Chromium, before any work; returns the browser for ``pdf``."""
    path = Path(out)
    if path.is_dir():
        raise SqlanonError(f"--out: {str(path)!r} is a directory")
    if not path.parent.is_dir():
        raise SqlanonError(f"--out: folder {str(path.parent)!r} does not exist")
    if path.suffix.lower() not in (".html", ".htm"):
        raise SqlanonError(f"--out: {str(path)!r} should end in .html (the PDF goes beside it as .pdf)")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SqlanonError("report: the charts need matplotlib (pip install 'sqlanon[report]')") from None
    return chromium() if pdf else None


def write_report(data: Mapping[str, Any] | Any, out: str | Path, *, pdf: bool = False) -> list[str]:
    """Write the page of ``data`` (a :class:`sqlanon.ReportResult` or its ``to_dict()``) to
    ``out`` (and, with ``pdf``, the PDF beside it, ``out`` with ``.pdf``). Everything is checked
    and rendered before anything is written. Returns the paths written."""
    if hasattr(data, "to_dict"):
        data = data.to_dict()
    path = Path(out)
    browser = check_out(path, pdf)
    text = render(data)
    written = []
    write_atomic(path, text.encode("utf-8"))
    written.append(str(path))
    if browser is not None:
        pdf_path = path.with_suffix(".pdf")
        if not print_pdf(browser, path, pdf_path):
            make_console(stderr=True).print(
                "note: --pdf: Chromium's sandbox cannot start here (root, or no user namespaces); "
                "printed without it, offline",
                markup=False,
                highlight=False,
            )
        written.append(str(pdf_path))
    return written


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary file created exclusively beside it (``mkstemp``:
    O_CREAT|O_EXCL, mode 0600, a random name) and renamed over it: a link planted at a temporary
    name (``.NAME.html.tmp`` was written through) or at ``path`` is never followed; a link at
    ``path`` is replaced, its target left untouched."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


#: Chromium printing offline: no background or component networking, no resolver (every host
#: maps to nothing), every request sent to a closed proxy port (loopback included), and a fresh
#: empty profile per print. The page itself loads nothing (inline CSS and SVG, no script).
OFFLINE_ARGS = (
    "--headless",
    "--disable-gpu",
    "--no-pdf-header-footer",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--no-pings",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
)
NO_SANDBOX = "--no-sandbox"


def chromium_args(browser: str, profile: str, html: Path, pdf: Path, sandbox: bool) -> list[str]:
    """The command line that prints ``html`` to ``pdf`` offline (see :data:`OFFLINE_ARGS`)."""
    return [
        browser,
        *OFFLINE_ARGS,
        *(() if sandbox else (NO_SANDBOX,)),
        f"--user-data-dir={profile}",
        f"--print-to-pdf={pdf}",
        html.resolve().as_uri(),
    ]


def print_pdf(browser: str, html: Path, pdf: Path) -> bool:
    """Print ``html`` to ``pdf`` with headless Chromium, offline, sandboxed where the machine
    allows: without the sandbox only when it cannot start (root, or no user namespaces). The
    browser prints into a private folder; the PDF is then written as :func:`write_atomic` does.
    Returns whether the sandbox was used."""
    last = None
    for sandbox in (True, False):
        with tempfile.TemporaryDirectory(prefix="sqlanon-chromium-") as work:
            profile, out = Path(work) / "profile", Path(work) / "page.pdf"
            profile.mkdir(mode=0o700)
            try:
                r = subprocess.run(
                    chromium_args(browser, str(profile), html, out, sandbox),
                    capture_output=True,
                    text=True,
                    timeout=180,
                    stdin=subprocess.DEVNULL,
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                raise SqlanonError(f"--pdf: Chromium failed: {e}") from None
            if r.returncode == 0 and out.is_file() and out.stat().st_size > 0:
                write_atomic(pdf, out.read_bytes())
                return sandbox
            last = r
            if not sandbox or not _no_sandbox_possible(r.stderr + r.stdout):
                break
    assert last is not None
    tail = (last.stderr or last.stdout).strip().splitlines()[-1:] or ["no output"]
    raise SqlanonError(f"--pdf: Chromium could not print the page ({tail[0]})")


def _no_sandbox_possible(output: str) -> bool:
    """Chromium's own words when its sandbox cannot start (root; no user namespaces, no setuid
    helper): only then is the print tried again without it."""
    text = output.lower()
    return "sandbox" in text
