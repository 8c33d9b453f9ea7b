"""Prompt in, parsed action out (no transport code).

The model is the request's ``policy`` field (a Triton model name; empty: the service default).
``react:<model>`` runs the ReAct baseline on that model: ReAct sampling (free text, stops before
``Observation:``) and the ReAct parser instead of the JSON action protocol.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from livehost.agent import state as st
from livehost.agent.loop import POLICY_UNAVAILABLE
from livehost.policy.actions import ParsedAction, parse_action
from livehost.react.parse import parse_react
from livehost.security.ids import check_state_ids

MAX_TOKENS = 256
REACT_STOP = ["\nObservation:", "Observation:"]


class Generator(Protocol):
    async def generate(self, prompt_text: str, context_json: str, sampling: dict[str, Any]) -> Any: ...


class Unavailable(Exception):
    pass


def action_record(state: dict[str, Any], parsed: Any, raw: str, model: str) -> dict[str, Any]:
    return {
        "state": state, "kind": parsed.kind, "skill": parsed.skill, "tool": parsed.tool,
        "arguments_json": json.dumps(parsed.arguments or {}, sort_keys=True), "text": parsed.text,
        "reason": parsed.reason if parsed.kind != "invalid" else parsed.error, "raw_output": raw, "model": model,
    }


def sampling_for(state: dict[str, Any]) -> dict[str, Any]:
    sampling: dict[str, Any] = {"temperature": 0.0, "max_tokens": MAX_TOKENS, "seed": state["turn"]}
    if st.is_react(state):
        sampling.update({"json_schema": False, "stop": REACT_STOP})
    return sampling


def parse_output(state: dict[str, Any], text: str) -> ParsedAction:
    return parse_react(text) if st.is_react(state) else parse_action(text)


class PolicyHandler:
    def __init__(self, generators: Mapping[str, Generator], default_model: str,
                 unavailable: tuple[type[BaseException], ...] = (Unavailable,),
                 sampling: Mapping[str, Any] | None = None):
        self._generators = generators
        self._default = default_model
        self._unavailable = unavailable
        self._sampling = dict(sampling or {})  # overrides, e.g. temperature > 0 to sample behaviours

    def models(self) -> list[str]:
        return list(self._generators)

    def generator(self, model: str | None) -> tuple[str, Generator]:
        name = model or self._default
        if name not in self._generators:
            raise KeyError(f"unknown policy model {name!r}; served: {', '.join(self._generators)}")
        return name, self._generators[name]

    async def act(self, prompt: dict[str, Any]) -> dict[str, Any]:
        """The AgentAction record for one prompt; model output and parsed action become steps."""
        state = st.clone(prompt["state"])
        check_state_ids(state)  # ids from Kafka have the format Ingest enforces (else dead-lettered)
        name, gen = self.generator(st.policy_model(state))
        try:
            sampling = {**sampling_for(state), **self._sampling}
            result = await gen.generate(prompt["text"], prompt["context_json"], sampling)
        except self._unavailable as exc:
            st.add_step(state, "model_output", name, {"error": f"{POLICY_UNAVAILABLE}: {exc}"})
            return {"state": state, "kind": "invalid", "skill": None, "tool": None, "arguments_json": "{}",
                    "text": None, "reason": f"{POLICY_UNAVAILABLE}: {exc}", "raw_output": "", "model": name}
        parsed = parse_output(state, result.text)
        st.add_step(state, "model_output", name, {"raw": result.text, "attempts": result.attempts},
                    duration_ms=result.latency_ms)
        st.add_step(state, "action", parsed.kind, {
            "kind": parsed.kind, "skill": parsed.skill, "tool": parsed.tool, "arguments": parsed.arguments,
            "text": parsed.text, "reason": parsed.reason, "repaired": parsed.repaired, "error": parsed.error})
        return action_record(state, parsed, result.text, name)
