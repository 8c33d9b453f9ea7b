"""Voice as a service: replies in, avatar segments out (Kafka and a gRPC server stream for renderers)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
from aiokafka import ConsumerRecord

from livehost.config import Settings, load_settings, state_dir
from livehost.gen.livehost.voice.v1 import voice_pb2, voice_pb2_grpc
from livehost.kafka import ConsumerLoop, Producer
from livehost.service import ServiceRuntime
from livehost.topics import AVATAR_SEGMENTS, REPLIES, ROOM_EVENTS, Topic
from services.voice import settings as service_settings
from services.voice.handlers import VoiceHandler


def to_proto(seg: dict[str, Any]) -> Any:
    return voice_pb2.Segment(
        request_id=seg["request_id"], room_id=seg["room_id"], seq=seg["seq"], text=seg["text"],
        start_ms=int(seg["start_ms"]), end_ms=int(seg["end_ms"]), audio_ref=seg.get("audio_ref") or "",
        sample_rate=seg.get("sample_rate") or 0, engine=seg.get("engine") or "",
        visemes=[voice_pb2.Viseme(t_ms=int(v["t_ms"]), viseme=v["viseme"]) for v in seg.get("visemes", [])],
        final=bool(seg.get("final")), cancel=bool(seg.get("cancel")))


class Fanout:
    """Per-room subscriber queues for StreamSegments; slow subscribers drop oldest segments."""

    def __init__(self) -> None:
        self._subs: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}

    def publish(self, seg: dict[str, Any]) -> None:
        for q in self._subs.get(seg["room_id"], set()):
            if q.full():
                q.get_nowait()
            q.put_nowait(seg)

    async def subscribe(self, room_id: str) -> AsyncIterator[dict[str, Any]]:
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=256)
        self._subs.setdefault(room_id, set()).add(q)
        try:
            while True:
                yield await q.get()
        finally:
            self._subs[room_id].discard(q)


class VoiceServicer(voice_pb2_grpc.VoiceServiceServicer):
    def __init__(self, settings: Settings, handler: VoiceHandler, fanout: Fanout):
        self._settings = settings
        self._handler = handler
        self._fanout = fanout

    async def Synthesize(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not request.text.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "text is empty")
        request_id = f"adhoc-{uuid.uuid4().hex[:12]}"
        stream = self._handler.segments_for(request.text, request_id, "adhoc")
        segments = await asyncio.get_running_loop().run_in_executor(None, list, stream)
        return voice_pb2.SynthesizeResponse(segments=[to_proto(s) for s in segments])

    async def StreamSegments(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        if not request.room_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "room_id is required")
        async for seg in self._fanout.subscribe(request.room_id):
            yield to_proto(seg)


def build(settings: Settings | None = None) -> ServiceRuntime:
    settings = settings or load_settings()
    producer = Producer(settings)
    runtime = ServiceRuntime("voice", settings, service_settings.grpc_port(settings), producer)
    handler = VoiceHandler(settings.voice_engine, settings.voice_audio_dir or state_dir() / "audio")
    fanout = Fanout()

    async def publish(seg: dict[str, Any]) -> None:
        await producer.send(AVATAR_SEGMENTS, seg["room_id"], seg)
        fanout.publish(seg)

    async def on_reply(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> None:
        await handler.on_reply(record, publish)

    async def on_room_event(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> None:
        if record["type"] == "product_switch":
            handler.cancel_room(record["room_id"])

    runtime.consumers.append(ConsumerLoop(settings, service_settings.GROUP_ID, [REPLIES], on_reply, producer))
    # A separate group and task, so a product switch can stop speech while a reply is being synthesized.
    runtime.consumers.append(ConsumerLoop(settings, f"{service_settings.GROUP_ID}-rooms", [ROOM_EVENTS],
                                          on_room_event, producer))
    runtime.servicers.append((voice_pb2_grpc.add_VoiceServiceServicer_to_server,
                              VoiceServicer(settings, handler, fanout)))
    return runtime
