"""``sqlanon report``: one self-contained HTML page (issue 14) drawn from the dictionary of
:func:`sqlanon.ml.evidence.report_data` (the JSON of ``sqlanon report --json``), and its PDF.

The page opens offline: its CSS is inline, its charts are inline SVG (:mod:`sqlanon.report.charts`,
matplotlib), and it loads nothing (no script, no font, no CDN). The template is
``templates/report/page.html.j2`` (Jinja2, autoescaped). ``--pdf`` prints the same page with
headless Chromium (``chromium --headless --print-to-pdf``; Debian's package ``chromium``).
"""

from __future__ import annotations

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
    env.filters["pct"] = lambda v: "n/a" if v is None else f"{100 * float(v):.2f} %"
    return env


def _num(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        v = 0.0 if abs(v) < 1e-12 else v
        return f"{v:,.0f}" if abs(v) >= 1e5 else f"{v:.4g}"
    return str(v)


def _figure(pair: tuple[str, str]) -> dict[str, Any]:
    return {"svg": Markup(pair[0]), "caption": pair[1]}


def _requirements(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = [k for k in before.get("satisfied", {}) if k != "all"]
    keys += [k for k in after.get("satisfied", {}) if k != "all" and k not in keys]
    return [
        {
            "name": k,
            "before": before.get("satisfied", {}).get(k),
            "after": after.get("satisfied", {}).get(k),
            "records": before.get("violations", {}).get(k),
        }
        for k in keys
    ]


def _sensitive(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    dist = data["distributions"]
    l_req = {}
    t_req: dict[str, tuple[str, float]] = {}
    for req in data["policy"]["requirements"]:
        if req.startswith("l["):
            attr = req[2 : req.index("]")]
            l_req[attr] = req
        if req.startswith("t["):
            attr = req[2 : req.index("]")]
            measure = req.split(": ", 1)[1].split(" <= ")[0]
            t_req[attr] = (measure, float(req.rsplit("<= ", 1)[1]))
    for attr in data["after"].get("sensitive", []):
        before, after = dist["before"].get(attr, {}), dist["after"].get(attr, {})
        measure, bound = t_req.get(attr, ("emd-equal", None))
        key = {"emd-equal": "emd_equal", "emd-ordered": "emd_ordered", "kl": "kl"}[measure]
        l_bound = None
        if attr in l_req and "distinct" in l_req[attr]:
            l_bound = float(l_req[attr].rsplit(">= ", 1)[-1]) if ">= " in l_req[attr] else None
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
                "requirements": [r for r in data["policy"]["requirements"] if f"[{attr}]" in r],
                "l": data["after"]["l_diversity"].get(attr, {}),
                "t": data["after"]["t_closeness"].get(attr, {}),
                "info": info,
                "info_before": data["before"]["information"].get(attr, {}),
            }
        )
    return out


def render(data: Mapping[str, Any]) -> str:
    """The page's HTML text."""
    before, after = data["before"], data["after"]
    k = before.get("policy_k")
    bound = None
    for req in data["policy"]["requirements"]:
        if req.startswith("risk.prosecutor <= "):
            bound = float(req.split("<= ")[1])
    ctx: dict[str, Any] = {
        "d": data,
        "requirements": _requirements(before, after),
        "fig_classes": _figure(charts.class_sizes(before, after, k)),
        "fig_risk": _figure(charts.prosecutor(before, after, bound)),
        "sensitive": _sensitive(data),
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
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    written.append(str(path))
    if browser is not None:
        pdf_path = path.with_suffix(".pdf")
        print_pdf(browser, path, pdf_path)
        written.append(str(pdf_path))
    return written


def print_pdf(browser: str, html: Path, pdf: Path) -> None:
    """Print ``html`` to ``pdf`` with headless Chromium (no network: the page needs none)."""
    with tempfile.TemporaryDirectory(prefix="sqlanon-chromium-") as profile:
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace for the sandbox
            "--disable-gpu",
            "--no-pdf-header-footer",
            f"--user-data-dir={profile}",
            f"--print-to-pdf={pdf.resolve()}",
            html.resolve().as_uri(),
        ]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SqlanonError(f"--pdf: Chromium failed: {e}") from None
    if r.returncode != 0 or not pdf.is_file() or pdf.stat().st_size == 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SqlanonError(f"--pdf: Chromium could not print the page ({tail[0]})")
