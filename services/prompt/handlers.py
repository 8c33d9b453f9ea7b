"""Turn a request state into the next turn's prompt (no transport code)."""

from __future__ import annotations

import time
from typing import Any, Protocol

from livehost.agent import state as st
from livehost.agent.prompt import RenderedPrompt, Sources, build_context, render
from livehost.harness.provider import HarnessProvider

FAQ_LIMIT = 3
MEMORY_LIMIT = 5


class FactSource(Protocol):
    async def product(self, room_id: str, link_id: int) -> dict[str, Any] | None: ...

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int) -> list[dict[str, Any]]: ...

    async def memory(self, room_id: str, limit: int) -> list[str]: ...


class PromptHandler:
    def __init__(self, harnesses: HarnessProvider, facts: FactSource):
        self._harnesses = harnesses
        self._facts = facts

    async def render(self, state: dict[str, Any]) -> RenderedPrompt:
        harness = await self._harnesses.get(state["harness_version"])
        room = st.room(state)
        link = room.get("current_link")
        product = await self._facts.product(state["room_id"], int(link)) if link else None
        faq = await self._facts.faq(state["room_id"], state["merged_text"], link, FAQ_LIMIT)
        memory = await self._facts.memory(state["room_id"], MEMORY_LIMIT)
        return render(harness, build_context(harness, state, Sources(product, faq, memory)))

    async def next_prompt(self, state: dict[str, Any]) -> dict[str, Any]:
        """The AgentPrompt record for the state's current turn; the prompt is recorded as a step."""
        started = time.perf_counter()
        rendered = await self.render(state)
        state = st.clone(state)
        st.add_step(state, "prompt", None, {
            "text": rendered.text,
            "total_tokens": rendered.total_tokens,
            "sections": [s.__dict__ for s in rendered.sections],
            "evidence": {"product": rendered.context["product"], "faq": rendered.context["faq"]},
        }, duration_ms=(time.perf_counter() - started) * 1000)
        import json

        return {"state": state, "text": rendered.text, "context_json": json.dumps(rendered.context, default=str)}
