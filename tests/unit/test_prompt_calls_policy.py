"""LIVEHOST_PROMPT_CALLS_POLICY: the prompt step asks the policy model itself and publishes the action,
with the same steps recorded as when the two services pass the prompt over Kafka."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from livehost.agent import state as st
from livehost.harness.provider import StaticHarnessProvider
from livehost.topics import ACTIONS, PROMPTS
from services.policy.handlers import PolicyHandler
from services.prompt.handlers import PromptHandler
from tests.unit.test_prompt_evidence import HARNESS, Facts  # the same harness and catalog facts


@dataclass
class Result:
    text: str
    attempts: int = 1
    latency_ms: float = 1.0


class Model:
    """A policy model that answers every prompt with one reply and remembers what it was shown."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def generate(self, prompt_text: str, context_json: str, sampling: dict[str, Any]) -> Result:
        self.prompts.append(prompt_text)
        return Result(json.dumps({"action": "reply", "text": "It is 299 yuan."}))


def request() -> dict[str, Any]:
    return st.new_state(room_id="room-a", harness_version=HARNESS.version(),
                        comments=[{"event_id": "e1", "user_id": "u-1", "text": "how much?", "ts_ms": 1}],
                        room={"room_id": "room-a", "current_link": 3}, ttl_ms=10_000, time_budget_ms=8_000)


async def test_without_a_decider_the_step_publishes_the_prompt() -> None:
    topic, record = await PromptHandler(StaticHarnessProvider(HARNESS), Facts()).next_record(request())
    assert topic is PROMPTS
    assert [s["kind"] for s in record["state"]["steps"]][-1] == "prompt"


async def test_with_a_decider_the_step_publishes_what_the_policy_service_would() -> None:
    model = Model()
    policy = PolicyHandler({"policy_reference": model}, "policy_reference")
    fused = PromptHandler(StaticHarnessProvider(HARNESS), Facts(), decider=policy)
    topic, action = await fused.next_record(request())
    assert topic is ACTIONS

    # the two-step path: the prompt record as the policy service would read it from Kafka
    _, prompt = await PromptHandler(StaticHarnessProvider(HARNESS), Facts()).next_record(request())
    expected = await PolicyHandler({"policy_reference": Model()}, "policy_reference").act(prompt)
    assert model.prompts == [prompt["text"]]  # the model was shown the rendered prompt

    def shape(record: dict[str, Any]) -> Any:
        steps = [(s["kind"], s["name"], s["data_json"]) for s in record["state"]["steps"]]
        return {k: v for k, v in record.items() if k != "state"}, steps

    assert shape(action) == shape(expected)
    assert [s["kind"] for s in action["state"]["steps"]][-3:] == ["prompt", "model_output", "action"]
