"""Merging close comments of one room into one request.

A room's window opens with its first pending comment and closes ``window_ms`` later, or as soon as
it holds ``max_batch`` distinct comments. Identical repeats (same normalised text) collapse into
one comment, so a burst of "how much??" is one question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_NORMALISE = re.compile(r"[\W_]+", re.UNICODE)


def normalise(text: str) -> str:
    return _NORMALISE.sub(" ", text.lower()).strip()


@dataclass
class Batch:
    room_id: str
    opened_ms: int
    comments: list[dict[str, Any]] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)  # every event, duplicates included
    tokens: list[Any] = field(default_factory=list)  # transport handles to acknowledge once handled
    collapsed: int = 0

    def add(self, comment: dict[str, Any], token: Any = None) -> None:
        self.event_ids.append(comment["event_id"])
        if token is not None:
            self.tokens.append(token)
        key = normalise(comment["text"])
        if any(normalise(c["text"]) == key for c in self.comments):
            self.collapsed += 1
            return
        self.comments.append(comment)


class Merger:
    def __init__(self, window_ms: int, max_batch: int):
        self.window_ms = window_ms
        self.max_batch = max_batch
        self._open: dict[str, Batch] = {}

    def add(self, room_id: str, comment: dict[str, Any], now_ms: int, token: Any = None) -> list[Batch]:
        """Add a comment; returns batches that closed because they are full."""
        batch = self._open.get(room_id)
        if batch is None:
            batch = self._open[room_id] = Batch(room_id, now_ms)
        batch.add(comment, token)
        if len(batch.comments) >= self.max_batch:
            return [self._open.pop(room_id)]
        return []

    def due(self, now_ms: int) -> list[Batch]:
        """Batches whose window has elapsed."""
        ready = [r for r, b in self._open.items() if now_ms - b.opened_ms >= self.window_ms]
        return [self._open.pop(r) for r in ready]

    def next_due_ms(self) -> int | None:
        """When the earliest open window closes (None: no open window)."""
        return min((b.opened_ms + self.window_ms for b in self._open.values()), default=None)

    def flush_room(self, room_id: str) -> Batch | None:
        return self._open.pop(room_id, None)

    def flush_all(self) -> list[Batch]:
        """Every open batch, now (the windows are gone afterwards)."""
        batches = list(self._open.values())
        self._open.clear()
        return batches

    def has_room(self, room_id: str) -> bool:
        """True while the room has an open merge window."""
        return room_id in self._open

    def pending(self) -> int:
        return len(self._open)
