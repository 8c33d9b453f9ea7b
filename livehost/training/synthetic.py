"""Synthetic trajectories for tests and examples: scripted policy actions run through the real agent
loop step (``after_action``) under any harness, with the steps the prompt, policy and tools services
would add. Skills and tools are chosen by what they are, never by name."""

from __future__ import annotations

import json
from typing import Any

from livehost.agent import state as st
from livehost.agent.loop import after_action
from livehost.harness.model import Harness, Tool
from services.trajectories.handlers import trajectory_from_reply

PRODUCT = {"link_id": 3, "title": "Rain jacket", "price": 299, "currency": "CNY",
           "attributes": {"colors": ["red", "black"]}}


def reply_skill(harness: Harness) -> str:
    return next(s.id for s in harness.skills if s.kind == "reply")


def int_arg_tool(harness: Harness) -> tuple[Tool, str]:
    """A read-only tool taking exactly one required integer argument (e.g. a product link)."""
    for tool in harness.tools:
        props = tool.parameters.get("properties", {})
        ints = [k for k, v in props.items() if v.get("type") == "integer"]
        if ints and tool.parameters.get("required") == ints[:1] and not tool.side_effect:
            return tool, ints[0]
    raise LookupError("no tool with one required integer argument")


def good_script(harness: Harness) -> list[dict[str, Any]]:
    tool, arg = int_arg_tool(harness)
    return [{"kind": "call_tool", "tool": tool.name, "arguments": {arg: 3}},
            {"kind": "load_skill", "skill": reply_skill(harness)},
            {"kind": "reply", "text": "Link 3 is 299 CNY <sil_L2> tap to grab it!"}]


def retry_script(harness: Harness) -> list[dict[str, Any]]:
    tool, arg = int_arg_tool(harness)
    return [{"kind": "reply", "text": "It is 299!"},  # no reply skill loaded: corrected
            {"kind": "call_tool", "tool": tool.name, "arguments": {arg: 3}},
            {"kind": "load_skill", "skill": reply_skill(harness)},
            {"kind": "reply", "text": "Only 199 today!"},  # unsupported number: corrected
            {"kind": "reply", "text": "Link 3 is 299 CNY, tap to grab it!"}]


def fallback_script(harness: Harness) -> list[dict[str, Any]]:
    bad = {"kind": "reply", "text": "x" * (harness.rules.max_reply_chars + 10)}
    return [{"kind": "load_skill", "skill": reply_skill(harness)}, *[bad] * 8]


def run_script(harness: Harness, script: list[dict[str, Any]], n: int = 0, room_id: str = "room-1",
               created_ms: int = 1_700_000_000_000) -> dict[str, Any]:
    """The trajectory (as the recorder stores it) of one scripted request."""
    comment = {"event_id": f"e-{n}", "user_id": f"u-{n}", "text": "how much is link 3?", "ts_ms": created_ms}
    room = {"room_id": room_id, "current_link": 3, "campaign": {"name": "spring", "max_discount_pct": 15}}
    state = st.new_state(room_id=room_id, harness_version=harness.version(), comments=[comment], room=room,
                         ttl_ms=60_000, time_budget_ms=60_000, created_ms=created_ms)
    st.add_step(state, "input", None, {"comments": [comment], "event_ids": [comment["event_id"]], "room": room})
    for action in script:
        st.add_step(state, "prompt", None, {"text": f"{harness.instructions}\n(turn {state['turn']})",
                                            "sections": [{"id": s.id, "source": s.source, "tokens": 1,
                                                          "truncated": False} for s in harness.prompt.sections],
                                            "evidence": {"product": PRODUCT, "faq": []}})
        raw = json.dumps({"action": action["kind"], **{k: v for k, v in action.items() if k != "kind"}})
        st.add_step(state, "model_output", "scripted", {"raw": raw, "attempts": 1})
        st.add_step(state, "action", action["kind"], {"kind": action["kind"], "skill": action.get("skill"),
                                                      "tool": action.get("tool"),
                                                      "arguments": action.get("arguments") or {},
                                                      "text": action.get("text"), "reason": action.get("reason"),
                                                      "repaired": False, "error": None})
        nxt = after_action(harness, state, action, created_ms + 10)
        state = nxt.state
        if nxt.route == "tool_call":
            assert nxt.tool_call is not None
            st.add_step(state, "tool_result", nxt.tool_call["tool"], {
                "call_id": nxt.tool_call["call_id"], "tool": nxt.tool_call["tool"], "ok": True, "result": PRODUCT,
                "error_code": None, "error_message": None})
            state["turn"] += 1
        if nxt.route == "terminal":
            return trajectory_from_reply({"state": nxt.state, "outcome": nxt.outcome, "text": nxt.text,
                                          "reason": nxt.reason, "completed_ms": created_ms + 500})
    raise ValueError("the script ended without a terminal outcome")
