"""Where prompt assembly reads its facts: the commerce catalog and the room memory in PostgreSQL."""

from __future__ import annotations

from typing import Any

import asyncpg

from livehost.commerce.errors import CommerceError
from livehost.commerce.store import CommerceStore


class PostgresFacts:
    def __init__(self, pool: asyncpg.Pool):
        self._pool = pool
        self._store = CommerceStore(pool)

    async def product(self, room_id: str, link_id: int) -> dict[str, Any] | None:
        try:
            return await self._store.product_by_link(room_id, link_id)
        except CommerceError:
            return None  # no product on that link: the prompt says so

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int) -> list[dict[str, Any]]:
        try:
            found = await self._store.faq_search(room_id, query, link_id, limit=limit)
        except CommerceError:
            return []
        return [{"q": f["q"], "a": f["a"]} for f in found["results"]]

    async def memory(self, room_id: str, limit: int) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT text FROM room_memory WHERE room_id = $1 ORDER BY ts_ms DESC LIMIT $2", room_id, limit)
        return [r["text"] for r in reversed(rows)]
