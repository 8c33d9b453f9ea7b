"""Bounded in-memory structures: an LRU map with a size cap and idle expiry, and a sliding-window
rate limiter keyed by identity (itself bounded)."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMap(Generic[K, V]):
    """A dict with at most ``max_entries`` keys (least recently used evicted first) whose entries
    also expire ``idle_s`` seconds after their last use (``idle_s <= 0``: no expiry)."""

    def __init__(self, max_entries: int, idle_s: float = 0.0, clock: Callable[[], float] = time.monotonic):
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.idle_s = idle_s
        self._clock = clock
        self._data: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]

    def get(self, key: K, default: V | None = None) -> V | None:
        item = self._data.get(key)
        if item is None:
            return default
        now = self._clock()
        if self.idle_s > 0 and now - item[0] > self.idle_s:
            del self._data[key]
            self.evicted += 1
            return default
        self._data[key] = (now, item[1])
        self._data.move_to_end(key)
        return item[1]

    def __getitem__(self, key: K) -> V:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._data[key] = (self._clock(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)
            self.evicted += 1

    def setdefault(self, key: K, factory: Callable[[], V]) -> V:
        value = self.get(key)
        if value is None:
            value = factory()
            self[key] = value
        return value

    def pop(self, key: K, default: V | None = None) -> V | None:
        item = self._data.pop(key, None)
        return default if item is None else item[1]

    def expire(self) -> list[K]:
        """Drop every entry idle longer than ``idle_s``; returns their keys."""
        if self.idle_s <= 0:
            return []
        now = self._clock()
        gone = [k for k, (t, _v) in self._data.items() if now - t > self.idle_s]
        for k in gone:
            del self._data[k]
        self.evicted += len(gone)
        return gone

    def keys(self) -> Iterator[K]:
        return iter(list(self._data))


class RateLimiter:
    """At most ``limit`` events per ``window_s`` per key (sliding window); at most ``max_keys`` keys."""

    def __init__(self, limit: int, window_s: float, *, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._events: BoundedMap[str, deque[float]] = BoundedMap(max_keys, idle_s=window_s, clock=clock)

    def allow(self, key: str) -> bool:
        now = self._clock()
        events = self._events.setdefault(key, deque)
        while events and now - events[0] >= self.window_s:
            events.popleft()
        if len(events) >= self.limit:
            return False
        events.append(now)
        return True
