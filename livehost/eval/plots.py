"""Plots as base64 PNG for self-contained HTML reports (matplotlib, headless Agg backend).

Every function returns ``None`` when matplotlib is not installed: the report still renders, without
the figure, and says so.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _png(fig: Any, plt: Any) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def bars_with_ci(labels: Sequence[str], series: Mapping[str, Sequence[tuple[float, float, float]]], *, title: str,
                 ylabel: str, horizontal: bool | None = None) -> str | None:
    """Grouped bars; each series value is (estimate, low, high).

    More than three labels are drawn as horizontal bars — one row per label, label text readable,
    the figure as wide as a page column and as tall as it needs — with the legend below the plot,
    never over the bars or the labels.
    """
    plt = _plt()
    if plt is None:
        return None
    import numpy as np

    horizontal = len(labels) > 3 if horizontal is None else horizontal
    n_series = max(1, len(series))
    if horizontal:
        fig, ax = plt.subplots(figsize=(8.0, 1.2 + 0.18 * len(labels) * n_series))
    else:
        fig, ax = plt.subplots(figsize=(min(8.0, max(5.0, 0.6 * len(labels) * n_series)), 3.6))
    width = 0.8 / n_series
    x = np.arange(len(labels))
    for k, (name, values) in enumerate(series.items()):
        est = np.array([v[0] for v in values], dtype=float)
        err = np.array([[v[0] - v[1] for v in values], [v[2] - v[0] for v in values]], dtype=float)
        pos = x + k * width - 0.4 + width / 2
        if horizontal:
            ax.barh(pos, est, width, xerr=np.nan_to_num(err), capsize=2, label=name)
        else:
            ax.bar(pos, est, width, yerr=np.nan_to_num(err), capsize=3, label=name)
    if horizontal:
        ax.set_yticks(x)
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()  # first label on top, as in the table
        ax.set_xlabel(ylabel)
        ax.grid(axis="x", alpha=0.3)
    else:
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(series) > 1:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08) if horizontal else (0.5, 1.12),
                  ncol=len(series), frameon=False)
    return _png(fig, plt)


def histogram(values: Sequence[float], *, title: str, xlabel: str, marks: dict[str, float] | None = None,
              log_ratio: float = 20.0) -> str | None:
    """A histogram with labelled vertical marks (e.g. percentiles).

    When the largest value is more than ``log_ratio`` times the median, the x axis is logarithmic
    (log-spaced bins, noted in the axis label), so one slow outlier does not squash every other value
    into one bar. Mark labels are stacked at different heights so they never overlap.
    """
    plt = _plt()
    if plt is None or not values:
        return None
    fig = histogram_figure(plt, values, title=title, xlabel=xlabel, marks=marks, log_ratio=log_ratio)
    return None if fig is None else _png(fig, plt)


def histogram_figure(plt: Any, values: Sequence[float], *, title: str, xlabel: str,
                     marks: dict[str, float] | None = None, log_ratio: float = 20.0) -> Any:
    """The figure of :func:`histogram` (None without finite values)."""
    import numpy as np

    data = np.asarray([v for v in values if v == v], dtype=float)
    if data.size == 0:
        return None
    fig, ax = plt.subplots(figsize=(8.0, 3.4))
    positive = data[data > 0]
    median = float(np.median(data))
    log = positive.size > 0 and median > 0 and float(data.max()) > log_ratio * median
    if log:
        lo, hi = float(positive.min()), float(positive.max())
        zeros = int(data.size - positive.size)
        bins = np.geomspace(lo, hi * 1.0001, 31) if hi > lo else 30
        ax.hist(np.maximum(data, lo), bins=bins, color="#4a8")  # a log axis has no 0: zeros go to the first bin
        ax.set_xscale("log")
        xlabel = f"{xlabel} (log scale: the largest value is {hi / median:.0f}x the median"
        xlabel += f"; {zeros} value(s) of 0 in the first bar)" if zeros else ")"
    else:
        ax.hist(data, bins=30, color="#4a8")
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top * 1.35)  # headroom for the mark labels
    colors = ["#a33", "#d67a00", "#6a3d9a", "#1f5fa0"]
    for i, (name, value) in enumerate(sorted((marks or {}).items(), key=lambda kv: kv[1])):
        color = colors[i % len(colors)]
        ax.axvline(value, linestyle="--", color=color, linewidth=1.2)
        ax.annotate(f"{name} {value:.0f}", xy=(value, top * (1.28 - 0.13 * i)), xytext=(3, 0),
                    textcoords="offset points", fontsize=8, color=color, va="center",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cases")
    ax.set_title(title)
    return fig


def band(x: Sequence[str], lines: Mapping[str, Sequence[tuple[float | None, float | None, float | None]]], *,
         title: str, ylabel: str, zero: bool = True) -> str | None:
    """One line per series with its interval as a shaded band (None values are skipped)."""
    plt = _plt()
    if plt is None or not x:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    idx = list(range(len(x)))
    for name, values in lines.items():
        pts = [(i, v) for i, v in zip(idx, values, strict=True) if v[0] is not None]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[1][0] for p in pts], marker="o", label=name)
        lo = [p[1][1] if p[1][1] is not None else p[1][0] for p in pts]
        hi = [p[1][2] if p[1][2] is not None else p[1][0] for p in pts]
        ax.fill_between(xs, lo, hi, alpha=0.2)
    if zero:
        ax.axhline(0, color="#888", linewidth=0.8)
    ax.set_xticks(idx)
    ax.set_xticklabels(x, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _png(fig, plt)


def img(png: str | None, alt: str) -> str:
    if png is None:
        return f"<p><i>({alt}: plot unavailable — install matplotlib)</i></p>"
    # scales down with the page (never wider than its column), keeps its aspect ratio
    return f'<img alt="{alt}" style="max-width:100%;height:auto" src="data:image/png;base64,{png}">'
