"""A/B analysis known answers: planted lift detected with a covering CI, planted SRM flagged, no false
SRM on a correct split, stable assignment, never a lift without its interval."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from rich.console import Console

from livehost.experiments.analysis import ExperimentData, analyze, lift_text
from livehost.experiments.assign import BUCKETS, Arm, Experiment, bucket, parse_arm
from livehost.experiments.report import print_report, render_html
from livehost.experiments.synth import Plan, simulate_arrays

EXP = Experiment("ab-test", "salt-42", (Arm("control", "react", 80), Arm("treatment", "3f2a9c1d", 20)),
                 status="running")


def lift(result: dict, arm: str, metric: str) -> dict:  # type: ignore[type-arg]
    return next(r for r in result["lifts"] if r["arm"] == arm and r["metric"] == metric)


def test_assignment_is_stable_salted_and_follows_the_split() -> None:
    assert EXP.assign("user-1") == EXP.assign("user-1")
    assert bucket("salt-42", "user-1") == bucket("salt-42", "user-1") < BUCKETS
    other = Experiment("ab-test", "other-salt", EXP.arms)
    same = sum(EXP.assign(f"u{i}")[0].name == other.assign(f"u{i}")[0].name for i in range(5000))
    assert 3000 < same < 3800  # independent: P(same) = .8² + .2² = .68
    share = Counter(EXP.assign(f"u{i}")[0].name for i in range(20000))
    assert share["treatment"] / 20000 == pytest.approx(0.2, abs=0.01)
    assert EXP.boundaries() == [8000, 10000]
    three = Experiment("x", "s", (Arm("c", "react", 1), Arm("t1", "v1", 1), Arm("t2", "v2", 2)))
    assert three.boundaries() == [2500, 5000, 10000]


def test_definition_checks_and_arm_parsing() -> None:
    assert parse_arm("control=react:80") == Arm("control", "react", 80.0)
    with pytest.raises(ValueError):
        parse_arm("control:80")
    with pytest.raises(ValueError, match="two arms"):
        Experiment("x", "s", (Arm("only", "react", 1),))
    with pytest.raises(ValueError, match="weight"):
        Experiment("x", "s", (Arm("a", "react", 1), Arm("b", "v", 0)))
    with pytest.raises(ValueError, match="name"):
        Experiment("Bad Name", "s", (Arm("a", "react", 1), Arm("b", "v", 1)))


def test_planted_lift_is_detected_and_covered() -> None:
    data = simulate_arrays(EXP, Plan(users=200_000, gmv_lift={"treatment": 0.10}, views_lift={"treatment": 0.05},
                                     seed=1))
    result = analyze(data, method="both", n_boot=200)
    views, gmv = lift(result, "treatment", "item_page_views"), lift(result, "treatment", "gmv")
    for row, planted in ((views, 0.05), (gmv, 0.10)):
        assert row["ci"][0] <= planted <= row["ci"][1], row
        assert row["ci"][0] > 0 and row["p_value"] < 0.01  # detected
        assert row["bootstrap_ci"][0] <= planted <= row["bootstrap_ci"][1]
    assert not result["srm"]["mismatch"]
    per = {a["arm"]: a for a in result["arms"]}
    assert per["control"]["participants"] + per["treatment"]["participants"] == 200_000
    views_pp = {k: v["item_page_views"]["per_participant"] for k, v in per.items()}
    ratio = views_pp["treatment"] / views_pp["control"]
    assert views["lift"] == pytest.approx(ratio - 1)
    assert len(result["daily"]) == 7 and result["daily"][-1]["participants"] == [per["control"]["participants"],
                                                                                  per["treatment"]["participants"]]


def test_null_effect_interval_covers_zero_most_of_the_time() -> None:
    covered = 0
    for seed in range(40):
        data = simulate_arrays(EXP, Plan(users=20_000, seed=100 + seed))
        row = lift(analyze(data, daily=False), "treatment", "item_page_views")
        covered += row["ci"][0] <= 0 <= row["ci"][1]
    assert covered >= 34  # nominal 95%: 38 of 40 expected


def test_planted_srm_is_flagged_and_correct_split_is_not() -> None:
    bad = analyze(simulate_arrays(EXP, Plan(users=50_000, drop={"treatment": 0.05}, seed=2)), daily=False)
    assert bad["srm"]["mismatch"] and bad["srm"]["p_value"] < 0.001
    false_alarms = sum(analyze(simulate_arrays(EXP, Plan(users=20_000, seed=s)), daily=False)["srm"]["mismatch"]
                       for s in range(20))
    assert false_alarms == 0


def test_never_a_lift_without_interval() -> None:
    arm = np.array([0, 0, 0, 1, 1, 1])
    data = ExperimentData.empty_outcomes(["control", "treatment"], [50, 50], arm, np.zeros(6, dtype=int))
    result = analyze(data)
    for row in result["lifts"]:
        assert row["lift"] is None and "undefined" in row["note"]
        assert lift_text(row).startswith("n/a")
    tiny = ExperimentData.empty_outcomes(["control", "treatment"], [50, 50], np.array([0, 1]), np.zeros(2, dtype=int))
    assert all(r["lift"] is None for r in analyze(tiny)["lifts"])


def test_reports_render() -> None:
    data = simulate_arrays(EXP, Plan(users=5000, gmv_lift={"treatment": 0.1}, seed=3))
    result = analyze(data)
    console = Console(record=True, width=200)
    print_report(EXP, result, console)
    text = console.export_text()
    assert "95% CI" in text and "no sample ratio mismatch" in text
    page = render_html(EXP, result)
    assert "<html" in page and "Lifts" in page and "95% CI" in page
    assert "data:image/png;base64," in page
