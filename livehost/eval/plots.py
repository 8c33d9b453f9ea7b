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
                 ylabel: str) -> str | None:
    """Grouped bars; each series value is (estimate, low, high)."""
    plt = _plt()
    if plt is None:
        return None
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(labels) * max(1, len(series))), 3.6))
    width = 0.8 / max(1, len(series))
    x = np.arange(len(labels))
    for k, (name, values) in enumerate(series.items()):
        est = np.array([v[0] for v in values], dtype=float)
        err = np.array([[v[0] - v[1] for v in values], [v[2] - v[0] for v in values]], dtype=float)
        ax.bar(x + k * width - 0.4 + width / 2, est, width, yerr=np.nan_to_num(err), capsize=3, label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(series) > 1:
        ax.legend(fontsize=8)
    return _png(fig, plt)


def histogram(values: Sequence[float], *, title: str, xlabel: str, marks: dict[str, float] | None = None
              ) -> str | None:
    plt = _plt()
    if plt is None or not values:
        return None
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    ax.hist(list(values), bins=30, color="#4a8")
    for name, value in (marks or {}).items():
        ax.axvline(value, linestyle="--", color="#a33")
        ax.text(value, ax.get_ylim()[1] * 0.9, f" {name}", fontsize=8, color="#a33")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return _png(fig, plt)


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
    return f'<img alt="{alt}" src="data:image/png;base64,{png}">'
