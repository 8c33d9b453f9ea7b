"""gRPC helpers shared by every service: server start-up with the standard health service, client
channels, a health wait, and mapping validation errors to INVALID_ARGUMENT.

Every server is a mutual-TLS server and every channel a mutual-TLS channel (credentials from the
PKI folder, see :mod:`livehost.security.pki`); authorization is :mod:`livehost.security.authz`.

Server side::

    from livehost.gen.livehost.ingest.v1 import ingest_pb2_grpc

    running = await start_server(
        [(ingest_pb2_grpc.add_IngestServiceServicer_to_server, IngestServicer(...))],
        host="0.0.0.0", port=settings.grpc_port,
    )
    ...                                   # running.port is the bound port (useful with port=0)
    await running.set_serving(False)      # e.g. while the Kafka consumer reconnects
    await running.stop(grace=5)

Client side::

    await wait_healthy("127.0.0.1:50051", service="livehost.ingest.v1.IngestService", timeout=10)
    async with make_channel("127.0.0.1:50051") as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from livehost.config import Settings, load_settings
from livehost.retry import backoff_delays
from livehost.security import pki_dir
from livehost.security.authz import AuthInterceptor
from livehost.security.pki import load_credential

# A generated `add_<Service>Servicer_to_server(servicer, server)` function.
AddFn = Callable[[Any, Any], None]

HEALTH_SERVICE_NAME = "grpc.health.v1.Health"
#: Message size limit for both directions (harness bundles and prompts can exceed gRPC's 4 MiB default).
MAX_MESSAGE_BYTES = 32 * 1024 * 1024

_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
_SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    # One process per port: a second server on the same port must fail, not share it silently.
    ("grpc.so_reuseport", 0),
]


# --- transport security: mutual TLS ---------------------------------------------------------------

def server_credentials(identity: str, settings: Settings | None = None) -> grpc.ServerCredentials:
    """TLS with ``identity``'s certificate that requires and verifies a client certificate."""
    cred = load_credential(pki_dir(settings), identity)
    return grpc.ssl_server_credentials([(cred.key, cred.cert)], root_certificates=cred.ca,
                                       require_client_auth=True)


def channel_credentials(identity: str | None = None, settings: Settings | None = None) -> grpc.ChannelCredentials:
    """TLS that verifies the server against the CA and presents ``identity``'s client certificate
    (default: ``settings.grpc_identity``)."""
    settings = settings or load_settings()
    cred = load_credential(pki_dir(settings), identity or settings.grpc_identity)
    return grpc.ssl_channel_credentials(root_certificates=cred.ca, private_key=cred.key,
                                        certificate_chain=cred.cert)
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}


