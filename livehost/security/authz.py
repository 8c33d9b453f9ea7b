"""Who may call what: the roles each gRPC method needs, and the server interceptor that enforces it.

The caller's identity is the subject CN of the client certificate that mutual TLS verified (never a
request field); its roles come from ``Settings.grpc_roles``. For every call the interceptor:

1. finds the identity in the TLS auth context — none, or an identity bound to no role:
   ``UNAUTHENTICATED`` (a caller without a certificate the CA signed never gets this far: the TLS
   handshake refuses it);
2. looks the method up in :data:`METHOD_ROLES` — a method not listed: ``PERMISSION_DENIED``
   (deny by default); roles without an overlap: ``PERMISSION_DENIED`` naming the roles needed;
3. enforces the per-method request size limit before the request is decoded
   (``RESOURCE_EXHAUSTED``);
4. runs the handler with the identity and its roles available through :func:`current_identity`.

Finer rules that depend on the request (a room_config event needs ``operator``, a forced activation
needs ``break-glass``) are checked by the servicer with :func:`require_role`.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

ROLES: tuple[str, ...] = ("producer", "operator", "author", "reviewer", "releaser", "evaluator", "service",
                          "break-glass")

_READ = ("operator", "author", "reviewer", "releaser", "evaluator", "service")
_ANY = ROLES

#: Full gRPC method name -> roles any one of which allows the call. Methods not listed are denied.
METHOD_ROLES: dict[str, tuple[str, ...]] = {
    "/grpc.health.v1.Health/Check": _ANY,
    "/grpc.health.v1.Health/Watch": _ANY,
    # Ingest: live-room producers publish; room_config (agent switching) also needs operator, checked
    # in the servicer because it is one variant of SubmitRoomEvent.
    "/livehost.ingest.v1.IngestService/SubmitComment": ("producer",),
    "/livehost.ingest.v1.IngestService/SubmitRoomEvent": ("producer", "operator"),
    "/livehost.prompt.v1.PromptAssemblyService/Render": ("service", "operator", "evaluator"),
    "/livehost.policy.v1.PolicyService/Decide": ("service", "operator", "evaluator"),
    "/livehost.policy.v1.PolicyService/ListModels": _READ,
    # Side effects (coupons, product cards) only for the services and operators.
    "/livehost.tools.v1.ToolExecutionService/Execute": ("service", "operator"),
    "/livehost.tools.v1.ToolExecutionService/ListTools": _READ,
    "/livehost.voice.v1.VoiceService/Synthesize": ("service", "operator"),
    "/livehost.voice.v1.VoiceService/StreamSegments": ("service", "operator"),
    # The harness workflow: authors push and propose, reviewers review, releasers activate and roll
    # back (forcing needs break-glass), only the evaluator attaches evaluation results.
    "/livehost.harness.v1.HarnessService/Validate": _READ,
    "/livehost.harness.v1.HarnessService/Push": ("author",),
    "/livehost.harness.v1.HarnessService/Show": _READ,
    "/livehost.harness.v1.HarnessService/Log": _READ,
    "/livehost.harness.v1.HarnessService/Diff": _READ,
    "/livehost.harness.v1.HarnessService/Propose": ("author",),
    "/livehost.harness.v1.HarnessService/Review": ("reviewer",),
    "/livehost.harness.v1.HarnessService/Activate": ("releaser",),
    "/livehost.harness.v1.HarnessService/Rollback": ("releaser",),
    "/livehost.harness.v1.HarnessService/GetActive": _READ,
    "/livehost.harness.v1.HarnessService/AttachEvaluation": ("evaluator",),
    "/livehost.harness.v1.HarnessService/ListProposals": _READ,
    "/livehost.harness.v1.HarnessService/ListEvaluations": _READ,
    "/livehost.harness.v1.HarnessService/ListActivations": _READ,
    "/livehost.harness.v1.HarnessService/Audit": ("operator", "reviewer", "releaser", "break-glass"),
    "/livehost.harness.v1.HarnessService/LoadStatus": _READ,
}


@dataclass(frozen=True)
class Caller:
    identity: str
    roles: frozenset[str]

    def has(self, *roles: str) -> bool:
        return bool(self.roles.intersection(roles))


_current: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("livehost_caller", default=None)


def current_identity() -> Caller:
    """The authenticated caller of the RPC being handled (set by :class:`AuthInterceptor`)."""
    caller = _current.get()
    if caller is None:
        raise PermissionError("no authenticated caller (the call did not pass the auth interceptor)")
    return caller


async def require_role(context: grpc.aio.ServicerContext, *roles: str, what: str = "this call") -> Caller:
    """The caller, or abort with PERMISSION_DENIED when it has none of ``roles``."""
    caller = current_identity()
    if not caller.has(*roles):
        await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                            f"{caller.identity!r} may not make {what}: needs role {' or '.join(roles)}")
    return caller


def peer_identity(auth_context: Mapping[str, Iterable[bytes]]) -> str | None:
    """The subject CN of the verified client certificate, or None without one."""
    if b"ssl" not in list(auth_context.get("transport_security_type", [])):
        return None
    names = list(auth_context.get("x509_common_name", []))
    return names[0].decode("utf-8", "replace") if names else None


class _TooLarge:
    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


def _size_checked(deserializer: Callable[[bytes], Any] | None, limit: int) -> Callable[[bytes], Any]:
    def check(data: bytes) -> Any:
        if len(data) > limit:
            return _TooLarge(len(data))
        return deserializer(data) if deserializer is not None else data
    return check


def _deny(code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(code, message)

    return grpc.unary_unary_rpc_method_handler(unary)


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authentication (TLS peer identity), authorization (method roles) and request size limits."""

    def __init__(self, roles: Mapping[str, Iterable[str]], *, default_max_bytes: int,
                 method_max_bytes: Mapping[str, int] | None = None,
                 method_roles: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self._roles = {identity: frozenset(r) for identity, r in roles.items()}
        self._default_max = default_max_bytes
        self._method_max = dict(method_max_bytes or {})
        self._method_roles = dict(method_roles if method_roles is not None else METHOD_ROLES)

    def limit(self, method: str) -> int:
        return self._method_max.get(method, self._default_max)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        return _wrap(handler, method, self._method_roles.get(method), self._roles, self.limit(method))


def _wrap(handler: grpc.RpcMethodHandler, method: str, needed: tuple[str, ...] | None,
          bindings: Mapping[str, frozenset[str]], limit: int) -> grpc.RpcMethodHandler:
    async def admit(context: grpc.aio.ServicerContext) -> Caller:
        identity = peer_identity(context.auth_context())
        if identity is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a client certificate is required")
        assert identity is not None
        roles = bindings.get(identity)
        if not roles:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                f"identity {identity!r} is not bound to any role")
        assert roles is not None
        if needed is None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{method} is not open to any role")
        assert needed is not None
        if not roles.intersection(needed):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                f"{identity!r} may not call {method}: needs role {' or '.join(needed)}")
        return Caller(identity, roles)

    async def check_size(request: Any, context: grpc.aio.ServicerContext) -> None:
        if isinstance(request, _TooLarge):
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"request of {request.size} bytes exceeds the {limit}-byte limit of {method}")

    deserializer = _size_checked(handler.request_deserializer, limit)
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            caller = await admit(context)
            await check_size(request, context)
            token = _current.set(caller)
            try:
                return await inner_uu(request, context)
            finally:
                _current.reset(token)
        return grpc.unary_unary_rpc_method_handler(unary_unary, request_deserializer=deserializer,
                                                   response_serializer=handler.response_serializer)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        if inspect.isasyncgenfunction(inner_us):
            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                caller = await admit(context)
                await check_size(request, context)
                token = _current.set(caller)
                try:
                    async for item in inner_us(request, context):
                        yield item
                finally:
                    _current.reset(token)
        else:  # a handler that writes with context.write (the health service's Watch)
            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:  # type: ignore[misc]
                caller = await admit(context)
                await check_size(request, context)
                token = _current.set(caller)
                try:
                    await inner_us(request, context)
                finally:
                    _current.reset(token)
        return grpc.unary_stream_rpc_method_handler(unary_stream, request_deserializer=deserializer,
                                                    response_serializer=handler.response_serializer)
    # Streaming requests: no service of LiveHost has one; refuse rather than pass unchecked.
    return _deny(grpc.StatusCode.UNIMPLEMENTED, f"{method}: client-streaming calls are not supported")
