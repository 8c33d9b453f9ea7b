"""The evaluation sandbox on the request path: a case's catalog in its own scope, and its faults.

A request carries its catalog scope in the room state (key ``scope``; default ``live``), set by
whoever created the request (the evaluation runner, a simulator). Prompt assembly reads facts from
that scope and the tools service runs tools in it. Faults of a sandbox scope are stored in
PostgreSQL (table ``sandbox_faults``, see ``infra/sql/030_sandbox_faults.sql``), so the tools
*service* applies them exactly as the in-process runner does: eval cases can run through Kafka too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import asyncpg

from livehost.commerce.faults import FaultInjector
from livehost.commerce.store import LIVE_SCOPE, CommerceStore


class FaultSource(Protocol):
    async def faults_for(self, scope: str) -> dict[str, str]:
        """capability -> fault kind for a catalog scope (empty: no faults)."""
        ...


class MemoryFaults:
    """Faults keyed by scope, in process (tests, a runner without a database)."""

    def __init__(self) -> None:
        self._by_scope: dict[str, dict[str, str]] = {}

    async def set(self, scope: str, faults: Mapping[str, str] | None) -> None:
        if scope == LIVE_SCOPE and faults:
            raise ValueError("faults cannot be injected into the live scope")
        self._by_scope[scope] = FaultInjector(faults).as_dict()

    async def clear(self, scope: str) -> None:
        self._by_scope.pop(scope, None)

    async def faults_for(self, scope: str) -> dict[str, str]:
        return dict(self._by_scope.get(scope, {}))


class PostgresFaults:
    """Faults keyed by scope in the ``sandbox_faults`` table (the live scope never has any)."""

    def __init__(self, pool: asyncpg.Pool):
        self._pool = pool

    async def set(self, scope: str, faults: Mapping[str, str] | None) -> None:
        clean = FaultInjector(faults).as_dict()  # unknown capability / kind -> ValueError
        if scope == LIVE_SCOPE:
            if clean:
                raise ValueError("faults cannot be injected into the live scope")
            return
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM sandbox_faults WHERE scope = $1", scope)
            await conn.executemany(
                "INSERT INTO sandbox_faults (scope, capability, fault) VALUES ($1, $2, $3)",
                [(scope, cap, kind) for cap, kind in sorted(clean.items())])

    async def clear(self, scope: str) -> None:
        await self._pool.execute("DELETE FROM sandbox_faults WHERE scope = $1", scope)

    async def faults_for(self, scope: str) -> dict[str, str]:
        if scope == LIVE_SCOPE:
            return {}
        rows = await self._pool.fetch("SELECT capability, fault FROM sandbox_faults WHERE scope = $1", scope)
        return {r["capability"]: r["fault"] for r in rows}


async def open_case(pool: asyncpg.Pool, case: dict[str, Any], faults: PostgresFaults | MemoryFaults) -> str:
    """Load one case (CASES.md) into a fresh scope with its faults; returns the scope."""
    FaultInjector.from_case(case)  # reject bad faults before loading anything
    scope = await CommerceStore(pool).load_case(case)
    await faults.set(scope, case.get("faults") or {})
    return scope


async def close_case(pool: asyncpg.Pool, scope: str, faults: PostgresFaults | MemoryFaults) -> None:
    """Drop a case's scope: catalog, grants, orders, idempotency ledger and faults."""
    await faults.clear(scope)
    await CommerceStore(pool).drop_scope(scope)
