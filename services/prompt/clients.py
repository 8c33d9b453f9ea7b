"""Where prompt assembly reads its facts: the commerce catalog and the room memory in PostgreSQL.

Every read is in the request's catalog scope (``live``, or a sandbox scope of an evaluation case).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from livehost.commerce.errors import CommerceError
from livehost.commerce.store import LIVE_SCOPE, CommerceStore


class PostgresFacts:
    def __init__(self, pool: asyncpg.Pool):
        self._pool = pool
        self._store = CommerceStore(pool)

    async def product(self, room_id: str, link_id: int, *, scope: str = LIVE_SCOPE) -> dict[str, Any] | None:
        try:
            return await self._store.product_by_link(room_id, link_id, scope=scope)
        except CommerceError:
            return None  # no product on that link: the prompt says so

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int, *,
                  scope: str = LIVE_SCOPE) -> list[dict[str, Any]]:
        try:
            found = await self._store.faq_search(room_id, query, link_id, limit=limit, scope=scope)
        except CommerceError:
            return []
        return [{"q": f["q"], "a": f["a"]} for f in found["results"]]

    async def lineup(self, room_id: str, *, scope: str = LIVE_SCOPE) -> list[dict[str, Any]]:
        """The room's links in order: link number, title and whether it can be bought now."""
        rows = await self._pool.fetch(
            "SELECT p.link_id, p.title, coalesce(i.stock, 0) > 0 AS available FROM products p "
            "LEFT JOIN inventory i USING (scope, room_id, link_id) "
            "WHERE p.scope = $1 AND p.room_id = $2 ORDER BY p.link_id", scope, room_id)
        return [{"link_id": r["link_id"], "title": r["title"], "available": r["available"]} for r in rows]

    async def memory(self, room_id: str, limit: int, *, scope: str = LIVE_SCOPE) -> list[str]:
        """What the host already said in the room. A sandbox scope has no history of its own (and must
        not see the live room's), so it is empty there."""
        if scope != LIVE_SCOPE:
            return []
        rows = await self._pool.fetch(
            "SELECT text FROM room_memory WHERE room_id = $1 ORDER BY ts_ms DESC LIMIT $2", room_id, limit)
        return [r["text"] for r in reversed(rows)]
