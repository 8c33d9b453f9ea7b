"""The throughput benchmark's check that every outcome of a step got its trajectory row, on a real
PostgreSQL: only the step's requests count, the wait is bounded, and the lag is the row's write time
less the outcome's time."""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import pytest

from benchmarks.bench_throughput import Step, trajectories_recorded
from livehost.db import connect_pool, migrate
from livehost.kafka import now_ms
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration


async def _row(pool: asyncpg.Pool, request_id: str, completed_ms: int) -> None:
    await pool.execute(
        "INSERT INTO trajectories (request_id, room_id, harness_version, outcome, merged_text, comments, steps, "
        "created_ms, completed_ms) VALUES ($1, 'room-1', 'v1', 'reply', 'hi', $2, $2, $3, $3)",
        request_id, json.dumps([]), completed_ms)


async def test_a_step_counts_its_own_rows_waits_within_its_bound_and_reports_the_lag(pg_server: str) -> None:
    pool = await connect_pool(await create_database(pg_server), attempts=5)
    try:
        await migrate(pool)
        now = now_ms()
        step = Step(rate=3, ended_ms=now - 1000)
        step.outcomes = {rid: {} for rid in ("req-a", "req-b", "req-c")}
        await _row(pool, "req-a", now - 2000)  # written ~2 s after its outcome
        await _row(pool, "req-b", now)
        await _row(pool, "req-other", now)  # another step's request

        started = time.monotonic()
        partial = await trajectories_recorded(pool, step, wait_s=1.5)
        waited = time.monotonic() - started
        assert partial["recorded"] == 2
        assert 1.5 <= waited < 5.0
        assert 1.5 < partial["lag_max"] < 4.0
        assert -0.5 < partial["lag_p50"] < 0.5 or 1.5 < partial["lag_p50"] < 4.0

        async def late() -> None:
            await asyncio.sleep(0.5)
            await _row(pool, "req-c", now_ms())

        writer = asyncio.create_task(late())
        started = time.monotonic()
        full = await trajectories_recorded(pool, step, wait_s=20.0)
        await writer
        assert full["recorded"] == 3
        assert time.monotonic() - started < 10.0  # returned once all were there, not at the bound
        assert full["caught_up_s"] >= 1.0  # the last row came after the step ended
    finally:
        await pool.close()
