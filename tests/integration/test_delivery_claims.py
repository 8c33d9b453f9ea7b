"""Delivery claims on a real PostgreSQL: once per key, and durable before the effect."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from livehost.claims import DeliveryClaims
from livehost.db import connect_pool, migrate
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration


@pytest.fixture
async def pool(pg_server: str) -> AsyncIterator[asyncpg.Pool]:
    dsn = await create_database(pg_server)
    pool = await connect_pool(dsn, attempts=5)
    await migrate(pool)
    try:
        yield pool
    finally:
        await pool.close()


async def _wal_writes(pool: asyncpg.Pool) -> int:
    await pool.execute("SELECT pg_stat_force_next_flush()")  # this backend's counts, now (PostgreSQL 15+)
    return int(await pool.fetchval("SELECT wal_write FROM pg_stat_wal"))


async def test_a_key_is_claimed_once(pool: asyncpg.Pool) -> None:
    claims = DeliveryClaims(lambda: pool, "voice")
    assert await claims.claim("req-1")
    assert not await claims.claim("req-1")  # a redelivery
    assert await claims.claim("req-2")
    assert await DeliveryClaims(lambda: pool, "ingest").claim("req-1")  # scopes are apart
    windowed = DeliveryClaims(lambda: pool, "ingest-window", window_s=0.001)
    assert await windowed.claim("k")
    await pool.execute("SELECT pg_sleep(0.01)")
    assert await windowed.claim("k")  # outside its window a claim is taken again


async def test_each_claim_commits_synchronously_on_an_asynchronous_server(pg_server: str) -> None:
    """The test server runs with synchronous_commit off. A synchronous commit writes the WAL out itself
    (pg_stat_wal.wal_write counts it); an asynchronous one leaves it to the WAL writer's next round."""
    pool = await connect_pool(await create_database(pg_server), attempts=5, min_size=1, max_size=1)
    try:
        await migrate(pool)
        await _sync_and_control(pool)
    finally:
        await pool.close()


async def _sync_and_control(pool: asyncpg.Pool) -> None:
    assert await pool.fetchval("SHOW synchronous_commit") == "off"
    claims = DeliveryClaims(lambda: pool, "voice")  # one connection: its own WAL counts are read
    n = 40
    before = await _wal_writes(pool)
    for i in range(n):
        assert await claims.claim(f"sync-{i}")
    claimed = await _wal_writes(pool) - before
    before = await _wal_writes(pool)
    for i in range(n):  # the control: the same rows inserted with the server's setting
        await pool.execute("INSERT INTO delivery_claims (scope, key) VALUES ('control', $1)", f"async-{i}")
    control = await _wal_writes(pool) - before
    assert claimed >= n, f"{claimed} WAL writes for {n} claims"
    assert control < n / 2, f"the control wrote the WAL {control} times: the test cannot tell the two apart"
