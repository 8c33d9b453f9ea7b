"""The throughput benchmark's verdict on the issue's targets, and its extra step at 2× capacity, from
step rows (the pure functions of benchmarks/bench_throughput.py; no stack)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from benchmarks.bench_throughput import capacity, capacity_rate, cores_probe, overload_rate, overload_step, targets


def row(offered: int, completed: float, replies: float, *, shed: float = 0.0, cancelled: float = 0.0,
        p95: float = 1.0, served_p95: float = 1.0) -> dict[str, Any]:
    return {"offered": offered, "completed_s": completed, "replies_s": replies, "shed_pct": shed,
            "cancelled_pct": cancelled, "p95": p95, "served_p95": served_p95}


def test_capacity_is_the_highest_step_within_the_rule() -> None:
    rows = [row(25, 25.0, 25.0), row(50, 49.5, 49.0, shed=0.5), row(100, 97.0, 80.0, shed=8.0)]
    assert capacity(rows) == 49.5 and capacity_rate(rows) == 50


def test_an_overload_step_is_added_at_twice_capacity_only_when_none_ran_near_it() -> None:
    found_50 = [row(25, 25.0, 25.0), row(50, 49.5, 49.0), row(75, 60.0, 50.0, shed=20.0)]
    assert overload_rate(found_50) == 100
    assert overload_step(found_50) is None  # 75 is 1.5×: not an overload step
    with_200 = [row(50, 50.0, 50.0), row(100, 99.5, 99.0), row(200, 120.0, 95.0, shed=40.0)]
    assert overload_rate(with_200) is None
    assert overload_step(with_200) is with_200[2]
    assert overload_rate([row(25, 10.0, 10.0, shed=60.0)]) is None  # no capacity: nothing to double


def test_targets_met_and_not_met_follow_the_figures() -> None:
    good = [row(50, 50.0, 50.0, p95=1.2), row(100, 99.5, 99.0, shed=0.5),
            row(200, 150.0, 92.0, shed=30.0, served_p95=1.8)]
    verdicts = {t: s for t, s, _ in targets(good, 100.0)}
    assert list(verdicts.values()) == ["met"] * 5, verdicts
    bad = [row(50, 50.0, 50.0, p95=1.7), row(100, 99.5, 99.0, shed=0.5),
           row(200, 150.0, 87.0, shed=30.0, served_p95=2.25)]
    verdicts = {t: s for t, s, _ in targets(bad, 1000.0)}
    assert list(verdicts.values()) == ["met", "not met", "not met", "not met", "not met"], verdicts
    figures = [f for _, _, f in targets(bad, 1000.0)]
    assert figures[3] == "87.0 replies/s at 200/s: 87% of 100/s" and figures[4] == "2.25 s at 200/s"


def test_what_a_run_did_not_measure_is_said_so() -> None:
    rows = [row(25, 25.0, 25.0), row(100, 70.0, 60.0, shed=30.0)]
    out = targets(rows, float("nan"))
    assert [s for _, s, _ in out] == ["not met", "not measured", "not measured", "not measured", "not measured"]
    assert out[2][2] == "no 50/s step" and out[3][2] == "no step near 2× 25/s"


def test_the_cores_probe_sees_other_processes_taking_cores() -> None:
    """The speed probe counts CPU time, blind to a core taken by another process; the cores probe is
    not: with one busy process per core beside it, each of its loops gets about half a core."""
    quiet = cores_probe()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        busy = cores_probe()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert busy < 0.75 * quiet, (quiet, busy)
