"""Commerce backend + tool executor against a real PostgreSQL.

Tools are found by the backend operation their binding names, never by their harness name."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from livehost.commerce.executor import ToolContext, ToolExecutor
from livehost.commerce.faults import FaultInjector
from livehost.commerce.operations import OPERATIONS
from livehost.commerce.store import LIVE_SCOPE, CommerceStore
from livehost.db import connect_pool, migrate
from livehost.harness.loader import from_dict, load
from livehost.harness.model import Harness, Tool
from livehost.stack.testing import running_postgres

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CASES = [json.loads(line) for line in (REPO / "tests" / "data" / "sample_cases.jsonl").read_text().splitlines()
         if line.strip()]


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_postgres(tmp_path_factory.mktemp("commerce_pg")) as url:
        yield url


@pytest.fixture(scope="module")
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await connect_pool(dsn, attempts=5, max_size=20)
    await migrate(pool)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture(scope="module")
def harness() -> Harness:
    return load(REPO / "harness" / "default")


@pytest.fixture
async def store(pool: asyncpg.Pool) -> AsyncIterator[CommerceStore]:
    """A store with the demo catalog loaded into a fresh sandbox scope (tests never share state)."""
    s = CommerceStore(pool)
    yield s


@pytest.fixture
async def demo(store: CommerceStore, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    scope = f"test:{request.node.name}"
    await store.drop_scope(scope)
    await store.load_demo_catalog(scope=scope)
    yield scope
    await store.drop_scope(scope)


def tool_for(harness: Harness, operation: str) -> Tool:
    return next(t for t in harness.tools if t.binding.operation == operation)


def arg(tool: Tool, param: str) -> str:
    """The tool argument that feeds an operation parameter."""
    return tool.binding.arguments.get(param, param)


def ctx(scope: str, room: str = "room-a", user: str | None = "u-17", request: str = "req-1",
        key: str | None = None) -> ToolContext:
    return ToolContext(room_id=room, user_id=user, request_id=request, idempotency_key=key, scope=scope)


async def call(ex: ToolExecutor, harness: Harness, operation: str, c: ToolContext, **params: Any) -> Any:
    tool = tool_for(harness, operation)
    return await ex.execute(harness, tool.name, {arg(tool, k): v for k, v in params.items()}, c)


async def grants(pool: asyncpg.Pool, scope: str, user: str | None = None) -> int:
    if user is None:
        return int(await pool.fetchval("SELECT count(*) FROM coupon_grants WHERE scope = $1", scope))
    return int(await pool.fetchval(
        "SELECT count(*) FROM coupon_grants WHERE scope = $1 AND user_id = $2", scope, user))


# ----------------------------------------------------------------------------- schema


async def test_migrations_idempotent(pool: asyncpg.Pool) -> None:
    assert await migrate(pool) == []
    tables = {r["tablename"] for r in await pool.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
    assert {"rooms", "products", "inventory", "faq", "coupons", "coupon_grants", "orders",
            "tool_idempotency"} <= tables
    gin = await pool.fetch("SELECT indexname FROM pg_indexes WHERE indexdef ILIKE '%USING gin%'")
    assert {"faq_tsv_idx", "products_search_idx"} <= {r["indexname"] for r in gin}


# ----------------------------------------------------------------------------- store operations


async def test_product_by_link_has_no_stock(store: CommerceStore, demo: str) -> None:
    p = await store.product_by_link("room-a", 3, scope=demo)
    assert p == {"link_id": 3, "sku": "JKT-3001", "title": "Alpine shell jacket", "price": 299, "currency": "CNY",
                 "attributes": {"waterproof_mm": 10000, "colors": ["black", "navy", "red"],
                                "sizes": ["S", "M", "L", "XL", "XXL"], "hood": "adjustable"}}
    assert "stock" not in p


async def test_inventory_and_sold_out(store: CommerceStore, demo: str) -> None:
    assert (await store.inventory("room-a", 3, scope=demo))["stock"] == 12
    mug = await store.inventory("room-b", 1, scope=demo)
    assert mug["stock"] == 0 and mug["available"] is False
    await store.set_stock("room-b", 1, 5, scope=demo)
    assert (await store.inventory("room-b", 1, scope=demo))["available"] is True


async def test_coupon_list_marks_coupons_above_campaign_max(store: CommerceStore, demo: str) -> None:
    res = await store.coupon_list("room-a", 3, scope=demo)
    codes = {c["code"]: c for c in res["coupons"]}
    assert set(codes) == {"WINTER20", "VIP35"}  # link coupon + room-wide coupon
    assert codes["WINTER20"] == {"code": "WINTER20", "discount_pct": 10, "min_spend": 199, "per_user_limit": 1,
                                 "link_id": 3, "issuable": True}
    assert codes["VIP35"]["issuable"] is False and res["campaign_max_discount_pct"] == 20


async def test_product_search_keywords_and_sku(store: CommerceStore, demo: str) -> None:
    res = await store.product_search("room-a", "waterproof boots for hiking", scope=demo)
    assert res["results"][0]["link_id"] == 2
    by_sku = await store.product_search("room-a", "glv-4004", scope=demo)
    assert [r["link_id"] for r in by_sku["results"]][:1] == [4]
    assert (await store.product_search("room-b", "jacket", scope=demo))["results"] == []


async def test_faq_search_link_and_room_wide(store: CommerceStore, demo: str) -> None:
    res = await store.faq_search("room-a", "does this run small?", 3, scope=demo)
    assert res["results"][0]["a"] == "True to size; size up for layering."
    ship = await store.faq_search("room-a", "how long does shipping take", 3, scope=demo)
    assert ship["results"][0]["link_id"] is None and "48 hours" in ship["results"][0]["a"]
    # link filter: boots' sizing entry is not returned for link 3
    assert all(r["link_id"] in (3, None) for r in res["results"])
    assert (await store.faq_search("room-a", "the and of", scope=demo))["results"] == []
    # a Chinese question finds the English entry through its shopping words' English sense
    zh = await store.faq_search("room-a", "几天发货？", 3, scope=demo)
    assert zh["query"] == "几天发货？" and zh["results"] and "48 hours" in zh["results"][0]["a"]


async def test_order_status_only_for_its_viewer(store: CommerceStore, demo: str) -> None:
    o = await store.order_status("room-a", "u-17", "#LH20251128001", scope=demo)
    assert o["status"] == "shipped" and o["carrier"] == "SF Express" and o["eta"] == "2025-12-02"
    from livehost.commerce.errors import NotFound

    with pytest.raises(NotFound):
        await store.order_status("room-a", "u-99", "LH20251128001", scope=demo)


async def test_room_state_switch_campaign_pin(store: CommerceStore, demo: str) -> None:
    st = await store.room_state("room-a", scope=demo)
    assert st["current_link"] == 3 and st["campaign"]["max_discount_pct"] == 20 and st["pinned_link"] is None
    await store.set_current_link("room-a", 2, scope=demo)
    await store.set_campaign("room-a", {"name": "Flash", "rules": [], "max_discount_pct": 40}, scope=demo)
    pinned = await store.pin_product("room-a", 2, scope=demo)
    assert pinned["title"] == "Waterproof hiking boots" and pinned["previous_pinned_link"] is None
    st = await store.room_state("room-a", scope=demo)
    assert (st["current_link"], st["pinned_link"], st["campaign"]["max_discount_pct"]) == (2, 2, 40)
    assert await store.pool.fetchval(  # the live scope is untouched
        "SELECT count(*) FROM rooms WHERE scope = $1 AND pinned_link = 2 AND current_link = 2", LIVE_SCOPE) == 0


# ----------------------------------------------------------------------------- executor


async def test_each_tool_through_the_harness(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    c = ctx(demo)
    out = await call(ex, harness, "product.by_link", c, link_id=3)
    assert out.ok and out.result["price"] == 299 and out.operation == "product.by_link" and out.duration_ms > 0
    out = await call(ex, harness, "inventory.get", ctx(demo, room="room-b"), link_id=1)
    assert out.ok and out.result["available"] is False
    out = await call(ex, harness, "coupon.list", c, link_id=3)
    assert out.ok and {x["code"] for x in out.result["coupons"]} == {"WINTER20", "VIP35"}
    out = await call(ex, harness, "faq.search", c, query="is it waterproof in heavy rain", link_id=3)
    assert out.ok and "10000 mm" in out.result["results"][0]["a"]
    out = await call(ex, harness, "faq.search", c, query="return policy")  # optional link omitted
    assert out.ok and out.result["results"][0]["link_id"] is None
    out = await call(ex, harness, "product.search", c, query="daypack")
    assert out.ok and out.result["results"][0]["link_id"] == 5
    out = await call(ex, harness, "order.status", c, order_id="LH20251128001")
    assert out.ok and out.result["status"] == "shipped"
    out = await call(ex, harness, "order.status", ctx(demo, user="u-5"), order_id="LH20251128001")
    assert (out.ok, out.error_code) == (False, "not_found")
    out = await call(ex, harness, "room.pin_product", c, link_id=5)
    assert out.ok and out.result["pinned_link"] == 5 and out.replayed is False
    assert (await store.room_state("room-a", scope=demo))["pinned_link"] == 5
    out = await call(ex, harness, "product.by_link", c, link_id=42)
    assert (out.ok, out.error_code) == (False, "not_found") and out.observation()["error"]["code"] == "not_found"


async def test_unknown_tool_lists_available(store: CommerceStore, demo: str, harness: Harness) -> None:
    out = await ToolExecutor(store).execute(harness, "no_such_tool", {}, ctx(demo))
    assert out.error_code == "unknown_tool"
    assert all(t.name in (out.error_message or "") for t in harness.tools)


async def test_invalid_arguments(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    tool = tool_for(harness, "product.by_link")
    link = arg(tool, "link_id")
    for bad, expect in (({}, f"'{link}' is a required property"),
                        ({link: "three"}, f"{link}: 'three' is not of type 'integer'"),
                        ({link: 0}, f"{link}: 0 is less than the minimum of 1"),
                        ({link: 3, "price": 1}, "Additional properties are not allowed")):
        out = await ex.execute(harness, tool.name, bad, ctx(demo))
        assert out.error_code == "invalid_arguments", bad
        assert expect in (out.error_message or ""), out.error_message
        assert tool.name in (out.error_message or "")


def _with_timeouts(harness: Harness, ms: int) -> Harness:
    return harness.model_copy(update={"tools": [t.model_copy(update={"timeout_ms": ms}) for t in harness.tools]})


@pytest.mark.parametrize("capability,operation,params", [
    ("product", "product.by_link", {"link_id": 3}),
    ("inventory", "inventory.get", {"link_id": 3}),
    ("coupon", "coupon.list", {"link_id": 3}),
    ("coupon", "coupon.issue", {"code": "WINTER20"}),
    ("faq", "faq.search", {"query": "returns"}),
    ("order", "order.status", {"order_id": "LH20251128001"}),
])
@pytest.mark.parametrize("fault", ["timeout", "malformed", "permission_denied"])
async def test_faults_are_structured_errors(store: CommerceStore, demo: str, harness: Harness, fault: str,
                                            capability: str, operation: str, params: dict[str, Any]) -> None:
    fast = _with_timeouts(harness, 150)
    ex = ToolExecutor(store, FaultInjector({capability: fault}))
    out = await call(ex, fast, operation, ctx(demo), **params)
    assert not out.ok and out.error_code == fault and out.fault == fault and out.result is None
    assert out.error_message
    if fault == "timeout":
        assert out.duration_ms >= 150 and "150 ms" in (out.error_message or "")
    assert await grants(store.pool, demo) == 0  # a faulted coupon call issued nothing
    # other capabilities are unaffected (with the harness's own timeouts: this checks the fault's scope,
    # not how fast an unfaulted query answers on a busy machine — 244 ms against 150 ms once)
    other = "faq.search" if capability != "faq" else "product.by_link"
    args: dict[str, Any] = {"query": "returns"} if other == "faq.search" else {"link_id": 3}
    ok = await call(ex, harness, other, ctx(demo), **args)
    assert ok.ok and ok.fault is None


async def test_real_timeout_of_slow_backend(store: CommerceStore, demo: str, harness: Harness) -> None:
    """A backend slower than the tool's timeout (a held row lock) times out, without a side effect."""
    fast = _with_timeouts(harness, 200)
    ex = ToolExecutor(store)
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT * FROM coupons WHERE scope = $1 FOR UPDATE", demo)
        out = await call(ex, fast, "coupon.issue", ctx(demo, key="slow-1"), code="WINTER20")
    assert out.error_code == "timeout"
    await asyncio.sleep(0.05)
    assert await grants(store.pool, demo) == 0
    again = await call(ex, fast, "coupon.issue", ctx(demo, key="slow-1"), code="WINTER20")
    assert again.ok and not again.replayed and await grants(store.pool, demo) == 1


