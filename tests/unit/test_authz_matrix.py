"""The authorization matrix: every gRPC method of every LiveHost service (and the health service) ×
{no credential, a credential with the wrong role, the right role}, through the real mutual-TLS server
and auth interceptor (grpcutil.start_server). The servicers here answer an empty response, so what is
tested is the transport and the method → role table; request-dependent rules (room_config, forced
activation) are tested with the real servicers elsewhere."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import descriptor as _descriptor
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2

from livehost.config import Settings
from livehost.gen.livehost.harness.v1 import harness_pb2
from livehost.gen.livehost.ingest.v1 import ingest_pb2
from livehost.gen.livehost.policy.v1 import policy_pb2
from livehost.gen.livehost.prompt.v1 import prompt_pb2
from livehost.gen.livehost.tools.v1 import tools_pb2
from livehost.gen.livehost.voice.v1 import voice_pb2
from livehost.grpcutil import RunningServer, make_channel, start_server
from livehost.security.authz import METHOD_ROLES
from livehost.security.pki import ensure_pki

FILES = [ingest_pb2, prompt_pb2, policy_pb2, tools_pb2, voice_pb2, harness_pb2, health_pb2]
SERVICES: list[_descriptor.ServiceDescriptor] = [
    s for f in FILES for s in f.DESCRIPTOR.services_by_name.values()]
METHODS: list[tuple[_descriptor.ServiceDescriptor, _descriptor.MethodDescriptor]] = [
    (s, m) for s in SERVICES for m in s.methods]
ROLES = Settings().grpc_roles


def full_name(service: _descriptor.ServiceDescriptor, method: _descriptor.MethodDescriptor) -> str:
    return f"/{service.full_name}/{method.name}"


def _handler(service: _descriptor.ServiceDescriptor) -> grpc.GenericRpcHandler:
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for m in service.methods:
        req, resp = GetMessageClass(m.input_type), GetMessageClass(m.output_type)
        if m.server_streaming:
            async def stream(request: Any, context: Any, resp: Any = resp) -> AsyncIterator[Any]:
                yield resp()
            handlers[m.name] = grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)
        else:
            async def unary(request: Any, context: Any, resp: Any = resp) -> Any:
                return resp()
            handlers[m.name] = grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[RunningServer]:
    adds = [(lambda _servicer, srv, s=s: srv.add_generic_rpc_handlers((_handler(s),)), None)
            for s in SERVICES if s.full_name != "grpc.health.v1.Health"]
    running = await start_server(adds, identity="harness")
    yield running
    await running.stop(grace=0)


async def call(channel: grpc.aio.Channel, service: _descriptor.ServiceDescriptor,
               method: _descriptor.MethodDescriptor) -> grpc.StatusCode:
    req, resp = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
    path = full_name(service, method)
    try:
        if method.server_streaming:
            stream = channel.unary_stream(path, request_serializer=req.SerializeToString,
                                          response_deserializer=resp.FromString)(req(), timeout=5)
            async for _ in stream:
                break
            stream.cancel()
        else:
            await channel.unary_unary(path, request_serializer=req.SerializeToString,
                                      response_deserializer=resp.FromString)(req(), timeout=5)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def test_every_method_has_roles() -> None:
    names = {full_name(s, m) for s, m in METHODS}
    assert names <= set(METHOD_ROLES), sorted(names - set(METHOD_ROLES))
    assert set(METHOD_ROLES) <= names, sorted(set(METHOD_ROLES) - names)  # no stale entries
    bound = {r for roles in ROLES.values() for r in roles}
    for name, roles in METHOD_ROLES.items():
        assert set(roles) & bound, f"{name}: no identity holds any of {roles}"


@pytest.mark.parametrize(("service", "method"), METHODS, ids=[full_name(s, m) for s, m in METHODS])
async def test_matrix(server: RunningServer, service: _descriptor.ServiceDescriptor,
                      method: _descriptor.MethodDescriptor, tmp_path: Path) -> None:
    needed = set(METHOD_ROLES[full_name(service, method)])
    right = next(i for i, roles in ROLES.items() if needed & set(roles))
    wrong = next((i for i, roles in ROLES.items() if not needed & set(roles)), None)

    # no credential: plaintext, and TLS without a client certificate — the handshake refuses both
    async with grpc.aio.insecure_channel(server.target) as plain:
        assert await call(plain, service, method) == grpc.StatusCode.UNAVAILABLE
    ca = (Path(os.environ["LIVEHOST_GRPC_PKI_DIR"]) / "ca.pem").read_bytes()
    async with grpc.aio.secure_channel(server.target, grpc.ssl_channel_credentials(ca)) as anonymous:
        assert await call(anonymous, service, method) == grpc.StatusCode.UNAVAILABLE
    # a certificate from another CA: refused in the handshake too
    foreign = tmp_path / "foreign"
    ensure_pki(foreign, [right])
    async with make_channel(server.target, identity=right,
                            settings=Settings(grpc_pki_dir=foreign)) as forged:
        assert await call(forged, service, method) == grpc.StatusCode.UNAVAILABLE
    # a certificate our CA signed for an identity bound to no role: UNAUTHENTICATED
    async with make_channel(server.target, identity="unbound") as unbound:
        assert await call(unbound, service, method) == grpc.StatusCode.UNAUTHENTICATED
    # the wrong role: PERMISSION_DENIED (every bound identity may check health, so it has none)
    if wrong is not None:
        async with make_channel(server.target, identity=wrong) as ch:
            assert await call(ch, service, method) == grpc.StatusCode.PERMISSION_DENIED, wrong
    else:
        assert service.full_name == "grpc.health.v1.Health"
    # the right role: the call reaches the servicer
    async with make_channel(server.target, identity=right) as ch:
        assert await call(ch, service, method) == grpc.StatusCode.OK, right


@pytest.fixture(scope="module", autouse=True)
def unbound_identity() -> None:
    """A credential the CA signed for an identity that configuration binds to no role."""
    ensure_pki(Path(os.environ["LIVEHOST_GRPC_PKI_DIR"]), ["unbound"])


async def test_request_size_limit_is_enforced_before_decoding(server: RunningServer) -> None:
    """A request over the method's limit is refused with RESOURCE_EXHAUSTED and never decoded."""
    settings = Settings()
    text = "x" * (settings.grpc_max_request_bytes + 1)
    async with make_channel(server.target, identity="producer") as ch:
        stub = ch.unary_unary("/livehost.ingest.v1.IngestService/SubmitComment",
                              request_serializer=ingest_pb2.SubmitCommentRequest.SerializeToString,
                              response_deserializer=ingest_pb2.SubmitCommentResponse.FromString)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub(ingest_pb2.SubmitCommentRequest(room_id="r", user_id="u", text=text), timeout=5)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        big = "x" * (30 * 1024 * 1024)  # above every method's limit: gRPC itself refuses it
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub(ingest_pb2.SubmitCommentRequest(room_id="r", user_id="u", text=big), timeout=10)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
