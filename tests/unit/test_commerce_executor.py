"""Tool executor logic without a database: lookup, validation, binding, faults, result checks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from livehost.commerce import store as store_mod
from livehost.commerce.errors import NotFound, PermissionDenied
from livehost.commerce.executor import (
    ToolContext,
    ToolExecutor,
    derive_idempotency_key,
    normalise_result,
    operation_params,
    validate_arguments,
)
from livehost.commerce.faults import CAPABILITIES, MALFORMED_RESULT, FaultInjector
from livehost.commerce.operations import OPERATIONS
from livehost.commerce.schemas import RESULT_SCHEMAS, result_problems
from livehost.harness.loader import load
from livehost.harness.model import Harness, Tool

REPO = Path(__file__).resolve().parents[2]
HARNESS = load(REPO / "harness" / "default")
CTX = ToolContext(room_id="room-a", user_id="u-1", request_id="r-1")

GOOD: dict[str, Any] = {
    "product.by_link": {"link_id": 3, "sku": "S", "title": "T", "price": 299, "currency": "CNY", "attributes": {}},
    "product.search": {"query": "q", "results": []},
    "inventory.get": {"link_id": 3, "stock": 0, "available": False},
    "coupon.list": {"link_id": 3, "coupons": [], "campaign_max_discount_pct": None},
    "coupon.issue": {"code": "C", "user_id": "u-1", "discount_pct": 10, "min_spend": 0,
                     "granted_at": "2025-01-01T00:00:00+00:00"},
    "faq.search": {"query": "q", "results": [{"q": "a?", "a": "b", "link_id": None, "score": 0.1}]},
    "room.pin_product": {"room_id": "room-a", "pinned_link": 3, "title": "T"},
    "order.status": {"order_id": "O", "status": "shipped", "carrier": None, "eta": None},
}


def tool_for(harness: Harness, operation: str) -> Tool:
    return next(t for t in harness.tools if t.binding.operation == operation)


def args_for(tool: Tool, **params: Any) -> dict[str, Any]:
    return {tool.binding.arguments.get(k, k): v for k, v in params.items()}


class FakeBackend:
    """Answers every operation with a canned result; records calls; run_once keeps a dict ledger."""

    def __init__(self, results: dict[str, Any] | None = None, delay: float = 0.0,
                 error: Exception | None = None):
        self.results = {**GOOD, **(results or {})}
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []
        self.ledger: dict[tuple[str, str], Any] = {}
        self.gated: list[dict[str, Any]] = []
        self.delay = delay
        self.error = error
        self._lock = asyncio.Lock()

    async def invoke(self, operation: str, params: dict[str, Any], *, scope: str = "live", conn: Any = None,
                     idempotency_key: str | None = None) -> Any:
        self.calls.append((operation, params, idempotency_key))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error:
            raise self.error
        return self.results[operation]

    async def run_once(self, scope: str, key: str, *, tool: str, operation: str, request_id: str | None,
                       action: Any) -> tuple[Any, bool]:
        async with self._lock:
            if (scope, key) in self.ledger:
                return self.ledger[(scope, key)], True
            result = await action(None)
            self.ledger[(scope, key)] = result
            return result, False

    async def gate_side_effect(self, conn: Any, policy: Any, **call: Any) -> None:
        """The real store enforces the side-effect gate against its ledger; the fake records the call."""
        self.gated.append(call)


def test_every_operation_has_a_method_and_a_result_schema() -> None:
    assert set(store_mod._METHODS) == set(OPERATIONS) == set(RESULT_SCHEMAS)
    for name in store_mod._METHODS.values():
        assert callable(getattr(store_mod.CommerceStore, name))
    for op, result in GOOD.items():
        assert result_problems(op, result) == [], op
        assert result_problems(op, MALFORMED_RESULT), op


def test_product_result_must_not_carry_stock() -> None:
    assert result_problems("product.by_link", {**GOOD["product.by_link"], "stock": 3})


def test_fault_injector_validation() -> None:
    assert set(CAPABILITIES) == {"product", "inventory", "coupon", "order", "faq"}
    f = FaultInjector.from_case({"faults": {"inventory": "timeout"}})
    assert f.fault_for("inventory") == "timeout" and f.fault_for("product") is None and f
    assert not FaultInjector.from_case({})
    with pytest.raises(ValueError, match="capability"):
        FaultInjector({"payments": "timeout"})
    with pytest.raises(ValueError, match="unknown fault"):
        FaultInjector({"coupon": "explode"})


def test_derived_key_is_canonical() -> None:
    a = derive_idempotency_key("r", "t", {"a": 1, "b": [1, 2]}, "room", "u")
    assert a == derive_idempotency_key("r", "t", {"b": [1, 2], "a": 1}, "room", "u")
    assert a != derive_idempotency_key("r", "t", {"a": 2, "b": [1, 2]}, "room", "u")
    assert a != derive_idempotency_key("r2", "t", {"a": 1, "b": [1, 2]}, "room", "u")
    assert a != derive_idempotency_key("r", "t", {"a": 1, "b": [1, 2]}, "room", "u2")


def test_validate_arguments_messages() -> None:
    tool = tool_for(HARNESS, "faq.search")
    q, link = tool.binding.arguments["query"], tool.binding.arguments["link_id"]
    assert validate_arguments(tool, {q: "x"}) == []
    problems = validate_arguments(tool, {q: "", link: -1})
    assert any(p.startswith(f"{link}: -1 is less than the minimum") for p in problems)
    assert any(p.startswith(f"{q}:") for p in problems)
    assert validate_arguments(tool, ["not", "a", "dict"]) == ["(root): arguments must be a JSON object, got list"]


def test_operation_params_binding_and_context() -> None:
    tool = tool_for(HARNESS, "coupon.issue")
    renamed = tool.model_copy(update={
        "parameters": {"type": "object", "properties": {"voucher": {"type": "string"}}, "required": ["voucher"]},
        "binding": tool.binding.model_copy(update={"arguments": {"code": "voucher"}})})
    op = OPERATIONS["coupon.issue"]
    params = operation_params(renamed, op, {"voucher": "X1"}, CTX)
    assert params == {"code": "X1", "room_id": "room-a", "user_id": "u-1"}
    # a binding cannot let the model choose the viewer
    hijack = renamed.model_copy(update={"binding": renamed.binding.model_copy(
        update={"arguments": {"code": "voucher", "user_id": "voucher"}})})
    assert operation_params(hijack, op, {"voucher": "X1"}, CTX)["user_id"] == "u-1"
    # an optional parameter left out is None
    faq = tool_for(HARNESS, "faq.search")
    params = operation_params(faq, OPERATIONS["faq.search"], {faq.binding.arguments["query"]: "q"}, CTX)
    assert params["link_id"] is None


def test_normalise_result() -> None:
    from livehost.commerce.errors import Malformed

    with pytest.raises(Malformed, match="not JSON"):
        normalise_result("inventory.get", {"link_id": 1, "stock": object(), "available": True})
    with pytest.raises(Malformed, match="not JSON"):
        normalise_result("inventory.get", {"link_id": 1, "stock": float("nan"), "available": True})
    with pytest.raises(Malformed, match="malformed result"):
        normalise_result("inventory.get", {"link_id": 1, "stock": -1, "available": True})
    assert normalise_result("inventory.get", {"link_id": 1, "stock": 2, "available": True})["stock"] == 2


async def test_unknown_tool_and_misconfigured() -> None:
    ex = ToolExecutor(FakeBackend())
    out = await ex.execute(HARNESS, "nope", {}, CTX)
    assert (out.ok, out.error_code) == (False, "unknown_tool") and "available tools:" in (out.error_message or "")
    tool = HARNESS.tools[0]
    broken = HARNESS.model_copy(update={"tools": [tool.model_copy(update={
        "binding": tool.binding.model_copy(update={"operation": "teleport"})})]})
    out = await ex.execute(broken, tool.name, {}, CTX)
    assert out.error_code == "misconfigured"


async def test_each_operation_through_fake_backend() -> None:
    backend = FakeBackend()
    ex = ToolExecutor(backend)
    samples = {"link_id": 3, "query": "q", "code": "C", "order_id": "O"}
    for op_name, op in OPERATIONS.items():
        tool = tool_for(HARNESS, op_name)
        out = await ex.execute(HARNESS, tool.name, args_for(tool, **{p: samples[p] for p in op.params}), CTX)
        assert out.ok, (op_name, out.error_message)
        assert out.result == GOOD[op_name] and out.operation == op_name
        assert (out.idempotency_key is not None) == (op.side_effect or tool.side_effect)
    assert {c[0] for c in backend.calls} == set(OPERATIONS)


async def test_side_effect_replay_with_fake_backend() -> None:
    backend = FakeBackend()
    ex = ToolExecutor(backend)
    tool = tool_for(HARNESS, "coupon.issue")
    outs = [await ex.execute(HARNESS, tool.name, args_for(tool, code="C"), CTX) for _ in range(3)]
    assert [o.replayed for o in outs] == [False, True, True]
    assert len(backend.calls) == 1 and backend.calls[0][2] == outs[0].idempotency_key


@pytest.mark.parametrize("fault", ["timeout", "malformed", "permission_denied"])
async def test_faults(fault: str) -> None:
    backend = FakeBackend()
    fast = HARNESS.model_copy(update={"tools": [t.model_copy(update={"timeout_ms": 50}) for t in HARNESS.tools]})
    ex = ToolExecutor(backend, FaultInjector({"inventory": fault}))
    tool = tool_for(fast, "inventory.get")
    out = await ex.execute(fast, tool.name, args_for(tool, link_id=3), CTX)
    assert (out.ok, out.error_code, out.fault, out.result) == (False, fault, fault, None)
    assert out.observation() == {"ok": False, "error": {"code": fault, "message": out.error_message}}
    assert backend.calls == []  # the faulted service was never reached


async def test_backend_errors_map_to_codes() -> None:
    fast = HARNESS.model_copy(update={"tools": [t.model_copy(update={"timeout_ms": 50}) for t in HARNESS.tools]})
    tool = tool_for(fast, "product.by_link")
    cases: list[tuple[FakeBackend, str]] = [
        (FakeBackend(error=NotFound("no link 9")), "not_found"),
        (FakeBackend(error=PermissionDenied("no")), "permission_denied"),
        (FakeBackend(error=ConnectionRefusedError("down")), "unavailable"),
        (FakeBackend(error=ZeroDivisionError()), "internal"),
        (FakeBackend(delay=0.5), "timeout"),
        (FakeBackend(results={"product.by_link": {"price": "cheap"}}), "malformed"),
    ]
    for backend, code in cases:
        out = await ToolExecutor(backend).execute(fast, tool.name, args_for(tool, link_id=9), CTX)
        assert out.error_code == code, (code, out.error_message)