class _RecordingServer:
    """Passes a generated add-function's registrations through and records the service names."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server
        self.names: list[str] = []

    def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        handlers = tuple(handlers)
        for h in handlers:
            name = getattr(h, "service_name", None)
            if callable(name) and name() and name() not in self.names:
                self.names.append(name())
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service_name: str, method_handlers: Any) -> None:
        if service_name not in self.names:
            self.names.append(service_name)
        self._server.add_registered_method_handlers(service_name, method_handlers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


@dataclass
class RunningServer:
    """A started gRPC server with its health service."""

    server: grpc.aio.Server
    host: str
    port: int
    health: health_aio.HealthServicer
    #: Fully qualified names of the registered services (without the health service itself).
    service_names: list[str] = field(default_factory=list)
    serving: bool = True

    @property
    def target(self) -> str:
        """Address a client on this machine dials (wildcard hosts become the loopback address)."""
        host = "127.0.0.1" if self.host in _WILDCARD_HOSTS else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"{host}:{self.port}"

    async def set_serving(self, serving: bool) -> None:
        """Report SERVING or NOT_SERVING for the server ("") and every registered service."""
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ["", *self.service_names]:
            await self.health.set(name, status)
        self.serving = serving

    async def stop(self, grace: float | None = 5.0) -> None:
        """Report NOT_SERVING everywhere, then stop, letting in-flight calls finish for `grace` seconds."""
        self.serving = False
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)

    async def wait_for_termination(self) -> None:
        await self.server.wait_for_termination()


async def start_server(
    servicers: Sequence[tuple[AddFn, Any]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    serving: bool = True,
    interceptors: Sequence[grpc.aio.ServerInterceptor] | None = None,
    options: Sequence[tuple[str, Any]] | None = None,
    identity: str | None = None,
    settings: Settings | None = None,
) -> RunningServer:
    """Start a grpc.aio server with `servicers` and the standard health service.

    The port is a mutual-TLS port with `identity`'s certificate (default ``settings.grpc_identity``);
    every call passes :class:`~livehost.security.authz.AuthInterceptor` first (caller identity from
    the client certificate, roles from ``settings.grpc_roles``, per-method request size limits).

    `servicers` pairs each generated `add_<Service>Servicer_to_server` function with its servicer.
    Port 0 binds a free port; the bound port is `RunningServer.port`. Health starts SERVING (or
    NOT_SERVING when `serving=False`) for the overall server ("") and each service's full name.
    Raises OSError when the address cannot be bound.
    """
    settings = settings or load_settings()
    auth = AuthInterceptor(settings.grpc_roles, default_max_bytes=settings.grpc_max_request_bytes,
                           method_max_bytes=settings.grpc_method_max_request_bytes)
    # gRPC itself refuses anything above the largest per-method limit before reading it whole.
    largest = max([settings.grpc_max_request_bytes, *settings.grpc_method_max_request_bytes.values()])
    credentials = server_credentials(identity or settings.grpc_identity, settings)
    server = grpc.aio.server(
        interceptors=[auth, *(interceptors or [])],
        options=[*_SERVER_OPTIONS, ("grpc.max_receive_message_length", largest), *(options or [])],
    )
    recorder = _RecordingServer(server)
    for add_fn, servicer in servicers:
        add_fn(servicer, recorder)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)

    address = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    try:
        bound = server.add_secure_port(address, credentials)
    except RuntimeError as exc:  # grpc raises RuntimeError on bind failure in recent versions
        raise OSError(f"cannot bind gRPC server to {address}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot bind gRPC server to {address}")
    await server.start()

    running = RunningServer(server=server, host=host, port=bound, health=health, service_names=recorder.names)
    await running.set_serving(serving)
    return running


def make_channel(target: str, *, options: Sequence[tuple[str, Any]] | None = None, identity: str | None = None,
                 settings: Settings | None = None) -> grpc.aio.Channel:
    """A mutual-TLS asyncio channel presenting `identity`'s certificate (default
    ``settings.grpc_identity``), with LiveHost's message-size and keepalive options.

    Use as `async with make_channel(target) as channel:` or close it with `await channel.close()`.
    """
    return grpc.aio.secure_channel(target, channel_credentials(identity, settings),
                                   options=[*_CHANNEL_OPTIONS, *(options or [])])


def make_sync_channel(target: str, *, options: Sequence[tuple[str, Any]] | None = None,
                      identity: str | None = None, settings: Settings | None = None) -> grpc.Channel:
    """A blocking channel with the same credentials and options, for the CLI and other synchronous callers."""
    return grpc.secure_channel(target, channel_credentials(identity, settings),
                               options=[*_CHANNEL_OPTIONS, *(options or [])])


async def health_status(
    channel: grpc.aio.Channel,
    service: str = "",
    timeout: float = 2.0,  # noqa: ASYNC109 - a gRPC deadline, sent to the server with the call
) -> str:
    """One health Check: "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"/"UNKNOWN", or "NOT_FOUND".

    Raises grpc.aio.AioRpcError for transport errors (e.g. UNAVAILABLE when nothing listens).
    """
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return "NOT_FOUND"
        raise
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))


async def wait_healthy(
    target: str,
    service: str = "",
    timeout: float = 30.0,  # noqa: ASYNC109 - overall deadline spanning retries and per-call deadlines
    *,
    identity: str | None = None,
) -> None:
    """Poll the health service at `target` until `service` ("" = whole server) is SERVING.

    Raises TimeoutError (with the last status or error seen) when `timeout` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    last = "no answer"
    delays = backoff_delays(initial_s=0.05, max_s=1.0)
    async with make_channel(target, identity=identity) as channel:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"gRPC service {service or '(server)'} at {target} not SERVING: {last}")
            try:
                last = await health_status(channel, service, timeout=min(2.0, remaining))
                if last == "SERVING":
                    return
            except grpc.aio.AioRpcError as exc:
                last = f"{exc.code().name}: {exc.details()}"
            await asyncio.sleep(min(next(delays), max(0.0, deadline - time.monotonic())))


# --- validation errors -> INVALID_ARGUMENT -------------------------------------------------------

_MAX_REASON_CHARS = 2000


def validation_reason(exc: BaseException) -> str:
    """A short, client-safe description of a validation error.

    Understands pydantic ValidationError ("loc: msg; ..."), jsonschema ValidationError
    ("$.path: message") and falls back to str(exc) for ValueError and others.
    """
    reason: str
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError" and hasattr(exc, "error_count"):
        parts = []
        for err in errors():
            loc = ".".join(str(x) for x in err.get("loc", ())) or "(root)"
            parts.append(f"{loc}: {err.get('msg', 'invalid')}")
        reason = "; ".join(parts)
    elif hasattr(exc, "message") and hasattr(exc, "json_path"):
        reason = f"{exc.json_path}: {exc.message}"
    else:
        reason = str(exc) or type(exc).__name__
    if len(reason) > _MAX_REASON_CHARS:
        reason = reason[: _MAX_REASON_CHARS - 3] + "..."
    return reason


async def abort_invalid_argument(context: grpc.aio.ServicerContext, error: BaseException | str) -> NoReturn:
    """Abort the current RPC with INVALID_ARGUMENT and a reason taken from `error`."""
    reason = error if isinstance(error, str) else validation_reason(error)
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises


def _default_validation_errors() -> tuple[type[BaseException], ...]:
    import jsonschema

    return (ValueError, jsonschema.ValidationError)


@asynccontextmanager
async def invalid_argument_on(
    context: grpc.aio.ServicerContext, *errors: type[BaseException]
) -> AsyncIterator[None]:
    """Turn validation errors raised in the block into INVALID_ARGUMENT.

    Default error types: ValueError (which includes pydantic's ValidationError and
    json.JSONDecodeError) and jsonschema.ValidationError::

        async with invalid_argument_on(context):
            state = RequestState.model_validate_json(request.request_json)
    """
    catch: tuple[type[BaseException], ...] = errors or _default_validation_errors()
    try:
        yield
    except catch as exc:
        await abort_invalid_argument(context, exc)
