"""The voice service's reply handler without a broker: real espeak audio, a recording publisher.

A gated engine (espeak behind a threading.Event) makes "cancel while a chunk is being synthesized"
deterministic; a fake clock drives the estimated playback clock.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition
from prometheus_client import REGISTRY

from livehost.voice import get_engine, read_wav
from services.voice.consumer import OffsetTracker
from services.voice.handlers import VoiceHandler

LONG = ("Welcome back everyone. Link three is the silk scarf. It comes in four colours. "
        "Shipping is free today. Grab the coupon below. Thanks for watching!")


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class GatedEngine:
    """espeak, but each synthesize() waits for the test to open the gate (one call per open)."""

    name = "espeak"

    def __init__(self) -> None:
        self.inner = get_engine("espeak")
        self.gate = threading.Semaphore(0)
        self.calls = 0
        self.entered = threading.Semaphore(0)

    def synthesize(self, text: str, rate: float = 1.0) -> Any:
        self.calls += 1
        self.entered.release()
        assert self.gate.acquire(timeout=10), "gate never opened"
        return self.inner.synthesize(text, rate)


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


class Recorder:
    def __init__(self) -> None:
        self.segments: list[dict[str, Any]] = []
        self.event = asyncio.Event()

    async def __call__(self, seg: dict[str, Any]) -> None:
        self.segments.append(seg)
        self.event.set()

    def of(self, request_id: str) -> list[dict[str, Any]]:
        return [s for s in self.segments if s["request_id"] == request_id]

    async def wait(self, pred: Any, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not pred():
                self.event.clear()
                await self.event.wait()


def reply(request_id: str, text: str | None, room: str = "room-1", outcome: str = "reply",
          priority: int = 1, reason: str | None = None, completed_ms: int = 3) -> dict[str, Any]:
    state = {"request_id": request_id, "room_id": room, "harness_version": "v1", "policy": "", "created_ms": 1,
             "deadline_ms": 2, "priority": priority, "turn": 0, "comments": [], "merged_text": "", "room_json": "{}",
             "loaded_skills": [], "retries": 0, "steps": []}
    return {"state": state, "outcome": outcome, "text": text, "reason": reason, "completed_ms": completed_ms}


def handler(tmp_path: Path, engine: Any = "espeak", clock: Clock | None = None) -> tuple[VoiceHandler, Recorder]:
    rec = Recorder()
    return VoiceHandler(engine, tmp_path, rec, clock=clock or Clock()), rec


async def say(h: VoiceHandler, r: dict[str, Any]) -> int:
    return await h.speak(r) if await h.admit(r) else 0


async def test_reply_spoken_tokens_never_spoken_unknown_reported(tmp_path: Path) -> None:
    h, rec = handler(tmp_path)
    before = metric("livehost_voice_warnings_total", kind="unknown_token")
    n = await say(h, reply("r1", "Hello there! <sil_L2> [wink]The scarf is <bogus>twenty dollars."))
    assert n == len(rec.segments) == 2
    assert metric("livehost_voice_warnings_total", kind="unknown_token") == before + 2
    for i, seg in enumerate(rec.segments):
        assert seg["seq"] == i and not seg["cancel"]
        assert "<" not in seg["text"] and "[" not in seg["text"]
        x, sr = read_wav(seg["audio_ref"])
        assert sr == seg["sample_rate"] and len(x) > 0
        assert Path(seg["audio_ref"].removeprefix("file://")).parent == (tmp_path / "room-1").resolve()
    assert rec.segments[-1]["final"]


@pytest.mark.parametrize("text,reason", [("", None), ("   ", None), ("<sil_L3>[speed_e2]", "only_control_tokens"),
                                         ("🎉🎉", "no_speakable_text")])
async def test_bad_text_skipped_with_reason(tmp_path: Path, text: str, reason: str | None) -> None:
    h, rec = handler(tmp_path)
    before = metric("livehost_voice_warnings_total", kind="skipped")
    assert await say(h, reply(f"bad-{reason}", text)) == 0
    assert rec.segments == []
    assert metric("livehost_voice_warnings_total", kind="skipped") == before + 1


async def test_non_spoken_outcomes_and_duplicates(tmp_path: Path) -> None:
    h, rec = handler(tmp_path)
    assert not await h.admit(reply("n1", None, outcome="no_reply"))
    assert not await h.admit(reply("n2", None, outcome="rejected"))
    assert await say(h, reply("d1", "Hello.")) == 1
    assert not await h.admit(reply("d1", "Hello."))  # at-least-once redelivery: spoken once
    assert len(rec.segments) == 1


async def test_engine_failure_falls_back_and_is_recorded(tmp_path: Path) -> None:
    class Broken:
        name = "piper"

        def synthesize(self, text: str, rate: float = 1.0) -> Any:
            raise RuntimeError("model file corrupt")

    h, rec = handler(tmp_path, engine=Broken())
    failures = metric("livehost_voice_engine_failures_total", engine="piper")
    fallbacks = metric("livehost_voice_warnings_total", kind="engine_fallback")
    assert await say(h, reply("f1", "Hello there. See you soon.")) == 2
    assert [s["engine"] for s in rec.segments] == ["espeak", "espeak"]
    assert metric("livehost_voice_engine_failures_total", engine="piper") == failures + 1
    assert metric("livehost_voice_warnings_total", kind="engine_fallback") == fallbacks + 1


async def test_text_engine_gives_subtitles_only(tmp_path: Path) -> None:
    h, rec = handler(tmp_path, engine="text")
    assert await say(h, reply("t1", "Hello there. Bye now.")) == 2
    assert all(s["engine"] == "text" and s["audio_ref"] is None and s["end_ms"] > s["start_ms"]
               for s in rec.segments)


class NoThreads(Executor):
    """An executor that refuses work: a reply that needs no engine must not ask for a thread."""

    def __init__(self) -> None:
        self.asked = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        raise AssertionError("a text-only reply was handed to a thread")


async def test_a_text_only_reply_is_made_in_place_and_writes_no_folder(tmp_path: Path) -> None:
    threads = NoThreads()
    rec = Recorder()
    h = VoiceHandler("text", tmp_path, rec, executor=threads, clock=Clock())
    assert await say(h, reply("t2", LONG, room="room-9")) == len(rec.of("t2")) > 2
    assert [s["seq"] for s in rec.of("t2")] == list(range(len(rec.of("t2"))))
    assert rec.of("t2")[-1]["final"] and threads.asked == 0
    assert not (tmp_path / "room-9").exists()  # nothing to write, so no folder either
    # an engine with audio still synthesizes in a thread, and its folder is made for its files
    h2 = VoiceHandler("espeak", tmp_path, rec, executor=threads, clock=Clock())
    with pytest.raises(AssertionError, match="handed to a thread"):
        await say(h2, reply("a2", "Hello there.", room="room-9"))
    assert threads.asked == 1
    h3, rec3 = handler(tmp_path, engine="espeak")
    assert await say(h3, reply("a3", "Hello there.", room="room-9")) == 1
    assert (tmp_path / "room-9").is_dir() and rec3.segments[0]["audio_ref"]


async def test_a_text_only_reply_cancelled_mid_way_publishes_nothing_after_its_cancel(tmp_path: Path) -> None:
    rec = Recorder()
    first_out = asyncio.Event()

    async def publish(seg: dict[str, Any]) -> None:
        await rec(seg)
        if seg["seq"] == 0 and not seg["cancel"]:
            first_out.set()
            await asyncio.sleep(0)  # the cancel arrives (another task) while the first segment is out

    h = VoiceHandler("text", tmp_path, publish, executor=NoThreads(), clock=Clock())

    async def cancel() -> None:
        await first_out.wait()
        assert not await h.admit(reply("t3", None, outcome="cancelled", reason="stale"))

    canceller = asyncio.create_task(cancel())
    assert await say(h, reply("t3", LONG)) == 1
    await asyncio.wait_for(canceller, 5)
    assert [(s["seq"], s["cancel"]) for s in rec.of("t3")] == [(0, False), (1, True)]


@pytest.mark.parametrize("room", ["../outside", "a/b", ""])
async def test_a_room_id_that_names_another_folder_is_refused_every_time(tmp_path: Path, room: str) -> None:
    h, rec = handler(tmp_path / "audio", engine="text")
    for _ in range(2):  # a refused id is not remembered as a checked folder
        with pytest.raises(ValueError):
            h.segments_for("Hello.", "r1", room)
    assert rec.segments == []


async def test_cancelled_outcome_stops_the_request_being_spoken(tmp_path: Path) -> None:
    eng = GatedEngine()
    h, rec = handler(tmp_path, engine=eng)
    r = reply("c1", LONG)
    assert await h.admit(r)
    task = asyncio.create_task(h.speak(r))
    eng.gate.release()  # chunk 0
    await rec.wait(lambda: len(rec.of("c1")) == 1)
    assert await asyncio.to_thread(eng.entered.acquire, True, 5)  # chunk 0 entered
    assert await asyncio.to_thread(eng.entered.acquire, True, 5)  # chunk 1 is being synthesized...
    discarded = metric("livehost_voice_discarded_segments_total")
    assert not await h.admit(reply("c1", None, outcome="cancelled", reason="stale: request exceeded its time budget"))
    segs = rec.of("c1")
    assert [s["cancel"] for s in segs] == [False, True]
    assert segs[-1]["seq"] == 1 and segs[-1]["final"]
    eng.gate.release()  # ...and finishes after the cancel: its segment must never be published
    assert await asyncio.wait_for(task, 5) == 1
    for _ in range(50):
        if metric("livehost_voice_discarded_segments_total") > discarded:
            break
        await asyncio.sleep(0.05)
    assert metric("livehost_voice_discarded_segments_total") == discarded + 1
    assert rec.of("c1") == segs and eng.calls == 2  # no chunk after the cancel was even started
    assert not await h.admit(r)  # a redelivered reply of a cancelled request is not spoken


async def test_product_switch_cancels_while_playing_not_after(tmp_path: Path) -> None:
    clock = Clock()
    h, rec = handler(tmp_path, clock=clock)
    assert await say(h, reply("p1", "Hi there. The kettle is on link two. It boils fast.")) == 3
    audio_ms = rec.segments[-1]["end_ms"]
    clock.t += 1000  # the renderer is one second into the reply's audio
    assert await h.cancel_room("room-1") == 1
    cancel = rec.segments[-1]
    assert cancel["cancel"] and cancel["seq"] == 3 and cancel["start_ms"] == pytest.approx(1000)
    assert await h.cancel_room("room-1") == 0  # one cancel per request
    assert await say(h, reply("p2", "Boots now.")) == 1
    clock.t += audio_ms + 10_000  # long after its playback ended: nothing to cancel
    assert await h.cancel_room("room-1") == 0
    assert not rec.of("p2")[-1]["cancel"]


async def test_product_switch_spares_replies_completed_after_it(tmp_path: Path) -> None:
    h, rec = handler(tmp_path)
    await say(h, reply("old", "About the scarf.", completed_ms=1_000))
    await say(h, reply("new", "About the boots.", completed_ms=3_000))
    assert await h.cancel_room("room-1", "product_switch", before_ms=2_000) == 1
    assert [s["request_id"] for s in rec.segments if s["cancel"]] == ["old"]
    assert h.live_requests("room-1") == ["new"]


async def test_other_rooms_are_not_cancelled(tmp_path: Path) -> None:
    h, rec = handler(tmp_path)
    await say(h, reply("a1", "Hello room A.", room="room-a"))
    await say(h, reply("b1", "Hello room B.", room="room-b"))
    assert await h.cancel_room("room-a") == 1
    assert [s["request_id"] for s in rec.segments if s["cancel"]] == ["a1"]


async def test_higher_priority_preempts_lower(tmp_path: Path) -> None:
    h, rec = handler(tmp_path)
    await say(h, reply("low", "Thanks for joining us tonight, everyone.", priority=1))
    await say(h, reply("same", "Hello again.", priority=1))  # same priority: queued after, no preemption
    assert not any(s["cancel"] for s in rec.segments)
    assert await say(h, reply("high", "Link three costs twenty dollars.", priority=2)) == 1
    cancelled = [s["request_id"] for s in rec.segments if s["cancel"]]
    assert sorted(cancelled) == ["low", "same"]
    assert rec.segments[-1]["request_id"] == "high" and not rec.segments[-1]["cancel"]


async def test_cancel_before_start_publishes_nothing(tmp_path: Path) -> None:
    h, rec = handler(tmp_path)
    r = reply("q1", "Queued reply.")
    assert await h.admit(r)
    await h.cancel_room("room-1")
    assert await h.speak(r) == 0
    assert rec.segments == []


class Acking(Recorder):
    """A transport that hands back each segment's acknowledgement, resolved by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: list[asyncio.Future[None]] = []

    async def __call__(self, seg: dict[str, Any]) -> asyncio.Future[None]:  # type: ignore[override]
        await super().__call__(seg)
        self.acks.append(asyncio.get_running_loop().create_future())
        return self.acks[-1]


