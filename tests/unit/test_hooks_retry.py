"""Correct-and-retry and retry budgets through the agent loop step (``after_action``), with scripted
policy actions and a simulated tool service, under the shipped harness (hooks referred to by kind)."""

from __future__ import annotations

import json
from typing import Any

from livehost.agent import state as st
from livehost.agent.loop import Next, after_action
from livehost.config import REPO_ROOT
from livehost.harness.loader import load
from livehost.harness.model import Harness
from livehost.training.synthetic import int_arg_tool, reply_skill

HARNESS = load(REPO_ROOT / "harness" / "default")
NOW = 2_000
PRODUCT = {"link_id": 3, "title": "Rain jacket", "price": 299, "currency": "CNY"}




def new_state(harness: Harness) -> dict[str, Any]:
    comment = {"event_id": "e-1", "user_id": "u1", "text": "how much is link 3?", "ts_ms": 1}
    return st.new_state(room_id="room-1", harness_version=harness.version(), comments=[comment],
                        room={"room_id": "room-1", "current_link": 3}, ttl_ms=60_000, time_budget_ms=60_000,
                        created_ms=1_000)


def drive(harness: Harness, state: dict[str, Any], actions: list[dict[str, Any]]) -> tuple[Next, list[Next]]:
    """Feed scripted actions one per turn; tool calls are answered like the tools service would."""
    steps: list[Next] = []
    for action in actions:
        nxt = after_action(harness, state, action, NOW)
        steps.append(nxt)
        state = nxt.state
        if nxt.route == "tool_call":
            assert nxt.tool_call is not None
            st.add_step(state, "tool_result", nxt.tool_call["tool"], {
                "call_id": nxt.tool_call["call_id"], "tool": nxt.tool_call["tool"], "ok": True, "result": PRODUCT})
            state["turn"] += 1
        if nxt.route == "terminal":
            return nxt, steps
    raise AssertionError(f"script ended without a terminal outcome: {[s.route for s in steps]}")


def corrections_by_kind(harness: Harness, state: dict[str, Any]) -> list[str]:
    kinds = {h.id: h.kind for h in harness.hooks}
    return [kinds.get(s["name"], s["name"]) for s in state["steps"] if s["kind"] == "correction"]


def test_correct_and_retry_ends_in_a_good_reply() -> None:
    tool, arg = int_arg_tool(HARNESS)
    final, steps = drive(HARNESS, new_state(HARNESS), [
        {"kind": "reply", "text": "It is 299!"},  # no reply skill loaded -> correct
        {"kind": "load_skill", "skill": reply_skill(HARNESS)},
        {"kind": "call_tool", "tool": tool.name, "arguments": {arg: 0}},  # bad argument -> correct
        {"kind": "call_tool", "tool": tool.name, "arguments": {arg: 3}},
        {"kind": "reply", "text": "Only 199 today!"},  # number not in the tool result -> correct
        {"kind": "reply", "text": "Link 3 is 299 CNY <sil_L2> tap to grab it!"},
    ])
    assert [s.route for s in steps] == ["turn", "turn", "turn", "tool_call", "turn", "terminal"]
    assert final.outcome == "reply" and final.text is not None and "299" in final.text
    assert corrections_by_kind(HARNESS, final.state) == ["skill_load_requirement", "tool_arguments", "factual_risk"]
    # Each correction told the policy why (the hook's message with its reason).
    messages = [json.loads(s["data_json"])["message"] for s in final.state["steps"] if s["kind"] == "correction"]
    assert all(m and "{reason}" not in m for m in messages)
    assert final.state["retries"] == 3
    assert final.state["steps"][-1]["kind"] == "reply"


def test_retry_budget_ends_in_the_fallback() -> None:
    banned = HARNESS.rules.banned_phrases[0]
    bad = {"kind": "reply", "text": f"The {banned} deal, tap link 3!"}
    budget = next(h.retry_budget for h in HARNESS.hooks if h.kind == "reply_format")
    final, steps = drive(HARNESS, new_state(HARNESS),
                         [{"kind": "load_skill", "skill": reply_skill(HARNESS)}, *[bad] * (budget + 1)])
    assert [s.route for s in steps] == ["turn", *["turn"] * budget, "terminal"]
    assert final.outcome == "fallback" and final.text == HARNESS.fallback.text
    assert "retry budget" in (final.reason or "")
    assert corrections_by_kind(HARNESS, final.state) == ["reply_format"] * budget


def test_fallback_is_silence_when_the_harness_says_so() -> None:
    silent = HARNESS.model_copy(update={"fallback": HARNESS.fallback.model_copy(update={"mode": "silence"})})
    bad = {"kind": "reply", "text": "x" * (silent.rules.max_reply_chars + 5)}
    final, _ = drive(silent, new_state(silent), [{"kind": "load_skill", "skill": reply_skill(silent)}, *[bad] * 5])
    assert final.outcome == "rejected" and final.text is None


def test_loop_detection_stops_repeated_identical_tool_calls() -> None:
    tool, arg = int_arg_tool(HARNESS)
    call = {"kind": "call_tool", "tool": tool.name, "arguments": {arg: 3}}
    final, steps = drive(HARNESS, new_state(HARNESS), [call] * 5)
    retry = next(h for h in HARNESS.hooks if h.kind == "retry_control")
    assert [s.route for s in steps] == ["tool_call"] * int(retry.params["max_identical_calls"]) + ["terminal"]
    assert final.outcome == "fallback" and "loop" in (final.reason or "")


def test_retry_control_budget_across_hooks_ends_in_the_fallback() -> None:
    """Different hooks each correcting once still hit the overall correction budget."""
    retry = next(h for h in HARNESS.hooks if h.kind == "retry_control")
    tool, arg = int_arg_tool(HARNESS)
    harness = HARNESS.model_copy(update={"limits": HARNESS.limits.model_copy(update={"max_turns": 20})})
    script = [{"kind": "reply", "text": "Hi"},  # skill requirement
              {"kind": "call_tool", "tool": tool.name, "arguments": {arg: -1}},  # tool arguments
              {"kind": "load_skill", "skill": reply_skill(harness)},
              {"kind": "reply", "text": "It is 123"},  # factual risk
              {"kind": "reply", "text": "It is 123 still"}]
    final, _ = drive(harness, new_state(harness), script)
    assert final.outcome == "fallback"
    assert len(corrections_by_kind(harness, final.state)) == int(retry.params["max_corrections"])
    assert "retry" in (final.reason or "") or "budget" in (final.reason or "")


def test_turn_limit_ends_in_the_fallback() -> None:
    tool, arg = int_arg_tool(HARNESS)
    calls = [{"kind": "call_tool", "tool": tool.name, "arguments": {arg: n}} for n in range(1, 20)]
    final, steps = drive(HARNESS, new_state(HARNESS), calls)
    assert final.outcome == "fallback" and "turn limit" in (final.reason or "")
    assert len(steps) == HARNESS.limits.max_turns
