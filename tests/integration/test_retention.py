"""Retention against a real PostgreSQL: ``livehost purge`` deletes room memory, idempotency keys (and the
side-effect ledger) and trajectories past their retention, and nothing newer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from typer.testing import CliRunner

from livehost.cli import app
from livehost.config import Settings
from livehost.db import connect_pool, migrate
from livehost.retention import purge_database
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration
DAY_MS = 86_400_000


@pytest.fixture
async def db(pg_server: str) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    dsn = await create_database(pg_server)
    pool = await connect_pool(dsn, attempts=5)
    await migrate(pool)
    try:
        yield dsn, pool
    finally:
        await pool.close()


async def seed(pool: asyncpg.Pool, now_ms: int) -> None:
    for name, age_days in (("old", 100), ("new", 1)):
        ts = now_ms - age_days * DAY_MS
        await pool.execute(
            "INSERT INTO trajectories (request_id, room_id, harness_version, outcome, merged_text, comments, steps,"
            " created_ms, completed_ms) VALUES ($1, 'room-a', 'v', 'reply', '', '[]', '[]', $2, $2)", name, ts)
        await pool.execute("INSERT INTO room_memory (request_id, room_id, text, ts_ms) VALUES ($1, 'room-a', 'hi', $2)",
                           name, ts)
        await pool.execute("INSERT INTO tool_idempotency (idempotency_key, tool, operation, created_at) "
                           "VALUES ($1, 't', 'room.pin_product', to_timestamp($2 / 1000.0))", name, ts)
        await pool.execute("INSERT INTO side_effect_ledger (idempotency_key, room_id, tool, operation, at) "
                           "VALUES ($1, 'room-a', 't', 'room.pin_product', to_timestamp($2 / 1000.0))", name, ts)
        await pool.execute("INSERT INTO delivery_claims (scope, key, at) "
                           "VALUES ('voice', $1, to_timestamp($2 / 1000.0))", name, ts)


async def test_purge_deletes_only_what_is_past_retention(db: tuple[str, asyncpg.Pool]) -> None:
    _dsn, pool = db
    now = time.time()
    await seed(pool, int(now * 1000))
    settings = Settings(retention_room_memory_days=30, retention_idempotency_days=30,
                        retention_trajectories_days=90)
    counted = await purge_database(pool, settings, dry_run=True, now=now)
    assert counted == {"room_memory": 1, "idempotency_keys": 1, "delivery_claims": 1, "side_effect_ledger": 1,
                       "trajectories": 1}
    assert await pool.fetchval("SELECT count(*) FROM trajectories") == 2  # a dry run deletes nothing
    assert await purge_database(pool, settings, now=now) == counted
    for table in ("trajectories", "room_memory"):
        assert [r[0] for r in await pool.fetch(f"SELECT request_id FROM {table}")] == ["new"]
    assert [r[0] for r in await pool.fetch("SELECT idempotency_key FROM tool_idempotency")] == ["new"]
    assert [r[0] for r in await pool.fetch("SELECT idempotency_key FROM side_effect_ledger")] == ["new"]
    assert [r[0] for r in await pool.fetch("SELECT key FROM delivery_claims")] == ["new"]
    keep_forever = Settings(retention_room_memory_days=0, retention_idempotency_days=0, retention_trajectories_days=0)
    assert await purge_database(pool, keep_forever, now=now + 1000 * 86_400) == {}


def test_purge_command(db: tuple[str, asyncpg.Pool], tmp_path: Path) -> None:
    dsn, _pool = db
    result = CliRunner().invoke(app, ["purge", "--dry-run"], env={
        "LIVEHOST_POSTGRES_DSN": dsn, "LIVEHOST_STATE_DIR": str(tmp_path), "LIVEHOST_VOICE_AUDIO_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert "trajectories: would delete 0" in result.output and "audio_files: would delete 0" in result.output
    bad = CliRunner().invoke(app, ["purge"], env={
        "LIVEHOST_POSTGRES_DSN": "postgresql://livehost:hunter2@127.0.0.1:1/livehost",
        "LIVEHOST_STATE_DIR": str(tmp_path), "LIVEHOST_VOICE_AUDIO_DIR": str(tmp_path)})
    assert bad.exit_code == 2 and "hunter2" not in bad.output and "***" in bad.output


async def test_services_only_check_the_schema_when_migrations_run_as_a_job(pg_server: str) -> None:
    """With db_migrate_on_start off (the chart), a service never applies DDL: a schema that lacks a
    migration is an error naming it; once `python -m livehost.db` ran, the check passes."""
    from livehost.db import migrate

    pool = await connect_pool(await create_database(pg_server), attempts=5)
    try:
        with pytest.raises(RuntimeError, match="python -m livehost.db"):
            await migrate(pool, apply=False)
        assert await pool.fetchval("SELECT to_regclass('trajectories')") is None  # nothing was created
        assert await migrate(pool, apply=True)
        assert await migrate(pool, apply=False) == []
    finally:
        await pool.close()
