"""Where the preview gets segments: the avatar-segments topic, or the voice service's gRPC stream."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import grpc
from aiokafka import AIOKafkaConsumer

from livehost import codec
from livehost.config import Settings
from livehost.grpcutil import make_channel
from livehost.kafka import consumer_options
from livehost.preview.hub import SegmentHub
from livehost.retry import backoff_delays
from livehost.topics import AVATAR_SEGMENTS

log = logging.getLogger(__name__)


async def kafka_feed(settings: Settings, hub: SegmentHub, room: str | None = None, from_beginning: bool = False,
                     ready: asyncio.Event | None = None) -> None:
    """Consume ``avatar.segments`` (own throw-away group, nothing committed) into ``hub``.

    ``room`` None feeds every room. Runs until cancelled.
    """
    consumer = AIOKafkaConsumer(
        AVATAR_SEGMENTS.name, **consumer_options(settings),
        group_id=f"livehost-preview-{uuid.uuid4().hex[:8]}", enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest")
    await consumer.start()
    try:
        if not from_beginning:
            # make "latest" concrete now: segments published after this call are not missed
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=100)
            await consumer.seek_to_end()
            for tp in consumer.assignment():
                await consumer.position(tp)
        if ready is not None:
            ready.set()
        while True:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for rec in records:
                    try:
                        seg = codec.decode(AVATAR_SEGMENTS.schema, rec.value)
                    except codec.DecodeError as exc:
                        log.warning("undecodable segment at %s[%d]@%d: %s", rec.topic, rec.partition, rec.offset, exc)
                        continue
                    if room is None or seg["room_id"] == room:
                        hub.publish(seg)
    finally:
        await consumer.stop()


def segment_from_proto(seg: Any) -> dict[str, Any]:
    return {"request_id": seg.request_id, "room_id": seg.room_id, "seq": seg.seq, "text": seg.text,
            "start_ms": float(seg.start_ms), "end_ms": float(seg.end_ms), "audio_ref": seg.audio_ref or None,
            "sample_rate": seg.sample_rate, "engine": seg.engine,
            "visemes": [{"t_ms": float(v.t_ms), "viseme": v.viseme} for v in seg.visemes],
            "final": seg.final, "cancel": seg.cancel, "ts_ms": 0}


async def grpc_feed(target: str, hub: SegmentHub, room: str) -> None:
    """Follow the voice service's StreamSegments for ``room``; reconnects (with backoff) when it restarts."""
    from livehost.gen.livehost.voice.v1 import voice_pb2, voice_pb2_grpc

    delays = backoff_delays(0.2, 5.0)
    while True:
        try:
            async with make_channel(target) as channel:
                stub = voice_pb2_grpc.VoiceServiceStub(channel)
                async for seg in stub.StreamSegments(voice_pb2.StreamSegmentsRequest(room_id=room)):
                    hub.publish(segment_from_proto(seg))
                    delays = backoff_delays(0.2, 5.0)
            await asyncio.sleep(next(delays))  # the server ended the stream (e.g. it is stopping)
        except grpc.aio.AioRpcError as exc:
            delay = next(delays)
            log.warning("voice stream at %s: %s; reconnecting in %.1fs", target, exc.code().name, delay)
            await asyncio.sleep(delay)
