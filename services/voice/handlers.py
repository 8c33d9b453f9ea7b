"""Replies in, avatar segments out; cancellation when the room moves on (no transport code).

Life of a reply
---------------
1. :meth:`VoiceHandler.admit` runs when the record *arrives* (in fetch order, before any queueing):
   it drops duplicates, applies a terminal ``cancelled`` outcome to the request it names, lets a
   higher-priority reply preempt the room's lower-priority speech, and registers the reply.
2. :meth:`VoiceHandler.speak` runs in the room's order (the consumer runs rooms concurrently, one
   reply at a time per room): the reply is planned (warnings logged and counted), then synthesized
   chunk by chunk in the synthesis thread pool — never on the event loop — and each segment is
   published as soon as it exists, so the renderer starts after the first sentence.

Cancellation
------------
A request is cancelled by a ``product_switch`` room event (every request of the room), by a
terminal reply record with outcome ``cancelled`` for the same request id (e.g. the agent dropped
it as stale), or by a reply of higher ``state.priority`` in the same room (``PREEMPT_ON_HIGHER_PRIORITY``).

Cancelling sets the request's flags at once (the synthesis thread stops before its next chunk, the
speaking task stops waiting for the chunk in progress), and publishes one cancel segment
(``cancel=true``, ``final=true``, ``seq`` = number of segments published) that tells the renderer to
stop. Publishing a segment and publishing the cancel segment are serialised per request and the
flag is re-checked under that lock, so: a segment synthesized after the cancel is never published,
and nothing of the request is published after its cancel segment. A request cancelled before it
started speaking publishes nothing at all.

Segments are published faster than real time, so "still being spoken" is judged against an
estimated playback clock per room: the renderer plays a room's requests back to back, starting when
their first segment is published (or when the room's previous request ends). A request is
cancellable while it is synthesizing or while its estimated playback has not ended; the cancel
segment's ``start_ms``/``end_ms`` carry the estimated play-head (reply timeline) at cancel time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from livehost.claims import ClaimsUnavailable, DeliveryClaims
from livehost.kafka import now_ms
from livehost.security.ids import check_id, inside
from livehost.voice.engines import TTSEngine
from livehost.voice.synth import ReplyStream, cancel_segment, stream_reply
from services.voice import metrics

log = logging.getLogger(__name__)

SPOKEN_OUTCOMES = ("reply", "fallback")
PREEMPT_ON_HIGHER_PRIORITY = True
REMEMBER_REQUESTS = 10_000  # request ids remembered for duplicate / late-cancel detection

# Hands a segment to the transport. It may return the segment's acknowledgement instead of waiting for
# it: a reply's segments are then sent back to back (one produce request for a text voice's whole reply,
# not one per segment), and the reply is done, its offset committable, once every one was acknowledged.
Publish = Callable[[dict[str, Any]], Awaitable[Awaitable[Any] | None]]
Clock = Callable[[], float]


@dataclass
class Speech:
    """One request of a room: queued, synthesizing, or (by estimate) still playing."""

    request_id: str
    room_id: str
    priority: int
    completed_ms: float = 0.0  # when the agent completed the reply (event time)
    arrived: float = field(default_factory=time.perf_counter)
    stop: threading.Event = field(default_factory=threading.Event)  # seen by the synthesis thread
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reason: str | None = None  # set once: why it was cancelled
    started: bool = False
    synthesizing: bool = False
    published: int = 0
    last_end_ms: float = 0.0
    play_start_ms: float | None = None  # wall clock ms when the renderer starts it (estimate)
    cancel_sent: bool = False

    def play_end_ms(self) -> float | None:
        return None if self.play_start_ms is None else self.play_start_ms + self.last_end_ms

    def live(self, now: float) -> bool:
        """Queued, synthesizing, or still playing (estimate)."""
        if not self.started or self.synthesizing:
            return True
        end = self.play_end_ms()
        return end is not None and end > now


@dataclass
class Room:
    speeches: OrderedDict[str, Speech] = field(default_factory=OrderedDict)
    play_until_ms: float = 0.0
    last_used_ms: float = 0.0


class _Lru:
    def __init__(self, size: int) -> None:
        self._d: OrderedDict[str, str] = OrderedDict()
        self._size = size

    def add(self, key: str, value: str = "") -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self._size:
            self._d.popitem(last=False)

    def get(self, key: str) -> str | None:
        return self._d.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._d


@lru_cache(maxsize=4096)
def _room_folder(audio_dir: Path, room_id: str) -> Path:
    """The room's audio folder, checked once per room (resolving it took a third of planning a reply);
    a refused id raises, and is not remembered."""
    return inside(audio_dir, check_id("room_id", room_id))


def record_plan_warnings(stream: ReplyStream, request_id: str, room_id: str) -> None:
    """Log and count what planning found in the text (unknown tokens, stripped characters...)."""
    plan = stream.plan
    for token in plan.unknown_tokens:
        metrics.WARNINGS.labels("unknown_token").inc()
        log.warning("request %s (room %s): unknown control token stripped: %r", request_id, room_id, token)
    if plan.removed_chars:
        metrics.WARNINGS.labels("unsupported_chars").inc()
        log.warning("request %s (room %s): unsupported characters stripped: %s", request_id, room_id,
                    " ".join(f"U+{ord(c):04X}" for c in plan.removed_chars[:10]))
    if plan.truncated:
        metrics.WARNINGS.labels("truncated").inc()
        log.warning("request %s (room %s): reply truncated (%s)", request_id, room_id,
                    next((w for w in plan.warnings if w.startswith("reply truncated")), ""))
    if plan.skipped_reason:
        metrics.WARNINGS.labels("skipped").inc()
        log.warning("request %s (room %s): not spoken, %s", request_id, room_id, plan.skipped_reason)


def record_engine_failures(stream: ReplyStream, seen: int, request_id: str) -> int:
    """Log and count engine failures recorded since ``seen``; returns the new count."""
    failures = stream.result.engine_failures
    for f in failures[seen:]:
        metrics.ENGINE_FAILURES.labels(f.engine).inc()
        if f.next_engine:
            metrics.WARNINGS.labels("engine_fallback").inc()
            log.error("request %s: TTS engine %s failed at segment %d (%s); falling back to %s for the rest "
                      "of the reply", request_id, f.engine, f.seq, f.error, f.next_engine)
        else:
            metrics.WARNINGS.labels("engine_failed").inc()
            log.error("request %s: TTS engine %s failed at segment %d (%s); no engine left, text-only segment",
                      request_id, f.engine, f.seq, f.error)
    return len(failures)


class VoiceHandler:
    def __init__(self, engine: str | TTSEngine, audio_dir: Path, publish: Publish, executor: Executor | None = None,
                 clock: Clock | None = None, preempt: bool = PREEMPT_ON_HIGHER_PRIORITY,
                 room_idle_s: float = 600.0, claims: DeliveryClaims | None = None):
        self._engine = engine
        self._audio_dir = audio_dir
        self._publish = publish
        self._executor = executor
        self._clock: Clock = clock or (lambda: float(now_ms()))
        self._preempt = preempt
        self._rooms: dict[str, Room] = {}
        self._room_idle_ms = room_idle_s * 1000.0  # a room with nothing live is forgotten after this
        self._last_sweep_ms = 0.0
        self._finished = _Lru(REMEMBER_REQUESTS)  # spoken (or skipped) request ids
        self._cancelled = _Lru(REMEMBER_REQUESTS)  # request id -> reason
        # Durable dedup across restarts and replicas: a reply is claimed (PostgreSQL) before it is spoken.
        self._claims = claims

    # -- synthesis ---------------------------------------------------------------------------------

    @property
    def engine(self) -> str | TTSEngine:
        return self._engine

    def use_engine(self, engine: str | TTSEngine) -> None:
        """Switch engine (e.g. the configured one could not load at start-up)."""
        self._engine = engine

    def segments_for(self, text: str, request_id: str, room_id: str, cancel: Any = None,
                     engine: str | TTSEngine | None = None) -> ReplyStream:
        # The room id names a folder: it must be a well-formed id and the folder must stay inside the
        # audio folder (a room id like ``../../x`` is refused, nothing is written outside).
        out_dir = _room_folder(self._audio_dir, room_id)
        check_id("request_id", request_id)
        return stream_reply(text, out_dir=out_dir, request_id=request_id, room_id=room_id,
                            engine=engine or self._engine, cancel=cancel)

    # -- arrival -----------------------------------------------------------------------------------

    async def admit(self, reply: dict[str, Any]) -> bool:
        """Handle a reply record on arrival; True when it must be spoken (then call :meth:`speak`)."""
        state = reply["state"]
        room_id, request_id = check_id("room_id", state["room_id"]), check_id("request_id", state["request_id"])
        if reply["outcome"] == "cancelled":
            reason = f"cancelled: {reply.get('reason') or 'no reason given'}"
            self._cancelled.add(request_id, reason)
            await self.cancel_request(room_id, request_id, reason)
            return False
        if reply["outcome"] not in SPOKEN_OUTCOMES:
            return False
        room = self._room(room_id)
        self._prune(room)
        if request_id in room.speeches or request_id in self._finished:
            log.info("request %s (room %s): duplicate reply ignored", request_id, room_id)
            return False
        if request_id in self._cancelled:
            log.info("request %s (room %s): not spoken, already %s", request_id, room_id,
                     self._cancelled.get(request_id))
            return False
        priority = int(state.get("priority") or 0)
        if self._preempt:
            lower = [s for s in room.speeches.values() if s.priority < priority]
            for speech in lower:
                await self._cancel(speech, f"preempted by higher-priority request {request_id}")
        room.speeches[request_id] = Speech(request_id, room_id, priority, float(reply.get("completed_ms") or 0))
        return True

    # -- speaking ----------------------------------------------------------------------------------

    async def speak(self, reply: dict[str, Any]) -> int:
        """Speak an admitted reply (in the room's order); returns the number of segments published."""
        state = reply["state"]
        room_id, request_id = state["room_id"], state["request_id"]
        room = self._room(room_id)
        speech = room.speeches.get(request_id)
        if speech is None or speech.reason is not None:
            return 0  # cancelled while queued: the renderer never saw it
        # The durable claim is taken when speech starts (not on arrival): a process that dies with the
        # reply still queued leaves it to be spoken after the redelivery.
        if not await self._claim(request_id):
            room.speeches.pop(request_id, None)
            self._finished.add(request_id)
            return 0
        speech.started = speech.synthesizing = True
        try:
            stream = self.segments_for(reply.get("text") or "", request_id, room_id, speech.stop)
            record_plan_warnings(stream, request_id, room_id)
            if stream.skipped_reason:
                return 0
            return await self._speak(room, speech, stream)
        except asyncio.CancelledError:  # the service is stopping: the reply will be redelivered
            speech.reason = speech.reason or "service stopping"
            speech.stop.set()
            raise
        except Exception:
            await self._cancel(speech, "error")
            raise
        finally:
            speech.synthesizing = False
            self._finished.add(request_id)
            if speech.reason is not None or not speech.published:
                room.speeches.pop(request_id, None)
            self._prune(room)

    async def _claim(self, request_id: str) -> bool:
        if self._claims is None:
            return True
        try:
            if await self._claims.claim(request_id):
                return True
        except ClaimsUnavailable as exc:  # speak rather than stay silent; the in-memory set still dedups
            log.warning("%s; speaking without the durable duplicate check", exc)
            return True
        log.info("request %s: already spoken (claimed before a restart or by another replica); redelivery "
                 "ignored", request_id)
        return False

    async def _speak(self, room: Room, speech: Speech, stream: ReplyStream) -> int:
        acks: list[Awaitable[Any]] = []
        try:
            published = await self._segments(room, speech, stream, acks)
        except BaseException:
            # Nothing waits for these. Stopping: the reply is not committed and is read again (a stop
            # with the broker away would otherwise wait out the producer's timeout). Failed: speak()
            # sends a cancel segment and waits for it, which the partition orders after these.
            for ack in acks:
                asyncio.ensure_future(ack).add_done_callback(_unawaited_ack)
            raise
        if acks:  # also for a speech cut part-way: what was handed over is delivered before the commit
            await asyncio.gather(*acks)
        return published

    async def _segments(self, room: Room, speech: Speech, stream: ReplyStream, acks: list[Awaitable[Any]]) -> int:
        loop = asyncio.get_running_loop()
        iterator = iter(stream)
        failures = 0
        in_place = not stream.needs_thread
        while True:
            if in_place:
                if speech.reason is not None:
                    break
                segment = next(iterator, None)
            else:
                chunk: asyncio.Future[Any] = loop.run_in_executor(self._executor, next, iterator, None)
                stopped: asyncio.Future[Any] = asyncio.ensure_future(speech.stopped.wait())
                try:
                    await asyncio.wait([chunk, stopped], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopped.cancel()
                if speech.reason is not None:
                    # The thread finishes the chunk in progress; its segment is dropped, never published.
                    chunk.add_done_callback(_discard)
                    break
                segment = chunk.result()
            failures = record_engine_failures(stream, failures, speech.request_id)
            if segment is None:
                break
            async with speech.lock:
                if speech.reason is not None:  # cancelled while this segment was being synthesized
                    metrics.DISCARDED.inc()
                    break
                now = self._clock()
                if speech.play_start_ms is None:
                    speech.play_start_ms = max(now, room.play_until_ms)
                    metrics.FIRST_SEGMENT.observe(time.perf_counter() - speech.arrived)
                segment["ts_ms"] = now_ms()
                ack = await self._publish(segment)
                if ack is not None:
                    acks.append(ack)
                speech.published += 1
                speech.last_end_ms = float(segment["end_ms"])
                room.play_until_ms = max(room.play_until_ms, speech.play_start_ms + speech.last_end_ms)
                metrics.SEGMENTS.labels(segment["engine"]).inc()
        return speech.published

    # -- cancellation ------------------------------------------------------------------------------

    async def cancel_room(self, room_id: str, reason: str = "product_switch", before_ms: float | None = None) -> int:
        """Stop every request of a room still queued, being synthesized, or (by estimate) playing.

        With ``before_ms`` (the room event's time) only replies completed at or before it are
        stopped: a reply completed after a product switch already speaks about the new product, and
        a switch replayed after a restart does not cut replies that came after it.
        """
        room = self._rooms.get(room_id)
        if room is None:
            return 0
        self._prune(room)
        n = 0
        for speech in list(room.speeches.values()):
            if before_ms is None or speech.completed_ms <= before_ms:
                n += await self._cancel(speech, reason)
        return n

    async def cancel_request(self, room_id: str, request_id: str, reason: str) -> bool:
        room = self._rooms.get(room_id)
        speech = room.speeches.get(request_id) if room else None
        return speech is not None and await self._cancel(speech, reason)

    async def _cancel(self, speech: Speech, reason: str) -> bool:
        if speech.reason is not None:
            return False
        speech.reason = reason
        speech.stop.set()
        speech.stopped.set()
        self._cancelled.add(speech.request_id, reason)
        metrics.CANCELS.labels(reason.split(":")[0].split(" ")[0]).inc()
        room = self._room(speech.room_id)
        async with speech.lock:
            if speech.started and not speech.cancel_sent:
                now = self._clock()
                at = speech.last_end_ms
                if speech.play_start_ms is not None:
                    at = min(max(now - speech.play_start_ms, 0.0), speech.last_end_ms)
                seg = cancel_segment(speech.request_id, speech.room_id, speech.published, at, reason)
                seg["ts_ms"] = now_ms()
                speech.cancel_sent = True
                ack = await self._publish(seg)
                if ack is not None:
                    await ack
                log.info("request %s (room %s): speech cancelled after %d segments (%s)",
                         speech.request_id, speech.room_id, speech.published, reason)
            else:
                log.info("request %s (room %s): cancelled before it was spoken (%s)",
                         speech.request_id, speech.room_id, reason)
        if not speech.synthesizing:
            room.speeches.pop(speech.request_id, None)
        # the renderer stopped this request: the room's later requests play from now on
        now = self._clock()
        ends = [e for s in room.speeches.values() if s.reason is None and (e := s.play_end_ms()) is not None]
        room.play_until_ms = max([now, *ends]) if ends else now
        return True

    # -- bookkeeping -------------------------------------------------------------------------------

    def _room(self, room_id: str) -> Room:
        now = self._clock()
        if now - self._last_sweep_ms > 1000.0:
            self.evict_idle(now)
        room = self._rooms.get(room_id)
        if room is None:
            room = self._rooms[room_id] = Room()
        room.last_used_ms = now
        return room

    def evict_idle(self, now: float | None = None) -> list[str]:
        """Forget rooms unused for ``room_idle_s`` that have nothing queued, synthesizing or playing."""
        now = self._clock() if now is None else now
        self._last_sweep_ms = now
        gone = []
        for room_id, room in list(self._rooms.items()):
            if now - room.last_used_ms > self._room_idle_ms:
                self._prune(room)
                if not room.speeches:
                    del self._rooms[room_id]
                    gone.append(room_id)
        return gone

    @property
    def room_count(self) -> int:
        return len(self._rooms)

    def _prune(self, room: Room) -> None:
        now = self._clock()
        for rid in [rid for rid, s in room.speeches.items() if not s.live(now)]:
            del room.speeches[rid]

    def live_requests(self, room_id: str) -> list[str]:
        room = self._rooms.get(room_id)
        if room is None:
            return []
        self._prune(room)
        return list(room.speeches)


def _unawaited_ack(fut: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of an acknowledgement nobody waits for (its reply is read again)."""
    if not fut.cancelled() and fut.exception() is not None:
        log.info("segment not acknowledged (its reply is read again): %r", fut.exception())


def _discard(fut: asyncio.Future[Any]) -> None:
    if fut.cancelled():
        return
    exc = fut.exception()
    if exc is not None:
        log.warning("synthesis after cancel failed (ignored): %r", exc)
    elif fut.result() is not None:
        metrics.DISCARDED.inc()
