"""Experiment definitions and stable assignment: hash(salt, user id) → bucket → arm.

The same user always lands in the same arm of an experiment (the hash does not depend on time,
room or process); different salts give independent assignments across experiments.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

BUCKETS = 10_000
REACT_BASELINE = "react"  # the ReAct baseline arm (no harness version)
ARM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
EXPERIMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


def bucket(salt: str, user_id: str) -> int:
    digest = hashlib.sha256(f"{salt}\x1f{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


@dataclass(frozen=True)
class Arm:
    name: str
    harness_version: str  # a registry version, or "react"
    weight: float


@dataclass(frozen=True)
class Experiment:
    name: str
    salt: str
    arms: tuple[Arm, ...]  # arms[0] is the control
    description: str = ""
    status: str = "draft"
    start_at: datetime | None = None
    stop_at: datetime | None = None
    created_by: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_definition(self.name, self.arms)

    @property
    def control(self) -> Arm:
        return self.arms[0]

    @property
    def weights(self) -> list[float]:
        return [a.weight for a in self.arms]

    def boundaries(self) -> list[int]:
        """Upper bucket bound (exclusive) of each arm, in arm order."""
        total = sum(self.weights)
        out, acc = [], 0.0
        for arm in self.arms:
            acc += arm.weight
            out.append(round(acc / total * BUCKETS))
        out[-1] = BUCKETS
        return out

    def arm_for_bucket(self, b: int) -> Arm:
        for arm, upper in zip(self.arms, self.boundaries(), strict=True):
            if b < upper:
                return arm
        return self.arms[-1]

    def assign(self, user_id: str) -> tuple[Arm, int]:
        b = bucket(self.salt, user_id)
        return self.arm_for_bucket(b), b

    def running_at(self, at: datetime) -> bool:
        if self.status != "running":
            return False
        if self.start_at is not None and at < self.start_at:
            return False
        return not (self.stop_at is not None and at >= self.stop_at)


def check_definition(name: str, arms: tuple[Arm, ...] | list[Arm]) -> None:
    problems = []
    if not EXPERIMENT_NAME.match(name or ""):
        problems.append(f"experiment name {name!r}: lowercase letters, digits, '.', '_', '-' (max 63)")
    if len(arms) < 2:
        problems.append("an experiment needs at least two arms (the first is the control)")
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        problems.append("arm names must be unique")
    for a in arms:
        if not ARM_NAME.match(a.name):
            problems.append(f"arm name {a.name!r}: lowercase letters, digits, '_', '-' (max 32)")
        if not a.weight > 0:
            problems.append(f"arm {a.name}: weight must be > 0")
        if not a.harness_version:
            problems.append(f"arm {a.name}: needs a harness version or {REACT_BASELINE!r}")
    if problems:
        raise ValueError("; ".join(problems))


def parse_arm(spec: str) -> Arm:
    """``name=version:weight`` (``version`` may be ``react``), e.g. ``control=react:80``."""
    name, eq, rest = spec.partition("=")
    version, colon, weight = rest.rpartition(":")
    if not eq or not colon or not name or not version:
        raise ValueError(f"arm {spec!r}: use name=version:weight, e.g. control=react:80")
    try:
        w = float(weight)
    except ValueError:
        raise ValueError(f"arm {spec!r}: weight {weight!r} is not a number") from None
    return Arm(name.strip(), version.strip(), w)
