"""Statistics shared by the judge calibration, the gate, the reports, pairwise tests and experiments.

Everything is plain numpy / stdlib and seeded where random; each function has a known-answer test
in ``tests/unit/test_eval_stats.py``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

_NORMAL = NormalDist()


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    estimate: float
    low: float
    high: float
    level: float = 0.95

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "level": self.level}

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high


def normal_cdf(x: float) -> float:
    return _NORMAL.cdf(x)


def normal_ppf(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def two_sided_p_from_z(z: float) -> float:
    return float(math.erfc(abs(z) / math.sqrt(2.0)))


# -- bootstrap ------------------------------------------------------------------------------------

def _as_array(values: Sequence[float] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=float)


def bootstrap_mean(values: Sequence[float] | np.ndarray, *, n_boot: int = 2000, level: float = 0.95,
                   seed: int = 0) -> Interval:
    """Mean with a percentile bootstrap interval (seeded: same input and seed → same interval)."""
    x = _as_array(values)
    if x.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), level)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return Interval(float(x.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)), level)


def bootstrap_paired_diff(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, n_boot: int = 2000,
                          level: float = 0.95, seed: int = 0) -> Interval:
    """Mean of ``a - b`` over pairs (same case in both), resampling pairs together."""
    xa, xb = _as_array(a), _as_array(b)
    if xa.shape != xb.shape:
        raise ValueError("paired samples must have the same length")
    return bootstrap_mean(xa - xb, n_boot=n_boot, level=level, seed=seed)


def bootstrap_ratio_lift(treatment: np.ndarray, control: np.ndarray, *, n_boot: int = 1000, level: float = 0.95,
                         seed: int = 0) -> Interval:
    """Relative lift mean(t)/mean(c) - 1 with a percentile bootstrap interval (arms resampled independently)."""
    t, c = _as_array(treatment), _as_array(control)
    rng = np.random.default_rng(seed)
    # Resample in chunks to bound memory on large arms.
    lifts: list[float] = []
    for _ in range(n_boot):
        mt = t[rng.integers(0, t.size, size=t.size)].mean()
        mc = c[rng.integers(0, c.size, size=c.size)].mean()
        lifts.append(mt / mc - 1.0 if mc != 0 else float("nan"))
    arr = np.asarray(lifts)
    arr = arr[np.isfinite(arr)]
    alpha = (1.0 - level) / 2.0
    point = t.mean() / c.mean() - 1.0 if c.mean() != 0 else float("nan")
    if arr.size == 0:
        return Interval(float(point), float("nan"), float("nan"), level)
    return Interval(float(point), float(np.quantile(arr, alpha)), float(np.quantile(arr, 1 - alpha)), level)


# -- ratio-of-means lift (delta method) and Welch z -----------------------------------------------

@dataclass(frozen=True)
class LiftTest:
    control_mean: float
    treatment_mean: float
    abs_diff: float
    lift: Interval  # relative: mean_t / mean_c - 1
    z: float
    p_value: float


def delta_lift(treatment: np.ndarray, control: np.ndarray, *, level: float = 0.95) -> LiftTest:
    """Relative lift of per-participant means with a delta-method interval, and the Welch z test of
    the difference of means (normal approximation: arms here have thousands of participants)."""
    t, c = _as_array(treatment), _as_array(control)
    nt, nc = t.size, c.size
    if nt < 2 or nc < 2:
        raise ValueError("each arm needs at least 2 participants")
    mt, mc = float(t.mean()), float(c.mean())
    vt, vc = float(t.var(ddof=1)) / nt, float(c.var(ddof=1)) / nc
    se_diff = math.sqrt(vt + vc)
    z = (mt - mc) / se_diff if se_diff > 0 else (0.0 if mt == mc else math.copysign(math.inf, mt - mc))
    p = two_sided_p_from_z(z) if math.isfinite(z) else 0.0
    zq = normal_ppf(0.5 + level / 2.0)
    if mc == 0:
        lift = Interval(float("nan"), float("nan"), float("nan"), level)
    else:
        ratio = mt / mc
        se_ratio = math.sqrt(vt / mc**2 + (mt**2) * vc / mc**4)
        lift = Interval(ratio - 1.0, ratio - 1.0 - zq * se_ratio, ratio - 1.0 + zq * se_ratio, level)
    return LiftTest(mc, mt, mt - mc, lift, z, p)


# -- agreement -------------------------------------------------------------------------------------

def confusion_matrix(a: Sequence[Hashable], b: Sequence[Hashable],
                     labels: Sequence[Hashable] | None = None) -> tuple[list[Hashable], np.ndarray]:
    """Rows: labels of ``a``; columns: labels of ``b``."""
    if len(a) != len(b):
        raise ValueError("rating lists must have the same length")
    labs = list(labels) if labels is not None else sorted(set(a) | set(b), key=lambda v: (str(type(v)), v))
    index = {lab: i for i, lab in enumerate(labs)}
    m = np.zeros((len(labs), len(labs)), dtype=float)
    for x, y in zip(a, b, strict=True):
        m[index[x], index[y]] += 1
    return labs, m


def kappa_from_table(table: np.ndarray, weights: str | None = None) -> float:
    """Cohen's kappa of a k×k contingency table; ``weights`` None, ``linear`` or ``quadratic`` (ordered
    categories, in the table's order). NaN when chance agreement is total (kappa undefined)."""
    m = np.asarray(table, dtype=float)
    k = m.shape[0]
    n = m.sum()
    if n == 0:
        return float("nan")
    obs = m / n
    exp = np.outer(obs.sum(axis=1), obs.sum(axis=0))
    i, j = np.indices((k, k))
    if weights is None:
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j) / max(k - 1, 1)
    elif weights == "quadratic":
        w = ((i - j) / max(k - 1, 1)) ** 2
    else:
        raise ValueError(f"unknown weights {weights!r}")
    denom = float((w * exp).sum())
    if denom == 0:
        return float("nan")
    return 1.0 - float((w * obs).sum()) / denom


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None = None,
                weights: str | None = None) -> float:
    _, table = confusion_matrix(a, b, labels)
    return kappa_from_table(table, weights)


