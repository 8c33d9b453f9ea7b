"""Tool call in, tool result out (no transport code).

Tools run in the request's catalog scope (room state key ``scope``; ``live`` by default). A sandbox
scope's faults come from a :class:`~livehost.agent.sandbox.FaultSource` (PostgreSQL in the service),
so an evaluation case's injected timeouts and malformed results apply on the real path too. The live
scope has faults only during an operator's drill (:mod:`livehost.commerce.drills`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from livehost.agent import state as st
from livehost.agent.sandbox import FaultSource
from livehost.commerce.drills import LiveDrills
from livehost.commerce.executor import ToolContext, ToolExecutor, ToolOutcome
from livehost.commerce.faults import FaultInjector
from livehost.commerce.store import LIVE_SCOPE
from livehost.harness.provider import HarnessProvider
from livehost.security.attest import AttestationError, Verifier
from livehost.security.ids import check_id

log = logging.getLogger(__name__)


def viewer(state: dict[str, Any]) -> str:
    """The viewer a side effect is for: the author of the request's latest comment."""
    return state["comments"][-1]["user_id"] if state["comments"] else ""


def trusted_viewer(state: dict[str, Any], verifier: Verifier | None, now_ms: int | None = None) -> str | None:
    """The viewer, only when the request's attestation (signed by the service that screened its
    comments, before the request's deadline) verifies and names them; else None — no coupon and no
    order lookup for anybody."""
    if verifier is None:  # in-process runs (evaluation) create their requests themselves
        return viewer(state)
    try:
        attested = verifier.viewers(state, now_ms)
    except AttestationError as exc:
        log.warning("request %s: %s; tools run without a viewer", state.get("request_id"), exc)
        return None
    who = viewer(state)
    return who if who in attested else None


class ToolsHandler:
    def __init__(self, harnesses: HarnessProvider, executor: ToolExecutor, faults: FaultSource | None = None,
                 verifier: Verifier | None = None, drills: LiveDrills | None = None):
        self._harnesses = harnesses
        self._executor = executor
        self._faults = faults
        self._verifier = verifier
        self._drills = drills

    async def executor_for(self, scope: str) -> ToolExecutor:
        """The executor of a scope: the shared one, or one with the scope's sandbox faults (the live
        scope's: the active drills)."""
        if scope == LIVE_SCOPE:
            faults = await self._drills.faults() if self._drills is not None else {}
        elif self._faults is not None:
            faults = await self._faults.faults_for(scope)
        else:
            faults = {}
        if not faults:
            return self._executor
        return ToolExecutor(self._executor.store, FaultInjector(faults))

    async def execute(self, harness_version: str, tool: str, arguments: dict[str, Any], room_id: str,
                      user_id: str | None, request_id: str, idempotency_key: str | None,
                      scope: str = LIVE_SCOPE) -> ToolOutcome:
        harness = await self._harnesses.get(harness_version)
        ctx = ToolContext(room_id=room_id, user_id=user_id, request_id=request_id, idempotency_key=idempotency_key,
                          scope=scope)
        executor = await self.executor_for(scope)
        return await executor.execute(harness, tool, arguments, ctx)

    async def on_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """The ToolResult record for one ToolCall; the result is recorded as a step and the turn advances."""
        state = st.clone(call["state"])
        check_id("room_id", state["room_id"])  # ids from Kafka meet the format Ingest enforces
        check_id("request_id", state["request_id"])
        outcome = await self.execute(state["harness_version"], call["tool"], json.loads(call["arguments_json"]),
                                     state["room_id"], trusted_viewer(state, self._verifier), state["request_id"],
                                     call["idempotency_key"],
                                     scope=st.scope(state))
        st.add_step(state, "tool_result", call["tool"], {
            "call_id": call["call_id"], "tool": call["tool"], "ok": outcome.ok, "result": outcome.result,
            "error_code": outcome.error_code, "error_message": outcome.error_message, "fault": outcome.fault,
        }, duration_ms=outcome.duration_ms)
        state["turn"] += 1
        return {"state": state, "call_id": call["call_id"], "tool": call["tool"], "ok": outcome.ok,
                "result_json": json.dumps(outcome.result, default=str), "error_code": outcome.error_code,
                "error_message": outcome.error_message, "duration_ms": outcome.duration_ms}
