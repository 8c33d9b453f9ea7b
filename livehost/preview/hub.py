"""Per-room fan-out of avatar segments to the preview page's event streams, with a short history.

Every published segment gets an event id, ``<hub token>-<n>`` with ``n`` increasing per room. A page
that reconnects sends the last id it saw (the ``Last-Event-ID`` header of Server-Sent Events) and
gets every segment after it from the history, so a reconnect loses nothing that is still kept
(``HISTORY`` segments per room). An id from another hub (the preview was restarted) replays the
whole history.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from typing import Any

HISTORY = 500  # segments kept per room for ?replay=1 and for resuming after a reconnect

Event = tuple[str, dict[str, Any]]  # (event id, segment)


class Subscription:
    """One page's queue of ``(event id, segment)``; :meth:`next` waits at most ``timeout`` seconds.

    Waiting never cancels the pending read: a timeout leaves it in place for the next call, so no
    segment is lost between keep-alives.
    """

    def __init__(self, hub: SegmentHub, room: str, queue: asyncio.Queue[Event]) -> None:
        self._hub = hub
        self._room = room
        self._queue = queue
        self._pending: asyncio.Task[Event] | None = None

    async def next(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when ``timeout`` passed first."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._queue.get())
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return None
        event, self._pending = self._pending.result(), None
        return event

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._hub._unsubscribe(self._room, self._queue)


class SegmentHub:
    """Feeders (Kafka, gRPC, a test) call :meth:`publish`; each page subscribes to one room."""

    def __init__(self, history: int = HISTORY) -> None:
        self._subs: dict[str, set[asyncio.Queue[Event]]] = {}
        self._history: dict[str, deque[Event]] = {}
        self._counter: dict[str, int] = {}
        self._size = history
        self._changed = asyncio.Event()
        self.token = uuid.uuid4().hex[:8]

    def publish(self, seg: dict[str, Any]) -> str:
        """Fan ``seg`` out to the room's pages; returns its event id."""
        room = str(seg["room_id"])
        n = self._counter.get(room, 0) + 1
        self._counter[room] = n
        event = (f"{self.token}-{n}", seg)
        self._history.setdefault(room, deque(maxlen=self._size)).append(event)
        for q in self._subs.get(room, set()):
            if q.full():  # a stalled page loses the oldest segments, never blocks the feed
                q.get_nowait()
            q.put_nowait(event)
        return event[0]

    def history(self, room: str) -> list[dict[str, Any]]:
        return [seg for _, seg in self._history.get(room, ())]

    def events_after(self, room: str, last_event_id: str) -> list[Event]:
        """The kept events of ``room`` after ``last_event_id`` (all of them if the id is not this hub's)."""
        events = list(self._history.get(room, ()))
        token, _, n = last_event_id.rpartition("-")
        if token != self.token or not n.isdigit():
            return events
        return [e for e in events if int(e[0].rpartition("-")[2]) > int(n)]

    def subscribers(self, room: str) -> int:
        return len(self._subs.get(room, ()))

    async def wait_subscribers(self, room: str, n: int = 1) -> None:
        while self.subscribers(room) < n:
            self._changed.clear()
            await self._changed.wait()

    def subscribe(self, room: str, replay: bool = False, last_event_id: str | None = None) -> Subscription:
        """A subscription to ``room``: with ``last_event_id``, first every kept event after it; else with
        ``replay``, first the room's history; then live events. Call ``close()`` when done."""
        q: asyncio.Queue[Event] = asyncio.Queue(maxsize=1000)
        backlog = (self.events_after(room, last_event_id) if last_event_id
                   else list(self._history.get(room, ())) if replay else [])
        for event in backlog[-q.maxsize:]:
            q.put_nowait(event)
        self._subs.setdefault(room, set()).add(q)
        self._changed.set()
        return Subscription(self, room, q)

    def _unsubscribe(self, room: str, q: asyncio.Queue[Event]) -> None:
        self._subs.get(room, set()).discard(q)
        self._changed.set()
