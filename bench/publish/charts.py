"""The site's charts, drawn with matplotlib at build time as inline SVG (no JavaScript: the pages work
from file://); deterministic (a hash salt per chart, no date), text kept as XML-escaped text.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter

import matplotlib

matplotlib.use("Agg")  # no display; the SVG backend is used through savefig(format="svg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)
from markupsafe import Markup, escape  # noqa: E402

from bench.backends import BACKENDS  # noqa: E402
from bench.backends.stages import STAGES, label as stage_label  # noqa: E402
from bench.publish import stages  # noqa: E402
from bench.publish.fmt import group_by, setting_text  # noqa: E402
from bench.publish.results import CellResult  # noqa: E402

# Axes that may vary across a dataset's cells and deserve a chart: setting -> axis label.
AXES = {"world_size": "world size (ranks)", "num_workers": "DataLoader workers per rank"}
STYLE = {
    "svg.fonttype": "none",       # text as <text>, selectable and escaped, not glyph paths
    "text.parse_math": False,     # a "$" in a dataset name or cell id is text, not mathtext
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 72,
}
MEDIAN_EPOCH = attrgetter("median")  # what the epoch time charts plot of a cell


@dataclass(frozen=True)
class Chart:
    key: str      # unique within the page: the SVG's element ids derive from it
    title: str
    svg: Markup   # the inline <svg> element, with <title> and aria label
    wide: bool = False  # spans the page's width


def dataset_charts(table: dict, key: str) -> list[Chart]:
    """The charts one dataset's table supports: each only when its axis has ≥2 values."""
    ok = [r for r in table["rows"] if r.measured]
    name = table["dataset"]
    charts = []
    axes = _varying(ok)  # what tells the charted cells apart (the table's axes may vary only among failed cells)
    if staged := [r for r in ok if stages.seconds(r)]:  # first: the why behind every other chart
        charts.append(stage_bars(f"{key}-stages", f"{name}: where each epoch goes", staged, _varying(staged)))
    if _has_axis(ok, "world_size"):
        palette = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]  # one colour per configuration
        labels = dict.fromkeys(_label(r, axes, exclude="world_size") for r in ok)
        colors = {label: palette[i % len(palette)] for i, label in enumerate(labels)}
        charts.append(line_chart(f"{key}-epoch-ws", f"{name}: epoch time against world size", AXES["world_size"],
                                 "median epoch time (s), bars: IQR", _series(ok, axes, "world_size", MEDIAN_EPOCH, True),
                                 colors=colors))
        for field, value, scale, what, unit, ideal in (
                ("eff", lambda r: r.scaling_efficiency, 100, "scaling efficiency", "%", 100.0),
                ("total_pss_bytes", lambda r: r.metrics.total_pss_bytes, 1 / 2**20, "total peak PSS, all ranks", "MiB", None),
                ("rank_pss_bytes", lambda r: r.rank_pss_bytes, 1 / 2**20, "peak PSS per rank (largest rank)", "MiB", None)):
            series = _series(ok, axes, "world_size", value, scale=scale)
            if any(series.values()):
                charts.append(line_chart(f"{key}-{field}-ws", f"{name}: {what} against world size", AXES["world_size"],
                                         f"{what} ({unit})", series, ideal=ideal, colors=colors))
    if _has_axis(ok, "num_workers"):
        charts.append(line_chart(f"{key}-epoch-workers", f"{name}: epoch time against DataLoader workers",
                                 AXES["num_workers"], "median epoch time (s), bars: IQR",
                                 _series(ok, axes, "num_workers", MEDIAN_EPOCH, True)))
    for backend, cells in group_by(ok, lambda r: r.backend).items():  # mode bars where BACKENDS asks
        if backend in BACKENDS and BACKENDS[backend].mode_chart and _has_axis(cells, "mode"):
            slug = re.sub(r"[^a-z0-9]+", "-", backend.lower()).strip("-")
            charts.append(mode_bars(f"{key}-{slug}-mode", f"{name}: {backend} epoch time per mode", cells, _varying(cells)))
    return charts


