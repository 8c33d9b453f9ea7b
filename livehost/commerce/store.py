"""The commerce backend in PostgreSQL: rooms and live links, products, inventory, FAQ, coupons,
orders — and the exactly-once ledger of side-effecting tool calls.

Every row lives in a *scope*. Production data is scope ``live`` (:data:`LIVE_SCOPE`); the
evaluation sandbox loads one case's catalog snapshot into a fresh scope (:meth:`CommerceStore.load_case`)
so cases never see each other's products, coupons or grants, and drops it afterwards.

FAQ and product search use PostgreSQL full-text search (generated ``tsvector`` columns + GIN).
Keyword FTS is robust, needs no extra service or model, and is good at the SKU and attribute
terms viewers type ("waterproof", "350 ml", "JKT-3001"); the query is OR-ed over its lexemes and
ranked, so a chatty question still finds the entry. Embeddings (pgvector) are a later option.
Limitation: the ``english`` parser does not segment CJK text; Chinese FAQs need a segmenting
text-search configuration (e.g. zhparser) or embeddings.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg

from livehost.commerce.errors import InvalidArgument, LimitReached, NotFound, PermissionDenied
from livehost.commerce.operations import OPERATIONS
from livehost.config import REPO_ROOT
from livehost.hooks.gate import SideEffectPolicy, budget_reason, static_reason
from livehost.understanding.normalize import gloss

LIVE_SCOPE = "live"
DEMO_CATALOG_PATH = REPO_ROOT / "infra" / "seed" / "demo_catalog.json"

# operation name -> CommerceStore method (operations are code; harness tools bind to them)
_METHODS: dict[str, str] = {
    "product.by_link": "product_by_link",
    "product.search": "product_search",
    "inventory.get": "inventory",
    "coupon.list": "coupon_list",
    "coupon.issue": "coupon_issue",
    "faq.search": "faq_search",
    "room.pin_product": "pin_product",
    "order.status": "order_status",
}

# OR-query of the lexemes of $n (NULL when the text has none, e.g. only stop words).
TSQUERY_SQL = (
    "(SELECT CASE WHEN count(*) = 0 THEN NULL "
    "ELSE string_agg(quote_literal(lexeme), ' | ')::tsquery END "
    "FROM unnest(to_tsvector('english', {p})))"
)

Action = Callable[[asyncpg.Connection], Awaitable[Any]]


def catalog_number(value: Decimal | float | int | None) -> int | float | None:
    """Numbers as the catalog wrote them: 299, not 299.00 (replies must quote catalog numbers)."""
    if value is None:
        return None
    d = Decimal(str(value))
    return int(d) if d == d.to_integral_value() else float(d)


def _link(value: Any, name: str = "link_id") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")
    return value


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{name} must be a non-empty string, got {value!r}")
    return value.strip()


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class CommerceStore:
    """Async access to the commerce tables. Every method takes ``scope`` (default :data:`LIVE_SCOPE`)
    and an optional ``conn`` to run inside a caller's transaction."""

    def __init__(self, pool: asyncpg.Pool):
        self._pool = pool

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    @asynccontextmanager
    async def _conn(self, conn: asyncpg.Connection | None) -> AsyncIterator[asyncpg.Connection]:
        if conn is not None:
            yield conn
        else:
            async with self._pool.acquire() as acquired:
                yield acquired

    # ------------------------------------------------------------------ dispatch

    async def invoke(self, operation: str, params: dict[str, Any], *, scope: str = LIVE_SCOPE,
                     conn: asyncpg.Connection | None = None, idempotency_key: str | None = None) -> Any:
        """Run a backend operation by name with its parameters (operation params + context params)."""
        op = OPERATIONS.get(operation)
        method_name = _METHODS.get(operation)
        if op is None or method_name is None:
            raise InvalidArgument(f"unknown backend operation {operation!r}")
        allowed = set(op.params) | set(op.context)
        unknown = set(params) - allowed
        if unknown:
            raise InvalidArgument(f"{operation} takes no parameter(s) {sorted(unknown)}")
        kwargs: dict[str, Any] = {name: params.get(name) for name in (*op.context, *op.params)}
        if op.side_effect:
            kwargs["idempotency_key"] = idempotency_key
        method = getattr(self, method_name)
        return await method(**kwargs, scope=scope, conn=conn)

    async def run_once(self, scope: str, key: str, *, tool: str, operation: str, request_id: str | None,
                       action: Action) -> tuple[Any, bool]:
        """Run ``action(conn)`` exactly once per ``(scope, key)``; returns ``(result, replayed)``.

        The ledger row is inserted first, in the same transaction as the side effect: a concurrent
        duplicate blocks on the uncommitted key and, once the first commits, reads its stored
        result. If the action fails the transaction rolls back — no side effect, no ledger row —
        and a retry runs it again. ``action`` must return JSON-serialisable data."""
        async with self._pool.acquire() as conn, conn.transaction():
            inserted = await conn.fetchval(
                "INSERT INTO tool_idempotency (scope, idempotency_key, tool, operation, request_id) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING true",
                scope, key, tool, operation, request_id)
            if not inserted:
                stored = await conn.fetchval(
                    "SELECT result FROM tool_idempotency WHERE scope = $1 AND idempotency_key = $2",
                    scope, key)
                if stored is None:
                    raise RuntimeError(f"idempotency key {key!r} has no stored result")
                return _json(stored), True
            result = await action(conn)
            await conn.execute(
                "UPDATE tool_idempotency SET result = $3::jsonb WHERE scope = $1 AND idempotency_key = $2",
                scope, key, json.dumps(result))
            return result, False

    # ------------------------------------------------------------------ side-effect gate

    async def gate_side_effect(self, conn: asyncpg.Connection, policy: SideEffectPolicy, *, scope: str, key: str,
                               room_id: str, user_id: str | None, tool: str, operation: str,
                               params: dict[str, Any]) -> None:
        """Hold one side effect to the room's policy (livehost/hooks/gate.py) inside its own transaction:
        the static rules against the room's stored campaign, then the budgets against the ledger (the
        room's rows serialised by an advisory lock), then record it. Raises PermissionDenied."""
        campaign = _json(await conn.fetchval("SELECT campaign FROM rooms WHERE scope = $1 AND room_id = $2",
                                             scope, room_id))
        reason = static_reason(policy, tool, operation, params, campaign)
        if reason is None and policy.has_budgets:
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"side-effects:{scope}:{room_id}")
            counts = await conn.fetchrow(
                "SELECT count(*) FILTER (WHERE user_id IS NOT DISTINCT FROM $3) AS viewer, count(*) AS room, "
                "count(*) FILTER (WHERE at > now() - interval '1 minute') AS last_minute "
                "FROM side_effect_ledger WHERE scope = $1 AND room_id = $2", scope, room_id, user_id)
            reason = budget_reason(policy, viewer=counts["viewer"], room=counts["room"],
                                   last_minute=counts["last_minute"])
        if reason is not None:
            raise PermissionDenied(f"side-effect gate {policy.hook_id}: {reason}")
        await conn.execute(
            "INSERT INTO side_effect_ledger (scope, idempotency_key, room_id, user_id, tool, operation) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING", scope, key, room_id, user_id, tool, operation)

    # ------------------------------------------------------------------ operations

    async def product_by_link(self, room_id: str, link_id: int, *, scope: str = LIVE_SCOPE,
                              conn: asyncpg.Connection | None = None) -> dict[str, Any]:
        """Product facts of a live link (no stock: that is :meth:`inventory`)."""
        link_id = _link(link_id)
        async with self._conn(conn) as c:
            row = await c.fetchrow(
                "SELECT link_id, sku, title, price, currency, attributes FROM products "
                "WHERE scope = $1 AND room_id = $2 AND link_id = $3", scope, room_id, link_id)
        if row is None:
            raise NotFound(f"no product on link {link_id} in this room")
        return {"link_id": row["link_id"], "sku": row["sku"], "title": row["title"],
                "price": catalog_number(row["price"]), "currency": row["currency"],
                "attributes": _json(row["attributes"])}

    async def product_search(self, room_id: str, query: str, *, limit: int = 5, scope: str = LIVE_SCOPE,
                             conn: asyncpg.Connection | None = None) -> dict[str, Any]:
        """Products of the room matching keywords (title, SKU, attribute keys and values)."""
        query = _text(query, "query")
        sql = (
            f"WITH q AS (SELECT {TSQUERY_SQL.format(p='$3')} AS tsq) "
            "SELECT p.link_id, p.sku, p.title, p.price, p.currency, "
            "  (upper(p.sku) = upper($3)) AS exact, "
            "  CASE WHEN q.tsq IS NULL THEN 0 ELSE ts_rank(p.search_tsv, q.tsq) END AS score "
            "FROM products p, q WHERE p.scope = $1 AND p.room_id = $2 AND ("
            "  (q.tsq IS NOT NULL AND p.search_tsv @@ q.tsq) OR upper(p.sku) = upper($3) "
            "  OR p.title ILIKE '%' || $4 || '%') "
            "ORDER BY exact DESC, score DESC, p.link_id LIMIT $5")
        async with self._conn(conn) as c:
            rows = await c.fetch(sql, scope, room_id, query, _like_escape(query), limit)
        return {"query": query, "results": [
            {"link_id": r["link_id"], "sku": r["sku"], "title": r["title"], "price": catalog_number(r["price"]),
             "currency": r["currency"]} for r in rows]}

    async def inventory(self, room_id: str, link_id: int, *, scope: str = LIVE_SCOPE,
                        conn: asyncpg.Connection | None = None) -> dict[str, Any]:
        """Units left on a live link and whether it can be bought now."""
        link_id = _link(link_id)
        async with self._conn(conn) as c:
            row = await c.fetchrow(
                "SELECT p.link_id, p.sku, p.title, coalesce(i.stock, 0) AS stock FROM products p "
                "LEFT JOIN inventory i USING (scope, room_id, link_id) "
                "WHERE p.scope = $1 AND p.room_id = $2 AND p.link_id = $3", scope, room_id, link_id)
        if row is None:
            raise NotFound(f"no product on link {link_id} in this room")
        return {"link_id": row["link_id"], "sku": row["sku"], "title": row["title"],
                "stock": row["stock"], "available": row["stock"] > 0}

    async def coupon_list(self, room_id: str, link_id: int, *, scope: str = LIVE_SCOPE,
                          conn: asyncpg.Connection | None = None) -> dict[str, Any]:
        """Coupons valid for a link (its own and room-wide ones), with discount and minimum spend.

        ``issuable`` is false for a coupon above the room campaign's maximum discount."""
        link_id = _link(link_id)
        async with self._conn(conn) as c:
            exists = await c.fetchval(
                "SELECT true FROM products WHERE scope = $1 AND room_id = $2 AND link_id = $3",
                scope, room_id, link_id)
            if not exists:
                raise NotFound(f"no product on link {link_id} in this room")
            campaign = _json(await c.fetchval(
                "SELECT campaign FROM rooms WHERE scope = $1 AND room_id = $2", scope, room_id))
            rows = await c.fetch(
                "SELECT link_id, code, discount_pct, min_spend, per_user_limit FROM coupons "
                "WHERE scope = $1 AND room_id = $2 AND (link_id = $3 OR link_id IS NULL) "
                "ORDER BY discount_pct DESC, code", scope, room_id, link_id)
        cap = _campaign_cap(campaign)
        return {
            "link_id": link_id,
            "campaign_max_discount_pct": catalog_number(cap),
            "coupons": [
                {"code": r["code"], "discount_pct": catalog_number(r["discount_pct"]),
                 "min_spend": catalog_number(r["min_spend"]),
                 "per_user_limit": r["per_user_limit"], "link_id": r["link_id"],
                 "issuable": cap is None or r["discount_pct"] <= cap}
                for r in rows
            ],
        }

    async def coupon_issue(self, room_id: str, user_id: str, code: str, *, scope: str = LIVE_SCOPE,
                           conn: asyncpg.Connection | None = None,
                           idempotency_key: str | None = None) -> dict[str, Any]:
        """Grant a coupon to a viewer. Refuses (``permission_denied``) a coupon whose discount is above
        the room campaign's ``max_discount_pct``; refuses (``limit_reached``) past the per-user limit."""
        code = _text(code, "code")
        user_id = _text(user_id, "user_id")
        async with self._conn(conn) as c, c.transaction():
            rows = await c.fetch(
                "SELECT code, discount_pct, min_spend, per_user_limit FROM coupons "
                "WHERE scope = $1 AND room_id = $2 AND upper(code) = upper($3) "
                "ORDER BY link_id NULLS FIRST, coupon_id FOR UPDATE", scope, room_id, code)
            if not rows:
                raise NotFound(f"no coupon {code!r} in this room")
            coupon = rows[0]
            campaign = _json(await c.fetchval(
                "SELECT campaign FROM rooms WHERE scope = $1 AND room_id = $2", scope, room_id))
            cap = _campaign_cap(campaign)
            if cap is not None and coupon["discount_pct"] > cap:
                raise PermissionDenied(
                    f"coupon {coupon['code']} gives {catalog_number(coupon['discount_pct'])}% off, above the campaign "
                    f"maximum of {catalog_number(cap)}%: not allowed to issue it")
            used = await c.fetchval(
                "SELECT count(*) FROM coupon_grants WHERE scope = $1 AND room_id = $2 AND user_id = $3 "
                "AND code = $4", scope, room_id, user_id, coupon["code"])
            if used >= coupon["per_user_limit"]:
                raise LimitReached(
                    f"viewer already holds coupon {coupon['code']} (limit {coupon['per_user_limit']} per viewer)")
            try:
                granted_at = await c.fetchval(
                    "INSERT INTO coupon_grants (scope, room_id, user_id, code, grant_no, idempotency_key) "
                    "VALUES ($1, $2, $3, $4, $5, $6) RETURNING granted_at",
                    scope, room_id, user_id, coupon["code"], used + 1, idempotency_key)
            except asyncpg.UniqueViolationError:
                raise LimitReached(f"viewer already holds coupon {coupon['code']}") from None
        return {"code": coupon["code"], "user_id": user_id, "discount_pct": catalog_number(coupon["discount_pct"]),
                "min_spend": catalog_number(coupon["min_spend"]), "granted_at": granted_at.isoformat(),
                "grants_used": used + 1, "per_user_limit": coupon["per_user_limit"]}

    async def faq_search(self, room_id: str, query: str, link_id: int | None = None, *, limit: int = 3,
                         scope: str = LIVE_SCOPE, conn: asyncpg.Connection | None = None) -> dict[str, Any]:
        """FAQ entries of the room ranked by full-text match; with ``link_id``, that link's entries and
        the room-wide ones (link-specific first on equal rank)."""
        query = _text(query, "query")
        if link_id is not None:
            link_id = _link(link_id)
        sql = (
            f"WITH q AS (SELECT {TSQUERY_SQL.format(p='$3')} AS tsq) "
            "SELECT f.link_id, f.q, f.a, ts_rank(f.tsv, q.tsq) AS score FROM faq f, q "
            "WHERE f.scope = $1 AND f.room_id = $2 AND q.tsq IS NOT NULL AND f.tsv @@ q.tsq "
            "AND ($4::integer IS NULL OR f.link_id = $4 OR f.link_id IS NULL) "
            "ORDER BY score DESC, (f.link_id IS NULL), f.faq_id LIMIT $5")
        # Chinese has no spaces for the full-text parser: its shopping words also search by their English
        # sense ("幼猫能吃吗" finds "Can kittens eat it?")
        async with self._conn(conn) as c:
            rows = await c.fetch(sql, scope, room_id, gloss(query), link_id, limit)
        return {"query": query, "results": [
            {"q": r["q"], "a": r["a"], "link_id": r["link_id"], "score": round(float(r["score"]), 4)}
            for r in rows]}

    async def pin_product(self, room_id: str, link_id: int, *, scope: str = LIVE_SCOPE,
                          conn: asyncpg.Connection | None = None,
                          idempotency_key: str | None = None) -> dict[str, Any]:
        """Pin the product card of a link on the room's screen."""
        link_id = _link(link_id)
        async with self._conn(conn) as c, c.transaction():
            title = await c.fetchval(
                "SELECT title FROM products WHERE scope = $1 AND room_id = $2 AND link_id = $3",
                scope, room_id, link_id)
            if title is None:
                raise NotFound(f"no product on link {link_id} in this room")
            previous = await c.fetchval(
                "SELECT pinned_link FROM rooms WHERE scope = $1 AND room_id = $2 FOR UPDATE", scope, room_id)
            await c.execute(
                "UPDATE rooms SET pinned_link = $3, updated_at = now() WHERE scope = $1 AND room_id = $2",
                scope, room_id, link_id)
        return {"room_id": room_id, "pinned_link": link_id, "title": title, "previous_pinned_link": previous}

    async def order_status(self, room_id: str, user_id: str, order_id: str, *, scope: str = LIVE_SCOPE,
                           conn: asyncpg.Connection | None = None) -> dict[str, Any]:
        """Status, carrier and ETA of one of the viewer's orders (another viewer's order is not found)."""
        order_id = _text(order_id, "order_id").lstrip("#").strip()
        async with self._conn(conn) as c:
            row = await c.fetchrow(
                "SELECT order_id, user_id, status, carrier, eta, items FROM orders "
                "WHERE scope = $1 AND upper(order_id) = upper($2)", scope, order_id)
        if row is None or row["user_id"] != user_id:
            raise NotFound(f"no order {order_id} for this viewer")
        return {"order_id": row["order_id"], "status": row["status"], "carrier": row["carrier"],
                "eta": row["eta"].isoformat() if row["eta"] else None, "items": _json(row["items"])}

    # ------------------------------------------------------------------ room state

    async def room_state(self, room_id: str, *, scope: str = LIVE_SCOPE) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            "SELECT room_id, current_link, viewer_count, campaign, pinned_link FROM rooms "
            "WHERE scope = $1 AND room_id = $2", scope, room_id)
        if row is None:
            raise NotFound(f"no room {room_id!r}")
        return {"room_id": row["room_id"], "current_link": row["current_link"],
                "viewer_count": row["viewer_count"], "campaign": _json(row["campaign"]),
                "pinned_link": row["pinned_link"]}

    async def _upsert_room(self, room_id: str, column: str, value: Any, scope: str) -> dict[str, Any]:
        await self._pool.execute(
            f"INSERT INTO rooms (scope, room_id, {column}) VALUES ($1, $2, $3) "
            f"ON CONFLICT (scope, room_id) DO UPDATE SET {column} = EXCLUDED.{column}, updated_at = now()",
            scope, room_id, value)
        return await self.room_state(room_id, scope=scope)

    async def set_current_link(self, room_id: str, link_id: int | None, *,
                               scope: str = LIVE_SCOPE) -> dict[str, Any]:
        """Product switch: the link the host is presenting now (room created if new)."""
        return await self._upsert_room(room_id, "current_link", None if link_id is None else _link(link_id), scope)

    async def set_campaign(self, room_id: str, campaign: dict[str, Any] | None, *,
                           scope: str = LIVE_SCOPE) -> dict[str, Any]:
        """Campaign change: ``{name, rules, max_discount_pct}`` or None to end it."""
        return await self._upsert_room(room_id, "campaign", None if campaign is None else json.dumps(campaign),
                                       scope)

    async def set_viewer_count(self, room_id: str, viewer_count: int, *,
                               scope: str = LIVE_SCOPE) -> dict[str, Any]:
        return await self._upsert_room(room_id, "viewer_count", max(0, int(viewer_count)), scope)

    async def set_stock(self, room_id: str, link_id: int, stock: int, *, scope: str = LIVE_SCOPE) -> None:
        link_id = _link(link_id)
        status = await self._pool.execute(
            "UPDATE inventory SET stock = $4, updated_at = now() "
            "WHERE scope = $1 AND room_id = $2 AND link_id = $3", scope, room_id, link_id, max(0, int(stock)))
        if status.endswith(" 0"):
            raise NotFound(f"no product on link {link_id} in room {room_id!r}")

    async def list_products(self, room_id: str, *, scope: str = LIVE_SCOPE) -> list[dict[str, Any]]:
        """The room's whole catalog with stock (for prompt assembly and judges, not a tool)."""
        rows = await self._pool.fetch(
            "SELECT p.link_id, p.sku, p.title, p.price, p.currency, p.attributes, coalesce(i.stock, 0) AS stock "
            "FROM products p LEFT JOIN inventory i USING (scope, room_id, link_id) "
            "WHERE p.scope = $1 AND p.room_id = $2 ORDER BY p.link_id", scope, room_id)
        return [{"link_id": r["link_id"], "sku": r["sku"], "title": r["title"], "price": catalog_number(r["price"]),
                 "currency": r["currency"], "attributes": _json(r["attributes"]), "stock": r["stock"]}
                for r in rows]

    # ------------------------------------------------------------------ loading

    async def load_catalog(self, data: dict[str, Any], *, scope: str = LIVE_SCOPE) -> list[str]:
        """Load rooms (with their catalog, FAQ and coupons) and orders; returns the room ids.

        Format (the product entries are those of ``CASES.md``)::

            {"rooms": [{"room_id", "current_link", "viewer_count", "campaign", "pinned_link",
                        "catalog": [{"link_id", "sku", "title", "price", "currency", "stock",
                                     "attributes", "faq": [{"q", "a"}],
                                     "coupons": [{"code", "discount_pct", "min_spend", "per_user_limit"}]}],
                        "faq": [...room-wide...], "coupons": [...room-wide...]}],
             "orders": [{"order_id", "user_id", "room_id", "status", "carrier", "eta", "items"}]}

        A room's products, inventory, FAQ and coupons are replaced; coupon grants are kept."""
        rooms = data.get("rooms", [])
        if not isinstance(rooms, list):
            raise ValueError("catalog: 'rooms' must be a list")
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                for i, room in enumerate(rooms):
                    await _load_room(conn, scope, room, f"rooms[{i}]")
                for j, order in enumerate(data.get("orders", [])):
                    await _load_order(conn, scope, order, f"orders[{j}]")
        except asyncpg.IntegrityConstraintViolationError as exc:  # duplicate link, negative price, ...
            raise ValueError(f"catalog rejected: {exc}") from exc
        return [r["room_id"] for r in rooms]

    async def load_demo_catalog(self, path: Path | str = DEMO_CATALOG_PATH, *,
                                scope: str = LIVE_SCOPE) -> list[str]:
        """Load ``infra/seed/demo_catalog.json`` (or another file of that format)."""
        text = await asyncio.to_thread(Path(path).read_text, encoding="utf-8")
        return await self.load_catalog(json.loads(text), scope=scope)

    async def load_case(self, case: dict[str, Any]) -> str:
        """Sandbox: load one evaluation case's room and catalog (CASES.md) into a fresh scope and
        return it. Optional ``orders`` in the case are loaded too. Faults are not the store's
        business: see :meth:`livehost.commerce.faults.FaultInjector.from_case`."""
        room = case.get("room")
        if not isinstance(room, dict) or "room_id" not in room:
            raise ValueError(f"case {case.get('id')!r}: 'room' with a 'room_id' is required")
        scope = f"case:{case.get('id', 'anon')}:{uuid.uuid4().hex[:10]}"
        await self.load_catalog(
            {"rooms": [{**room, "catalog": case.get("catalog", [])}], "orders": case.get("orders", [])},
            scope=scope)
        return scope

    async def drop_scope(self, scope: str) -> None:
        """Delete every row of a sandbox scope (the live scope is refused)."""
        if scope == LIVE_SCOPE:
            raise ValueError("refusing to drop the live scope")
        async with self._pool.acquire() as conn, conn.transaction():
            for table in ("rooms", "coupon_grants", "orders", "tool_idempotency"):
                await conn.execute(f"DELETE FROM {table} WHERE scope = $1", scope)

    async def purge_idempotency(self, older_than_s: float) -> int:
        """Forget ledger entries older than ``older_than_s`` seconds (redeliveries come within minutes)."""
        status = await self._pool.execute(
            "DELETE FROM tool_idempotency WHERE created_at < now() - make_interval(secs => $1)",
            float(older_than_s))
        return int(status.split()[-1])


