"""The adaptive in-flight limit on its own: a generation's 95th percentile decides, the step is in
proportion to how late it is, and what was released before a decrease is not counted again."""

from __future__ import annotations

import pytest

from livehost.agent.admission import MAX_DECREASE, MIN_WINDOW, InFlightLimit


def feed(limit: InFlightLimit, latencies: list[float], released_ms: int = 0, now_ms: int = 1,
         in_flight: int = 1_000) -> None:
    for n, latency in enumerate(latencies):
        limit.outcome(latency, released_ms, now_ms + n, in_flight)


def warmed(maximum: int, objective_ms: float = 1_000, base_ms: float = 300, minimum: int = 4) -> InFlightLimit:
    """A limit whose first window (which decides nothing) has set its base median to ``base_ms``."""
    limit = InFlightLimit(maximum=maximum, objective_ms=objective_ms, minimum=minimum)
    feed(limit, [base_ms] * limit.window())
    assert limit.base_ms == base_ms and limit.value == maximum
    return limit


def test_the_first_window_sets_the_base_and_decides_nothing() -> None:
    """A cold start: the first requests take 2 s against a 1 s objective with nothing queued. That
    window, and requests running past the objective before it is full, leave the limit at its cap;
    warm windows lower the base, and a window queued past it then steps the limit down."""
    limit = InFlightLimit(maximum=80, objective_ms=1_000)
    feed(limit, [2_000.0] * 10, in_flight=20)
    assert not limit.wants_ages()  # the hooks processor does not list the ages before there is a base
    limit.in_flight([(0, 2_500.0)] * 20, now_ms=20)
    assert limit.value == 80
    feed(limit, [2_000.0] * (limit.window() - 10), now_ms=30, in_flight=20)
    assert limit.value == 80 and limit.base_ms == 2_000
    feed(limit, [300.0] * limit.window(), now_ms=1_000, in_flight=50)
    assert limit.value == 80 and limit.base_ms == 300
    feed(limit, [1_250.0] * limit.window(), now_ms=2_000)
    assert limit.value == pytest.approx(80 * 0.8)


@pytest.mark.parametrize(("late_ms", "factor"), [(1_050, 0.9), (1_250, 0.8), (2_000, MAX_DECREASE),
                                                 (9_000, MAX_DECREASE)])
def test_the_step_down_is_the_objective_over_the_percentile_within_bounds(late_ms: float, factor: float) -> None:
    limit = warmed(20)
    feed(limit, [late_ms] * MIN_WINDOW)
    assert limit.value == pytest.approx(20 * factor)


def test_the_ninety_fifth_percentile_decides() -> None:
    limit = InFlightLimit(maximum=20, objective_ms=1_000)
    feed(limit, [300.0] * 20)  # the base: a median of 300 ms
    feed(limit, [500.0] * 19 + [5_000.0])  # one in twenty late: the 95th percentile is on time
    assert limit.value == 20
    feed(limit, [500.0] * 18 + [5_000.0] * 2, now_ms=100)  # two in twenty: it is late
    assert limit.value == pytest.approx(20 * MAX_DECREASE)


def test_nothing_is_decided_before_a_window_is_full() -> None:
    limit = warmed(60)
    assert limit.window() == 30  # half the limit
    feed(limit, [3_000.0] * 29)
    assert limit.value == 60
    feed(limit, [3_000.0], now_ms=50)
    assert limit.value == pytest.approx(60 * MAX_DECREASE)


def test_outcomes_released_before_a_decrease_belong_to_the_old_generation() -> None:
    limit = warmed(40)
    feed(limit, [1_250.0] * 20, released_ms=0, now_ms=1_000)
    assert limit.value == pytest.approx(32) and limit.decreased_at_ms == 1_019
    feed(limit, [1_250.0] * 40, released_ms=500, now_ms=1_100)  # released at 500: before the decrease
    assert limit.value == pytest.approx(32)
    feed(limit, [2_000.0] * 20, released_ms=1_050, now_ms=3_000)  # later than 1.5 times the base
    assert limit.value == pytest.approx(32 * 0.5)


def test_the_limit_stays_within_its_bounds() -> None:
    limit = warmed(8, minimum=4)
    for gen in range(10):
        feed(limit, [10_000.0] * MIN_WINDOW, released_ms=gen * 1_000, now_ms=gen * 1_000 + 500)
    assert limit.value == 4
    feed(limit, [100.0] * 1_000, released_ms=20_000, now_ms=20_000)
    assert limit.value == 8


def test_on_time_outcomes_grow_it_by_one_per_limit_of_them() -> None:
    limit = warmed(100)
    feed(limit, [3_000.0] * 50)  # a window of 50, three times too late: 100 -> 50
    assert limit.value == pytest.approx(100 * MAX_DECREASE)
    feed(limit, [100.0] * 50, released_ms=10_000, now_ms=10_000)
    assert 50.9 < limit.value < 51.1


