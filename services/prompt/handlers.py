"""Turn a request state into the next turn's prompt (no transport code).

Harness requests run the harness's prompt pipeline on facts from the request's catalog scope.
ReAct-baseline requests (``policy`` = ``react:<model>``) get the fixed ReAct prompt instead
(livehost.react.prompt): tools only, no skills, no pipeline.

With a decider (``LIVEHOST_PROMPT_CALLS_POLICY``), the step also asks the policy model and its
output is the action, as the policy service would have published it. With a tool runner as well
(``LIVEHOST_PROMPT_RUNS_TURNS``) the step goes on in process as the hooks processor and the tools
service would: it applies the step hooks to the action (``after_action``, the same pure function the
hooks processor runs), runs the tool call or the next turn, and asks again, until an action ends the
request. Only that last action is published: the hooks processor applies the step hooks to it once
more, records the outcome and frees the room, exactly as for an action from the policy service.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from livehost.agent import state as st
from livehost.agent.loop import Next, route_action
from livehost.agent.prompt import RenderedPrompt, Sources, build_context, context_json, render
from livehost.harness.provider import HarnessProvider
from livehost.react import prompt as react_prompt
from livehost.security.ids import check_state_ids
from livehost.topics import ACTIONS, PROMPTS, Topic

FAQ_LIMIT = 3
MEMORY_LIMIT = 5
MAX_TURNS_IN_PROCESS = 32


class FactSource(Protocol):
    """Where a request's catalog facts come from (services.prompt.clients.PostgresFacts)."""

    async def gather(self, room_id: str, link: Any, query: str, faq_limit: int, memory_limit: int, *,
                     scope: str = ...) -> Sources: ...


class FourReads:
    """A fact source made of four reads — the product on a link, FAQ entries, the room's memory and its
    lineup — whose ``gather`` makes them one after the other. PostgresFacts makes them in one statement
    instead, and holds its ``gather`` to this one (tests/integration/test_prompt_facts.py)."""

    async def product(self, room_id: str, link_id: int, *, scope: str = st.LIVE_SCOPE) -> dict[str, Any] | None:
        raise NotImplementedError

    async def faq(self, room_id: str, query: str, link_id: int | None, limit: int, *,
                  scope: str = st.LIVE_SCOPE) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def memory(self, room_id: str, limit: int, *, scope: str = st.LIVE_SCOPE) -> list[str]:
        raise NotImplementedError

    async def lineup(self, room_id: str, *, scope: str = st.LIVE_SCOPE) -> list[dict[str, Any]]:
        return []  # a source without one shows no lineup

    async def gather(self, room_id: str, link: Any, query: str, faq_limit: int, memory_limit: int, *,
                     scope: str = st.LIVE_SCOPE) -> Sources:
        product = await self.product(room_id, int(link), scope=scope) if link else None
        return Sources(product, await self.faq(room_id, query, link, faq_limit, scope=scope),
                       await self.memory(room_id, memory_limit, scope=scope), await self.lineup(room_id, scope=scope))


class Decider(Protocol):
    """The policy step (services.policy.handlers.PolicyHandler): a prompt record in, an action record out."""

    async def act(self, prompt: dict[str, Any]) -> dict[str, Any]: ...


class ToolRunner(Protocol):
    """The tools step (services.tools.handlers.ToolsHandler): a tool call record in, its result record out."""

    async def on_call(self, call: dict[str, Any]) -> dict[str, Any]: ...


class PromptHandler:
    def __init__(self, harnesses: HarnessProvider, facts: FactSource, decider: Decider | None = None,
                 tools: ToolRunner | None = None, now_ms: Callable[[], int] = st.now_ms):
        if tools is not None and decider is None:
            raise ValueError("running tools in process needs the policy step in process too")
        self._harnesses = harnesses
        self._facts = facts
        self._decider = decider
        self._tools = tools
        self._now_ms = now_ms

    async def next_record(self, state: dict[str, Any]) -> tuple[Topic, dict[str, Any]]:
        """What this step publishes for the state's current turn: its prompt; with a decider the
        action the policy model chose for that prompt; with a tool runner too, the action that ends
        the request."""
        if self._decider is None or self._tools is None:
            prompt = await self.next_prompt(state)
            return (PROMPTS, prompt) if self._decider is None else (ACTIONS, await self._decider.act(prompt))
        # A request's facts, read once for all its turns (the same four answers each turn otherwise).
        sources = None if st.is_react(state) else await self.sources(state)
        action = await self._decider.act(await self.next_prompt(state, sources))
        # The harness's turn limit bounds the loop (after_action ends the request on the last turn);
        # the cap guards against a harness edit that would not.
        for _ in range(MAX_TURNS_IN_PROCESS):
            nxt = await self._after(action)
            if nxt.route == "terminal":
                break
            if nxt.route == "tool_call":
                assert nxt.tool_call is not None
                nxt.state = (await self._tools.on_call({"state": nxt.state, **nxt.tool_call}))["state"]
            action = await self._decider.act(await self.next_prompt(nxt.state, sources))
        return ACTIONS, action

    async def _after(self, record: dict[str, Any]) -> Next:
        """Where the step hooks send an action (the hooks processor's routing, without its room schedule)."""
        harness = await self._harnesses.get(record["state"]["harness_version"])
        return route_action(harness, record, self._now_ms())

    async def render(self, state: dict[str, Any], sources: Sources | None = None) -> RenderedPrompt:
        harness = await self._harnesses.get(state["harness_version"])
        if st.is_react(state):
            return react_prompt.render(harness, state)
        return render(harness, build_context(harness, state, sources or await self.sources(state)))

    async def sources(self, state: dict[str, Any]) -> Sources:
        """The catalog facts a prompt shows: they depend on the request (room, scope, product on screen
        when it started, merged text), not on its turn."""
        return await self._facts.gather(state["room_id"], st.room(state).get("current_link"), state["merged_text"],
                                        FAQ_LIMIT, MEMORY_LIMIT, scope=st.scope(state))

    async def next_prompt(self, state: dict[str, Any], sources: Sources | None = None) -> dict[str, Any]:
        """The AgentPrompt record for the state's current turn (on ``sources`` when given, else on facts
        read now); the prompt is recorded as a step."""
        check_state_ids(state)  # ids from Kafka have the format Ingest enforces (else dead-lettered)
        started = time.perf_counter()
        rendered = await self.render(state, sources)
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
        return {"state": state, "text": rendered.text, "context_json": context_json(rendered.context)}
