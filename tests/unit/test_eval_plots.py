"""Report plots a reader can read: page-width figures, a latency histogram that one outlier does not
flatten, percentile labels that do not overlap, a category chart whose labels and legend fit."""

from __future__ import annotations

import base64
import struct

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from livehost.eval import plots  # noqa: E402


def _png_size(b64: str) -> tuple[int, int]:
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


def _overlaps(a: object, b: object) -> bool:
    return bool(a.overlaps(b))  # type: ignore[attr-defined]


def test_latency_histogram_uses_a_log_axis_for_an_outlier_and_labels_do_not_collide() -> None:
    values = [12.0 + (i % 7) for i in range(500)] + [3000.0, 0.0]  # a 0 (dropped input) too
    marks = {"p50": 15.0, "p95": 18.0, "p99": 18.0}
    fig = plots.histogram_figure(plt, values, title="Latency", xlabel="ms", marks=marks)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel() and "1 value(s) of 0" in ax.get_xlabel()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == 3
    assert not any(_overlaps(boxes[i], boxes[j]) for i in range(3) for j in range(i + 1, 3))
    # the bars spread over several bins, not one
    heights = [p.get_height() for p in ax.patches if p.get_height() > 0]
    assert len(heights) >= 3
    plt.close(fig)
    flat = plots.histogram_figure(plt, [10.0 + i for i in range(100)], title="t", xlabel="ms")
    assert flat.axes[0].get_xscale() == "linear"
    plt.close(flat)


def test_category_chart_fits_a_page_and_scales() -> None:
    labels = [f"category_{i:02d}_with_a_long_name" for i in range(17)]
    series = {m: [(80.0, 70.0, 90.0)] * len(labels) for m in ("accuracy", "effectiveness")}
    png = plots.bars_with_ci(labels, series, title="Per category", ylabel="score")
    assert png is not None
    width, height = _png_size(png)
    assert width <= 800, width  # was 0.6 in x 34 bars = 1,958 px
    tag = plots.img(png, "per-category scores")
    assert "max-width:100%" in tag and "height:auto" in tag
