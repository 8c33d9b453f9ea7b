"""Ingest's gRPC servicer: validate, publish, answer with where the event landed."""

from __future__ import annotations

import logging
from typing import Any

import grpc

from livehost.claims import ClaimsUnavailable, DeliveryClaims
from livehost.config import Settings, load_settings
from livehost.gen.livehost.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from livehost.kafka import Producer
from livehost.security.authz import require_role
from livehost.service import ServiceRuntime
from livehost.topics import ROOM_EVENTS
from services.ingest import clients, handlers
from services.ingest import settings as service_settings

log = logging.getLogger(__name__)


def _landed(result: str | None) -> tuple[int, int]:
    """Where the first submission of a duplicate landed; (-1, -1) while it is still being published
    (or was published before results were recorded)."""
    try:
        partition, offset = (result or "").split(":")
        return int(partition), int(offset)
    except ValueError:
        return -1, -1


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(self, settings: Settings, producer: Producer, claims: DeliveryClaims | None = None):
        self._settings = settings
        self._producer = producer
        self._claims = claims  # durable client_event_id deduplication (None: none)

    async def _publish(self, event: dict[str, Any], client_event_id: str | None = None
                       ) -> ingest_pb2.SubmitCommentResponse:
        key = f"{event['room_id']}/{client_event_id}" if client_event_id is not None and self._claims else None
        if key is not None and self._claims is not None:
            try:
                if not await self._claims.claim(key):  # the same client event within the window
                    partition, offset = _landed(await self._claims.result(key))
                    return ingest_pb2.SubmitCommentResponse(event_id=event["event_id"], accepted=False,
                                                            partition=partition, offset=offset)
            except ClaimsUnavailable as exc:  # accept rather than refuse: downstream dedups by event id
                log.warning("%s; accepting without the duplicate check", exc)
                key = None
        try:
            partition, offset = await self._producer.send(ROOM_EVENTS, event["room_id"], event)
        except BaseException:
            if key is not None and self._claims is not None:
                await self._claims.release(key)  # not published: the client's retry must be accepted
            raise
        if key is not None and self._claims is not None:
            await self._claims.settle(key, f"{partition}:{offset}")
        return ingest_pb2.SubmitCommentResponse(event_id=event["event_id"], accepted=True,
                                                partition=partition, offset=offset)

    async def SubmitComment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            event = handlers.comment_event(request.room_id, request.user_id, request.text,
                                           self._settings.max_comment_chars,
                                           request.client_event_id if request.HasField("client_event_id") else None,
                                           max_bytes=self._settings.max_comment_bytes)
        except handlers.InvalidEvent as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return await self._publish(event, request.client_event_id if request.HasField("client_event_id") else None)

    async def SubmitRoomEvent(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        client_id = request.client_event_id if request.HasField("client_event_id") else None
        try:
            which = request.WhichOneof("event")
            if which == "product_switch":
                event = handlers.product_switch_event(request.room_id, request.product_switch.link_id, client_id)
            elif which == "campaign_change":
                event = handlers.campaign_event(request.room_id, request.campaign_change.campaign_json, client_id,
                                                max_bytes=self._settings.max_campaign_json_bytes)
            elif which == "room_config":  # switching a room's agent is an operator's decision
                await require_role(context, "operator", what="a room_config event")
                event = handlers.room_config_event(request.room_id, request.room_config.policy, client_id)
            else:
                raise handlers.InvalidEvent("event is required: product_switch, campaign_change or room_config")
        except handlers.InvalidEvent as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return await self._publish(event, client_id)


def build(settings: Settings | None = None) -> ServiceRuntime:
    settings = settings or load_settings()
    producer = clients.producer(settings)
    runtime = ServiceRuntime("ingest", settings, service_settings.grpc_port(settings), producer)
    db = runtime.database()
    claims = DeliveryClaims(lambda: db.pool, "ingest", settings.ingest_dedup_window_s)
    runtime.servicers.append((ingest_pb2_grpc.add_IngestServiceServicer_to_server,
                              IngestServicer(settings, producer, claims)))
    return runtime
