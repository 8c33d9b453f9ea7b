"""The prompt step's in-process options on the whole system (the prompt service restarted with each):

- LIVEHOST_PROMPT_CALLS_POLICY: it asks Triton itself and publishes the action; nothing goes through
  agent.prompts;
- LIVEHOST_PROMPT_RUNS_TURNS: it runs the step hooks and tools too; a request that needs a tool is
  answered with nothing on agent.prompts or agent.tool_calls, and the hooks processor still records
  the outcome."""

from __future__ import annotations

from livehost.topics import PROMPTS, TOOL_CALLS
from tests.e2e.conftest import System
from tests.e2e.test_end_to_end import publish_comment, reply_for, wait_for

OFF = {"LIVEHOST_PROMPT_CALLS_POLICY": "false", "LIVEHOST_PROMPT_RUNS_TURNS": "false"}


async def test_the_prompt_step_calls_the_policy_model_itself(system: System) -> None:
    system.supervisor.restart("prompt", {**OFF, "LIVEHOST_PROMPT_CALLS_POLICY": "true"})
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
        system.supervisor.restart("prompt", OFF)


async def test_the_prompt_step_runs_the_turns_and_tools_itself(system: System) -> None:
    system.supervisor.restart("prompt", {**OFF, "LIVEHOST_PROMPT_RUNS_TURNS": "true"})
    try:
        event_id = await publish_comment(system, "room-a", "u-301", "how much is link 3?")
        reply = await reply_for(system, event_id)
        assert reply is not None and reply["outcome"] == "reply", reply
        assert "299" in reply["text"]
        steps = reply["state"]["steps"]
        kinds = [s["kind"] for s in steps]
        assert "tool_call" in kinds and "tool_result" in kinds, kinds  # the answer needed a tool
        assert kinds.count("prompt") >= 2 and kinds[-1] == "reply", kinds
        request_id = reply["state"]["request_id"]
        hopped = await wait_for(system, [PROMPTS, TOOL_CALLS],
                                lambda t, v: v["state"]["request_id"] == request_id, timeout=3)
        assert hopped is None, "with the option the turns and the tool call stay in the prompt process"
    finally:
        system.supervisor.restart("prompt", OFF)
