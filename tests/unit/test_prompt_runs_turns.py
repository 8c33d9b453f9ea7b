"""LIVEHOST_PROMPT_RUNS_TURNS: the prompt step runs a request's turns in process — policy, step hooks,
tools — and publishes the action that ends the request, with the same steps recorded as when the
prompt, policy, hooks and tools steps pass the request over Kafka."""

from __future__ import annotations

import json
from typing import Any

import pytest

from livehost.agent import state as st
from livehost.agent.loop import action_from_record, after_action
from livehost.agent.prompt import Sources
from livehost.commerce.executor import ToolExecutor
from livehost.harness.provider import StaticHarnessProvider
from livehost.topics import ACTIONS
from services.policy.handlers import PolicyHandler
from services.prompt.handlers import FAQ_LIMIT, MEMORY_LIMIT, PromptHandler
from services.tools.handlers import ToolsHandler
from tests.unit.test_agent_sandbox import Store
from tests.unit.test_prompt_calls_policy import Result
from tests.unit.test_prompt_evidence import HARNESS, LINEUP, PRODUCT, Facts

# A read-only tool of the shipped harness that takes a live link number, found by its schema (the
# harness is data: no tool is named here).
TOOL = next(t for t in HARNESS.tools if not t.side_effect and t.parameters.get("required") == ["link_id"])
SKILL = HARNESS.skills[0].id
NOW_MS = 1_000


