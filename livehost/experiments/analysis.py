"""A/B analysis: per arm participants and metrics per participant, relative lift of each treatment
arm against the control with a confidence interval (delta method, and/or bootstrap) and p-value
(Welch z), sample-ratio-mismatch check against the configured split, and a daily (cumulative)
breakdown. A lift is never reported without its interval.

Metrics (each divided by participants — everyone exposed, with or without outcomes):
``gmv`` (confirmed-order amount), ``item_page_views``, ``orders``, ``conversion`` (share of
participants with at least one confirmed order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from livehost.eval.stats import bootstrap_ratio_lift, delta_lift, finite_or_none, srm_check

METRICS = ("gmv", "item_page_views", "orders", "conversion")
PRIMARY = ("gmv", "item_page_views")


@dataclass
class ExperimentData:
    """Participants (one row each) and their outcome events after exposure, aggregated per day."""

    arm_names: list[str]  # index 0 = control
    weights: list[float]
    user_arm: np.ndarray  # int, arm index per participant
    user_day: np.ndarray  # int, exposure day (days since epoch) per participant
    out_user: np.ndarray  # int, participant index per outcome row
    out_day: np.ndarray  # int, day of the outcome row
    out_views: np.ndarray
    out_orders: np.ndarray
    out_gmv: np.ndarray

    @classmethod
    def empty_outcomes(cls, arm_names: list[str], weights: list[float], user_arm: np.ndarray,
                       user_day: np.ndarray) -> ExperimentData:
        z = np.zeros(0)
        return cls(arm_names, weights, user_arm, user_day, z.astype(int), z.astype(int), z, z, z)


def per_user(data: ExperimentData, up_to_day: int | None = None) -> dict[str, np.ndarray]:
    n = data.user_arm.size
    mask = np.ones(data.out_user.size, dtype=bool) if up_to_day is None else data.out_day <= up_to_day
    users = data.out_user[mask]
    views = np.bincount(users, weights=data.out_views[mask], minlength=n)
    orders = np.bincount(users, weights=data.out_orders[mask], minlength=n)
    gmv = np.bincount(users, weights=data.out_gmv[mask], minlength=n)
    return {"gmv": gmv, "item_page_views": views, "orders": orders, "conversion": (orders > 0).astype(float)}


def _lift_row(t: np.ndarray, c: np.ndarray, method: str, n_boot: int, seed: int, level: float) -> dict[str, Any]:
    row: dict[str, Any] = {}
    if t.size < 2 or c.size < 2:
        return {"lift": None, "ci": [None, None], "p_value": None, "note": "too few participants for an interval"}
    test = delta_lift(t, c, level=level)
    row["abs_diff"] = finite_or_none(test.abs_diff)
    row["p_value"] = finite_or_none(test.p_value)
    row["z"] = finite_or_none(test.z)
    if method in ("delta", "both"):
        row["lift"] = finite_or_none(test.lift.estimate)
        row["ci"] = [finite_or_none(test.lift.low), finite_or_none(test.lift.high)]
        row["ci_method"] = "delta"
    if method in ("bootstrap", "both"):
        boot = bootstrap_ratio_lift(t, c, n_boot=n_boot, seed=seed, level=level)
        row["bootstrap_ci"] = [finite_or_none(boot.low), finite_or_none(boot.high)]
        if method == "bootstrap":
            row["lift"] = finite_or_none(boot.estimate)
            row["ci"] = row["bootstrap_ci"]
            row["ci_method"] = "bootstrap"
    if row.get("ci", [None])[0] is None:
        row["lift"] = None  # never a lift without its interval
        row["note"] = "control mean is 0: relative lift undefined"
    return row


def arm_summary(data: ExperimentData, values: dict[str, np.ndarray], mask: np.ndarray | None = None
                ) -> list[dict[str, Any]]:
    rows = []
    for k, name in enumerate(data.arm_names):
        sel = data.user_arm == k
        if mask is not None:
            sel &= mask
        n = int(sel.sum())
        row: dict[str, Any] = {"arm": name, "participants": n}
        for m in METRICS:
            total = float(values[m][sel].sum())
            row[m] = {"total": total, "per_participant": total / n if n else None}
        rows.append(row)
    return rows


def analyze(data: ExperimentData, *, method: str = "delta", n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            srm_threshold: float = 0.001, daily: bool = True) -> dict[str, Any]:
    if method not in ("delta", "bootstrap", "both"):
        raise ValueError("method: delta, bootstrap or both")
    values = per_user(data)
    arms = arm_summary(data, values)
    counts = [r["participants"] for r in arms]
    srm = srm_check(counts, data.weights, srm_threshold) if sum(counts) else None
    lifts = []
    control = data.user_arm == 0
    for k in range(1, len(data.arm_names)):
        treat = data.user_arm == k
        for m in METRICS:
            row = _lift_row(values[m][treat], values[m][control], method, n_boot, seed, level)
            lifts.append({"arm": data.arm_names[k], "vs": data.arm_names[0], "metric": m, "level": level, **row})
    result: dict[str, Any] = {
        "participants": int(sum(counts)), "arms": arms, "lifts": lifts, "method": method, "level": level,
        "srm": None if srm is None else {"observed": srm.observed, "expected": [round(e, 2) for e in srm.expected],
                                         "weights": data.weights, "chi2": srm.chi2, "df": srm.df,
                                         "p_value": srm.p_value, "mismatch": srm.mismatch,
                                         "threshold": srm.threshold},
    }
    if daily and data.user_day.size:
        result["daily"] = daily_breakdown(data, level=level)
    return result


def daily_breakdown(data: ExperimentData, *, level: float = 0.95) -> list[dict[str, Any]]:
    """Cumulative by day: participants exposed so far and their outcomes so far, lift with CI."""
    first = int(data.user_day.min())
    last = int(max(data.user_day.max(), data.out_day.max() if data.out_day.size else first))
    rows = []
    for day in range(first, last + 1):
        exposed = data.user_day <= day
        values = per_user(data, day)
        row: dict[str, Any] = {"day": str(np.datetime64(day, "D")),
                               "participants": [int((exposed & (data.user_arm == k)).sum())
                                                for k in range(len(data.arm_names))]}
        for m in PRIMARY:
            c = values[m][exposed & (data.user_arm == 0)]
            per_arm = [float(values[m][exposed & (data.user_arm == k)].mean())
                       if (exposed & (data.user_arm == k)).any() else None for k in range(len(data.arm_names))]
            row[m] = {"per_participant": per_arm, "lifts": []}
            for k in range(1, len(data.arm_names)):
                t = values[m][exposed & (data.user_arm == k)]
                row[m]["lifts"].append({"arm": data.arm_names[k],
                                        **_lift_row(t, c, "delta", 0, 0, level)})
        rows.append(row)
    return rows


def fmt_pct(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x * 100:+.{digits}f}%"


def lift_text(row: dict[str, Any]) -> str:
    """``+4.33% (95% CI +1.10%..+7.56%, p=0.0086)`` — or why there is no lift."""
    if row.get("lift") is None or row.get("ci", [None])[0] is None:
        return f"n/a ({row.get('note', 'no interval')})"
    p = row.get("p_value")
    ptxt = "n/a" if p is None else (f"{p:.2g}" if p >= 1e-4 else "<1e-4")
    return (f"{fmt_pct(row['lift'])} ({int(row.get('level', 0.95) * 100)}% CI {fmt_pct(row['ci'][0])}.."
            f"{fmt_pct(row['ci'][1])}, p={ptxt})")
