"""The pool's release path on a real PostgreSQL: no reset query per use, and a transaction left open
is still rolled back before the connection is handed out again."""

from __future__ import annotations

import asyncpg
import pytest

from livehost.db import connect_pool
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration


async def test_a_released_connection_costs_no_reset_round_trip(pg_server: str) -> None:
    pool = await connect_pool(await create_database(pg_server), attempts=5, max_size=1)
    try:
        async with pool.acquire() as conn:
            await conn.fetchval("SELECT 1")
            before = conn._protocol.queries_count  # type: ignore[attr-defined]
        async with pool.acquire() as again:
            assert again._protocol.queries_count == before  # type: ignore[attr-defined]
        # asyncpg's default pool sends its reset query on the same release
        default = await asyncpg.create_pool(await create_database(pg_server), min_size=1, max_size=1)
        try:
            async with default.acquire() as conn:
                await conn.fetchval("SELECT 1")
                before = conn._protocol.queries_count  # type: ignore[attr-defined]
            async with default.acquire() as again:
                assert again._protocol.queries_count == before + 1  # type: ignore[attr-defined]
        finally:
            await default.close()
    finally:
        await pool.close()


async def test_a_transaction_left_open_is_rolled_back_on_release(pg_server: str) -> None:
    pool = await connect_pool(await create_database(pg_server), attempts=5, max_size=1)
    try:
        await pool.execute("CREATE TABLE t (x int)")
        async with pool.acquire() as conn:
            await conn.execute("BEGIN")
            await conn.execute("INSERT INTO t VALUES (1)")
            await conn.execute("SET LOCAL statement_timeout = 1234")
        async with pool.acquire() as again:
            assert not again.is_in_transaction()
            assert await again.fetchval("SELECT count(*) FROM t") == 0
            assert await again.fetchval("SHOW statement_timeout") == "0"
    finally:
        await pool.close()