def agreement(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    if not a:
        return float("nan")
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


# -- exact binomial sign test ----------------------------------------------------------------------

def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial (sign) test of wins vs losses (ties excluded), p = 0.5.

    p = min(1, 2 · P(X ≤ min(wins, losses))), X ~ Binomial(wins + losses, 1/2). Exact integers."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / 2**n)


# -- chi-square -------------------------------------------------------------------------------------

def _gammainc_lower_series(a: float, x: float) -> float:
    term = 1.0 / a
    total = term
    ap = a
    for _ in range(10000):
        ap += 1.0
        term *= x / ap
        total += term
        if abs(term) < abs(total) * 1e-15:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gammainc_upper_cf(a: float, x: float) -> float:
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chi2_sf(x: float, df: int) -> float:
    """Survival function of the chi-square distribution (regularised upper incomplete gamma)."""
    if df <= 0:
        raise ValueError("df must be positive")
    if x <= 0:
        return 1.0
    a, y = df / 2.0, x / 2.0
    if y < a + 1.0:
        return max(0.0, 1.0 - _gammainc_lower_series(a, y))
    return min(1.0, _gammainc_upper_cf(a, y))


@dataclass(frozen=True)
class SRM:
    observed: list[int]
    expected: list[float]
    chi2: float
    df: int
    p_value: float
    mismatch: bool
    threshold: float


def srm_check(observed: Sequence[int], weights: Sequence[float], threshold: float = 0.001) -> SRM:
    """Sample-ratio mismatch: chi-square goodness of fit of arm sizes against the configured split."""
    obs = np.asarray(observed, dtype=float)
    w = np.asarray(weights, dtype=float)
    if obs.size != w.size or obs.size < 2:
        raise ValueError("need one observed count per arm, at least two arms")
    total = obs.sum()
    exp = total * w / w.sum()
    if total == 0:
        return SRM([int(v) for v in obs], [float(v) for v in exp], 0.0, int(obs.size - 1), 1.0, False, threshold)
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    p = chi2_sf(chi2, int(obs.size - 1))
    return SRM([int(v) for v in obs], [float(v) for v in exp], chi2, int(obs.size - 1), p, p < threshold, threshold)


# -- distributions and percentiles ---------------------------------------------------------------

def tv_distance(p: Mapping[Any, float], q: Mapping[Any, float]) -> float:
    """Total variation distance ½ Σ |p(x) − q(x)| of two discrete distributions (normalised first)."""
    sp, sq = sum(p.values()), sum(q.values())
    if sp <= 0 or sq <= 0:
        raise ValueError("distributions need positive mass")
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) / sp - q.get(k, 0.0) / sq) for k in keys)


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 90, 95, 99)) -> dict[str, float]:
    x = _as_array([v for v in values if v is not None and math.isfinite(v)])
    if x.size == 0:
        return {f"p{int(q)}": float("nan") for q in qs}
    out = {f"p{int(q)}": float(np.percentile(x, q)) for q in qs}
    out["max"] = float(x.max())
    out["mean"] = float(x.mean())
    return out


def finite_or_none(value: float) -> float | None:
    """JSON-friendly: NaN/inf become None."""
    return float(value) if value is not None and math.isfinite(value) else None
