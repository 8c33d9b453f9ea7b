"""Replies in, avatar segments out; cancellation when the room moves on (no transport code).

Synthesis runs in a worker thread so the event loop keeps consuming; each segment is handed to
``publish`` as soon as it is ready, so the renderer can start speaking after the first sentence.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from livehost.kafka import now_ms
from livehost.voice.synth import cancel_segment, stream_reply

SPOKEN_OUTCOMES = ("reply", "fallback")
Publish = Callable[[dict[str, Any]], Awaitable[None]]


class VoiceHandler:
    def __init__(self, engine: str, audio_dir: Path):
        self._engine = engine
        self._audio_dir = audio_dir
        self._active: dict[str, dict[str, threading.Event]] = {}  # room -> request -> cancel flag

    def segments_for(self, text: str, request_id: str, room_id: str, cancel: threading.Event | None = None
                     ) -> Any:
        return stream_reply(text, out_dir=self._audio_dir / room_id, request_id=request_id, room_id=room_id,
                            engine=self._engine, cancel=cancel)

    async def on_reply(self, reply: dict[str, Any], publish: Publish) -> int:
        """Speak a terminal reply; returns the number of segments published."""
        if reply["outcome"] not in SPOKEN_OUTCOMES or not reply.get("text"):
            return 0
        state = reply["state"]
        room_id, request_id = state["room_id"], state["request_id"]
        cancel = threading.Event()
        self._active.setdefault(room_id, {})[request_id] = cancel
        stream = self.segments_for(reply["text"], request_id, room_id, cancel)
        iterator = iter(stream)
        loop = asyncio.get_running_loop()
        published = 0
        last_end = 0.0
        try:
            while True:
                segment = await loop.run_in_executor(None, next, iterator, None)
                if segment is None:
                    break
                if cancel.is_set():
                    break
                segment["ts_ms"] = now_ms()
                last_end = segment["end_ms"]
                await publish(segment)
                published += 1
            if cancel.is_set():
                await publish({**cancel_segment(request_id, room_id, published, last_end), "ts_ms": now_ms()})
        finally:
            self._active.get(room_id, {}).pop(request_id, None)
        return published

    def cancel_room(self, room_id: str) -> int:
        """Stop every reply still being spoken in a room (product switch, higher-priority request)."""
        flags = self._active.get(room_id, {})
        for flag in flags.values():
            flag.set()
        return len(flags)
