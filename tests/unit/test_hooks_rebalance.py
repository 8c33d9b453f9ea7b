"""A rebalance makes the hooks worker drop what it holds (open merge windows, queued requests, in-flight
marks) without acknowledging it, so the comments are read again and merged once
(services.hooks.handlers.HooksHandler.drop_held)."""

from __future__ import annotations

import json
from typing import Any

from livehost.config import REPO_ROOT, Settings
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.topics import REQUESTS
from services.hooks.handlers import Handled, HooksHandler

HARNESS = load(REPO_ROOT / "harness" / "default")
T0 = 1_000_000
WINDOW = 800


class Token:
    def __init__(self, name: str) -> None:
        self.name = name
        self.acked = False

    def ack(self) -> None:
        self.acked = True


def handler() -> HooksHandler:
    rooms = {r: json.dumps({"room_id": r, "current_link": 1}) for r in ("a", "b")}
    return HooksHandler(Settings(merge_window_ms=WINDOW, request_ttl_ms=60_000), StaticHarnessProvider(HARNESS), rooms)


async def comment(h: HooksHandler, room: str, n: int, at: int) -> tuple[Token, Handled]:
    token = Token(f"{room}-{n}")
    done = await h.on_room_event({"event_id": f"{room}-{n}", "room_id": room, "type": "comment", "user_id": "u",
                                  "text": f"is link {n} in stock?", "ts_ms": at}, at, token)
    return token, done


def requests(done: Handled) -> list[dict[str, Any]]:
    return [e.record for e in done.emits if e.topic is REQUESTS]


async def test_held_comments_are_dropped_unacknowledged_and_merge_once_when_read_again() -> None:
    h = handler()
    first, _ = await comment(h, "a", 1, T0)
    started = await h.flush(T0 + WINDOW)
    assert len(requests(started)) == 1 and started.tokens == [first]  # in flight: acknowledged
    queued, _ = await comment(h, "a", 2, T0 + 1000)
    assert not requests(await h.flush(T0 + 1000 + WINDOW))  # merged, waits behind the in-flight one
    open_window, _ = await comment(h, "a", 3, T0 + 2000)
    other_room, _ = await comment(h, "b", 1, T0 + 2000)

    held = h.drop_held()
    assert {t.name for t in held} == {"a-2", "a-3", "b-1"}
    assert not any(t.acked for t in held)
    assert h.in_flight_count == 0 and not h.schedules and not h.merger.pending()

    # read again after the rebalance (new tokens for the same offsets): one request per room, each
    # comment in exactly one of them
    again = [await comment(h, "a", 2, T0 + 3000), await comment(h, "a", 3, T0 + 3000),
             await comment(h, "b", 1, T0 + 3000)]
    done = await h.flush(T0 + 3000 + WINDOW)
    published = requests(done)
    assert sorted(r["state"]["room_id"] for r in published) == ["a", "b"]
    merged = sorted(c["event_id"] for r in published for c in r["state"]["comments"])
    assert merged == ["a-2", "a-3", "b-1"]
    assert sorted(t.name for t in done.tokens) == sorted(t.name for t, _ in again)
    assert h.drop_held() == []  # nothing held any more: everything published
