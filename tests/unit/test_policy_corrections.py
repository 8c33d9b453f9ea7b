"""After a hook corrects a step, the reference policy does not propose the corrected step again: it
works out which of its actions was corrected (the hooks reject an action before it is recorded), reads
the tool's schema, and takes a different valid step."""

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from livehost.agent import state as st
from livehost.agent.loop import after_action
from livehost.agent.prompt import TRANSCRIPT_KINDS
from livehost.harness.loader import load
from livehost.harness.model import Harness
from livehost.policy.reference import decide
from livehost.policy.testing import build_context, run_loop
from livehost.training.formats import to_sft
from services.trajectories.handlers import trajectory_from_reply

ROOT = Path(__file__).resolve().parents[2]
CASES = {c["id"]: c for c in (json.loads(line) for line in
                              (ROOT / "tests/data/sample_cases.jsonl").read_text().splitlines() if line)}


@pytest.fixture(scope="module")
def harness() -> Harness:
    return load(ROOT / "harness/default")


def _with_comment(case: dict[str, Any], text: str) -> dict[str, Any]:
    out = copy.deepcopy(case)
    out["comments"] = [{"user_id": "u-1", "text": text, "offset_ms": 0}]
    return out


def test_a_schema_correction_is_read_and_not_repeated(harness):
    case = CASES["sample-correction-01"]
    result = run_loop(decide, harness, case)
    assert len(result.corrections) == 1 and "maximum" in result.corrections[0]
    calls = [a for a in result.actions if a["action"] == "call_tool"]
    assert len(calls) == 1  # the corrected call was not proposed again
    assert result.responded and "link 3" in (result.reply or "") and "120" not in (result.reply or "")


@pytest.mark.parametrize("text", ["is link 120 still in stock?", "any coupon for link 120?"])
def test_other_tools_corrected_for_the_same_reason(harness, text):
    result = run_loop(decide, harness, _with_comment(CASES["sample-correction-01"], text))
    assert len(result.corrections) == 1
    assert len([a for a in result.actions if a["action"] == "call_tool"]) == 1
    assert result.responded and "link 3" in (result.reply or "")


def test_any_corrected_call_is_not_proposed_again(harness):
    """Whatever the hook and its message: a correction of a tool call makes the policy move on."""
    case = _with_comment(CASES["sample-merge-01"], "what colors, and can you send me the coupon")
    ctx = build_context(harness, case)
    corrected: list[dict[str, Any]] = []
    for turn in range(1, harness.limits.max_turns + 1):
        ctx["turn"] = turn
        action = decide(copy.deepcopy(ctx))
        if action["action"] != "call_tool":
            break
        assert action not in corrected
        if len(corrected) < 2:  # a hook turns down the first two calls, recorded as corrections only
            corrected.append(action)
            ctx["transcript"].append({"turn": turn, "kind": "correction", "name": "some_hook",
                                      "data": {"hook": "some_hook", "reason": "not allowed here",
                                               "message": "That is not allowed. Answer without it."}})
            continue
        ctx["transcript"].append({"turn": turn, "kind": "tool_call", "name": action["tool"],
                                  "data": {"tool": action["tool"], "arguments": action["arguments"]}})
        ctx["transcript"].append({"turn": turn, "kind": "tool_result", "name": action["tool"],
                                  "data": {"tool": action["tool"], "ok": False, "error_code": "not_found"}})
    assert len(corrected) == 2


def test_through_the_harness_step_hooks(harness):
    """The real agent loop (``after_action`` with the shipped hooks): one correction, then a reply."""
    case = CASES["sample-correction-01"]
    ctx = build_context(harness, case)
    comment = {"event_id": "e-1", "user_id": "u-23", "text": case["comments"][0]["text"], "ts_ms": 0}
    state = st.new_state(room_id="room-a", harness_version=harness.version(), comments=[comment],
                         room=case["room"], ttl_ms=60_000, time_budget_ms=60_000, created_ms=0)
    outcome = None
    for _ in range(harness.limits.max_turns):
        ctx["turn"] = state["turn"]
        ctx["transcript"] = [{"turn": s["turn"], "kind": s["kind"], "name": s["name"], "data": s["data"]}
                             for s in st.steps(state, *TRANSCRIPT_KINDS)]
        ctx["loaded_skills"] = [{"id": s.id, "body": s.body} for s in harness.skills
                                if s.id in state["loaded_skills"]]
        action = _parsed(decide(copy.deepcopy(ctx)))
        st.add_step(state, "prompt", None, {"text": "(prompt)", "sections": [], "evidence": {}})
        st.add_step(state, "model_output", "policy_reference", {"raw": json.dumps(action), "attempts": 1})
        st.add_step(state, "action", action["kind"], {**action, "repaired": False, "error": None})
        nxt = after_action(harness, state, action, now_ms=10)
        state = nxt.state
        if nxt.route == "terminal":
            outcome = nxt
            break
        if nxt.route == "tool_call":
            assert nxt.tool_call is not None
            st.add_step(state, "tool_result", nxt.tool_call["tool"],
                        {"tool": nxt.tool_call["tool"], "ok": True, "result": case["catalog"][0]})
            state["turn"] += 1
    assert outcome is not None and outcome.outcome == "reply", outcome
    corrections = st.steps(state, "correction")
    assert len(corrections) == 1 and "link 3" in (outcome.text or "")
    corr = corrections[0]
    assert corr["name"] == next(h.id for h in harness.hooks if h.kind == "tool_arguments")
    # the SFT export trims the retry: the corrected call is not taught, the final behaviour is
    row = trajectory_from_reply({"state": state, "outcome": outcome.outcome, "text": outcome.text,
                                 "reason": outcome.reason, "completed_ms": 500})
    assert row["outcome"] == "reply"
    sft = to_sft(row, harness, keep_retries=0.0)
    assert sft is not None and sft["retries"] == 1 and sft["trimmed"]
    taught = json.dumps(sft["messages"][2:])
    assert "120" not in taught and "link 3" in taught
    whole = to_sft(row, harness, keep_retries=1.0)
    assert whole is not None and not whole["trimmed"] and "120" in json.dumps(whole["messages"][2:])


def _parsed(action: dict[str, Any]) -> dict[str, Any]:
    from livehost.policy.actions import parse_action

    return parse_action(json.dumps(action)).as_dict()