# ----------------------------------------------------------------------------- exactly once


async def test_duplicate_delivery_issues_one_coupon(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    first = await call(ex, harness, "coupon.issue", ctx(demo, key="k-1"), code="WINTER20")
    second = await call(ex, harness, "coupon.issue", ctx(demo, key="k-1"), code="WINTER20")
    assert first.ok and second.ok and not first.replayed and second.replayed
    assert first.result == second.result and first.result["code"] == "WINTER20"
    assert await grants(store.pool, demo) == 1


async def test_concurrent_duplicates_issue_one_coupon(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    outs = await asyncio.gather(*(call(ex, harness, "coupon.issue", ctx(demo, key="k-conc"), code="WINTER20")
                                  for _ in range(10)))
    assert all(o.ok for o in outs), [o.error_message for o in outs]
    assert sum(not o.replayed for o in outs) == 1
    assert len({json.dumps(o.result, sort_keys=True) for o in outs}) == 1
    assert await grants(store.pool, demo) == 1
    ledger = await store.pool.fetchval("SELECT count(*) FROM tool_idempotency WHERE scope = $1", demo)
    assert ledger == 1


async def test_derived_key_when_none_given(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    outs = await asyncio.gather(*(call(ex, harness, "coupon.issue", ctx(demo, request="req-7"), code="TRAIL10")
                                  for _ in range(4)))
    assert all(o.ok for o in outs) and sum(o.replayed for o in outs) == 3
    assert len({o.idempotency_key for o in outs}) == 1 and outs[0].idempotency_key.startswith("derived:")
    # a new request is a new call: TRAIL10 allows 2 per viewer
    again = await call(ex, harness, "coupon.issue", ctx(demo, request="req-8"), code="TRAIL10")
    assert again.ok and not again.replayed and again.result["grants_used"] == 2
    assert await grants(store.pool, demo) == 2


async def test_duplicate_pin_replays(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    a = await call(ex, harness, "room.pin_product", ctx(demo, key="pin-1"), link_id=1)
    await store.pool.execute("UPDATE rooms SET pinned_link = 4 WHERE scope = $1 AND room_id = 'room-a'", demo)
    b = await call(ex, harness, "room.pin_product", ctx(demo, key="pin-1"), link_id=1)
    assert b.replayed and b.result == a.result
    assert (await store.room_state("room-a", scope=demo))["pinned_link"] == 4  # not pinned twice


async def test_coupon_above_campaign_max_refused(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    out = await call(ex, harness, "coupon.issue", ctx(demo, key="vip-1"), code="VIP35")
    assert out.error_code == "permission_denied" and "20" in (out.error_message or "")
    assert await grants(store.pool, demo) == 0
    assert await store.pool.fetchval("SELECT count(*) FROM tool_idempotency WHERE scope = $1", demo) == 0
    # at the cap is fine (PACK20 is exactly 20%); a refusal is not stored, so raising the cap lets a retry pass
    assert (await call(ex, harness, "coupon.issue", ctx(demo, key="p-1"), code="PACK20")).ok
    await store.set_campaign("room-a", {"name": "VIP night", "rules": [], "max_discount_pct": 40}, scope=demo)
    retry = await call(ex, harness, "coupon.issue", ctx(demo, key="vip-1"), code="vip35")
    assert retry.ok and retry.result["code"] == "VIP35" and not retry.replayed


async def test_per_user_limit(store: CommerceStore, demo: str, harness: Harness) -> None:
    ex = ToolExecutor(store)
    results = [await call(ex, harness, "coupon.issue", ctx(demo, key=f"t-{i}"), code="TRAIL10") for i in range(3)]
    assert [r.ok for r in results] == [True, True, False]
    assert results[2].error_code == "limit_reached"
    assert (await call(ex, harness, "coupon.issue", ctx(demo, user="u-2", key="t-x"), code="TRAIL10")).ok
    # concurrent distinct keys for one viewer still respect the limit
    outs = await asyncio.gather(*(call(ex, harness, "coupon.issue", ctx(demo, user="u-3", key=f"c-{i}"),
                                       code="FLEECE15") for i in range(6)))
    assert sum(o.ok for o in outs) == 1 and {o.error_code for o in outs if not o.ok} == {"limit_reached"}
    assert await grants(store.pool, demo, "u-17") == 2 and await grants(store.pool, demo, "u-3") == 1
    unknown = await call(ex, harness, "coupon.issue", ctx(demo, key="u-1"), code="NOPE")
    assert unknown.error_code == "not_found"


async def test_coupon_issue_needs_a_viewer(store: CommerceStore, demo: str, harness: Harness) -> None:
    out = await call(ToolExecutor(store), harness, "coupon.issue", ctx(demo, user=None), code="WINTER20")
    assert out.error_code == "invalid_arguments"


# ----------------------------------------------------------------------------- sandbox


async def test_sandbox_loads_each_case_isolated(store: CommerceStore, harness: Harness) -> None:
    scopes = {case["id"]: await store.load_case(case) for case in CASES}
    try:
        assert len(set(scopes.values())) == len(CASES)
        for case in CASES:
            scope, room = scopes[case["id"]], case["room"]
            st = await store.room_state(room["room_id"], scope=scope)
            assert st["current_link"] == room["current_link"] and st["campaign"] == room.get("campaign")
            products = await store.list_products(room["room_id"], scope=scope)
            assert [(p["link_id"], p["price"], p["stock"]) for p in products] == [
                (p["link_id"], p["price"], p["stock"]) for p in case["catalog"]]
            for p in case["catalog"]:
                listed = await store.coupon_list(room["room_id"], p["link_id"], scope=scope)
                codes = {c["code"] for c in listed["coupons"]}
                assert codes == {c["code"] for c in p.get("coupons", [])}, case["id"]
        # same room id and link in two cases, different data: no leaking
        attr, price = scopes["sample-attr-01"], scopes["sample-price-01"]
        assert (await store.coupon_list("room-a", 3, scope=attr))["coupons"] == []
        assert [c["code"] for c in (await store.coupon_list("room-a", 3, scope=price))["coupons"]] == ["WINTER20"]
        ex = ToolExecutor(store)
        issued = await call(ex, harness, "coupon.issue", ctx(price, user="u-17"), code="WINTER20")
        assert issued.ok
        other = await call(ex, harness, "coupon.issue", ctx(scopes["sample-merge-01"], user="u-17"), code="WINTER20")
        assert other.ok and not other.replayed  # grants and ledger are per scope too
    finally:
        for scope in scopes.values():
            await store.drop_scope(scope)
    for scope in scopes.values():
        assert await store.pool.fetchval("SELECT count(*) FROM products WHERE scope = $1", scope) == 0


async def test_sandbox_case_faults(store: CommerceStore, harness: Harness) -> None:
    case = next(c for c in CASES if c.get("faults"))
    scope = await store.load_case(case)
    try:
        faults = FaultInjector.from_case(case)
        ex = ToolExecutor(store, faults)
        c = ctx(scope, room=case["room"]["room_id"], user=case["comments"][0]["user_id"])
        link = case["room"]["current_link"]
        for capability, kind in case["faults"].items():
            op = next(o for o in OPERATIONS.values() if o.capability == capability and "link_id" in o.params)
            out = await call(ex, _with_timeouts(harness, 100), op.name, c, link_id=link)
            assert out.error_code == kind and out.result is None
        ok = await call(ex, harness, "product.by_link", c, link_id=link)
        assert ok.ok
    finally:
        await store.drop_scope(scope)


async def test_bad_catalog_is_rejected_whole(store: CommerceStore) -> None:
    case = {**CASES[0], "id": "dup"}
    case["catalog"] = [*case["catalog"], case["catalog"][0]]  # the same link twice
    with pytest.raises(ValueError, match="catalog rejected"):
        await store.load_case(case)
    with pytest.raises(ValueError, match="'price' is required"):
        await store.load_case({**CASES[0], "catalog": [{"link_id": 1, "sku": "X", "title": "Y"}]})
    assert await store.pool.fetchval("SELECT count(*) FROM rooms WHERE scope LIKE 'case:dup:%'") == 0


# ----------------------------------------------------------------------------- harness variants


def renamed(harness: Harness) -> Harness:
    """Every tool and every tool argument renamed; bindings and skill tool lists updated."""
    data = harness.canonical()
    names: dict[str, str] = {}
    for i, tool in enumerate(data["tools"]):
        new = f"t{i}_{tool['name'][::-1]}"
        names[tool["name"]] = new
        tool["name"] = new
        props = tool["parameters"].get("properties", {})
        tool["parameters"]["properties"] = {f"x_{k}": v for k, v in props.items()}
        tool["parameters"]["required"] = [f"x_{k}" for k in tool["parameters"].get("required", [])]
        tool["binding"]["arguments"] = {p: f"x_{a}" for p, a in tool["binding"]["arguments"].items()}
        tool["description"] = "Rewritten: " + tool["description"]
    for skill in data["skills"]:
        skill["tools"] = [names[t] for t in skill["tools"]]
    return from_dict(data)


async def test_renamed_tools_and_arguments_still_work(store: CommerceStore, demo: str, harness: Harness) -> None:
    variant = renamed(harness)
    assert not {t.name for t in variant.tools} & {t.name for t in harness.tools}
    ex = ToolExecutor(store)
    out = await call(ex, variant, "product.by_link", ctx(demo), link_id=3)
    assert out.ok and out.result["sku"] == "JKT-3001" and out.tool == tool_for(variant, "product.by_link").name
    out = await call(ex, variant, "faq.search", ctx(demo), query="run small", link_id=3)
    assert out.ok and out.result["results"]
    issue = tool_for(variant, "coupon.issue")
    a = await ex.execute(variant, issue.name, {arg(issue, "code"): "WINTER20"}, ctx(demo, key="r-1"))
    b = await ex.execute(variant, issue.name, {arg(issue, "code"): "WINTER20"}, ctx(demo, key="r-1"))
    assert a.ok and b.replayed and await grants(store.pool, demo) == 1
    # the old argument name is now invalid, the old tool name unknown
    bad = await ex.execute(variant, tool_for(variant, "inventory.get").name, {"link_id": 3}, ctx(demo))
    assert bad.error_code == "invalid_arguments"
    old = await ex.execute(variant, tool_for(harness, "inventory.get").name, {"link_id": 3}, ctx(demo))
    assert old.error_code == "unknown_tool"
