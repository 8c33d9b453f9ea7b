"""Known answers of the statistics used by calibration, the gate, pairwise tests and experiments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from livehost.eval.stats import (
    bootstrap_mean,
    bootstrap_paired_diff,
    chi2_sf,
    cohen_kappa,
    delta_lift,
    kappa_from_table,
    percentiles,
    sign_test,
    srm_check,
    tv_distance,
)


def test_kappa_hand_computed_2x2() -> None:
    # po = (20 + 15) / 50 = 0.7; pe = (25*30 + 25*20) / 50^2 = 0.5; kappa = (0.7 - 0.5) / 0.5 = 0.4
    assert kappa_from_table(np.array([[20, 5], [10, 15]])) == pytest.approx(0.4)
    judge = [1] * 25 + [0] * 25
    human = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(judge, human, labels=[1, 0]) == pytest.approx(0.4)


def test_kappa_perfect_chance_and_undefined() -> None:
    assert cohen_kappa([0, 1, 1, 0], [0, 1, 1, 0]) == pytest.approx(1.0)
    # independent marginals: observed agreement equals chance agreement → 0
    assert kappa_from_table(np.array([[25, 25], [25, 25]])) == pytest.approx(0.0)
    assert math.isnan(cohen_kappa([1, 1], [1, 1]))  # a single class: kappa undefined


def test_weighted_kappa_hand_computed_3x3() -> None:
    t = np.array([[10, 2, 0], [3, 8, 2], [1, 2, 12]], dtype=float)
    n = t.sum()  # 40
    # unweighted: po = 30/40 = 0.75; rows 12,13,15; cols 14,12,14 → pe = (12*14 + 13*12 + 15*14)/1600 = 0.33375
    assert kappa_from_table(t) == pytest.approx((0.75 - 0.33375) / (1 - 0.33375))
    # linear weights |i-j|/2: observed disagreement = (2*.5 + 3*.5 + 2*.5 + 2*.5 + 0*1 + 1*1)/40 = 5.5/40
    rows, cols = t.sum(1) / n, t.sum(0) / n
    w = np.abs(np.subtract.outer(np.arange(3), np.arange(3))) / 2
    expected = float((w * np.outer(rows, cols)).sum())
    assert kappa_from_table(t, "linear") == pytest.approx(1 - (5.5 / 40) / expected)
    assert kappa_from_table(t, "quadratic") > kappa_from_table(t, "linear") > 0


def test_sign_test_known_answer_35_1_64() -> None:
    p = sign_test(35, 1)
    assert p == pytest.approx(2 * (math.comb(36, 0) + math.comb(36, 1)) / 2**36)
    assert p == pytest.approx(1.0768e-9, rel=1e-3)
    assert p < 0.001
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == 1.0
    assert sign_test(9, 1) == pytest.approx(2 * 11 / 1024)


def test_chi2_sf_known_values() -> None:
    assert chi2_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-6)
    assert chi2_sf(5.991464547107979, 2) == pytest.approx(0.05, rel=1e-6)
    assert chi2_sf(7.0, 2) == pytest.approx(math.exp(-3.5))  # df=2: exactly exp(-x/2)
    assert chi2_sf(10.828, 1) == pytest.approx(0.001, rel=1e-3)
    assert chi2_sf(30.0, 10) == pytest.approx(0.000857, rel=1e-2)
    assert chi2_sf(0.0, 3) == 1.0


def test_srm_report_split_is_fine_and_planted_mismatch_is_flagged() -> None:
    # The published A/B test: 1,581,494 control vs 395,276 treatment on an 80/20 split.
    ok = srm_check([1_581_494, 395_276], [80, 20])
    assert not ok.mismatch and ok.p_value > 0.5
    bad = srm_check([1_590_000, 386_770], [80, 20])
    assert bad.mismatch and bad.p_value < 1e-6


def test_tv_distance_known_distributions() -> None:
    assert tv_distance({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}) == 0.0
    assert tv_distance({"a": 1.0}, {"b": 1.0}) == 1.0
    assert tv_distance({"a": 0.7, "b": 0.3}, {"a": 0.4, "b": 0.4, "c": 0.2}) == pytest.approx(0.3)
    assert tv_distance({"a": 3, "b": 1}, {"a": 0.5, "b": 0.5}) == pytest.approx(0.25)  # normalised first


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    x = np.r_[np.ones(80), np.zeros(20)]
    a, b = bootstrap_mean(x, seed=3), bootstrap_mean(x, seed=3)
    assert a == b and a.estimate == pytest.approx(0.8) and a.low < 0.8 < a.high
    assert 0.05 < a.high - a.low < 0.2  # ≈ 2·1.96·sqrt(.8·.2/100) = 0.157
    d = bootstrap_paired_diff(np.ones(50), np.r_[np.ones(40), np.zeros(10)], seed=1)
    assert d.estimate == pytest.approx(0.2) and d.low > 0


def test_delta_lift_matches_planted_ratio() -> None:
    rng = np.random.default_rng(0)
    c = rng.poisson(3.0, 100_000).astype(float)
    t = rng.poisson(3.15, 100_000).astype(float)
    res = delta_lift(t, c)
    assert res.lift.covers(0.05) and res.p_value < 1e-6 and res.lift.low > 0


def test_percentiles() -> None:
    p = percentiles(list(range(1, 101)))
    assert p["p50"] == pytest.approx(50.5) and p["max"] == 100
