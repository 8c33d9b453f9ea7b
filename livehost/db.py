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

# SQLSTATE classes and codes that say "the server, not this statement, is the problem": connection
# exceptions (08), transaction rollbacks a retry resolves (40: serialization, deadlock), insufficient
# resources (53: too many connections, out of memory, disk full), operator intervention (57: admin or
# crash shutdown, cannot connect now — starting up or in recovery —, query cancelled), system/I/O
# errors (58), a read-only server during a failover (25006) and a lock not available now (55P03).
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
TRANSIENT_SQLSTATES = frozenset({"25006", "55P03"})


def transient_db_error(exc: BaseException) -> bool:
    """True when ``exc`` means PostgreSQL is (for now) unreachable or unable, so the same write will
    succeed once it is back: wait and retry, never drop or dead-letter the record. False for what the
    record itself causes (a value asyncpg cannot encode, a constraint or type the table refuses).

    Besides the SQLSTATEs above: any OSError (refused, reset, timeout), asyncpg's InterfaceError
    (connection closed mid-operation, pool closing) except its client-side DataError (an argument it
    cannot encode: the record's fault), and asyncpg's InternalClientError — a connection whose
    server died mid-query can be left with its protocol in the middle of an operation ("cannot switch
    to state 15; another operation (2) is in progress", seen when the postmaster was SIGKILLed in the
    fault suite); that error is no subclass of InterfaceError or PostgresError."""
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, asyncpg.exceptions._base.DataError):  # before InterfaceError: it subclasses it
        return False
    if isinstance(exc, asyncpg.InterfaceError | asyncpg.exceptions._base.InternalClientError):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, "sqlstate", "") or "")
        return state[:2] in TRANSIENT_SQLSTATE_CLASSES or state in TRANSIENT_SQLSTATES
    return False


def broken_connection(exc: BaseException) -> bool:
    """The connection the error came from is unusable (its protocol state is lost): the pool should be
    rebuilt rather than hand the connection out again."""
    return isinstance(exc, asyncpg.exceptions._base.InternalClientError)


async def keep_session(conn: asyncpg.Connection) -> None:
    """How a pool connection is reset when it comes back: it is not (beyond asyncpg's own rollback of
    a transaction left open, which still runs before this).

    asyncpg's default sends ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`` on every
    release: one more round trip and four statements per use, for session state LiveHost never leaves
    behind. Its locks are transaction-scoped (``pg_advisory_xact_lock``), its settings ``SET LOCAL``, it
    neither listens nor keeps cursors outside a transaction; the one session-level lock (the migrator's)
    is released in a ``finally``. ``tests/unit/test_db_session_state.py`` keeps the code that way."""


async def connect_pool(dsn: str, *, attempts: int | None = None, min_size: int = 1, max_size: int = 5,
                       initial_s: float = 0.2, max_s: float = 5.0) -> asyncpg.Pool:
    """Open a pool, retrying with backoff until PostgreSQL answers (forever when attempts is None)."""
    last: Exception | None = None
    for attempt, delay in enumerate(backoff_delays(initial_s, max_s)):
        if attempts is not None and attempt >= attempts:
            break
        try:
            return await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, timeout=5,
                                             reset=keep_session)
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
