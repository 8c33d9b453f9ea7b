"""The prompt step's evidence holds what the prompt showed that a reply may state — the product, the
FAQ and the room's lineup — so the factual-risk hook accepts link numbers of the lineup."""

from __future__ import annotations

from typing import Any

from livehost.agent import state as st
from livehost.config import REPO_ROOT
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.hooks.step import check_action
from services.prompt.handlers import FourReads, PromptHandler

HARNESS = load(REPO_ROOT / "harness" / "default")
PRODUCT = {"link_id": 3, "sku": "JKT", "title": "Jacket", "price": 299, "currency": "CNY", "attributes": {}}
LINEUP = [{"link_id": 3, "title": "Jacket", "available": False}, {"link_id": 7, "title": "Mug", "available": True}]


class Facts(FourReads):
    async def product(self, room_id: str, link_id: int, *, scope: str = "live") -> dict[str, Any] | None:
        return PRODUCT

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int, *,
                  scope: str = "live") -> list[dict[str, Any]]:
        return []

    async def memory(self, room_id: str, limit: int, *, scope: str = "live") -> list[str]:
        return []

    async def lineup(self, room_id: str, *, scope: str = "live") -> list[dict[str, Any]]:
        return LINEUP


async def test_lineup_numbers_are_evidence_for_the_factual_risk_hook() -> None:
    state = st.new_state(room_id="room-a", harness_version=HARNESS.version(),
                         comments=[{"event_id": "e1", "user_id": "u-1", "text": "sold out?", "ts_ms": 1}],
                         room={"room_id": "room-a", "current_link": 3}, ttl_ms=10_000, time_budget_ms=8_000)
    out = await PromptHandler(StaticHarnessProvider(HARNESS), Facts()).next_prompt(state)
    prompt = st.steps(out["state"], "prompt")[-1]["data"]
    assert prompt["evidence"]["lineup"] == LINEUP
    reply = {"kind": "reply", "text": "Sorry, link 3 is sold out! Link 7, the Mug, is still available!"}
    risky = [v for v in check_action(HARNESS, out["state"], reply) if v.kind == "factual_risk"]
    assert risky and all(not v.failed for v in risky), risky
    invented = {"kind": "reply", "text": "Link 9 is still available!"}
    assert any(v.failed for v in check_action(HARNESS, out["state"], invented) if v.kind == "factual_risk")
