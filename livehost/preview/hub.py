"""Per-room fan-out of avatar segments to the preview page's event streams, with a short history."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator
from typing import Any

HISTORY = 500  # segments kept per room for ?replay=1


class SegmentHub:
    """Feeders (Kafka, gRPC, a test) call :meth:`publish`; each page subscribes to one room."""

    def __init__(self, history: int = HISTORY) -> None:
        self._subs: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
        self._history: dict[str, deque[dict[str, Any]]] = {}
        self._size = history
        self._changed = asyncio.Event()

    def publish(self, seg: dict[str, Any]) -> None:
        room = str(seg["room_id"])
        self._history.setdefault(room, deque(maxlen=self._size)).append(seg)
        for q in self._subs.get(room, set()):
            if q.full():  # a stalled page loses the oldest segments, never blocks the feed
                q.get_nowait()
            q.put_nowait(seg)

    def history(self, room: str) -> list[dict[str, Any]]:
        return list(self._history.get(room, ()))

    def subscribers(self, room: str) -> int:
        return len(self._subs.get(room, ()))

    async def wait_subscribers(self, room: str, n: int = 1) -> None:
        while self.subscribers(room) < n:
            self._changed.clear()
            await self._changed.wait()

    async def subscribe(self, room: str, replay: bool = False) -> AsyncGenerator[dict[str, Any], None]:
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        if replay:
            for seg in self.history(room):
                q.put_nowait(seg)
        self._subs.setdefault(room, set()).add(q)
        self._changed.set()
        try:
            while True:
                yield await q.get()
        finally:
            self._subs[room].discard(q)
            self._changed.set()
