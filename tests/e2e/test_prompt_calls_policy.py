"""LIVEHOST_PROMPT_CALLS_POLICY on the whole system: the prompt service, restarted with the option,
asks Triton itself and publishes the action; the request is answered with the same kinds of steps and
nothing goes through agent.prompts."""

from __future__ import annotations

import dataclasses

from livehost.topics import PROMPTS
from tests.e2e.conftest import System
from tests.e2e.test_end_to_end import publish_comment, reply_for, wait_for


def _restart_prompt(system: System, **env: str) -> None:
    sup = system.supervisor
    old = sup.procs["prompt"]
    sup.stop(("prompt",))
    proc = dataclasses.replace(old, pid=0, env={**old.env, **env}, state="starting", restarts=0)
    sup._spawn(proc)
    sup.procs["prompt"] = proc
    sup.wait_ready(timeout=120)


async def test_the_prompt_step_calls_the_policy_model_itself(system: System) -> None:
    _restart_prompt(system, LIVEHOST_PROMPT_CALLS_POLICY="true")
    try:
        event_id = await publish_comment(system, "room-a", "u-300", "how much is link 3?")
        reply = await reply_for(system, event_id)
        assert reply is not None and reply["outcome"] == "reply", reply
        assert "299" in reply["text"]
        kinds = [s["kind"] for s in reply["state"]["steps"]]
        assert "prompt" in kinds and "model_output" in kinds and "action" in kinds, kinds
        request_id = reply["state"]["request_id"]
        went_through_prompts = await wait_for(system, [PROMPTS],
                                              lambda t, v: v["state"]["request_id"] == request_id, timeout=3)
        assert went_through_prompts is None, "with the option the prompt step must publish actions, not prompts"
    finally:
        _restart_prompt(system, LIVEHOST_PROMPT_CALLS_POLICY="false")
