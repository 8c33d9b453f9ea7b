"""The registry as the CLI sees it: every call goes through the Harness gRPC API over mutual TLS.

The CLI needs no database credentials: the harness service holds them, authenticates the caller
by its client certificate (``LIVEHOST_GRPC_IDENTITY``, from the PKI folder) and records that
identity as the actor. :class:`RemoteRegistry` offers the subset of :class:`Registry`'s methods the
CLI uses, returning the same value types, and maps gRPC status codes back to the registry's
refusals (so the CLI prints and exits the same way).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import grpc
import grpc.aio

from livehost.gen.livehost.harness.v1 import harness_pb2, harness_pb2_grpc
from livehost.grpcutil import make_channel
from livehost.harness.loader import HarnessError, Problem, from_dict
from livehost.harness.model import Harness
from livehost.harness.registry import (
    Activation,
    AuditEntry,
    BadRequest,
    Evaluation,
    HarnessSettings,
    LoadStatus,
    NotFound,
    Proposal,
    PushResult,
    Refused,
    RegistryError,
    SelfReview,
    VersionInfo,
)
from livehost.harness.validate import validate_bundle, validate_path

DECISION_VALUES = {"approve": 1, "reject": 2, "request_changes": 3}


def api_url(settings: HarnessSettings) -> str:
    """Where the Harness API listens: ``LIVEHOST_HARNESS_API_URL``, else the local harness port."""
    return settings.harness_api_url or f"{settings.grpc_host}:{settings.harness_grpc_port}"


def _ts(value: str) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _raise(exc: grpc.aio.AioRpcError, url: str) -> NoReturn:
    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.NOT_FOUND:
        raise NotFound(details) from None
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
        raise BadRequest(details) from None
    if code == grpc.StatusCode.PERMISSION_DENIED:
        message = f"permission denied: {details}"
        raise SelfReview(message) if "must not be the author" in details else Refused(message) from None
    if code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAUTHENTICATED):
        raise Refused(f"{code.name}: {details}") from None
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        raise ConnectionError(f"the Harness API at {url} is unreachable ({code.name}: {details})") from None
    raise RegistryError(f"{code.name}: {details}") from None


def _activation(a: Any) -> Activation:
    return Activation(a.id, a.target, a.version or None, a.action, a.previous_version or None, a.actor, a.forced,
                      a.reason, _ts(a.created_at), a.announced)  # type: ignore[arg-type]


def _evaluation(e: Any) -> Evaluation:
    return Evaluation(e.id, e.version, e.passed, dict(json.loads(e.result_json or "{}")), e.actor,
                      _ts(e.created_at))  # type: ignore[arg-type]


class RemoteRegistry:
    """The Harness API client the CLI uses in place of a database connection."""

    def __init__(self, settings: HarnessSettings, timeout_s: float = 30.0):
        self.url = api_url(settings)
        self._channel = make_channel(self.url, settings=settings)
        self._stub = harness_pb2_grpc.HarnessServiceStub(self._channel)
        self._timeout = timeout_s

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub, method)(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            _raise(exc, self.url)

    # -- versions ---------------------------------------------------------------------------------

    async def push(self, bundle: Harness | Path | str, *, author: str = "", message: str = "",
                   parent: str | None = None) -> PushResult:
        del author  # the identity of the client certificate is the author
        report = validate_bundle(bundle.canonical()) if isinstance(bundle, Harness) else validate_path(bundle)
        if report.errors or report.harness is None:
            raise HarnessError(report.errors or [Problem("bundle", "-", "could not load")])
        resp = await self._call("Push", harness_pb2.PushRequest(
            bundle_json=json.dumps(report.harness.canonical(), ensure_ascii=False), message=message,
            parent=parent or ""))
        return PushResult(resp.version, resp.created, tuple(report.warnings))

    async def show(self, ref: str) -> tuple[VersionInfo, Harness]:
        resp = await self._call("Show", harness_pb2.ShowRequest(version=ref))
        harness = from_dict(json.loads(resp.bundle_json))
        i = resp.info
        info = VersionInfo(i.version, harness.name, i.parent or None, i.author, i.message,
                           _ts(i.created_at))  # type: ignore[arg-type]
        return info, harness

    async def harness(self, ref: str) -> Harness:
        return (await self.show(ref))[1]

    async def log(self, limit: int = 50) -> list[VersionInfo]:
        resp = await self._call("Log", harness_pb2.LogRequest(limit=limit))
        return [VersionInfo(v.version, "", v.parent or None, v.author, v.message, _ts(v.created_at))  # type: ignore[arg-type]
                for v in resp.versions]

    # -- workflow ---------------------------------------------------------------------------------

    async def propose(self, version: str, *, author: str = "", message: str = "") -> Proposal:
        del author
        resp = await self._call("Propose", harness_pb2.ProposeRequest(version=version, message=message))
        return next(p for p in await self.proposals(limit=1000) if str(p.id) == resp.proposal_id)

    async def proposals(self, *, version: str | None = None, status: str | None = None,
                        limit: int = 100) -> list[Proposal]:
        resp = await self._call("ListProposals", harness_pb2.ListProposalsRequest(
            version=version or "", status=status or "", limit=limit))
        return [Proposal(p.id, p.version, p.author, p.message, p.status, _ts(p.created_at),  # type: ignore[arg-type]
                         _ts(p.created_at)) for p in resp.proposals]  # type: ignore[arg-type]

    async def review(self, proposal_id: int, *, reviewer: str = "", decision: str, comment: str = "") -> Proposal:
        del reviewer
        if decision not in DECISION_VALUES:
            raise BadRequest(f"decision must be one of {', '.join(DECISION_VALUES)}, got {decision!r}")
        await self._call("Review", harness_pb2.ReviewRequest(
            proposal_id=str(proposal_id), decision=DECISION_VALUES[decision], comment=comment))  # type: ignore[arg-type]
        return next(p for p in await self.proposals(limit=1000) if p.id == int(proposal_id))

    async def attach_evaluation(self, version: str, result: dict[str, Any], passed: bool, *,
                                actor: str = "") -> Evaluation:
        del actor
        resp = await self._call("AttachEvaluation", harness_pb2.AttachEvaluationRequest(
            version=version, result_json=json.dumps(result, default=str, ensure_ascii=False), passed=passed))
        return _evaluation(resp)

    async def evaluations(self, version: str) -> list[Evaluation]:
        resp = await self._call("ListEvaluations", harness_pb2.ListEvaluationsRequest(version=version))
        return [_evaluation(e) for e in resp.evaluations]

    async def activate(self, version: str, *, target: str = "global", actor: str = "", force: bool = False,
                       reason: str = "") -> Activation:
        del actor
        resp = await self._call("Activate", harness_pb2.ActivateRequest(version=version, target=target,
                                                                        force=force, reason=reason))
        return _activation(resp.activation)

    async def rollback(self, *, target: str = "global", actor: str = "", to: str | None = None,
                       force: bool = False, reason: str = "") -> Activation:
        del actor
        request = harness_pb2.RollbackRequest(target=target, force=force, reason=reason)
        if to:
            request.to_version = to
        resp = await self._call("Rollback", request)
        return _activation(resp.activation)

    # -- state ------------------------------------------------------------------------------------

    async def active(self, target: str = "global") -> Activation | None:
        resp = await self._call("ListActivations", harness_pb2.ListActivationsRequest(target=target))
        return _activation(resp.activations[0]) if resp.activations else None

    async def active_all(self) -> dict[str, str]:
        resp = await self._call("ListActivations", harness_pb2.ListActivationsRequest())
        return {a.target: a.version for a in resp.activations if a.version}

    async def history(self, target: str = "global", limit: int = 50) -> list[Activation]:
        resp = await self._call("ListActivations", harness_pb2.ListActivationsRequest(target=target, history=True))
        return [_activation(a) for a in resp.activations][:limit]

    async def audit(self, *, limit: int = 100, version: str | None = None, target: str | None = None,
                    actor: str | None = None) -> list[AuditEntry]:
        resp = await self._call("Audit", harness_pb2.AuditRequest(limit=limit, version=version or "",
                                                                  target=target or "", actor=actor or ""))
        return [AuditEntry(e.id, _ts(e.at), e.actor, e.action, e.version or None, e.target or None,  # type: ignore[arg-type]
                           e.proposal_id or None, dict(json.loads(e.details_json or "{}"))) for e in resp.entries]

    async def load_status(self, version: str | None = None) -> list[LoadStatus]:
        resp = await self._call("LoadStatus", harness_pb2.LoadStatusRequest(version=version or ""))
        return [LoadStatus(st.service, st.version, st.ok, st.error, st.replica, _ts(st.updated_at))  # type: ignore[arg-type]
                for st in resp.entries]
