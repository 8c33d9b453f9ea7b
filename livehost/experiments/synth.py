"""Synthetic experiment traffic with planted effects (known-answer tests, demos, load tests).

Users are assigned with the experiment's real hash; each participant gets Poisson item-page views
and Bernoulli confirmed orders with exponential amounts. ``lift`` multiplies the treatment arms'
view rate and order probability, so the expected relative lift of views/participant and
GMV/participant is exactly the planted one. ``drop`` removes a share of one arm's exposures
(a logging loss) to plant a sample-ratio mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from livehost.experiments.analysis import ExperimentData
from livehost.experiments.assign import Experiment
from livehost.experiments.store import EPOCH


@dataclass
class Plan:
    users: int = 20_000
    days: int = 7
    start: datetime = datetime(2026, 3, 1, tzinfo=UTC)
    views_mean: float = 3.0
    order_prob: float = 0.08
    amount_mean: float = 200.0
    gmv_lift: dict[str, float] = field(default_factory=dict)  # arm -> relative lift of order probability
    views_lift: dict[str, float] = field(default_factory=dict)  # arm -> relative lift of the view rate
    drop: dict[str, float] = field(default_factory=dict)  # arm -> share of exposures lost
    seed: int = 0


def simulate_arrays(exp: Experiment, plan: Plan) -> ExperimentData:
    """Participants and outcomes as analysis arrays (fast: no database)."""
    rng = np.random.default_rng(plan.seed)
    names = [a.name for a in exp.arms]
    arm_idx = np.array([names.index(exp.assign(f"user-{i}")[0].name) for i in range(plan.users)], dtype=int)
    keep = np.ones(plan.users, dtype=bool)
    for arm, share in plan.drop.items():
        sel = arm_idx == names.index(arm)
        keep[sel] = rng.random(int(sel.sum())) >= share
    arm_idx = arm_idx[keep]
    n = arm_idx.size
    start_day = (plan.start.date() - EPOCH).days
    user_day = start_day + rng.integers(0, plan.days, size=n)
    view_mult = np.array([1.0 + plan.views_lift.get(a, 0.0) for a in names])[arm_idx]
    order_mult = np.array([1.0 + plan.gmv_lift.get(a, 0.0) for a in names])[arm_idx]
    views = rng.poisson(plan.views_mean * view_mult)
    ordered = rng.random(n) < np.clip(plan.order_prob * order_mult, 0, 1)
    amounts = np.where(ordered, np.round(rng.exponential(plan.amount_mean, size=n), 2), 0.0)
    last_day = start_day + plan.days - 1
    out_day = np.minimum(user_day + rng.integers(0, 3, size=n), last_day)
    has = (views > 0) | ordered
    return ExperimentData(names, exp.weights, arm_idx, user_day, np.nonzero(has)[0], out_day[has],
                          views[has].astype(float), ordered[has].astype(float), amounts[has])


def simulate_events(exp: Experiment, plan: Plan) -> tuple[list[tuple[str, datetime, str | None]],
                                                           list[dict[str, Any]]]:
    """The same traffic as exposures (user, time, room) and OutcomeEvent records (for Kafka or the store)."""
    rng = np.random.default_rng(plan.seed)
    names = [a.name for a in exp.arms]
    exposures: list[tuple[str, datetime, str | None]] = []
    events: list[dict[str, Any]] = []
    for i in range(plan.users):
        user = f"user-{i}"
        arm = exp.assign(user)[0].name
        if arm in plan.drop and rng.random() < plan.drop[arm]:
            continue
        at = plan.start + timedelta(seconds=float(rng.uniform(0, plan.days * 86400 - 7200)))
        exposures.append((user, at, "sim-room-01"))
        k = names.index(arm)
        views = int(rng.poisson(plan.views_mean * (1.0 + plan.views_lift.get(names[k], 0.0))))
        for v in range(views):
            ts = at + timedelta(seconds=float(rng.uniform(1, 3600)))
            events.append({"event_id": f"{exp.name}-{user}-v{v}", "type": "item_page_view", "user_id": user,
                           "ts_ms": int(ts.timestamp() * 1000), "room_id": "sim-room-01",
                           "link_id": int(rng.integers(1, 6)), "order_id": None, "amount": None, "currency": None})
        if rng.random() < plan.order_prob * (1.0 + plan.gmv_lift.get(names[k], 0.0)):
            ts = at + timedelta(seconds=float(rng.uniform(60, 7000)))
            events.append({"event_id": f"{exp.name}-{user}-o", "type": "order_confirmed", "user_id": user,
                           "ts_ms": int(ts.timestamp() * 1000), "room_id": "sim-room-01", "link_id": None,
                           "order_id": f"O-{user}", "amount": round(float(rng.exponential(plan.amount_mean)), 2),
                           "currency": "CNY"})
    return exposures, events
