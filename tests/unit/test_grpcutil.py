"""livehost.grpcutil: server start-up with health, health flips, and serving a generated stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pydantic
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from livehost.gen.livehost.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from livehost.grpcutil import (
    RunningServer,
    abort_invalid_argument,
    health_status,
    invalid_argument_on,
    make_channel,
    start_server,
    validation_reason,
    wait_healthy,
)

INGEST = "livehost.ingest.v1.IngestService"


class _Comment(pydantic.BaseModel):
    room_id: str = pydantic.Field(min_length=1)
    text: str = pydantic.Field(min_length=1)


class MinimalIngest(ingest_pb2_grpc.IngestServiceServicer):
    """Accepts comments with a room and text; rejects the rest with INVALID_ARGUMENT."""

    async def SubmitComment(
        self, request: ingest_pb2.SubmitCommentRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.SubmitCommentResponse:
        async with invalid_argument_on(context):
            _Comment(room_id=request.room_id, text=request.text)
        event_id = request.client_event_id if request.HasField("client_event_id") else "generated"
        return ingest_pb2.SubmitCommentResponse(event_id=event_id, accepted=True, partition=0, offset=7)

    async def SubmitRoomEvent(
        self, request: ingest_pb2.SubmitRoomEventRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.SubmitCommentResponse:
        if request.WhichOneof("event") is None:
            await abort_invalid_argument(context, "no event given")
        if request.HasField("campaign_change"):
            async with invalid_argument_on(context):
                json.loads(request.campaign_change.campaign_json)
        return ingest_pb2.SubmitCommentResponse(event_id="e", accepted=True)


@pytest.fixture
async def running() -> AsyncIterator[RunningServer]:
    srv = await start_server([(ingest_pb2_grpc.add_IngestServiceServicer_to_server, MinimalIngest())], port=0)
    yield srv
    await srv.stop(grace=0)


async def _health(target: str, service: str) -> str:
    async with make_channel(target) as ch:
        return await health_status(ch, service)


async def test_port_zero_binds_a_free_port_and_records_services(running: RunningServer) -> None:
    assert running.port > 0
    assert running.target == f"127.0.0.1:{running.port}"
    assert running.service_names == [INGEST]
    await wait_healthy(running.target, timeout=5)
    await wait_healthy(running.target, service=INGEST, timeout=5)


async def test_health_flips_serving_and_not_serving(running: RunningServer) -> None:
    assert await _health(running.target, "") == "SERVING"
    assert await _health(running.target, INGEST) == "SERVING"
    assert await _health(running.target, "no.such.Service") == "NOT_FOUND"

    await running.set_serving(False)
    assert await _health(running.target, "") == "NOT_SERVING"
    assert await _health(running.target, INGEST) == "NOT_SERVING"
    with pytest.raises(TimeoutError, match="NOT_SERVING"):
        await wait_healthy(running.target, service=INGEST, timeout=0.3)

    await running.set_serving(True)
    assert await _health(running.target, INGEST) == "SERVING"


async def test_health_watch_sees_the_flip(running: RunningServer) -> None:
    async with make_channel(running.target) as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=INGEST))
        first = await stream.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        await running.set_serving(False)
        second = await stream.read()
        assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
        stream.cancel()


async def test_generated_stub_is_served(running: RunningServer) -> None:
    async with make_channel(running.target, identity="producer") as ch:
        stub = ingest_pb2_grpc.IngestServiceStub(ch)
        resp = await stub.SubmitComment(
            ingest_pb2.SubmitCommentRequest(
                room_id="r1", user_id="u1", text="how much is link 3?", client_event_id="c-1"
            ),
            timeout=5,
        )
        assert (resp.event_id, resp.accepted, resp.offset) == ("c-1", True, 7)

        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SubmitComment(ingest_pb2.SubmitCommentRequest(room_id="r1", text=""), timeout=5)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "text" in (info.value.details() or "")

        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SubmitRoomEvent(ingest_pb2.SubmitRoomEventRequest(room_id="r1"), timeout=5)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == "no event given"

        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SubmitRoomEvent(
                ingest_pb2.SubmitRoomEventRequest(
                    room_id="r1", campaign_change=ingest_pb2.CampaignChange(campaign_json="{not json")
                ),
                timeout=5,
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        ok = await stub.SubmitRoomEvent(
            ingest_pb2.SubmitRoomEventRequest(
                room_id="r1", product_switch=ingest_pb2.ProductSwitch(link_id=3)
            ),
            timeout=5,
        )
        assert ok.accepted


async def test_stop_reports_not_serving_and_closes() -> None:
    srv = await start_server([], port=0)
    assert srv.service_names == []
    await wait_healthy(srv.target, timeout=5)
    await srv.stop(grace=0)
    with pytest.raises(TimeoutError):
        await wait_healthy(srv.target, timeout=0.3)


async def test_busy_port_raises_oserror(running: RunningServer) -> None:
    with pytest.raises(OSError):
        await start_server([], port=running.port)


async def test_start_not_serving() -> None:
    srv = await start_server(
        [(ingest_pb2_grpc.add_IngestServiceServicer_to_server, MinimalIngest())], port=0, serving=False
    )
    try:
        assert await _health(srv.target, INGEST) == "NOT_SERVING"
    finally:
        await srv.stop(grace=0)


def test_validation_reason_formats() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        _Comment(room_id="", text="x")
    assert validation_reason(info.value).startswith("room_id: ")

    import jsonschema

    with pytest.raises(jsonschema.ValidationError) as jinfo:
        jsonschema.validate({"link_id": "x"}, {"properties": {"link_id": {"type": "integer"}}})
    assert validation_reason(jinfo.value) == "$.link_id: 'x' is not of type 'integer'"
    assert validation_reason(ValueError("bad")) == "bad"
    assert len(validation_reason(ValueError("x" * 5000))) == 2000
