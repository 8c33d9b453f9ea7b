"""The catalog scope on the request path (no database): the scope travels in the room state,
prompt assembly and tools use it, and a scope's faults apply only to that scope."""

from __future__ import annotations

import json
from typing import Any

import pytest

from livehost.agent import state as st
from livehost.agent.sandbox import MemoryFaults
from livehost.commerce.executor import ToolExecutor
from livehost.config import REPO_ROOT
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.runner.expect import check
from services.prompt.handlers import FourReads, PromptHandler
from services.tools.handlers import ToolsHandler

HARNESS = load(REPO_ROOT / "harness" / "default")
PRODUCT = {"link_id": 3, "sku": "JKT", "title": "Jacket", "price": 299, "currency": "CNY", "attributes": {}}


def state(**room: Any) -> dict[str, Any]:
    return st.new_state(room_id="room-a", harness_version=HARNESS.version(),
                        comments=[{"event_id": "e1", "user_id": "u-1", "text": "how much?", "ts_ms": 1}],
                        room={"room_id": "room-a", "current_link": 3, **room}, ttl_ms=10_000, time_budget_ms=8_000)


class Store:
    def __init__(self) -> None:
        self.scopes: list[str] = []

    async def invoke(self, operation: str, params: dict[str, Any], *, scope: str = "live", conn: Any = None,
                     idempotency_key: str | None = None) -> Any:
        self.scopes.append(scope)
        return {**PRODUCT, "link_id": params["link_id"]}

    async def run_once(self, *a: Any, **kw: Any) -> Any:
        raise AssertionError("no side effects here")


class Facts(FourReads):
    def __init__(self) -> None:
        self.scopes: list[str] = []

    async def product(self, room_id: str, link_id: int, *, scope: str = "live") -> dict[str, Any] | None:
        self.scopes.append(scope)
        return PRODUCT

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int, *,
                  scope: str = "live") -> list[dict[str, Any]]:
        self.scopes.append(scope)
        return []

    async def memory(self, room_id: str, limit: int, *, scope: str = "live") -> list[str]:
        self.scopes.append(scope)
        return []


def test_scope_and_policy_come_from_the_request() -> None:
    assert st.scope(state()) == "live"
    assert st.scope(state(scope="case:x:1")) == "case:x:1"
    s = {**state(), "policy": "react:policy_llm"}
    assert st.is_react(s) and st.policy_model(s) == "policy_llm"
    assert st.policy_model({**s, "policy": ""}) is None and not st.is_react({**s, "policy": "policy_llm"})


async def test_prompt_assembly_reads_facts_in_the_request_scope() -> None:
    facts = Facts()
    handler = PromptHandler(StaticHarnessProvider(HARNESS), facts)
    await handler.next_prompt(state(scope="case:x:1"))
    assert set(facts.scopes) == {"case:x:1"}


async def test_tools_run_in_the_request_scope_with_that_scope_s_faults() -> None:
    store, faults = Store(), MemoryFaults()
    await faults.set("case:faulty:1", {"product": "permission_denied"})
    handler = ToolsHandler(StaticHarnessProvider(HARNESS), ToolExecutor(store), faults)
    tool = next(t for t in HARNESS.tools if t.binding.operation == "product.by_link")

    async def call(scope: str | None) -> dict[str, Any]:
        s = state(scope=scope) if scope else state()
        return await handler.on_call({"state": s, "call_id": "c1", "tool": tool.name,
                                      "arguments_json": json.dumps({"link_id": 3}), "idempotency_key": None})

    faulty = await call("case:faulty:1")
    assert not faulty["ok"] and faulty["error_code"] == "permission_denied"
    clean, live = await call("case:clean:1"), await call(None)
    assert clean["ok"] and live["ok"] and store.scopes == ["case:clean:1", "live"]
    with pytest.raises(ValueError):
        await faults.set("live", {"product": "timeout"})
    with pytest.raises(ValueError):
        await faults.set("case:x", {"warehouse": "timeout"})


CASE = {"id": "c", "room": {"room_id": "r", "current_link": 3, "campaign": {"max_discount_pct": 20}},
        "catalog": [{"link_id": 3, "price": 299.0, "stock": 12, "coupons": [{"code": "WINTER20", "discount_pct": 10}]}],
        "expect": {"respond": True, "must_include": [["299"], ["WINTER20", "coupon"]],
                   "must_not_include": ["free gift"], "numbers_from_catalog_only": True}}


@pytest.mark.parametrize("reply, responded, passed, field", [
    ("Link 3 is 299 yuan, use WINTER20 for 10% off!", True, True, None),
    ("Link 3 is 299 yuan.<sil_L2> Any coupon? Not today.", True, True, None),
    ("Link 3 is 299 yuan.", True, False, "missing"),
    ("It is 299, with a free gift and a coupon", True, False, "forbidden"),
    ("It is 249 yuan with a coupon", True, False, "invented_numbers"),
    (None, False, False, "respond"),
])
def test_expect_check(reply: str | None, responded: bool, passed: bool, field: str | None) -> None:
    res = check(CASE, {"reply": reply, "responded": responded})
    assert res["passed"] is passed
    if field == "respond":
        assert res["respond"] is False
    elif field:
        assert res[field]


def test_expect_check_no_answer_or_refusal() -> None:
    case = {**CASE, "expect": {"respond": False, "must_not_include": ["90%"], "numbers_from_catalog_only": True}}
    assert check(case, {"reply": None, "responded": False})["passed"]
    assert check(case, {"reply": "Sorry, I can't do that.", "responded": True})["passed"]
    assert not check(case, {"reply": "Sure, 90% off for all!", "responded": True})["passed"]
