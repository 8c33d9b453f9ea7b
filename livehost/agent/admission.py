"""The adaptive in-flight limit of admission control (used by the hooks processor).

Additive increase, multiplicative decrease, as TCP's congestion window, with choices that
measurement forced:

- **Decide on a generation's percentile, not on its slowest request.** Reacting to the slowest
  request of a generation held the limit below what the machine could serve: near capacity a few
  requests are always slow (measured 2026-12-03: shrinking on any request over 1.2 s shed 18% of
  100 requests/s that the same machine served with 1% shed). Here a generation decides once it has
  ``window()`` outcomes, on its ``QUANTILE``.
- **Decrease in proportion to how late it is.** The old fixed step of 10% per generation needs
  seven generations to halve the limit, and a generation lasts as long as its late requests (5-6 s
  each at 2x capacity on a slow machine). The step is objective / percentile, between
  ``MAX_DECREASE`` and ``MIN_DECREASE``.
- **Grow only while the limit is used** (at least half of it in flight), as TCP validates its
  window (RFC 7661) and Netflix's concurrency-limits AIMD does. Growing on every on-time outcome,
  a limit capped at 96 stood at its cap after a 25/s step that used about 20, and the 50/s step
  that followed answered with a p95 of 5.9 s (2026-12-03 14:53).
  A decrease starts from the most requests that were in flight, when that is below the limit.
  (Capping the limit at twice that after an on-time window, so that a load step meets a limit near
  its need, shed 34% at 25/s on a slow machine after one late window: left out.)

A generation is the requests released after the last decrease: those released before it ran under
the old limit and say nothing about the new one (decreasing for each of them collapsed the limit
after a slow start-up).

- **The first window decides nothing; it sets the base median.** A cold stack's first requests take
  about 2 s without any queueing (caches, connections, the first Triton calls). Counting their
  lateness as queueing, as the rule did while it had no base, brought a limit of 80 down to 4-13 in
  the first 2 s of every benchmark run, and it regrew only by 1/limit per on-time outcome: the 100/s
  step that followed met a limit of 41-64 where it needed 60-80, and shed 1-10% (2026-12-04). The
  cost: a worker that starts under overload takes a queued median as its base, and keeps its cap
  until a window shows a lower median (the budget and room-queue shedding still apply).
"""

from __future__ import annotations

import logging
import math

log = logging.getLogger(__name__)

QUANTILE = 0.95
MIN_WINDOW = 20  # outcomes before a generation decides (fewer is noise: one late request in 20 is not)
MIN_DECREASE = 0.9  # the smallest step down, a factor of the limit
MAX_DECREASE = 0.5  # the largest step down
# A generation past the objective steps the limit down only while its median is QUEUEING times the
# lowest median seen (the base, which may rise by BASE_DRIFT per window, so that it follows a machine
# that slowed down): late without queueing, a lower limit only sheds (measured on a machine slower than
# the objective at 25/s: the limit sank to 10 and shed 34% with no gain in latency).
QUEUEING = 1.5
BASE_DRIFT = 1.01
MIN_MEDIAN = 5  # outcomes of a generation before its median counts for a decision on ages


