"""The voice service in-process (services.voice.server.build + livehost.service.run) against a real
Tansu broker, with the real piper voice: replies in, segments out on Kafka and on the gRPC stream.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
import wave
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiokafka import AIOKafkaConsumer
from prometheus_client import REGISTRY

from livehost import codec
from livehost.config import Settings
from livehost.gen.livehost.voice.v1 import voice_pb2, voice_pb2_grpc
from livehost.grpcutil import make_channel, wait_healthy
from livehost.kafka import Producer, now_ms
from livehost.service import ServiceRuntime, run
from livehost.stack.testing import kafka_client
from livehost.topics import AVATAR_SEGMENTS, REPLIES, ROOM_EVENTS
from livehost.voice import audio_ref_path, plan_chunks
from services.voice.server import VoiceServicer, build

from .conftest import create_database

pytestmark = pytest.mark.integration

LONG = " ".join([
    "Welcome back to the live room, everyone!",
    "Link three is our silk scarf, and it is the softest thing we sell.",
    "It comes in four colours: ruby, navy, sage and a warm sand.",
    "Every scarf is hand finished in a small workshop.",
    "Today it is twenty nine ninety nine instead of forty five.",
    "Shipping is free for members, and returns are free for thirty days.",
    "Grab the coupon under the video before it runs out.",
    "We have about forty left in stock in every colour.",
    "If you want a gift box, add a note at checkout.",
    "The scarf is machine washable on a gentle cycle.",
    "It measures one hundred and eighty by seventy centimetres.",
    "Thanks for watching, and see you at the next drop!",
])


@dataclass
class Voice:
    settings: Settings
    runtime: ServiceRuntime
    producer: Producer
    target: str
    segments: list[dict[str, Any]] = field(default_factory=list)  # avatar.segments, in arrival order
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def of(self, request_id: str) -> list[dict[str, Any]]:
        return [s for s in self.segments if s["request_id"] == request_id]

    async def wait(self, pred: Callable[[], bool], timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            while not pred():
                self.arrived.clear()
                await self.arrived.wait()

    @property
    def servicer(self) -> VoiceServicer:
        return next(s for _, s in self.runtime.servicers if isinstance(s, VoiceServicer))


def reply(request_id: str, room: str, text: str | None, outcome: str = "reply", priority: int = 1,
          reason: str | None = None) -> dict[str, Any]:
    state = {"request_id": request_id, "room_id": room, "harness_version": "v-test", "policy": "",
             "created_ms": now_ms(), "deadline_ms": now_ms() + 10_000, "priority": priority, "turn": 0,
             "comments": [], "merged_text": "", "room_json": "{}", "loaded_skills": [], "retries": 0, "steps": []}
    return {"state": state, "outcome": outcome, "text": text, "reason": reason, "completed_ms": now_ms()}


def product_switch(room: str, link_id: int) -> dict[str, Any]:
    return {"event_id": f"ps-{uuid.uuid4().hex[:8]}", "room_id": room, "type": "product_switch", "ts_ms": now_ms(),
            "user_id": None, "text": None, "link_id": link_id, "campaign_json": None, "viewer_count": None}


@pytest.fixture(scope="module")
async def voice(tmp_path_factory: pytest.TempPathFactory, module_kafka_bootstrap: str,
                pg_server: str) -> AsyncIterator[Voice]:
    root = tmp_path_factory.mktemp("voice")
    bootstrap = module_kafka_bootstrap
    dsn = await create_database(pg_server)  # the voice's durable "spoken once" claims
    if True:  # the block below ran inside the broker's context before the broker became session-wide
        settings = Settings(kafka_bootstrap=bootstrap, voice_engine="piper", voice_audio_dir=root / "audio",
                            voice_grpc_port=0, metrics_port=0, postgres_dsn=dsn)
        runtime = build(settings)
        stop = asyncio.Event()
        service = asyncio.create_task(run(runtime, stop))
        for _ in range(1200):
            if runtime.server is not None or service.done():
                break
            await asyncio.sleep(0.05)
        assert runtime.server is not None, "the voice service did not start its gRPC server"
        await wait_healthy(runtime.server.target, timeout=60)  # SERVING only after the engine warmed up
        producer = Producer(settings)
        await producer.start()
        consumer = AIOKafkaConsumer(AVATAR_SEGMENTS.name, **kafka_client(bootstrap), auto_offset_reset="earliest",
                                    group_id=f"test-{uuid.uuid4().hex[:8]}", fetch_max_wait_ms=10)
        await consumer.start()
        v = Voice(settings, runtime, producer, runtime.server.target)

        async def collect() -> None:
            while True:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    for rec in records:
                        v.segments.append(codec.decode(AVATAR_SEGMENTS.schema, rec.value))
                        v.arrived.set()

        collector = asyncio.create_task(collect())
        try:
            yield v
        finally:
            collector.cancel()
            await consumer.stop()
            await producer.stop()
            stop.set()
            await asyncio.wait_for(service, 30)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


async def follow(voice: Voice, room: str, until: Callable[[list[Any]], bool]) -> tuple[asyncio.Task[list[Any]], Any]:
    """Subscribe to StreamSegments for a room; the task returns what it got once ``until`` holds."""
    channel = make_channel(voice.target)
    call = voice_pb2_grpc.VoiceServiceStub(channel).StreamSegments(voice_pb2.StreamSegmentsRequest(room_id=room))

    async def read() -> list[Any]:
        got: list[Any] = []
        try:
            async for seg in call:
                got.append(seg)
                if until(got):
                    return got
        finally:
            call.cancel()
            await channel.close()
        return got

    task = asyncio.create_task(read())
    for _ in range(500):
        if voice.servicer.fanout.subscribers(room):
            break
        await asyncio.sleep(0.02)
    assert voice.servicer.fanout.subscribers(room), "StreamSegments did not subscribe"
    return task, call


def check_audio(seg: dict[str, Any]) -> None:
    path = audio_ref_path(seg["audio_ref"])
    assert path.is_file() and path.read_bytes()[:4] == b"RIFF"
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, seg["sample_rate"])
        frames = w.getnframes()
    duration_ms = frames * 1000.0 / seg["sample_rate"]
    assert frames > 0
    assert seg["end_ms"] - seg["start_ms"] == pytest.approx(duration_ms, abs=1.0)
    times = [v["t_ms"] for v in seg["visemes"]]
    assert len(times) >= 3 and times[0] == 0.0
    assert all(a < b for a, b in zip(times, times[1:], strict=False)), "visemes must be strictly increasing"
    assert times[-1] <= duration_ms


async def test_reply_becomes_segments_on_kafka_and_grpc(voice: Voice) -> None:
    room, rid = "room-int-1", f"req-{uuid.uuid4().hex[:8]}"
    unknown_before = REGISTRY.get_sample_value("livehost_voice_warnings_total", {"kind": "unknown_token"}) or 0.0
    stream, _ = await follow(voice, room, lambda got: bool(got) and got[-1].final)
    text = "Hi everyone, welcome! <sil_L2> [speed_e2]Link three is the silk scarf. [wink]Grab the coupon below."
    await voice.producer.send(REPLIES, room, reply(rid, room, text))
    await voice.wait(lambda: any(s["final"] for s in voice.of(rid)))
    segs = voice.of(rid)
    assert [s["seq"] for s in segs] == list(range(len(segs))) and len(segs) == 3
    assert [s["final"] for s in segs] == [False, False, True] and not any(s["cancel"] for s in segs)
    assert segs[0]["start_ms"] == 0.0
    for a, b in zip(segs, segs[1:], strict=False):
        assert b["start_ms"] == pytest.approx(a["end_ms"], abs=0.01)
    for seg in segs:
        assert seg["engine"] == "piper" and seg["room_id"] == room
        assert not any(c in seg["text"] for c in "<>[]")
        check_audio(seg)
    # the pause token is audible as silence at the end of the first segment's audio
    assert segs[0]["visemes"][-1]["viseme"] == "sil"
    assert (segs[0]["end_ms"] - segs[0]["start_ms"]) - segs[0]["visemes"][-1]["t_ms"] >= 450
    assert (REGISTRY.get_sample_value("livehost_voice_warnings_total", {"kind": "unknown_token"}) or 0.0) \
        == unknown_before + 1
    got = await asyncio.wait_for(stream, 10)
    assert [(g.request_id, g.seq, g.text, g.audio_ref, g.final, g.cancel) for g in got] == \
        [(s["request_id"], s["seq"], s["text"], s["audio_ref"] or "", s["final"], s["cancel"]) for s in segs]
    assert [[(v.t_ms, v.viseme) for v in g.visemes] for g in got] == \
        [[(int(v["t_ms"]), v["viseme"]) for v in s["visemes"]] for s in segs]


async def test_product_switch_stops_a_long_reply_other_rooms_keep_going(voice: Voice) -> None:
    room_a, room_b = "room-int-a", "room-int-b"
    rid_a, rid_b = f"long-{uuid.uuid4().hex[:8]}", f"short-{uuid.uuid4().hex[:8]}"
    planned = len(plan_chunks(LONG).chunks)
    assert planned >= 10
    stream, _ = await follow(voice, room_a, lambda got: bool(got) and got[-1].cancel)
    await voice.producer.send(REPLIES, room_a, reply(rid_a, room_a, LONG))
    await voice.producer.send(REPLIES, room_b, reply(rid_b, room_b, "Hello room B! The kettle is on link two."))
    # room B is not held up by room A's long reply
    await voice.wait(lambda: any(s["final"] for s in voice.of(rid_b)))
    a_so_far = len(voice.of(rid_a))
    assert a_so_far < planned, "room B waited for the whole of room A's reply"
    await voice.wait(lambda: len(voice.of(rid_a)) >= 1)
    await voice.producer.send(ROOM_EVENTS, room_a, product_switch(room_a, 2))
    await voice.wait(lambda: any(s["cancel"] for s in voice.of(rid_a)), timeout=15)
    await asyncio.sleep(3.0)  # anything synthesized after the cancel would show up by now
    segs = voice.of(rid_a)
    cancel_at = next(i for i, s in enumerate(segs) if s["cancel"])
    assert cancel_at == len(segs) - 1, "segments of the request were published after its cancel"
    cancel = segs[-1]
    spoken = segs[:-1]
    assert len(spoken) < planned, "the long reply was synthesized to the end despite the product switch"
    assert cancel["seq"] == len(spoken) and cancel["final"] and cancel["audio_ref"] is None
    assert not any(s["final"] for s in spoken)
    for seg in spoken:
        check_audio(seg)
    got = await asyncio.wait_for(stream, 10)
    assert [(g.request_id, g.seq, g.cancel) for g in got] == [(s["request_id"], s["seq"], s["cancel"]) for s in segs]


async def test_cancelled_outcome_stops_the_request_being_spoken(voice: Voice) -> None:
    room, rid = "room-int-c", f"stale-{uuid.uuid4().hex[:8]}"
    await voice.producer.send(REPLIES, room, reply(rid, room, LONG))
    await voice.wait(lambda: len(voice.of(rid)) >= 1)
    await voice.producer.send(REPLIES, room, reply(rid, room, None, outcome="cancelled",
                                                   reason="stale: request exceeded its time budget"))
    await voice.wait(lambda: any(s["cancel"] for s in voice.of(rid)), timeout=15)
    await asyncio.sleep(2.0)
    segs = voice.of(rid)
    assert segs[-1]["cancel"] and sum(s["cancel"] for s in segs) == 1
    assert len(segs) - 1 < len(plan_chunks(LONG).chunks)


async def test_synthesize_rpc(voice: Voice) -> None:
    async with make_channel(voice.target) as channel:
        stub = voice_pb2_grpc.VoiceServiceStub(channel)
        resp = await stub.Synthesize(voice_pb2.SynthesizeRequest(text="Hello there. <sil_L2> Bye!", engine="espeak"))
        assert [s.engine for s in resp.segments] == ["espeak", "espeak"] and resp.segments[-1].final
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Synthesize(voice_pb2.SynthesizeRequest(text="Hi", engine="nope"))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_audio_stays_under_the_audio_dir(voice: Voice) -> None:
    audio_dir = Path(voice.settings.voice_audio_dir or "").resolve()
    for seg in voice.segments:
        if seg["audio_ref"]:
            assert audio_ref_path(seg["audio_ref"]).resolve().is_relative_to(audio_dir / seg["room_id"])


async def test_a_path_like_room_id_writes_nothing_outside_the_audio_folder(voice: Voice) -> None:
    """A reply record whose room id is a path (``../../x``) reaches the voice service only by bypassing
    Ingest; it is refused (dead-lettered), nothing is written outside the audio folder, and the
    consumer keeps serving the next record. The gRPC stream refuses such a room id too."""
    audio_dir = Path(voice.settings.voice_audio_dir or "").resolve()
    marker = f"x-{uuid.uuid4().hex[:8]}"
    before = {p for p in audio_dir.parent.parent.rglob("*")}
    bad_rid, good_rid = f"bad-{uuid.uuid4().hex[:8]}", f"ok-{uuid.uuid4().hex[:8]}"
    for room in (f"../../{marker}", f"/tmp/{marker}", f"..\\{marker}", f"{marker}/../../.."):
        await voice.producer.send(REPLIES, "evil", reply(bad_rid, room, "You should not hear this."))
    await voice.producer.send(REPLIES, "room-ok", reply(good_rid, "room-ok", "Still serving."))
    await voice.wait(lambda: any(s["final"] for s in voice.of(good_rid)))
    assert voice.of(bad_rid) == []
    after = {p for p in audio_dir.parent.parent.rglob("*")}
    outside = [p for p in after - before if not p.resolve().is_relative_to(audio_dir)]
    assert outside == [] and not list(Path("/tmp").glob(f"{marker}*"))
    assert not [p for p in after if marker in str(p)]
    async with make_channel(voice.target) as channel:
        stream = voice_pb2_grpc.VoiceServiceStub(channel).StreamSegments(
            voice_pb2.StreamSegmentsRequest(room_id=f"../../{marker}"))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stream:
                break
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
