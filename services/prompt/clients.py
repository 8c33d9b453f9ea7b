"""Where prompt assembly reads its facts: the commerce catalog and the room memory in PostgreSQL.

Every read is in the request's catalog scope (``live``, or a sandbox scope of an evaluation case).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import asyncpg

from livehost.agent.prompt import Sources
from livehost.commerce.errors import CommerceError
from livehost.commerce.store import LIVE_SCOPE, TSQUERY_SQL, CommerceStore, catalog_number
from livehost.understanding.normalize import gloss
from services.prompt.handlers import FourReads

# A request's four facts in one statement: one round trip and one pool checkout instead of four (the
# per-statement cost, not the rows, is what they cost: 5.7% of the prompt step's samples at 2x load).
# Each subquery is the query of the method of the same name below, and gives the same rows.
GATHER_SQL = (
    f"WITH q AS (SELECT CASE WHEN $3::text IS NULL THEN NULL ELSE {TSQUERY_SQL.format(p='$3')} END AS tsq) "
    "SELECT "
    "(SELECT json_build_object('link_id', link_id, 'sku', sku, 'title', title, 'price', price::text, "
    "  'currency', currency, 'attributes', attributes) FROM products "
    "  WHERE $4::integer IS NOT NULL AND scope = $1 AND room_id = $2 AND link_id = $4) AS product, "
    "(SELECT coalesce(json_agg(json_build_object('q', f.q, 'a', f.a) ORDER BY f.n), '[]') FROM ("
    "  SELECT f.q, f.a, row_number() OVER (ORDER BY ts_rank(f.tsv, q.tsq) DESC, (f.link_id IS NULL), "
    "  f.faq_id) AS n FROM faq f, q WHERE f.scope = $1 AND f.room_id = $2 AND q.tsq IS NOT NULL "
    "  AND f.tsv @@ q.tsq AND ($4::integer IS NULL OR f.link_id = $4 OR f.link_id IS NULL) "
    "  ORDER BY n LIMIT $5) f) AS faq, "
    "(SELECT coalesce(json_agg(m.text ORDER BY m.ts_ms, m.request_id), '[]') FROM ("
    "  SELECT text, ts_ms, request_id FROM room_memory WHERE $1 = $7 AND room_id = $2 "
    "  ORDER BY ts_ms DESC, request_id DESC LIMIT $6) m) AS memory, "
    "(SELECT coalesce(json_agg(json_build_object('link_id', p.link_id, 'title', p.title, "
    "  'available', coalesce(i.stock, 0) > 0) ORDER BY p.link_id), '[]') FROM products p "
    "  LEFT JOIN inventory i USING (scope, room_id, link_id) WHERE p.scope = $1 AND p.room_id = $2) AS lineup"
)


class PostgresFacts(FourReads):
    def __init__(self, pool: asyncpg.Pool):
        self._pool = pool
        self._store = CommerceStore(pool)

    async def gather(self, room_id: str, link: Any, query: str, faq_limit: int, memory_limit: int, *,
                     scope: str = LIVE_SCOPE) -> Sources:
        """The product on ``link`` (if any), the FAQ entries ``query`` finds, the room's memory and its
        lineup, in one round trip: what FourReads.gather gives from :meth:`product`, :meth:`faq`,
        :meth:`memory` and :meth:`lineup`, with the same rules for a link or query they would refuse."""
        product_link = int(link) if link else None
        valid_link = link is None or (isinstance(link, int) and not isinstance(link, bool) and link >= 1)
        valid_query = isinstance(query, str) and bool(query.strip())
        # faq() answers nothing for a link or a query faq_search refuses; product() nothing for link < 1
        search = gloss(query.strip()) if valid_query and valid_link else None
        row = await self._pool.fetchrow(
            GATHER_SQL, scope, room_id, search, product_link if (product_link or 0) >= 1 else None,
            faq_limit, memory_limit, LIVE_SCOPE)
        assert row is not None  # a SELECT of subqueries always has its one row
        product = json.loads(row["product"]) if row["product"] is not None else None
        if product is not None:
            product["price"] = catalog_number(Decimal(product["price"]))  # as product_by_link gives it: 299, not 299.00
            if isinstance(product["attributes"], str):
                product["attributes"] = json.loads(product["attributes"])
        return Sources(product, json.loads(row["faq"]), json.loads(row["memory"]), json.loads(row["lineup"]))

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
        """What the host already said in the room, oldest first (of one instant, by request id). A sandbox
        scope has no history of its own (and must not see the live room's), so it is empty there."""
        if scope != LIVE_SCOPE:
            return []
        rows = await self._pool.fetch(
            "SELECT text FROM room_memory WHERE room_id = $1 ORDER BY ts_ms DESC, request_id DESC LIMIT $2",
            room_id, limit)
        return [r["text"] for r in reversed(rows)]
