"""Execute a harness tool call against the commerce backend.

The tool is looked up by name in the harness the request is pinned to; its behaviour comes from
the backend operation its binding names, never from the tool's name. Every failure is a structured
:class:`ToolOutcome` (``error_code`` + message the model can read), never an exception:

==================  ==================================================================
``unknown_tool``     no tool of that name in this harness (the message lists the tools)
``invalid_arguments`` arguments fail the tool's JSON Schema (or the backend's own checks)
``timeout``          no answer within the tool's ``timeout_ms``
``malformed``        the result is not JSON or does not fit the operation's result schema
``permission_denied`` the backend refused (e.g. a coupon above the campaign maximum)
``not_found``        no such link / coupon / order
``limit_reached``    a per-viewer limit is used up (coupon already claimed)
``misconfigured``    the tool binds to an unknown backend operation
``unavailable``      the database could not be reached
``internal``         anything else (logged)
==================  ==================================================================

Side-effecting tools (``tool.side_effect`` or the operation's) run exactly once per idempotency
key: key and result are stored in PostgreSQL in the same transaction as the side effect, and a
redelivered call returns the stored result with ``replayed=True``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import asyncpg
import jsonschema

from livehost.commerce.errors import CommerceError, Malformed, PermissionDenied
from livehost.commerce.faults import MALFORMED_RESULT, FaultInjector
from livehost.commerce.operations import OPERATIONS, Operation
from livehost.commerce.schemas import result_problems
from livehost.commerce.store import LIVE_SCOPE, Action
from livehost.harness.model import Harness, Tool
from livehost.hooks.gate import SideEffectPolicy, policy_for

log = logging.getLogger(__name__)

# How far past the tool's timeout an injected ``timeout`` fault sleeps.
TIMEOUT_FAULT_MARGIN_S = 0.5


class CommerceBackend(Protocol):
    """What the executor needs from the store (:class:`~livehost.commerce.store.CommerceStore`)."""

    async def invoke(self, operation: str, params: dict[str, Any], *, scope: str = ...,
                     conn: Any = ..., idempotency_key: str | None = ...) -> Any: ...

    async def run_once(self, scope: str, key: str, *, tool: str, operation: str, request_id: str | None,
                       action: Action) -> tuple[Any, bool]: ...

    async def gate_side_effect(self, conn: Any, policy: SideEffectPolicy, *, scope: str, key: str, room_id: str,
                               user_id: str | None, tool: str, operation: str, params: dict[str, Any]) -> None:
        """Hold a side effect to the room's policy (raise PermissionDenied) and record it."""


@dataclass(frozen=True)
class ToolContext:
    """Who and where a tool call acts for — filled from the request, never by the model.

    ``scope`` selects the catalog: ``live`` in production, a case's scope in the sandbox."""

    room_id: str
    user_id: str | None
    request_id: str
    idempotency_key: str | None = None
    scope: str = LIVE_SCOPE


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    result: Any
    error_code: str | None
    error_message: str | None
    duration_ms: float
    replayed: bool = False
    tool: str | None = None
    operation: str | None = None
    fault: str | None = None  # the injected fault that produced this outcome (sandbox only)
    idempotency_key: str | None = None

    def observation(self) -> dict[str, Any]:
        """What the model is shown: the result, or a structured error with no invented data."""
        if self.ok:
            return {"ok": True, "result": self.result}
        return {"ok": False, "error": {"code": self.error_code, "message": self.error_message}}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def derive_idempotency_key(request_id: str, tool: str, arguments: dict[str, Any], room_id: str = "",
                           user_id: str | None = None) -> str:
    """Deterministic key of a side-effecting call: request, tool, canonical arguments (and the room and
    viewer it acts for), so a redelivery of the same request maps to the same key."""
    blob = json.dumps([request_id, tool, arguments, room_id, user_id], sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False, default=str)
    return "derived:" + hashlib.sha256(blob.encode()).hexdigest()


def validate_arguments(tool: Tool, arguments: Any) -> list[str]:
    """Every way ``arguments`` fails the tool's JSON Schema, as ``path: message`` (empty when valid)."""
    if not isinstance(arguments, dict):
        return [f"(root): arguments must be a JSON object, got {type(arguments).__name__}"]
    cls = jsonschema.validators.validator_for(tool.parameters, default=jsonschema.Draft202012Validator)
    validator = cls(tool.parameters)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors]