async def test_a_reply_is_sent_back_to_back_and_done_when_every_segment_is_acknowledged(tmp_path: Path) -> None:
    """Segments go to the transport without waiting for each acknowledgement (one produce request for a
    text reply, not one per segment), and the reply is finished, its offset committable, only once all
    are acknowledged."""
    rec = Acking()
    h = VoiceHandler("text", tmp_path, rec, clock=Clock())
    r = reply("req-1", "Link three is the scarf. It comes in four colours. Shipping is free today.")
    assert await h.admit(r)
    speaking = asyncio.create_task(h.speak(r))
    await rec.wait(lambda: len(rec.segments) == 3)
    assert not speaking.done()  # all three handed over, none acknowledged yet
    for ack in rec.acks[:2]:
        ack.set_result(None)
    await asyncio.sleep(0.05)
    assert not speaking.done()
    rec.acks[2].set_result(None)
    assert await speaking == 3


async def test_a_segment_the_broker_refuses_fails_the_reply(tmp_path: Path) -> None:
    rec = Acking()
    h = VoiceHandler("text", tmp_path, rec, clock=Clock())
    r = reply("req-2", "Link three is the scarf. It comes in four colours.")
    assert await h.admit(r)
    speaking = asyncio.create_task(h.speak(r))
    await rec.wait(lambda: len(rec.segments) == 2)
    rec.acks[0].set_result(None)
    rec.acks[1].set_exception(ConnectionError("broker away"))
    await rec.wait(lambda: len(rec.segments) == 3)  # the avatar is told the reply stopped
    assert rec.segments[2]["cancel"] and rec.segments[2]["reason"] == "error"
    rec.acks[2].set_result(None)
    with pytest.raises(ConnectionError):
        await speaking  # not finished: the consumer does not commit it, the reply is read again


