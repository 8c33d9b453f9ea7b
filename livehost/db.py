"""PostgreSQL access: a pool that waits for the database, and the SQL migrations in infra/sql."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import asyncpg

from livehost.config import REPO_ROOT
from livehost.retry import backoff_delays
from livehost.security.redact import redact

MIGRATIONS_DIR = REPO_ROOT / "infra" / "sql"
log = logging.getLogger(__name__)


async def connect_pool(dsn: str, *, attempts: int | None = None, min_size: int = 1, max_size: int = 5,
                       initial_s: float = 0.2, max_s: float = 5.0) -> asyncpg.Pool:
    """Open a pool, retrying with backoff until PostgreSQL answers (forever when attempts is None)."""
    last: Exception | None = None
    for attempt, delay in enumerate(backoff_delays(initial_s, max_s)):
        if attempts is not None and attempt >= attempts:
            break
        try:
            return await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, timeout=5)
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            last = exc
            log.warning("PostgreSQL not reachable (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
    raise ConnectionError(redact(f"PostgreSQL at {dsn} unreachable: {last}"))


async def migrate(pool: asyncpg.Pool, directory: Path = MIGRATIONS_DIR, *, apply: bool | None = None) -> list[str]:
    """Apply every not-yet-applied ``NNN_name.sql`` file in order, each in its own transaction.

    An advisory lock serialises concurrent migrators (several services start at once). With
    ``apply=False`` (default: ``not Settings.db_migrate_on_start`` — a deployment whose migrations run
    as their own job, ``python -m livehost.db``) nothing is changed: a schema that lacks a migration is
    an error naming it, so a service whose role has no DDL rights never tries."""
    if apply is None:
        from livehost.config import load_settings

        apply = load_settings().db_migrate_on_start
    if not apply:
        async with pool.acquire() as conn:
            exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
            done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")} if exists else set()
        pending = [p.name for p in sorted(directory.glob("*.sql")) if p.name not in done]
        if pending:
            raise RuntimeError(f"the database schema lacks migrations {pending}: run `python -m livehost.db` "
                               "(the chart's migration job) first")
        return []
    applied_now: list[str] = []
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_advisory_lock(727001)")
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, "
                "applied_at timestamptz NOT NULL DEFAULT now())")
            done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
            for path in sorted(directory.glob("*.sql")):
                if path.name in done:
                    continue
                async with conn.transaction():
                    await conn.execute(path.read_text())
                    await conn.execute("INSERT INTO schema_migrations(name) VALUES ($1)", path.name)
                applied_now.append(path.name)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(727001)")
    return applied_now


ROLES_SQL = MIGRATIONS_DIR / "roles" / "service_roles.sql"


async def apply_service_roles(pool: asyncpg.Pool) -> None:
    """The least-privilege group role of each service (infra/sql/roles/service_roles.sql; idempotent)."""
    async with pool.acquire() as conn:
        await conn.execute(ROLES_SQL.read_text())


def main(argv: list[str] | None = None) -> None:
    """``python -m livehost.db [--roles]``: apply the migrations with ``LIVEHOST_POSTGRES_DSN`` (the schema
    owner); ``--roles`` also (re)applies the per-service group roles."""
    import sys

    from livehost.config import load_settings

    roles = "--roles" in (argv if argv is not None else sys.argv[1:])

    async def run() -> list[str]:
        pool = await connect_pool(load_settings().postgres_dsn, attempts=30)
        try:
            applied = await migrate(pool, apply=True)
            if roles:
                await apply_service_roles(pool)
            return applied
        finally:
            await pool.close()

    applied = asyncio.run(run())
    print(f"applied {len(applied)} migration(s): {', '.join(applied) or 'none pending'}"
          + ("; service roles applied" if roles else ""))


if __name__ == "__main__":
    main()
