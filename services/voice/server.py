"""Voice as a service: replies in, avatar segments out (Kafka and a gRPC server stream for renderers).

* ``agent.replies`` is consumed by a :class:`~services.voice.consumer.KeyedConsumerLoop`: rooms are
  spoken concurrently (one room's long reply does not delay another room), one reply at a time per
  room, and a reply's offset is committed only after all its segments were published (and all
  earlier replies of its partition finished).
* ``live.room.events`` is consumed by its own loop (own group), so a product switch cancels a room's
  speech while a reply is being synthesized.
* Synthesis runs in a small thread pool (``SYNTH_WORKERS``), never on the event loop; rooms
  interleave chunk by chunk. The engine (and its fallback if it cannot load) is warmed up in that
  pool before the service reports SERVING.
* Every segment goes to ``avatar.segments`` (key: room) and then to the room's StreamSegments
  subscribers, in the same order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from aiokafka import ConsumerRecord

from livehost.claims import DeliveryClaims
from livehost.config import Settings, load_settings, state_dir
from livehost.gen.livehost.voice.v1 import voice_pb2, voice_pb2_grpc
from livehost.kafka import ConsumerLoop, Producer
from livehost.security.ids import InvalidId, check_id
from livehost.service import ServiceRuntime
from livehost.topics import AVATAR_SEGMENTS, REPLIES, ROOM_EVENTS, Topic
from livehost.voice.engines import ENGINE_NAMES, default_fallback, warm_up
from livehost.voice.synth import TEXT_ENGINE
from services.voice import metrics
from services.voice import settings as service_settings
from services.voice.consumer import KeyedConsumerLoop
from services.voice.handlers import VoiceHandler

log = logging.getLogger(__name__)


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

    def subscribers(self, room_id: str) -> int:
        return len(self._subs.get(room_id, ()))

    async def subscribe(self, room_id: str) -> AsyncIterator[dict[str, Any]]:
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=256)
        self._subs.setdefault(room_id, set()).add(q)
        try:
            while True:
                yield await q.get()
        finally:
            self._subs[room_id].discard(q)
            if not self._subs[room_id]:
                del self._subs[room_id]  # no empty entry per room ever asked for


class VoiceServicer(voice_pb2_grpc.VoiceServiceServicer):
    def __init__(self, settings: Settings, handler: VoiceHandler, fanout: Fanout, executor: ThreadPoolExecutor):
        self._settings = settings
        self._handler = handler
        self._fanout = fanout
        self._executor = executor

    @property
    def fanout(self) -> Fanout:
        return self._fanout

    async def Synthesize(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not request.text.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "text is empty")
        engine = request.engine if request.HasField("engine") else None
        if engine is not None and engine not in (*ENGINE_NAMES, TEXT_ENGINE):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"unknown engine {engine!r}; known: {', '.join((*ENGINE_NAMES, TEXT_ENGINE))}")
        request_id = f"adhoc-{uuid.uuid4().hex[:12]}"
        stream = self._handler.segments_for(request.text, request_id, "adhoc", engine=engine)
        segments = await asyncio.get_running_loop().run_in_executor(self._executor, list, stream)
        return voice_pb2.SynthesizeResponse(segments=[to_proto(s) for s in segments])

    async def StreamSegments(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            check_id("room_id", request.room_id)
        except InvalidId as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        async for seg in self._fanout.subscribe(request.room_id):
            yield to_proto(seg)


def warm_up_engines(engine: str) -> str:
    """Load the configured engine (and speak a word); if it cannot load, the fallback instead.

    Returns the engine that is ready. Never raises: a broken engine is recorded (log + metrics) and
    each reply then falls back chunk by chunk.
    """
    if engine == TEXT_ENGINE:
        return engine
    try:
        seconds = warm_up(engine, synthesize=True)[engine]
        log.info("TTS engine %s warmed up in %.2fs", engine, seconds)
        return engine
    except Exception as exc:
        metrics.ENGINE_FAILURES.labels(engine).inc()
        metrics.WARNINGS.labels("warm_up_failed").inc()
        log.error("TTS engine %s failed to load (%s: %s); replies will fall back", engine, type(exc).__name__, exc)
    fallback = default_fallback(engine)
    try:
        warm_up(fallback, synthesize=True)
        log.warning("fallback TTS engine %s warmed up", fallback)
        return fallback
    except Exception as exc:
        metrics.ENGINE_FAILURES.labels(fallback).inc()
        log.error("fallback TTS engine %s failed to load too (%s); segments will be text-only", fallback, exc)
        return TEXT_ENGINE


def build(settings: Settings | None = None) -> ServiceRuntime:
    settings = settings or load_settings()
    producer = Producer(settings)
    runtime = ServiceRuntime("voice", settings, service_settings.grpc_port(settings), producer)
    executor = ThreadPoolExecutor(max_workers=service_settings.synth_workers(), thread_name_prefix="tts")
    fanout = Fanout()

    async def publish(seg: dict[str, Any]) -> Awaitable[Any]:
        ack = await producer.enqueue(AVATAR_SEGMENTS, seg["room_id"], seg)
        fanout.publish(seg)
        return ack

    audio_dir = settings.voice_audio_dir or state_dir() / "audio"
    db = runtime.database()
    handler = VoiceHandler(settings.voice_engine, audio_dir, publish, executor,
                           room_idle_s=settings.voice_room_idle_s,
                           claims=DeliveryClaims(lambda: db.pool, "voice"))

    async def warm() -> None:
        ready = await asyncio.get_running_loop().run_in_executor(executor, warm_up_engines, settings.voice_engine)
        if ready != settings.voice_engine:
            handler.use_engine(ready)  # do not retry a broken engine on every reply
        log.info("voice ready: engine %s (configured %s), audio in %s", ready, settings.voice_engine, audio_dir)

    async def admit(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> bool:
        return await handler.admit(record)

    async def speak(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> None:
        await handler.speak(record)

    async def on_room_event(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> None:
        if record["type"] == "product_switch":
            await handler.cancel_room(record["room_id"], "product_switch", before_ms=record["ts_ms"])

    async def close() -> None:
        executor.shutdown(wait=False, cancel_futures=True)

    runtime.connect.append(warm)
    runtime.close.append(close)
    runtime.consumers.append(KeyedConsumerLoop(settings, service_settings.GROUP_ID, [REPLIES], speak, producer,
                                               admit=admit))
    # A separate group and task, so a product switch can stop speech while a reply is being synthesized.
    runtime.consumers.append(ConsumerLoop(settings, service_settings.ROOMS_GROUP_ID, [ROOM_EVENTS],
                                          on_room_event, producer,
                                          fetch_min_bytes=service_settings.ROOMS_FETCH_MIN_BYTES))
    runtime.servicers.append((voice_pb2_grpc.add_VoiceServiceServicer_to_server,
                              VoiceServicer(settings, handler, fanout, executor)))
    return runtime