class Model:
    """Loads a skill, calls the tool, then replies; remembers every prompt it was shown."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = script
        self.prompts: list[str] = []

    async def generate(self, prompt_text: str, context_json: str, sampling: dict[str, Any]) -> Result:
        self.prompts.append(prompt_text)
        return Result(json.dumps(self.script[min(len(self.prompts) - 1, len(self.script) - 1)]))


SCRIPT = [{"action": "load_skill", "skill": SKILL},
          {"action": "call_tool", "tool": TOOL.name, "arguments": {"link_id": 3}},
          {"action": "reply", "text": "Here it is."}]


def request() -> dict[str, Any]:
    return st.new_state(room_id="room-a", harness_version=HARNESS.version(), created_ms=NOW_MS,
                        comments=[{"event_id": "e1", "user_id": "u-1", "text": "tell me about it", "ts_ms": 1}],
                        room={"room_id": "room-a", "current_link": 3}, ttl_ms=10_000, time_budget_ms=8_000)


def handlers(model: Model, store: Store) -> tuple[PromptHandler, PolicyHandler, ToolsHandler]:
    harnesses = StaticHarnessProvider(HARNESS)
    policy = PolicyHandler({"policy_reference": model}, "policy_reference")
    return PromptHandler(harnesses, Facts()), policy, ToolsHandler(harnesses, ToolExecutor(store))


async def over_kafka(script: list[dict[str, Any]]) -> tuple[dict[str, Any], Model, Store]:
    """The steps as the separate services run them: prompt, policy, the hooks' routing, tools — until
    the hooks would end the request; returns the action record the hooks processor was given last."""
    model, store = Model(script), Store()
    prompt, policy, tools = handlers(model, store)
    state = request()
    while True:
        action = await policy.act(await prompt.next_prompt(state))
        nxt = after_action(HARNESS, action["state"], action_from_record(action), NOW_MS)
        if nxt.route == "terminal":
            return action, model, store
        if nxt.route == "tool_call":
            assert nxt.tool_call is not None
            nxt.state = (await tools.on_call({"state": nxt.state, **nxt.tool_call}))["state"]
        state = nxt.state


def shape(record: dict[str, Any]) -> Any:
    steps = [(s["seq"], s["turn"], s["kind"], s["name"], s["data_json"]) for s in record["state"]["steps"]]
    return {k: v for k, v in record.items() if k != "state"}, steps, record["state"]["turn"]


async def test_the_step_publishes_the_last_action_with_every_step_the_services_would_record() -> None:
    model, store = Model(SCRIPT), Store()
    harnesses = StaticHarnessProvider(HARNESS)
    fused = PromptHandler(harnesses, Facts(), PolicyHandler({"policy_reference": model}, "policy_reference"),
                          ToolsHandler(harnesses, ToolExecutor(store)), now_ms=lambda: NOW_MS)
    topic, action = await fused.next_record(request())
    assert topic is ACTIONS

    expected, reference_model, reference_store = await over_kafka(SCRIPT)
    assert shape(action) == shape(expected)
    kinds = [s["kind"] for s in action["state"]["steps"]]
    assert kinds.count("prompt") == len(model.prompts) >= 3 and "skill_load" in kinds and "tool_result" in kinds
    assert action["kind"] == "reply"
    assert model.prompts == reference_model.prompts  # the model saw the same prompts
    assert len(store.scopes) == len(reference_store.scopes) == 1  # the tool ran once, in the request's scope

    # The hooks processor, given the published action, ends the request: nothing is left undone.
    assert after_action(HARNESS, action["state"], action_from_record(action), NOW_MS).route == "terminal"


async def test_a_correction_is_another_turn_in_process() -> None:
    script = [{"action": "call_tool", "tool": "no_such_tool", "arguments": {}}, *SCRIPT]
    model, store = Model(script), Store()
    harnesses = StaticHarnessProvider(HARNESS)
    fused = PromptHandler(harnesses, Facts(), PolicyHandler({"policy_reference": model}, "policy_reference"),
                          ToolsHandler(harnesses, ToolExecutor(store)), now_ms=lambda: NOW_MS)
    _, action = await fused.next_record(request())
    expected, _, _ = await over_kafka(script)
    assert shape(action) == shape(expected)
    assert any(s["kind"] == "correction" for s in action["state"]["steps"])


async def test_a_request_past_its_deadline_is_handed_to_the_hooks_processor_at_once() -> None:
    model, store = Model(SCRIPT), Store()
    harnesses = StaticHarnessProvider(HARNESS)
    late = request()["deadline_ms"] + 1
    fused = PromptHandler(harnesses, Facts(), PolicyHandler({"policy_reference": model}, "policy_reference"),
                          ToolsHandler(harnesses, ToolExecutor(store)), now_ms=lambda: late)
    _, action = await fused.next_record(request())
    assert len(model.prompts) == 1 and store.scopes == []  # no second turn, no tool
    assert after_action(HARNESS, action["state"], action_from_record(action), late).outcome == "cancelled"


def test_tools_in_process_need_the_policy_in_process() -> None:
    with pytest.raises(ValueError):
        PromptHandler(StaticHarnessProvider(HARNESS), Facts(), tools=ToolsHandler(StaticHarnessProvider(HARNESS),
                                                                                   ToolExecutor(Store())))


class CountingFacts(Facts):
    """The same catalog facts, counting the lookups (each is a PostgreSQL query in the service)."""

    def __init__(self) -> None:
        self.calls = 0

    async def product(self, *a: Any, **kw: Any) -> Any:
        self.calls += 1
        return await super().product(*a, **kw)

    async def faq(self, *a: Any, **kw: Any) -> Any:
        self.calls += 1
        return await super().faq(*a, **kw)

    async def memory(self, *a: Any, **kw: Any) -> Any:
        self.calls += 1
        return await super().memory(*a, **kw)

    async def lineup(self, *a: Any, **kw: Any) -> Any:
        self.calls += 1
        return await super().lineup(*a, **kw)


async def test_a_request_s_facts_are_read_once_for_all_its_turns() -> None:
    facts, model = CountingFacts(), Model(SCRIPT)
    harnesses = StaticHarnessProvider(HARNESS)
    fused = PromptHandler(harnesses, facts, PolicyHandler({"policy_reference": model}, "policy_reference"),
                          ToolsHandler(harnesses, ToolExecutor(Store())), now_ms=lambda: NOW_MS)
    await fused.next_record(request())
    assert len(model.prompts) >= 3
    assert facts.calls == 4  # product, FAQ, memory, lineup: once, not once per turn

    # a second request reads them again (they may have changed since)
    await fused.next_record(request())
    assert facts.calls == 8


class GatheringFacts(CountingFacts):
    """A fact source that reads all four in one call, as PostgresFacts does in one statement."""

    def __init__(self) -> None:
        super().__init__()
        self.gathered: list[tuple[Any, ...]] = []

    async def gather(self, room_id: str, link: Any, query: str, faq_limit: int, memory_limit: int, *,
                     scope: str = "live") -> Sources:
        self.gathered.append((room_id, link, query, faq_limit, memory_limit, scope))
        return Sources(PRODUCT, [], [], LINEUP)


async def test_a_source_that_gathers_is_asked_once_per_request() -> None:
    facts, model = GatheringFacts(), Model(SCRIPT)
    harnesses = StaticHarnessProvider(HARNESS)
    fused = PromptHandler(harnesses, facts, PolicyHandler({"policy_reference": model}, "policy_reference"),
                          ToolsHandler(harnesses, ToolExecutor(Store())), now_ms=lambda: NOW_MS)
    state = request()
    await fused.next_record(state)
    assert len(model.prompts) >= 3 and facts.calls == 0  # not the four separate reads
    assert facts.gathered == [("room-a", 3, state["merged_text"], FAQ_LIMIT, MEMORY_LIMIT, "live")]
    # what it gathered is what the prompt showed
    prompt = st.steps((await fused.next_prompt(request()))["state"], "prompt")[-1]["data"]
    assert prompt["evidence"]["product"] == PRODUCT and prompt["evidence"]["lineup"] == LINEUP
