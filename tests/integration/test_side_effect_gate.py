"""The side-effect gate (hook kind side_effect_gate) against a real PostgreSQL: the tools service's
executor refuses coupons without a campaign cap, outside the allowlist, or past the viewer / room /
per-minute budgets — in the side effect's own transaction — and the hooks' step check says the same
from the request alone. Tools are found by the backend operation they bind, never by name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from livehost.commerce.executor import ToolContext, ToolExecutor
from livehost.commerce.store import CommerceStore
from livehost.db import connect_pool, migrate
from livehost.harness.loader import from_dict, load
from livehost.harness.model import Harness, Tool
from livehost.hooks.gate import KIND, policy_for
from livehost.hooks.step import check_action
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration

SHIPPED = load(Path(__file__).resolve().parents[2] / "harness" / "default")


def with_gate(**params: Any) -> Harness:
    data = SHIPPED.canonical()
    for hook in data["hooks"]:
        if hook["kind"] == KIND:
            hook["params"] = params
    return from_dict(data)


def tool_for(harness: Harness, operation: str) -> Tool:
    return next(t for t in harness.tools if t.binding.operation == operation)


def coupon_args(harness: Harness, code: str) -> dict[str, Any]:
    tool = tool_for(harness, "coupon.issue")
    return {tool.binding.arguments.get("code", "code"): code}


@pytest.fixture
async def pool(pg_server: str) -> AsyncIterator[asyncpg.Pool]:
    p = await connect_pool(await create_database(pg_server), attempts=5)
    await migrate(p)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
async def store(pool: asyncpg.Pool) -> CommerceStore:
    s = CommerceStore(pool)
    await s.load_demo_catalog(scope="gate")
    return s


async def issue(executor: ToolExecutor, harness: Harness, code: str, user: str, request: str,
                room: str = "room-a") -> Any:
    tool = tool_for(harness, "coupon.issue")
    return await executor.execute(harness, tool.name, coupon_args(harness, code),
                                  ToolContext(room_id=room, user_id=user, request_id=request, scope="gate"))


async def test_shipped_harness_has_a_gate() -> None:
    policy = policy_for(SHIPPED, "room-a")
    assert policy is not None and policy.require_campaign_cap and policy.has_budgets


async def test_no_coupon_without_a_campaign_cap(store: CommerceStore) -> None:
    harness = with_gate(require_campaign_cap=True)
    executor = ToolExecutor(store)
    await store.set_campaign("room-a", {"name": "no cap"}, scope="gate")
    out = await issue(executor, harness, "TRAIL10", "u-1", "r-1")
    assert not out.ok and out.error_code == "permission_denied" and "campaign cap" in (out.error_message or "")
    await store.set_campaign("room-a", None, scope="gate")
    out = await issue(executor, harness, "TRAIL10", "u-1", "r-2")
    assert not out.ok and "campaign cap" in (out.error_message or "")
    await store.set_campaign("room-a", {"name": "capped", "max_discount_pct": 20}, scope="gate")
    out = await issue(executor, harness, "TRAIL10", "u-1", "r-3")
    assert out.ok, out
    # nothing was granted by the refused calls
    grants = await store._pool.fetchval("SELECT count(*) FROM coupon_grants WHERE scope = 'gate'")
    assert grants == 1


async def test_coupon_allowlist_and_allowed_tools(store: CommerceStore) -> None:
    executor = ToolExecutor(store)
    harness = with_gate(coupon_allowlist=["FLEECE15"])
    out = await issue(executor, harness, "TRAIL10", "u-1", "r-1")
    assert not out.ok and "allowlist" in (out.error_message or "")
    assert (await issue(executor, harness, "fleece15", "u-1", "r-2")).ok
    pin = tool_for(SHIPPED, "room.pin_product")
    harness = with_gate(allowed_tools=[pin.name], rooms={"room-b": {"allowed_tools": []}})
    out = await issue(executor, harness, "TRAIL10", "u-2", "r-3")
    assert not out.ok and "may not cause side effects" in (out.error_message or "")
    link = pin.binding.arguments.get("link_id", "link_id")
    ok = await executor.execute(harness, pin.name, {link: 2},
                                ToolContext(room_id="room-a", user_id="u-2", request_id="r-4", scope="gate"))
    assert ok.ok, ok
    denied = await executor.execute(harness, pin.name, {link: 2},
                                    ToolContext(room_id="room-b", user_id="u-2", request_id="r-5", scope="gate"))
    assert not denied.ok and denied.error_code == "permission_denied"  # room-b's policy allows no tool


async def test_budgets_per_viewer_room_and_minute(store: CommerceStore) -> None:
    executor = ToolExecutor(store)
    pin = tool_for(SHIPPED, "room.pin_product")
    link = pin.binding.arguments.get("link_id", "link_id")

    async def pin_for(user: str, request: str, room: str = "room-a", harness: Harness | None = None) -> Any:
        return await executor.execute(harness or budgets, pin.name, {link: 1},
                                      ToolContext(room_id=room, user_id=user, request_id=request, scope="gate"))

    budgets = with_gate(max_per_viewer=2, max_per_room=4)
    assert (await pin_for("u-1", "a")).ok and (await pin_for("u-1", "b")).ok
    out = await pin_for("u-1", "c")
    assert not out.ok and "viewer budget" in (out.error_message or "")
    # a redelivery of an allowed call replays its result and is not counted again
    again = await pin_for("u-1", "a")
    assert again.ok and again.replayed
    assert (await pin_for("u-2", "d")).ok and (await pin_for("u-3", "e")).ok
    out = await pin_for("u-4", "f")
    assert not out.ok and "room budget" in (out.error_message or "")
    assert (await pin_for("u-4", "f", room="room-b")).ok  # budgets are per room
    per_minute = with_gate(max_per_minute=1)
    out = await pin_for("u-5", "g", room="room-b", harness=per_minute)
    assert not out.ok and "last minute" in (out.error_message or "")


def test_step_hook_refuses_what_the_request_shows() -> None:
    harness = with_gate(coupon_allowlist=["FLEECE15"], require_campaign_cap=True)
    tool = tool_for(harness, "coupon.issue")
    state = {"room_id": "room-a", "room_json": '{"campaign": {"max_discount_pct": 20}}', "steps": [],
             "loaded_skills": [], "comments": []}

    def verdicts(code: str, room_json: str) -> list[str]:
        action = {"kind": "call_tool", "tool": tool.name, "arguments": coupon_args(harness, code)}
        return [v.verdict for v in check_action(harness, {**state, "room_json": room_json}, action)
                if v.kind == KIND]

    assert verdicts("FLEECE15", state["room_json"]) == ["pass"]
    assert verdicts("TRAIL10", state["room_json"]) == ["correct"]
    assert verdicts("FLEECE15", '{"campaign": null}') == ["correct"]