def test_it_grows_only_while_at_least_half_of_it_is_in_flight() -> None:
    """A limit of 20 with 9 requests in flight is not what holds them back: on-time outcomes do not grow
    it. With 15 in flight they grow it, up to twice 15."""
    limit = warmed(40)
    feed(limit, [2_000.0] * 20)
    assert limit.value == 20
    feed(limit, [100.0] * 100, released_ms=10_000, now_ms=10_000, in_flight=9)
    assert limit.value == 20
    feed(limit, [100.0] * 20, released_ms=10_000, now_ms=20_000, in_flight=15)
    assert 20.9 < limit.value < 21.1
    feed(limit, [100.0] * 1_000, released_ms=10_000, now_ms=30_000, in_flight=15)
    assert 30 <= limit.value < 30.1


def test_a_decrease_starts_from_what_was_in_flight_when_the_limit_was_not_used() -> None:
    """A limit of 96 with at most 30 requests in flight that are late comes down from 30, not 96."""
    limit = warmed(96)
    feed(limit, [2_000.0] * 48, in_flight=30)
    assert limit.value == pytest.approx(30 * MAX_DECREASE)


def test_requests_running_past_the_objective_decide_before_they_finish() -> None:
    """After one late outcome, one request of the generation already 1.25 s old against a 1 s objective:
    a window of 20 allows one late, so the limit steps down now, by 1000 / the second latest, and a
    new generation starts. Overdue requests of the old generation decide nothing."""
    limit = warmed(40, base_ms=100)
    feed(limit, [200.0] * 4 + [3_000.0], now_ms=2_900, in_flight=30)
    limit.in_flight([(0, 200.0)] * 29, now_ms=3_000)
    assert limit.value == 40
    limit.in_flight([(0, 1_250.0)] + [(0, 200.0)] * 28, now_ms=3_100)
    assert limit.value == pytest.approx(30 * 1_000 / 1_250) and limit.decreased_at_ms == 3_100
    before = limit.value
    feed(limit, [3_000.0], released_ms=3_200, now_ms=4_000)
    limit.in_flight([(0, 4_000.0)] * 10 + [(3_200, 100.0)] * 5, now_ms=4_100)  # old generation only
    assert limit.value == before


def test_ages_alone_decide_nothing() -> None:
    """Requests running long with no late outcome (a tool timing out: ages include tool calls, outcomes
    do not), or while nothing finishes (a dependency restarting), leave the limit alone."""
    limit = warmed(40, base_ms=100)
    feed(limit, [300.0] * 5, now_ms=1_000)
    assert not limit.wants_ages()  # the hooks processor does not even list the ages
    limit.in_flight([(0, 5_000.0)] * 30, now_ms=1_500)
    assert limit.value == 40
    feed(limit, [3_000.0], now_ms=2_000)
    assert limit.wants_ages()
    limit.in_flight([(0, 5_000.0)] * 30, now_ms=3_100)  # nothing finished for 1.1 s
    assert limit.value == 40
    limit.in_flight([(0, 5_000.0)] * 30, now_ms=2_500)
    assert limit.value < 40


def test_late_without_queueing_holds_the_limit() -> None:
    """Windows past the objective whose median is no higher than before: the machine is slower than the
    objective, not queueing, and a lower limit would only shed. A median 1.5 times the base is."""
    limit = InFlightLimit(maximum=40, objective_ms=1_000)
    feed(limit, [900.0] * 18 + [1_500.0] * 2)  # the first window sets the base, late or not
    assert limit.value == 40 and limit.base_ms == 900
    value = limit.value
    for gen in range(5):
        feed(limit, [950.0] * 18 + [1_500.0] * 2, released_ms=10_000 * (gen + 1), now_ms=10_000 * (gen + 1))
    assert limit.value >= value  # on-time outcomes grew it; no window stepped it down
    value = limit.value
    feed(limit, [1_500.0] * 20, released_ms=100_000, now_ms=100_000)
    assert limit.value == pytest.approx(value * 1_000 / 1_500)


def test_each_decrease_is_logged_with_what_decided_it(caplog: pytest.LogCaptureFixture) -> None:
    limit = InFlightLimit(maximum=40, objective_ms=1_000)
    with caplog.at_level("INFO", logger="livehost.agent.admission"):
        feed(limit, [300.0] * MIN_WINDOW)
        assert not caplog.records
        feed(limit, [2_000.0] * MIN_WINDOW, released_ms=10_000, now_ms=10_000)
    (record,) = caplog.records
    assert record.getMessage() == (f"in-flight limit 40.0 -> {limit.value:.1f}: 2000 ms against the 1000 ms "
                                   f"objective (a window's 95% of {MIN_WINDOW} outcomes)")