def _campaign_cap(campaign: Any) -> Decimal | None:
    if not isinstance(campaign, dict) or campaign.get("max_discount_pct") is None:
        return None
    return Decimal(str(campaign["max_discount_pct"]))


def _req(item: dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(item, dict) or key not in item or item[key] is None:
        raise ValueError(f"{where}: '{key}' is required")
    return item[key]


def _dec(value: Any) -> Decimal:
    return Decimal(str(value))


async def _load_room(conn: asyncpg.Connection, scope: str, room: dict[str, Any], where: str) -> None:
    room_id = str(_req(room, "room_id", where))
    campaign = room.get("campaign")
    await conn.execute(
        "INSERT INTO rooms (scope, room_id, current_link, viewer_count, campaign, pinned_link) "
        "VALUES ($1, $2, $3, $4, $5::jsonb, $6) ON CONFLICT (scope, room_id) DO UPDATE SET "
        "current_link = EXCLUDED.current_link, viewer_count = EXCLUDED.viewer_count, "
        "campaign = EXCLUDED.campaign, pinned_link = EXCLUDED.pinned_link, updated_at = now()",
        scope, room_id, room.get("current_link"), int(room.get("viewer_count") or 0),
        None if campaign is None else json.dumps(campaign), room.get("pinned_link"))
    for table in ("faq", "coupons", "products"):  # inventory cascades from products
        await conn.execute(f"DELETE FROM {table} WHERE scope = $1 AND room_id = $2", scope, room_id)
    products: list[tuple[Any, ...]] = []
    stock: list[tuple[Any, ...]] = []
    faq: list[tuple[Any, ...]] = []
    coupons: list[tuple[Any, ...]] = []
    for k, item in enumerate(room.get("catalog", [])):
        at = f"{where}.catalog[{k}]"
        link_id = int(_req(item, "link_id", at))
        products.append((scope, room_id, link_id, str(_req(item, "sku", at)), str(_req(item, "title", at)),
                         _dec(_req(item, "price", at)), item.get("currency") or "CNY",
                         json.dumps(item.get("attributes") or {})))
        stock.append((scope, room_id, link_id, max(0, int(item.get("stock") or 0))))
        faq += [(scope, room_id, link_id, _req(f, "q", at), _req(f, "a", at)) for f in item.get("faq") or []]
        coupons += [_coupon_row(scope, room_id, link_id, c, f"{at}.coupons") for c in item.get("coupons") or []]
    faq += [(scope, room_id, None, _req(f, "q", where), _req(f, "a", where)) for f in room.get("faq") or []]
    coupons += [_coupon_row(scope, room_id, None, c, f"{where}.coupons") for c in room.get("coupons") or []]
    await conn.executemany(
        "INSERT INTO products (scope, room_id, link_id, sku, title, price, currency, attributes) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)", products)
    await conn.executemany("INSERT INTO inventory (scope, room_id, link_id, stock) VALUES ($1, $2, $3, $4)",
                           stock)
    await conn.executemany("INSERT INTO faq (scope, room_id, link_id, q, a) VALUES ($1, $2, $3, $4, $5)", faq)
    await conn.executemany(
        "INSERT INTO coupons (scope, room_id, link_id, code, discount_pct, min_spend, per_user_limit) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING", coupons)


def _coupon_row(scope: str, room_id: str, link_id: int | None, c: dict[str, Any],
                where: str) -> tuple[Any, ...]:
    return (scope, room_id, link_id, str(_req(c, "code", where)), _dec(_req(c, "discount_pct", where)),
            _dec(c.get("min_spend") or 0), int(c.get("per_user_limit") or 1))


async def _load_order(conn: asyncpg.Connection, scope: str, order: dict[str, Any], where: str) -> None:
    eta = order.get("eta")
    await conn.execute(
        "INSERT INTO orders (scope, order_id, user_id, room_id, status, carrier, eta, items) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb) ON CONFLICT (scope, order_id) DO UPDATE SET "
        "user_id = EXCLUDED.user_id, room_id = EXCLUDED.room_id, status = EXCLUDED.status, "
        "carrier = EXCLUDED.carrier, eta = EXCLUDED.eta, items = EXCLUDED.items, updated_at = now()",
        scope, str(_req(order, "order_id", where)), str(_req(order, "user_id", where)), order.get("room_id"),
        str(_req(order, "status", where)), order.get("carrier"),
        date.fromisoformat(eta) if isinstance(eta, str) else eta, json.dumps(order.get("items") or []))
