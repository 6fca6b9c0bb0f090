"""The report's charts, drawn by matplotlib (the optional extra ``report``) and inlined as SVG, each
from aggregates the commands computed in the database (class-size histograms, per-class l and t
bins, ``profile`` rows, ``utility`` rows): no chart reads a row of data.

Each function returns ``(svg, sentence)``: the figure and one plain sentence saying what it shows
and whether what it shows is good, for a reader who has never heard of k-anonymity.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from sqlanon.errors import SqlanonError
from sqlanon.policy import Search
from sqlanon.report.console import number

BEFORE, AFTER = "#c0504d", "#2e75b6"
#: Class-size bands (lower edges) for the histograms: 1, 2, 3-4, 5-9, 10-19, ...
BANDS = (1, 2, 3, 5, 10, 20, 50, 100, 1000)


def _figure(width: float = 6.4, height: float = 3.2, ncols: int = 1) -> tuple[Any, Any]:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise SqlanonError("report: the charts need matplotlib (pip install 'sqlanon[report]')") from None
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes


def svg(fig: Any, name: str) -> str:
    """The figure as an inline ``<svg>`` element: text kept as text, no date, and ids salted by
    ``name`` so that several figures on one page never share an id.

    Every text is drawn as written: names come from the user, and mathtext read a column named
    ``$\\notacommand{$`` as TeX and crashed after all the database work (``$x^2$`` was drawn as
    math). Math is off on every text already made and, through rc, on those the draw makes
    (tick labels); TeX is never used."""
    import matplotlib
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_usetex(False)
        text.set_parse_math(False)
    buf = io.StringIO()
    rc = {"svg.fonttype": "none", "svg.hashsalt": name, "text.usetex": False, "text.parse_math": False}
    with matplotlib.rc_context(rc):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)  # RDF boilerplate
    return text[text.index("<svg") :]


def _band(size: int) -> int:
    return max(b for b in BANDS if b <= size)


def _band_label(i: int) -> str:
    lo = BANDS[i]
    hi = BANDS[i + 1] - 1 if i + 1 < len(BANDS) else None
    if hi is None:
        return f"{lo}+"
    return str(lo) if hi == lo else f"{lo}-{hi}"


def _records_by_band(class_sizes: Mapping[str, int]) -> list[float]:
    """Share of records in each class-size band (class_sizes: size -> number of classes)."""
    total = sum(int(s) * int(c) for s, c in class_sizes.items()) or 1
    out = [0.0] * len(BANDS)
    for s, c in class_sizes.items():
        out[BANDS.index(_band(int(s)))] += int(s) * int(c) / total
    return out


def _bars(ax: Any, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float], str]]) -> None:
    n = len(series)
    width = 0.8 / n
    for i, (name, values, colour) in enumerate(series):
        xs = [x + (i - (n - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width, label=name, color=colour)
    ax.set_xticks(range(len(labels)), labels)
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)


def class_sizes(before: Mapping[str, Any], after: Mapping[str, Any], k: int | None) -> tuple[str, str]:
    """Share of records by the size of their class, before and after."""
    fig, (ax,) = _figure()
    _bars(
        ax,
        [_band_label(i) for i in range(len(BANDS))],
        [
            ("source", [100 * v for v in _records_by_band(before["class_sizes"])], BEFORE),
            ("release", [100 * v for v in _records_by_band(after["class_sizes"])], AFTER),
        ],
    )
    ax.set_xlabel("size of the record's class (records sharing its quasi-identifiers)")
    ax.set_ylabel("% of records")
    small_b = 100 * before.get("share_below_k", 0.0)
    small_a = 100 * after.get("share_below_k", 0.0)
    kk = k or 1
    verdict = (
        "good: no record of the release is in a class smaller than k"
        if small_a == 0
        else f"not good: {small_a:.1f} % of the release's records are in classes smaller than k"
    )
    sentence = (
        f"How many records share their quasi-identifier values with how many others: in the source "
        f"{small_b:.1f} % of the records are in a class smaller than k = {kk} (easy to single out), "
        f"in the release {small_a:.1f} %; the further right, the safer ({verdict})."
    )
    return svg(fig, "class_sizes"), sentence


RISK_BANDS = (
    (1.0, "100 %"),
    (0.5, "50 %"),
    (0.2, "20-49 %"),
    (0.1, "10-19 %"),
    (0.05, "5-9 %"),
    (0.0, "< 5 %"),
)


def _records_by_risk(class_sizes: Mapping[str, int]) -> list[float]:
    total = sum(int(s) * int(c) for s, c in class_sizes.items()) or 1
    out = [0.0] * len(RISK_BANDS)
    for s, c in class_sizes.items():
        risk = 1.0 / int(s)
        i = next(i for i, (lo, _) in enumerate(RISK_BANDS) if risk >= lo - 1e-12)
        out[i] += int(s) * int(c) / total
    return out


def prosecutor(before: Mapping[str, Any], after: Mapping[str, Any], bound: float | None) -> tuple[str, str]:
    """Share of records at each prosecutor risk level (1 / class size)."""
    fig, (ax,) = _figure()
    rb, ra = _records_by_risk(before["class_sizes"]), _records_by_risk(after["class_sizes"])
    _bars(
        ax,
        [lab for _, lab in RISK_BANDS],
        [("source", [100 * v for v in rb], BEFORE), ("release", [100 * v for v in ra], AFTER)],
    )
    ax.set_xlabel("chance of re-identifying the record for someone who knows it is in the data")
    ax.set_ylabel("% of records")
    worst = after["risk"]["prosecutor_max"]
    ok = bound is None or worst <= bound + 1e-12
    sentence = (
        f"The chance that someone who knows a person is in the data picks out that person's record "
        f"(1 / the size of its class): at most {100 * worst:.1f} % in the release, against "
        f"{100 * before['risk']['prosecutor_max']:.0f} % in the source; bars to the right are good"
        + (
            f" (the policy's bound, {100 * bound:.1f} %, {'holds' if ok else 'does not hold'})."
            if bound
            else "."
        )
    )
    return svg(fig, "prosecutor"), sentence


#: The width of each measure's bins (templates/report/distribution.sql.j2: distinct l exactly,
#: entropy l and KL by tenths, EMD by fiftieths).
BIN_WIDTH = {"distinct": 1.0, "entropy": 0.1, "emd_equal": 0.02, "emd_ordered": 0.02, "kl": 0.1}
BIN_WIDTH["emd_hier"] = 0.02  # emd-hierarchical (sqlanon/measure/tcloseness_hier.py)


def _smallest_gap(bins: Sequence[float]) -> float:
    gaps = [b - a for a, b in zip(bins, bins[1:], strict=False) if b > a]
    return min(gaps, default=1.0)


def _binned_bars(
    ax: Any,
    bins: Sequence[float],
    width: float,
    centred: bool,
    series: Sequence[tuple[str, Sequence[float], str]],
) -> None:
    """Bars on a numeric axis, each bin at its real place and width: only the non-empty bins come
    from the database, and drawing them side by side spaced l = 1, 2, 9 evenly (issue 34).
    ``centred``: the bins are whole values (distinct l), drawn around them; else a bin is
    ``[edge, edge + width)``."""
    from matplotlib.ticker import MaxNLocator

    n = len(series)
    bar = 0.8 * width / n
    for i, (name, values, colour) in enumerate(series):
        shift = (i - (n - 1) / 2) * bar + (0 if centred else width / 2)
        ax.bar([b + shift for b in bins], values, bar, label=name, color=colour)
    if centred:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)


def _hist_series(hist: Sequence[Sequence[float]], total: float) -> dict[float, float]:
    return {float(b): 100 * float(r) / (total or 1) for b, _, r in hist}


def spread(
    attr: str,
    measure: str,
    before: Sequence[Sequence[float]],
    after: Sequence[Sequence[float]],
    threshold: float | None,
    higher_is_better: bool,
) -> tuple[str, str]:
    """Records by the l (or t) of their class, before and after."""
    tb = sum(r for _, _, r in before)
    ta = sum(r for _, _, r in after)
    sb, sa = _hist_series(before, tb), _hist_series(after, ta)
    bins = sorted(set(sb) | set(sa))
    fig, (ax,) = _figure()
    _binned_bars(
        ax,
        bins,
        BIN_WIDTH.get(measure) or _smallest_gap(bins),
        measure == "distinct",
        [("source", [sb.get(b, 0) for b in bins], BEFORE), ("release", [sa.get(b, 0) for b in bins], AFTER)],
    )
    names = {
        "distinct": "distinct values of " + attr + " in the record's class (l)",
        "entropy": "entropy l of the record's class, 2^H (lower edge of a tenth)",
        "emd_equal": "distance of the class's " + attr + " from the whole table's (t, EMD)",
        "emd_ordered": "ordered distance of the class's " + attr + " from the whole table's (t)",
        "emd_hier": "hierarchical distance of the class's " + attr + " from the whole table's (t)",
        "kl": "information the class gives about " + attr + " (I1, bits)",
    }
    ax.set_xlabel(names.get(measure, measure))
    ax.set_ylabel("% of records")
    worst_a = (min if higher_is_better else max)(b for b, _, _ in after) if after else None
    if higher_is_better:
        what = f"Every record of the release is in a class with at least {worst_a:g} different values of "
        good = (
            "more is better: an attacker who finds a person's class still cannot tell which value is theirs"
        )
    else:
        what = (
            f"No class of the release is farther than about {worst_a:g} from the table's overall "
            "distribution of "
        )
        good = "less is better: a class then reveals little more about a person than the whole table does"
    verdict = ""
    if threshold is not None and worst_a is not None:
        ok = worst_a >= threshold - 1e-9 if higher_is_better else worst_a <= threshold + 1e-9
        verdict = f"; the policy asks {threshold:g}: {'met' if ok else 'check the table above'}"
    sentence = Markup("{}{} ({}{}).").format(what, bdi(attr), good, verdict)
    return svg(fig, f"{attr}_{measure}"), sentence


def bdi(name: Any) -> Markup:
    """A user-supplied name for the page, escaped and isolated (``<bdi>``): a RIGHT-TO-LEFT
    OVERRIDE in a table name reversed the page's sentences around it (issue 32).

    >>> str(bdi("a\u202e<b>"))
    '<bdi>a\u202e&lt;b&gt;</bdi>'
    """
    return Markup("<bdi>{}</bdi>").format(name)


def tradeoff(profile: Mapping[str, Any], info: Mapping[str, Any]) -> tuple[str, str]:
    """The privacy/utility trade-off over k: four metrics of the optimum for each k."""
    rows = [r for r in profile.get("profile", []) if r.get("metrics")]
    chosen = profile.get("metric") or Search.metric  # the policy default where a profile names none
    names = [chosen] + [m for m in ("ncp", "entropy_loss", "discernibility", "precision") if m != chosen]
    names = [m for m in names if any((r["metrics"] or {}).get(m) is not None for r in rows)][:4]
    fig, axes = _figure(9.6, 2.6, max(1, len(names)))
    for ax, m in zip(axes, names, strict=False):
        pts = [(r["k"], r["metrics"][m]) for r in rows if r["metrics"].get(m) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=AFTER)
        better = (info.get(m) or {}).get("better", "lower")
        ax.set_title(f"{m} ({better} is better)", fontsize=9)
        _integer_k(ax)
    if not rows:
        return svg(
            fig, "tradeoff"
        ), "No k of the profile could be satisfied, so there is no trade-off to draw."
    first, last = rows[0], rows[-1]
    chosen = names[0] if names else chosen  # a metric the page shows (sqlanon.ml.shown: NCP is not)
    v0, v1 = first["metrics"].get(chosen), last["metrics"].get(chosen)
    sentence = (
        f"What protecting more costs: for each k, the best release's information-loss metrics; from "
        f"k = {first['k']} to k = {last['k']} the {chosen} goes from {_fmt(v0)} to {_fmt(v1)}. A flat line "
        "means a larger k is almost free; a steep one, that each step of privacy costs data quality."
    )
    return svg(fig, "tradeoff"), sentence


def _integer_k(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("k")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.spines[["top", "right"]].set_visible(False)


def _fmt(v: Any) -> str:
    return number(v, none="n/a")


def slug(text: str) -> str:
    """An id-safe slug (for anchors).

    >>> slug("salary-class / emd")
    'salary-class-emd'
    """
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
