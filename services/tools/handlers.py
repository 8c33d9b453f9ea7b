"""Tool call in, tool result out (no transport code)."""

from __future__ import annotations

import json
from typing import Any

from livehost.agent import state as st
from livehost.commerce.executor import ToolContext, ToolExecutor
from livehost.harness.provider import HarnessProvider


def viewer(state: dict[str, Any]) -> str:
    """The viewer a side effect is for: the author of the request's latest comment."""
    return state["comments"][-1]["user_id"] if state["comments"] else ""


class ToolsHandler:
    def __init__(self, harnesses: HarnessProvider, executor: ToolExecutor):
        self._harnesses = harnesses
        self._executor = executor

    async def execute(self, harness_version: str, tool: str, arguments: dict[str, Any], room_id: str,
                      user_id: str, request_id: str, idempotency_key: str | None) -> Any:
        harness = await self._harnesses.get(harness_version)
        ctx = ToolContext(room_id=room_id, user_id=user_id, request_id=request_id, idempotency_key=idempotency_key)
        return await self._executor.execute(harness, tool, arguments, ctx)

    async def on_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """The ToolResult record for one ToolCall; the result is recorded as a step and the turn advances."""
        state = st.clone(call["state"])
        outcome = await self.execute(state["harness_version"], call["tool"], json.loads(call["arguments_json"]),
                                     state["room_id"], viewer(state), state["request_id"], call["idempotency_key"])
        st.add_step(state, "tool_result", call["tool"], {
            "call_id": call["call_id"], "tool": call["tool"], "ok": outcome.ok, "result": outcome.result,
            "error_code": outcome.error_code, "error_message": outcome.error_message,
        }, duration_ms=outcome.duration_ms)
        state["turn"] += 1
        return {"state": state, "call_id": call["call_id"], "tool": call["tool"], "ok": outcome.ok,
                "result_json": json.dumps(outcome.result, default=str), "error_code": outcome.error_code,
                "error_message": outcome.error_message, "duration_ms": outcome.duration_ms}