def operation_params(tool: Tool, op: Operation, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Operation parameters from tool arguments (through ``binding.arguments``; an unmapped parameter
    takes the argument of the same name, else None) plus the context parameters from ``ctx`` (which
    a binding can never override)."""
    params: dict[str, Any] = {}
    for name in op.params:
        arg = tool.binding.arguments.get(name, name)
        params[name] = arguments.get(arg)
    context = {"room_id": ctx.room_id, "user_id": ctx.user_id, "request_id": ctx.request_id}
    for name in op.context:
        params[name] = context.get(name)
    return params


def normalise_result(operation: str, raw: Any) -> Any:
    """JSON round trip (so first call and replay are identical) + result-schema check."""
    try:
        data = json.loads(json.dumps(raw, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise Malformed(f"{operation} returned data that is not JSON: {exc}") from None
    problems = result_problems(operation, data)
    if problems:
        raise Malformed(f"{operation} returned a malformed result: {'; '.join(problems[:3])}")
    return data


class ToolExecutor:
    def __init__(self, store: CommerceBackend, faults: FaultInjector | None = None):
        self.store = store
        self.faults = faults

    async def execute(self, harness: Harness, tool_name: str, arguments: dict[str, Any],
                      ctx: ToolContext) -> ToolOutcome:
        t0 = time.perf_counter()

        def done(ok: bool, result: Any = None, code: str | None = None, message: str | None = None,
                 **extra: Any) -> ToolOutcome:
            return ToolOutcome(ok, result, code, message, round((time.perf_counter() - t0) * 1000, 3),
                               tool=tool_name, **extra)

        tool = harness.tool(tool_name)
        if tool is None:
            names = ", ".join(t.name for t in harness.tools) or "(none)"
            return done(False, code="unknown_tool", message=f"no tool named {tool_name!r}; available tools: {names}")
        op = OPERATIONS.get(tool.binding.operation)
        if op is None:
            return done(False, code="misconfigured",
                        message=f"tool {tool.name!r} binds to unknown operation {tool.binding.operation!r}")
        problems = validate_arguments(tool, arguments)
        if problems:
            return done(False, code="invalid_arguments", operation=op.name,
                        message=f"invalid arguments for {tool.name}: {'; '.join(problems)}")
        params = operation_params(tool, op, arguments, ctx)
        fault = self.faults.fault_for(op.capability) if self.faults else None
        side_effect = tool.side_effect or op.side_effect
        key = None
        if side_effect:
            key = ctx.idempotency_key or derive_idempotency_key(
                ctx.request_id, tool.name, arguments, ctx.room_id, ctx.user_id)
        timeout_s = tool.timeout_ms / 1000
        extra: dict[str, Any] = {"operation": op.name, "fault": fault, "idempotency_key": key}
        try:
            policy = policy_for(harness, ctx.room_id) if side_effect else None
            result, replayed = await asyncio.wait_for(
                self._run(tool, op, params, ctx, key, fault, timeout_s, policy), timeout_s)
        except TimeoutError:
            return done(False, code="timeout", message=f"{tool.name} did not answer within {tool.timeout_ms} ms",
                        **extra)
        except CommerceError as exc:
            return done(False, code=exc.code, message=exc.message, **extra)
        except (asyncpg.InterfaceError, asyncpg.PostgresConnectionError, OSError) as exc:
            log.warning("tool %s: backend unavailable: %s", tool.name, exc)
            return done(False, code="unavailable", message=f"{tool.name}: backend unavailable", **extra)
        except Exception as exc:
            log.exception("tool %s (%s) failed", tool.name, op.name)
            return done(False, code="internal", message=f"{tool.name} failed: {type(exc).__name__}", **extra)
        return done(True, result, replayed=replayed, **extra)

    async def _run(self, tool: Tool, op: Operation, params: dict[str, Any], ctx: ToolContext,
                   key: str | None, fault: str | None, timeout_s: float,
                   policy: SideEffectPolicy | None = None) -> tuple[Any, bool]:
        if fault == "timeout":
            await asyncio.sleep(timeout_s + TIMEOUT_FAULT_MARGIN_S)
        if fault == "permission_denied":
            raise PermissionDenied(f"{tool.name}: permission denied by the {op.capability} service")
        if fault == "malformed":
            return normalise_result(op.name, MALFORMED_RESULT), False

        async def call(conn: Any) -> Any:
            if policy is not None and key is not None:  # enforced in the side effect's own transaction
                await self.store.gate_side_effect(conn, policy, scope=ctx.scope, key=key, room_id=ctx.room_id,
                                                  user_id=ctx.user_id, tool=tool.name, operation=op.name,
                                                  params=params)
            raw = await self.store.invoke(op.name, params, scope=ctx.scope, conn=conn, idempotency_key=key)
            return normalise_result(op.name, raw)

        if key is None:
            return await call(None), False
        return await self.store.run_once(ctx.scope, key, tool=tool.name, operation=op.name,
                                         request_id=ctx.request_id, action=call)
