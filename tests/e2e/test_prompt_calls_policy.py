"""Where a request's turns run, on the whole system (the prompt service restarted with each setting):

- LIVEHOST_PROMPT_RUNS_TURNS (the default): the prompt step runs the policy, step hooks and tools too;
  a request that needs a tool is answered with nothing on agent.prompts or agent.tool_calls, and the
  hooks processor still records the outcome;
- LIVEHOST_PROMPT_CALLS_POLICY alone: it asks Triton itself and publishes the action; nothing goes
  through agent.prompts;
- both off: every step is its own service, and the request crosses agent.prompts and agent.tool_calls."""

from __future__ import annotations

from livehost.config import Settings
from livehost.topics import PROMPTS, TOOL_CALLS
from tests.e2e.conftest import System
from tests.e2e.test_end_to_end import publish_comment, reply_for, wait_for

OFF = {"LIVEHOST_PROMPT_CALLS_POLICY": "false", "LIVEHOST_PROMPT_RUNS_TURNS": "false"}
DEFAULT = {f"LIVEHOST_{name.upper()}": str(Settings.model_fields[name].default).lower()
           for name in ("prompt_calls_policy", "prompt_runs_turns")}  # restored after each test


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
        system.supervisor.restart("prompt", DEFAULT)


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
        system.supervisor.restart("prompt", DEFAULT)


async def test_with_both_off_every_step_is_its_own_service(system: System) -> None:
    system.supervisor.restart("prompt", OFF)
    try:
        event_id = await publish_comment(system, "room-a", "u-302", "how much is link 3?")
        reply = await reply_for(system, event_id)
        assert reply is not None and reply["outcome"] == "reply", reply
        request_id = reply["state"]["request_id"]
        for topic in (PROMPTS, TOOL_CALLS):
            hopped = await wait_for(system, [topic], lambda t, v: v["state"]["request_id"] == request_id, timeout=10)
            assert hopped is not None, f"with both options off the request crosses {topic.name}"
    finally:
        system.supervisor.restart("prompt", DEFAULT)
