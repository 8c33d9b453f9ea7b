"""One step of the ReAct baseline after the policy acted: no hooks, no skills.

Classic ReAct behaviour: a tool call runs (the tool executor validates arguments and reports any
error as the observation), an unknown tool or unparseable output becomes an observation telling
the model what went wrong, a final answer ends the request. The same turn limit and time budget as
harness requests (from the harness limits), and the same freshness rules (stale -> cancelled).
"""

from __future__ import annotations

import json
from typing import Any

from livehost.agent import state as st
from livehost.agent.loop import POLICY_UNAVAILABLE, Next, correct, fallback, idempotency_key, terminal
from livehost.harness.model import Harness

FORMAT_HOOK = "react_format"


def after_react_action(harness: Harness, state: dict[str, Any], action: dict[str, Any], now_ms: int) -> Next:
    state = st.clone(state)
    if now_ms > state["deadline_ms"]:
        return terminal(state, "cancelled", None, "stale: request exceeded its time budget")
    kind = action["kind"]
    error = action.get("error") or ""
    if kind == "invalid" and error.startswith(POLICY_UNAVAILABLE):
        return fallback(harness, state, error)
    last_turn = state["turn"] + 1 >= harness.limits.max_turns
    if kind in ("invalid", "load_skill", "call_tool") and last_turn:
        return terminal(state, "no_reply", None, f"agent stopped: iteration limit {harness.limits.max_turns}")
    if kind == "invalid":
        return correct(state, FORMAT_HOOK, error or "invalid format", error or "Invalid Format.")
    if kind == "load_skill":
        message = "Invalid Format: there are no skills; use a tool or give the Final Answer."
        return correct(state, FORMAT_HOOK, "load_skill in ReAct", message)
    if kind == "call_tool":
        tool = harness.tool(action.get("tool") or "")
        if tool is None:
            names = ", ".join(t.name for t in harness.tools)
            return correct(state, FORMAT_HOOK, f"unknown tool {action.get('tool')!r}",
                           f"{action.get('tool')} is not a valid tool, try one of [{names}].")
        args = action.get("arguments") or {}
        call = {
            "call_id": f"{state['request_id']}-t{state['turn']}",
            "tool": tool.name,
            "arguments_json": json.dumps(args, sort_keys=True),
            "idempotency_key": idempotency_key(state, tool.name, args) if tool.side_effect else None,
        }
        st.add_step(state, "tool_call", tool.name, {"call_id": call["call_id"], "tool": tool.name, "arguments": args})
        return Next("tool_call", state, tool_call=call)
    if kind == "reply" and (action.get("text") or "").strip():
        return terminal(state, "reply", action["text"].strip(), None)
    return terminal(state, "no_reply", None, action.get("reason") or "the agent chose not to answer")