async def test_a_stop_mid_reply_does_not_wait_for_acknowledgements(tmp_path: Path) -> None:
    """Stopping while a later chunk is synthesized: the reply is not committed (it is read again), so
    the task ends at once instead of waiting for a segment the broker may never acknowledge."""
    eng = GatedEngine()
    rec = Acking()
    h = VoiceHandler(eng, tmp_path, rec, clock=Clock())
    r = reply("c9", LONG)
    assert await h.admit(r)
    speaking = asyncio.create_task(h.speak(r))
    eng.gate.release()  # chunk 0: handed over, its acknowledgement never comes
    await rec.wait(lambda: len(rec.segments) == 1)
    assert await asyncio.to_thread(eng.entered.acquire, True, 5)  # chunk 0 entered
    assert await asyncio.to_thread(eng.entered.acquire, True, 5)  # chunk 1 is being synthesized
    speaking.cancel()
    try:
        await asyncio.wait({speaking}, timeout=2)
        assert speaking.done(), "the stop waited for an acknowledgement"
        assert speaking.cancelled()
    finally:
        eng.gate.release()  # let the synthesis thread finish
        if not speaking.done():
            rec.acks[0].set_result(None)
            await asyncio.wait({speaking}, timeout=2)


def test_offset_tracker_commits_only_finished_prefix() -> None:
    tp, tp2 = TopicPartition("agent.replies", 0), TopicPartition("agent.replies", 1)
    t = OffsetTracker()
    for off in (10, 11, 12):
        t.add(tp, off)
    t.add(tp2, 5)
    assert t.in_flight == 4 and t.committable() == {}
    t.done(tp, 11)  # a later room finished first: nothing may be committed yet
    assert t.committable() == {}
    t.done(tp, 10)
    assert t.committable() == {tp: 12}
    t.done(tp2, 5)
    assert t.committable() == {tp2: 6}
    assert t.committable() == {}
    t.done(tp, 12)
    assert t.committable() == {tp: 13} and t.in_flight == 0
    t.add(tp, 13)
    t.forget([tp])
    t.done(tp, 13)
    assert t.committable() == {}


def test_warm_up_falls_back_when_the_engine_cannot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    import services.voice.server as server
    from livehost.voice import EngineError

    real = server.warm_up

    def warm_up(name: str, synthesize: bool = False) -> dict[str, float]:
        if name == "piper":
            raise EngineError("piper model not found: /nope/voice.onnx")
        return real(name, synthesize=synthesize)

    monkeypatch.setattr(server, "warm_up", warm_up)
    failed = metric("livehost_voice_warnings_total", kind="warm_up_failed")
    piper_failures = metric("livehost_voice_engine_failures_total", engine="piper")
    assert server.warm_up_engines("piper") == "espeak"
    assert metric("livehost_voice_warnings_total", kind="warm_up_failed") == failed + 1
    assert metric("livehost_voice_engine_failures_total", engine="piper") == piper_failures + 1
    assert server.warm_up_engines("espeak") == "espeak"
    assert server.warm_up_engines("text") == "text"
