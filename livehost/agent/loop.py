"""One step of the agent loop after the policy acted: hooks decide, and the request moves on.

``after_action`` is pure: given the harness, the request state and the parsed action it returns
where the request goes next (another turn, a tool call, or a terminal outcome). The hooks service
wraps it with Kafka; the evaluation runner can call it directly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from livehost.agent import state as st
from livehost.harness.model import Harness
from livehost.hooks.step import check_action
from livehost.hooks.verdict import Verdict

Route = Literal["turn", "tool_call", "terminal"]
POLICY_UNAVAILABLE = "policy unavailable"


@dataclass
class Next:
    route: Route
    state: dict[str, Any]
    tool_call: dict[str, Any] | None = None  # for route == "tool_call"
    outcome: str | None = None  # for route == "terminal": reply | no_reply | rejected | fallback | cancelled
    text: str | None = None
    reason: str | None = None


def terminal(state: dict[str, Any], outcome: str, text: str | None, reason: str | None) -> Next:
    kind = {"reply": "reply", "no_reply": "no_reply", "cancelled": "cancel"}.get(outcome, "fallback")
    st.add_step(state, kind, None, {"outcome": outcome, "text": text, "reason": reason})
    return Next("terminal", state, outcome=outcome, text=text, reason=reason)


def fallback(harness: Harness, state: dict[str, Any], reason: str) -> Next:
    if harness.fallback.mode == "reply" and harness.fallback.text:
        return terminal(state, "fallback", harness.fallback.text, reason)
    return terminal(state, "rejected", None, reason)


def correct(state: dict[str, Any], hook: str, reason: str, message: str) -> Next:
    st.add_step(state, "correction", hook, {"hook": hook, "reason": reason, "message": message})
    state["retries"] += 1
    state["turn"] += 1
    return Next("turn", state)


def action_from_record(record: dict[str, Any]) -> dict[str, Any]:
    """The parsed action of an AgentAction record, as the step hooks take it."""
    kind = record["kind"]
    return {"kind": kind, "skill": record.get("skill"), "tool": record.get("tool"),
            "arguments": json.loads(record.get("arguments_json") or "{}"), "text": record.get("text"),
            "reason": record.get("reason"), "error": record.get("reason") if kind == "invalid" else None}


def route_action(harness: Harness, record: dict[str, Any], now_ms: int) -> Next:
    """Where the step hooks send an AgentAction record: the harness agent's routing, or the ReAct
    baseline's for its requests. The hooks processor and the prompt step running a request's turns
    both route with it."""
    from livehost.react.loop import after_react_action  # that module builds on this one

    after = after_react_action if st.is_react(record["state"]) else after_action
    return after(harness, record["state"], action_from_record(record), now_ms)


def idempotency_key(state: dict[str, Any], tool: str, arguments: dict[str, Any]) -> str:
    blob = json.dumps([state["request_id"], tool, arguments], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def after_action(harness: Harness, state: dict[str, Any], action: dict[str, Any], now_ms: int) -> Next:
    """Apply the step hooks to one parsed action and route the request."""
    state = st.clone(state)
    if now_ms > state["deadline_ms"]:
        return terminal(state, "cancelled", None, "stale: request exceeded its time budget")
    kind = action["kind"]
    last_turn = state["turn"] + 1 >= harness.limits.max_turns
    if kind == "invalid" and (action.get("error") or "").startswith(POLICY_UNAVAILABLE):
        return fallback(harness, state, action["error"])
    if kind == "invalid":
        if last_turn:
            return fallback(harness, state, f"turn limit reached after invalid output: {action.get('error')}")
        return correct(state, "action_protocol", action.get("error") or "unparseable action",
                       "Your output was not a valid action. Reply with exactly one JSON action object: "
                       f"{action.get('error') or ''}")
    if kind in ("call_tool", "load_skill") and last_turn:
        return fallback(harness, state, f"turn limit {harness.limits.max_turns} reached")
    if kind == "load_skill" and harness.skill(action.get("skill") or "") is None:
        known = ", ".join(s.id for s in harness.skills)
        return correct(state, "action_protocol", f"unknown skill {action.get('skill')!r}",
                       f"There is no skill {action.get('skill')!r}. Available skills: {known}")
    verdicts = check_action(harness, state, action)
    for v in verdicts:
        st.add_step(state, "hook_verdict", v.hook, v.as_dict())
    failed: Verdict | None = next((v for v in verdicts if v.failed), None)
    if failed is not None:
        if failed.verdict == "correct" and not last_turn:
            return correct(state, failed.hook, failed.reason, failed.message)
        return fallback(harness, state, f"{failed.hook}: {failed.reason}")
    if kind == "load_skill":
        skill = action["skill"]
        if skill not in state["loaded_skills"]:
            state["loaded_skills"].append(skill)
        st.add_step(state, "skill_load", skill, {"skill": skill})
        state["turn"] += 1
        return Next("turn", state)
    if kind == "call_tool":
        tool = harness.tool(action["tool"])
        assert tool is not None  # the tool-arguments hook checked it
        args = action.get("arguments") or {}
        call = {
            "call_id": f"{state['request_id']}-t{state['turn']}",
            "tool": tool.name,
            "arguments_json": json.dumps(args, sort_keys=True),
            "idempotency_key": idempotency_key(state, tool.name, args) if tool.side_effect else None,
        }
        st.add_step(state, "tool_call", tool.name, {"call_id": call["call_id"], "tool": tool.name, "arguments": args})
        return Next("tool_call", state, tool_call=call)
    if kind == "reply":
        return terminal(state, "reply", action.get("text"), None)
    return terminal(state, "no_reply", None, action.get("reason") or "policy chose not to reply")
