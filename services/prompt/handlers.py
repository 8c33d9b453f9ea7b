"""Turn a request state into the next turn's prompt (no transport code).

Harness requests run the harness's prompt pipeline on facts from the request's catalog scope.
ReAct-baseline requests (``policy`` = ``react:<model>``) get the fixed ReAct prompt instead
(livehost.react.prompt): tools only, no skills, no pipeline.

With a decider (``LIVEHOST_PROMPT_CALLS_POLICY``), the step also asks the policy model and its
output is the action, as the policy service would have published it.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from livehost.agent import state as st
from livehost.agent.prompt import RenderedPrompt, Sources, build_context, render
from livehost.harness.provider import HarnessProvider
from livehost.react import prompt as react_prompt
from livehost.security.ids import check_state_ids
from livehost.topics import ACTIONS, PROMPTS, Topic

FAQ_LIMIT = 3
MEMORY_LIMIT = 5


class FactSource(Protocol):
    async def product(self, room_id: str, link_id: int, *, scope: str = ...) -> dict[str, Any] | None: ...

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int, *,
                  scope: str = ...) -> list[dict[str, Any]]: ...

    async def memory(self, room_id: str, limit: int, *, scope: str = ...) -> list[str]: ...


class Decider(Protocol):
    """The policy step (services.policy.handlers.PolicyHandler): a prompt record in, an action record out."""

    async def act(self, prompt: dict[str, Any]) -> dict[str, Any]: ...


class PromptHandler:
    def __init__(self, harnesses: HarnessProvider, facts: FactSource, decider: Decider | None = None):
        self._harnesses = harnesses
        self._facts = facts
        self._decider = decider

    async def next_record(self, state: dict[str, Any]) -> tuple[Topic, dict[str, Any]]:
        """What this step publishes for the state's current turn: its prompt, or with a decider the
        action the policy model chose for that prompt."""
        prompt = await self.next_prompt(state)
        if self._decider is None:
            return PROMPTS, prompt
        return ACTIONS, await self._decider.act(prompt)

    async def render(self, state: dict[str, Any]) -> RenderedPrompt:
        harness = await self._harnesses.get(state["harness_version"])
        if st.is_react(state):
            return react_prompt.render(harness, state)
        room = st.room(state)
        scope = st.scope(state)
        link = room.get("current_link")
        product = await self._facts.product(state["room_id"], int(link), scope=scope) if link else None
        faq = await self._facts.faq(state["room_id"], state["merged_text"], link, FAQ_LIMIT, scope=scope)
        memory = await self._facts.memory(state["room_id"], MEMORY_LIMIT, scope=scope)
        lineup_of = getattr(self._facts, "lineup", None)  # optional: older fact sources have none
        lineup = await lineup_of(state["room_id"], scope=scope) if lineup_of is not None else []
        return render(harness, build_context(harness, state, Sources(product, faq, memory, lineup)))

    async def next_prompt(self, state: dict[str, Any]) -> dict[str, Any]:
        """The AgentPrompt record for the state's current turn; the prompt is recorded as a step."""
        check_state_ids(state)  # ids from Kafka have the format Ingest enforces (else dead-lettered)
        started = time.perf_counter()
        rendered = await self.render(state)
        state = st.clone(state)
        st.add_step(state, "prompt", None, {
            "text": rendered.text,
            "total_tokens": rendered.total_tokens,
            "sections": [s.__dict__ for s in rendered.sections],
            # what the prompt showed and a reply may state: the product, the FAQ and the room's lineup
            # (link numbers and titles of the alternatives to a sold-out product)
            "evidence": {"product": rendered.context.get("product"), "faq": rendered.context.get("faq"),
                         "lineup": (rendered.context.get("room") or {}).get("lineup") or []},
        }, duration_ms=(time.perf_counter() - started) * 1000)
        return {"state": state, "text": rendered.text, "context_json": json.dumps(rendered.context, default=str)}
