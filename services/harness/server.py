"""The Harness API's gRPC servicer: requests to registry calls, registry refusals to status codes.

The actor of every call is the authenticated identity (the client certificate's CN, see
livehost.security.authz), never a request field; forcing an activation or rollback also needs the
break-glass role, and pushes are limited per identity (count per minute; size by the per-method gRPC
limit).

INVALID_ARGUMENT: invalid bundle (every problem in the details), malformed input; NOT_FOUND: unknown
version / proposal, or a target with nothing active; PERMISSION_DENIED: an author reviewing their
own proposal; FAILED_PRECONDITION: a workflow gate (no approved review, no passing evaluation —
for an activation and a rollback alike, without force; livehost/harness/gates.py); UNAVAILABLE: the
registry is not connected yet.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc

from livehost.gen.livehost.harness.v1 import harness_pb2, harness_pb2_grpc
from livehost.harness import gates
from livehost.harness.registry import (
    Activation,
    AuditEntry,
    Evaluation,
    HarnessSettings,
    LoadStatus,
    Proposal,
    Registry,
    VersionInfo,
)
from livehost.security.authz import current_identity, require_role
from livehost.security.limits import RateLimiter
from livehost.service import ServiceRuntime
from services.harness import clients, handlers
from services.harness import settings as service_settings

T = TypeVar("T")


def _rfc3339(value: datetime | None) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else ""


def _info(v: VersionInfo) -> harness_pb2.VersionInfo:
    return harness_pb2.VersionInfo(version=v.version, parent=v.parent or "", author=v.author, message=v.message,
                                   created_at=_rfc3339(v.created_at))


def _activation(a: Activation) -> harness_pb2.Activation:
    return harness_pb2.Activation(id=a.id, target=a.target, version=a.version or "", action=a.action,
                                  previous_version=a.previous_version or "", actor=a.actor, forced=a.forced,
                                  reason=a.reason, created_at=_rfc3339(a.created_at), announced=a.announced)


def _evaluation(e: Evaluation) -> harness_pb2.Evaluation:
    return harness_pb2.Evaluation(id=e.id, version=e.version, passed=e.passed,
                                  result_json=json.dumps(e.result, default=str, ensure_ascii=False), actor=e.actor,
                                  created_at=_rfc3339(e.created_at))


def _proposal(p: Proposal) -> harness_pb2.Proposal:
    return harness_pb2.Proposal(id=p.id, version=p.version, author=p.author, message=p.message, status=p.status,
                                created_at=_rfc3339(p.created_at))


def _audit(e: AuditEntry) -> harness_pb2.AuditEntry:
    return harness_pb2.AuditEntry(id=e.id, at=_rfc3339(e.at), actor=e.actor, action=e.action, version=e.version or "",
                                  target=e.target or "", proposal_id=e.proposal_id or 0,
                                  details_json=json.dumps(e.details, default=str, ensure_ascii=False))


def _load_status(st: LoadStatus) -> harness_pb2.LoadStatusEntry:
    return harness_pb2.LoadStatusEntry(service=st.service, version=st.version, ok=st.ok, error=st.error,
                                       replica=st.replica, updated_at=_rfc3339(st.updated_at))


class HarnessServicer(harness_pb2_grpc.HarnessServiceServicer):
    def __init__(self, get_registry: Callable[[], Registry | None], *, pushes_per_minute: int = 10):
        self._get_registry = get_registry
        self._pushes = RateLimiter(pushes_per_minute, 60.0)

    @staticmethod
    def _actor() -> str:
        return current_identity().identity

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
        actor = self._actor()
        if not self._pushes.allow(actor):
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"{actor!r} pushed {self._pushes.limit} versions in the last minute; try later")

        async def fn(r: Registry) -> Any:
            result = await r.push(handlers.parse_bundle(request.bundle_json), author=actor,
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
            proposal = await r.propose(request.version, author=self._actor(), message=request.message)
            return harness_pb2.ProposeResponse(proposal_id=str(proposal.id))
        return await self._call(context, fn)

    async def Review(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            proposal = await r.review(handlers.proposal_id(request.proposal_id), reviewer=self._actor(),
                                      decision=handlers.decision(request.decision), comment=request.comment)
            return harness_pb2.ReviewResponse(status=proposal.status)
        return await self._call(context, fn)

    async def Activate(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request.force:  # overriding review and evaluation is break-glass, with a reason, flagged in audit
            await require_role(context, gates.FORCE_ROLE, what="a forced activation")

        async def fn(r: Registry) -> Any:
            a = await r.activate(request.version, target=handlers.api_target(request.target), actor=self._actor(),
                                 force=request.force, reason=request.reason)
            return harness_pb2.ActivateResponse(activation=_activation(a), **_rollout(a))
        return await self._call(context, fn)

    async def Rollback(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request.force:
            await require_role(context, gates.FORCE_ROLE, what="a forced rollback")

        async def fn(r: Registry) -> Any:
            to = request.to_version if request.HasField("to_version") and request.to_version else None
            a = await r.rollback(target=handlers.api_target(request.target), actor=self._actor(), to=to,
                                 force=request.force, reason=request.reason)
            return harness_pb2.RollbackResponse(activation=_activation(a), **_rollout(a))
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


    async def AttachEvaluation(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            result = handlers.parse_bundle(request.result_json or "{}", "result_json")
            return _evaluation(await r.attach_evaluation(request.version, result, request.passed,
                                                         actor=self._actor()))
        return await self._call(context, fn)

    async def ListProposals(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            rows = await r.proposals(version=request.version or None, status=request.status or None,
                                     limit=min(request.limit or service_settings.DEFAULT_LOG_LIMIT, 1000))
            return harness_pb2.ListProposalsResponse(proposals=[_proposal(p) for p in rows])
        return await self._call(context, fn)

    async def ListEvaluations(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            return harness_pb2.ListEvaluationsResponse(
                evaluations=[_evaluation(e) for e in await r.evaluations(request.version)])
        return await self._call(context, fn)

    async def ListActivations(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            rows: list[Activation]
            if request.target:
                target = handlers.api_target(request.target)
                if request.history:
                    rows = await r.history(target)
                else:
                    one = await r.active(target)
                    rows = [one] if one and one.version else []
            else:
                rows = [a for t in sorted(await r.active_all()) if (a := await r.active(t)) is not None]
            return harness_pb2.ListActivationsResponse(activations=[_activation(a) for a in rows])
        return await self._call(context, fn)

    async def Audit(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            rows = await r.audit(limit=min(request.limit or 100, 1000), version=request.version or None,
                                 target=request.target or None, actor=request.actor or None)
            return harness_pb2.AuditResponse(entries=[_audit(e) for e in rows])
        return await self._call(context, fn)

    async def LoadStatus(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def fn(r: Registry) -> Any:
            rows = await r.load_status(request.version or None)
            return harness_pb2.LoadStatusResponse(entries=[_load_status(st) for st in rows])
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
                              HarnessServicer(lambda: holder.get("registry"),
                                              pushes_per_minute=settings.harness_pushes_per_minute)))
    return runtime
