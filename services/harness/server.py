"""The Harness API's gRPC servicer: requests to registry calls, registry refusals to status codes.

INVALID_ARGUMENT: invalid bundle (every problem in the details), malformed input; NOT_FOUND: unknown
version / proposal, or a target with nothing active; PERMISSION_DENIED: an author reviewing their
own proposal; FAILED_PRECONDITION: a workflow gate (no approved review, failed evaluation, a
rollback to an unreviewed version without force); UNAVAILABLE: the registry is not connected yet.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc

from livehost.gen.livehost.harness.v1 import harness_pb2, harness_pb2_grpc
from livehost.harness.registry import Activation, HarnessSettings, Registry, VersionInfo
from livehost.service import ServiceRuntime
from services.harness import clients, handlers
from services.harness import settings as service_settings

T = TypeVar("T")


def _rfc3339(value: datetime | None) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else ""


def _info(v: VersionInfo) -> harness_pb2.VersionInfo:
    return harness_pb2.VersionInfo(version=v.version, parent=v.parent or "", author=v.author, message=v.message,
                                   created_at=_rfc3339(v.created_at))


class HarnessServicer(harness_pb2_grpc.HarnessServiceServicer):
    def __init__(self, get_registry: Callable[[], Registry | None]):
        self._get_registry = get_registry

    async def _call(self, context: grpc.aio.ServicerContext, fn: Callable[[Registry], Awaitable[T]]) -> T:
        registry = self._get_registry()
        if registry is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "harness registry not connected yet")
        assert registry is not None
        try:
            return await fn(registry)
        except Exception as exc:
            code = handlers.status_of(exc)
            if code is None:
                raise
            message = str(exc)
            problems = getattr(exc, "problems", None)
            if problems:
                message = f"invalid harness ({len(problems)} problems):\n" + "\n".join(f"- {p}" for p in problems)
            await context.abort(getattr(grpc.StatusCode, code), message)
            raise AssertionError("unreachable") from exc

    async def Validate(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(_r: Registry) -> Any:
            report = Registry.validate(handlers.parse_bundle(request.bundle_json))
            return harness_pb2.ValidateResponse(
                valid=report.ok,
                problems=[harness_pb2.Problem(path=f"{p.file}: {p.field}", message=p.message, severity=p.severity)
                          for p in report.problems])
        return await self._call(context, fn)

    async def Push(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            result = await r.push(handlers.parse_bundle(request.bundle_json), author=request.author,
                                  message=request.message, parent=request.parent or None)
            return harness_pb2.PushResponse(version=result.version, created=result.created)
        return await self._call(context, fn)

    async def Show(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            info = await r.info(request.version)
            bundle = await r.bundle(info.version)
            return harness_pb2.ShowResponse(info=_info(info), bundle_json=json.dumps(bundle, ensure_ascii=False))
        return await self._call(context, fn)

    async def Log(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            versions = await r.log(request.limit or service_settings.DEFAULT_LOG_LIMIT)
            return harness_pb2.LogResponse(versions=[_info(v) for v in versions])
        return await self._call(context, fn)

    async def Diff(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            return harness_pb2.DiffResponse(text=await r.diff(request.a, request.b))
        return await self._call(context, fn)

    async def Propose(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            proposal = await r.propose(request.version, author=request.author, message=request.message)
            return harness_pb2.ProposeResponse(proposal_id=str(proposal.id))
        return await self._call(context, fn)

    async def Review(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            proposal = await r.review(handlers.proposal_id(request.proposal_id), reviewer=request.reviewer,
                                      decision=handlers.decision(request.decision), comment=request.comment)
            return harness_pb2.ReviewResponse(status=proposal.status)
        return await self._call(context, fn)

    async def Activate(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            a = await r.activate(request.version, target=handlers.api_target(request.target), actor=request.actor,
                                 force=request.force, reason=request.reason)
            return harness_pb2.ActivateResponse(**_rollout(a))
        return await self._call(context, fn)

    async def Rollback(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            to = request.to_version if request.HasField("to_version") and request.to_version else None
            a = await r.rollback(target=handlers.api_target(request.target), actor=request.actor, to=to,
                                 force=request.force, reason=request.reason)
            return harness_pb2.RollbackResponse(**_rollout(a))
        return await self._call(context, fn)

    async def GetActive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            target = handlers.api_target(request.target)
            a = await r.active(target)
            if a is None or a.version is None:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"no harness is active on {target}")
            assert a is not None
            return harness_pb2.GetActiveResponse(version=a.version or "", activated_at=_rfc3339(a.created_at))
        return await self._call(context, fn)


def _rollout(a: Activation) -> dict[str, str]:
    return {"rollout_id": str(a.id), "previous_version": a.previous_version or "", "active_version": a.version or ""}


def build(settings: HarnessSettings | None = None) -> ServiceRuntime:
    settings = settings or service_settings.load_harness_settings()
    producer = clients.producer(settings)
    runtime = ServiceRuntime("harness", settings, service_settings.grpc_port(settings), producer)
    holder: dict[str, Registry] = {}

    async def connect() -> None:
        holder["registry"] = await clients.registry(settings, clients.publisher(producer))

    async def close() -> None:
        registry = holder.pop("registry", None)
        if registry is not None:
            await registry.close()

    runtime.connect.append(connect)
    runtime.close.append(close)
    runtime.servicers.append((harness_pb2_grpc.add_HarnessServiceServicer_to_server,
                              HarnessServicer(lambda: holder.get("registry"))))
    return runtime