def step_chart(key: str, title: str, run_labels: list[str], points: list[tuple[float, tuple[float, float] | None]],
               steps: list[tuple[int, str]], levels: list[tuple[int, int, float]], outliers: list[int]) -> Chart:
    """One series over its runs: medians with IQR, each segment's level, steps dashed, outliers hollow."""
    with _axes(key, (11, 3.4)) as ax:
        xs = list(range(len(points)))
        errors = [e or (0, 0) for _, e in points]
        ax.errorbar(xs, [y for y, _ in points], yerr=_yerr(errors),
                    fmt="o", markersize=4, capsize=3, color="#4c72b0", label="median epoch time, bars: IQR of its rounds")
        if outliers:
            ax.plot(outliers, [points[i][0] for i in outliers], "o", markersize=9, markerfacecolor="none",
                    color="#c44e52", label="off run (left out)")
        for n, (first, last, level) in enumerate(levels):
            ax.hlines(level, first - 0.4, last + 0.4, color="0.35", linewidth=1.5,
                      label="level between steps" if n == 0 else None)
        top = max(y + hi for (y, _), (_, hi) in zip(points, errors))
        for n, (x, text) in enumerate(steps):
            ax.axvline(x - 0.5, color="#c44e52", linestyle="--", linewidth=1.2, label="step" if n == 0 else None)
            ax.annotate(text, (x - 0.5, top), xytext=(3, 0), textcoords="offset points", color="#c44e52",
                        fontsize=8, va="top")
        many = len(run_labels) > 8
        step = max(1, len(run_labels) // 24)  # at most about 24 labels on the axis
        ax.set_xticks(xs[::step], run_labels[::step], rotation=30 if many else 0, ha="right" if many else "center")
        ax.set_ylim(bottom=0)
        # the legend inside: below the points, above 0
        return _chart(ax, key, title, "run (finished, UTC)", "median epoch time (s)", wide=True,
                      legend=dict(loc="lower left", ncol=4, framealpha=0.9))


def release_chart(key: str, group) -> Chart:
    """One configuration on each release (a history.ReleaseGroup): medians with IQR, and the noise band
    around the oldest that a release must leave."""
    rows, old = group.rows, group.oldest.cell.median
    with _axes(key, (7.2, 3.4)) as ax:
        xs = list(range(len(rows)))
        for x, row in zip(xs, rows):
            if row.verdict and row.verdict.threshold is not None:
                needed = 1 + row.verdict.threshold
                ax.fill_between([x - 0.3, x + 0.3], old / needed, old * needed, color="0.85",
                                label="noise band around the oldest" if x == 1 else None)
        ax.errorbar(xs, [r.cell.median for r in rows], yerr=_yerr(iqr_error(r.cell.median, r.cell.stats) for r in rows),
                    fmt="o", markersize=5, capsize=3, color="#4c72b0", label="median epoch time, bars: IQR")
        ax.set_xticks(xs, [r.release for r in rows])
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_ylim(bottom=0)
        return _chart(ax, key, f"{group.configuration}: {group.framework} releases", f"{group.framework} release",
                      "median epoch time (s)", legend=dict(loc="lower left", framealpha=0.9))


def line_chart(key, title, xlabel, ylabel, series: dict[str, list[tuple]], *, ideal: float | None = None,
               xticks: tuple[list, list] | None = None, colors: dict[str, str] | None = None,
               wide: bool = False) -> Chart:
    """One line per series of (x, y, (below, above) error bar or None); a wide chart has its legend below."""
    with _axes(key, (11, 3.6) if wide else (7.2, 3.6)) as ax:
        xs = sorted({x for pts in series.values() for x, _, _ in pts})
        for label, pts in series.items():
            pts = sorted(pts)
            errors = [e for _, _, e in pts]
            ax.errorbar([x for x, _, _ in pts], [y for _, y, _ in pts],
                        yerr=_yerr(errors) if any(e and any(e) for e in errors) else None,
                        marker="o", markersize=4, capsize=3, linewidth=1.5, label=label,
                        color=(colors or {}).get(label))
        if ideal is not None:
            ax.axhline(ideal, color="0.5", linestyle="--", linewidth=1, label="ideal")
        if xticks:  # labelled positions (runs); slanted only when many would collide
            many = len(xticks[0]) > 4
            ax.set_xticks(xticks[0], xticks[1], rotation=20 if many else 0, ha="right" if many else "center")
        else:
            ax.set_xticks(xs, [setting_text(x) for x in xs])
        ax.set_ylim(bottom=0)
        return _chart(ax, key, title, xlabel, ylabel, wide, legend=LEGEND_BELOW if wide else LEGEND_RIGHT)


def mode_bars(key: str, title: str, rows: list[CellResult], axes: list[str]) -> Chart:
    """Grouped bars: one group per mode, one bar per configuration of the other settings."""
    modes = list(dict.fromkeys(r.settings.mode for r in rows))
    configs = list(dict.fromkeys(_label(r, axes, exclude="mode") for r in rows))
    width = 0.8 / len(configs)
    with _axes(key, (7.2, 3.6)) as ax:
        for i, config in enumerate(configs):
            cells = {r.settings.mode: r for r in rows if _label(r, axes, exclude="mode") == config}
            xs = [m + (i - (len(configs) - 1) / 2) * width for m, mode in enumerate(modes) if mode in cells]
            ax.bar(xs, [cells[m].median for m in modes if m in cells], width=width, label=config,
                   yerr=_yerr(iqr_error(cells[m].median, cells[m].stats) for m in modes if m in cells), capsize=3)
        ax.set_xticks(range(len(modes)), [str(m) for m in modes])
        return _chart(ax, key, title, "mode (sampling device-feature device)", "median epoch time (s), bars: IQR")


STAGE_COLORS = dict(zip(STAGES, ("#4c72b0", "#dd8452", "#937860", "#55a868", "#8172b3", "#c44e52",
                                         "#bbbbbb", "#eeeeee")))


def stage_bars(key: str, title: str, rows: list[CellResult], axes: list[str]) -> Chart:
    """One horizontal bar per cell, its mean epoch stacked by stage (seconds)."""
    labels = [_label(r, axes, exclude="") for r in rows]
    with _axes(key, (11, 1.2 + 0.35 * len(rows))) as ax:
        ys = list(range(len(rows)))[::-1]  # the table's first row on top
        left = [0.0] * len(rows)
        for stage in STAGES:
            widths = [stages.seconds(r)[stage] for r in rows]
            if any(widths):
                ax.barh(ys, widths, left=left, color=STAGE_COLORS[stage], edgecolor="white", linewidth=0.5,
                        label=stage_label(stage))
                left = [a + b for a, b in zip(left, widths)]
        ax.set_yticks(ys, labels)
        ax.grid(axis="y", visible=False)
        return _chart(ax, key, title, "seconds per epoch (mean of the measured epochs)", "", wide=True)


@contextmanager
def _axes(key: str, size: tuple[float, float]):
    """The axes of a new figure of `size` inches, drawn in the site's style (a hash salt per chart)."""
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": key}):
        yield Figure(figsize=size).add_subplot()


# where a chart's legend goes: beside the plot, or below it (a wide chart: room for long cell ids)
LEGEND_RIGHT = dict(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
LEGEND_BELOW = dict(loc="upper left", bbox_to_anchor=(0, -0.3), ncol=2, frameon=False)


def _chart(ax, key: str, title: str, xlabel: str, ylabel: str, wide: bool = False,
           legend: dict = LEGEND_RIGHT) -> Chart:
    """The axes titled and labelled, as an inline <svg> with an escaped <title> and an aria label."""
    ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, **legend)
    buffer = io.StringIO()
    ax.figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    title_id = f"{key}-title"
    text = re.sub(r"<svg\b([^>]*)>",
                  lambda m: (f'<svg{m.group(1)} role="img" aria-labelledby="{escape(title_id)}" class="chart">'
                             f'<title id="{escape(title_id)}">{escape(title)}</title>'),
                  text, count=1)
    return Chart(key, title, Markup(text), wide)  # matplotlib escaped its own text; ours is escaped above


def _has_axis(rows: list[CellResult], axis: str) -> bool:
    return len({setting_text(r.settings.get(axis)) for r in rows if axis in r.settings}) >= 2


def _varying(rows: list[CellResult]) -> list[str]:
    """The settings whose values differ among the charted cells, in the order the cells name them."""
    keys = dict.fromkeys(k for r in rows for k in r.settings)
    return [k for k in keys if len({setting_text(r.settings.get(k)) for r in rows}) > 1]


def _label(row: CellResult, axes: list[str], exclude: str) -> str:
    """A configuration's name: backend and the varying axes but `exclude` that this cell has a value for."""
    others = [f"{k}={setting_text(row.settings[k])}" for k in axes if k != exclude and row.settings.get(k) is not None]
    return " ".join([row.backend or "?", *others])


def iqr_error(median: float, stats) -> tuple[float, float] | None:
    """Error bar (below, above) from the first to the third quartile of `stats` around the median."""
    if stats is None or stats.q1 is None or stats.q3 is None:
        return None
    return max(median - stats.q1, 0.0), max(stats.q3 - median, 0.0)


def _yerr(errors) -> list[list[float]]:
    """Error bars (below, above), a missing one as none, as matplotlib's yerr."""
    errors = [e or (0, 0) for e in errors]
    return [[lo for lo, _ in errors], [hi for _, hi in errors]]


def _series(rows: list[CellResult], axes: list[str], axis: str, value: Callable[[CellResult], float | None],
            with_iqr: bool = False, scale: float = 1.0) -> dict[str, list[tuple]]:
    charted = group_by((r for r in rows if value(r) is not None and axis in r.settings),
                       lambda r: _label(r, axes, exclude=axis))
    return {label: [(r.settings[axis], value(r) * scale, iqr_error(r.median, r.stats) if with_iqr else None)
                    for r in group] for label, group in charted.items()}
