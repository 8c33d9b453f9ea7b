"""Where prompt assembly reads its facts: the commerce catalog and the room memory in PostgreSQL."""

from __future__ import annotations

from typing import Any

import asyncpg

from livehost.commerce.store import CommerceStore


class PostgresFacts:
    def __init__(self, pool: asyncpg.Pool):
        self._pool = pool
        self._store = CommerceStore(pool)

    async def product(self, room_id: str, link_id: int) -> dict[str, Any] | None:
        return await self._store.product_for_prompt(room_id, link_id)

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int) -> list[dict[str, Any]]:
        return await self._store.faq_for_prompt(room_id, query, link_id, limit)

    async def memory(self, room_id: str, limit: int) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT text FROM room_memory WHERE room_id = $1 ORDER BY ts_ms DESC LIMIT $2", room_id, limit)
        return [r["text"] for r in reversed(rows)]