class InFlightLimit:
    """Requests in flight allowed, between ``minimum`` and ``maximum``, kept so that the ``QUANTILE``
    of a generation's latencies stays within ``objective_ms``."""

    def __init__(self, maximum: int, objective_ms: float, minimum: int = 4):
        self.maximum = max(1, maximum)
        self.minimum = min(max(1, minimum), self.maximum)
        self.objective_ms = objective_ms
        self.value = float(self.maximum)
        self.decreased_at_ms = 0  # when the current generation began
        self._window: list[float] = []  # latencies of the current generation (bounded: see window())
        self._used = 0  # the most requests in flight seen in the current window
        self._last_outcome_ms = 0
        self.base_ms: float | None = None  # the lowest window median, drifting up (QUEUEING)

    def __int__(self) -> int:
        return int(self.value)

    def window(self) -> int:
        """Outcomes a generation needs to decide: half the limit (about half a round of requests in
        flight), at least MIN_WINDOW."""
        return max(MIN_WINDOW, math.ceil(self.value / 2))

    def outcome(self, latency_ms: float, released_ms: int, now_ms: int, in_flight: int) -> None:
        """A request released at ``released_ms`` took ``latency_ms`` in the objective's terms; ``in_flight``
        requests were in flight as it finished, itself included."""
        self._last_outcome_ms = now_ms
        if latency_ms <= self.objective_ms and 2 * in_flight >= self.value:
            self.value = min(float(self.maximum), self.value + 1 / self.value)
        if released_ms < self.decreased_at_ms:
            return
        self._window.append(latency_ms)
        self._used = max(self._used, in_flight)
        if len(self._window) < self.window():
            return
        ranked = sorted(self._window)
        q = ranked[min(len(ranked) - 1, math.ceil(QUANTILE * len(ranked)) - 1)]
        median = ranked[len(ranked) // 2]
        queueing = self._queueing(median)
        self.base_ms = median if self.base_ms is None else min(median, self.base_ms * BASE_DRIFT)
        if q > self.objective_ms and queueing:
            self._decrease(q, now_ms, f"a window's {QUANTILE:.0%} of {len(ranked)} outcomes")
        else:
            self._window, self._used = [], 0

    def wants_ages(self) -> bool:
        """Whether :meth:`in_flight` can decide anything now: only once there is a base median and the
        generation has a late outcome (the caller then builds the list of ages, which costs a pass over
        its rooms)."""
        return self.base_ms is not None and any(x > self.objective_ms for x in self._window)

    def in_flight(self, running: list[tuple[int, float]], now_ms: int) -> None:
        """The requests in flight now, as (released at, age in the objective's terms). Those of the
        current generation already older than the objective will finish late: once more of them, with
        the generation's late outcomes so far, than a window's percentile allows are, the generation is
        decided now. Waiting for their outcomes made the limit react once per late request's lifetime:
        at 5 s each, one step in a 20 s overload (measured 2026-12-03)."""
        late_done = [x for x in self._window if x > self.objective_ms]
        if not late_done or now_ms - self._last_outcome_ms > self.objective_ms:
            # Only alongside late outcomes, which are measured without their tool calls (an age is not),
            # and not while nothing finishes (a dependency restarting stalls every request, and no
            # lower limit shortens that). Stepping down on ages alone shed 13% of a PostgreSQL
            # restart's requests and 34% of a tool-timeout drill's (fault suite, 2026-12-03).
            return
        if len(self._window) < MIN_MEDIAN or not self._queueing(sorted(self._window)[len(self._window) // 2]):
            return
        overdue = [age for released, age in running if released >= self.decreased_at_ms and age > self.objective_ms]
        if not overdue:
            return
        self._used = max(self._used, len(running))
        late = sorted(overdue + late_done, reverse=True)
        allowed = math.floor((1 - QUANTILE) * self.window() + 1e-9)
        if len(late) > allowed:
            self._decrease(late[allowed], now_ms, f"{len(late)} requests past it, running or done")

    def _queueing(self, median: float) -> bool:
        return self.base_ms is not None and median > QUEUEING * self.base_ms

    def _decrease(self, q: float, now_ms: int, why: str) -> None:
        """The generation's percentile ``q`` is past the objective: step down and start a new one."""
        # From what was in flight when that is less than the limit: a limit above it was not what made
        # them late.
        step = max(MAX_DECREASE, min(MIN_DECREASE, self.objective_ms / q))
        before = self.value
        self.value = max(float(self.minimum), min(self.value, float(self._used)) * step)
        # a decision per generation, not per request: seldom enough for info
        log.info("in-flight limit %.1f -> %.1f: %.0f ms against the %.0f ms objective (%s)",
                 before, self.value, q, self.objective_ms, why)
        self.decreased_at_ms = now_ms
        self._window, self._used = [], 0
