"""Drive a running system over Kafka: publish the room events of cases with bursty arrival timing.

``schedule`` turns cases into a timeline (seeded): cases arrive in bursts (several cases a few
hundred ms apart, exponential gaps between bursts), each case's comments keep their ``offset_ms``;
a campaign change is published when a room's campaign first appears or changes, and a product
switch when a case's current link differs from the room's last one. ``play`` publishes the
timeline to ``livehost.topics.ROOM_EVENTS`` (``schemas/room_event.avsc``), sleeping between events
(``speed`` > 1 plays faster).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from livehost.topics import ROOM_EVENTS, Topic

Send = Callable[[Topic, str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Scheduled:
    at_ms: int  # relative to the start of the play
    record: dict[str, Any]  # a RoomEvent (ts_ms filled at publish time)
    case_id: str


def _event(event_id: str, room_id: str, kind: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"event_id": event_id, "room_id": room_id, "type": kind, "ts_ms": 0, "user_id": None,
                              "text": None, "link_id": None, "campaign_json": None, "viewer_count": None}
    record.update(fields)
    return record


def schedule(cases: Sequence[dict[str, Any]], *, seed: int = 0, mean_gap_ms: float = 1500.0, max_burst: int = 4,
             room_prefix: str = "") -> list[Scheduled]:
    """The timeline of room events for ``cases`` (same cases and seed → same timeline)."""
    rng = random.Random(f"play:{seed}")
    out: list[Scheduled] = []
    t = 0.0
    remaining = list(cases)
    rooms: dict[str, tuple[str | None, int | None]] = {}  # room -> (campaign json, current link)
    while remaining:
        burst = remaining[:rng.randint(1, max_burst)]
        remaining = remaining[len(burst):]
        start = t
        for case in burst:
            start += rng.randint(0, 400)
            room = case.get("room") or {}
            room_id = f"{room_prefix}{room.get('room_id', 'room')}"
            cid = str(case.get("id"))
            campaign = json.dumps(room["campaign"], sort_keys=True) if room.get("campaign") else None
            last_campaign, last_link = rooms.get(room_id, (None, None))
            pre = 0
            if campaign is not None and campaign != last_campaign:
                out.append(Scheduled(int(start), _event(f"{cid}-campaign", room_id, "campaign_change",
                                                        campaign_json=campaign,
                                                        viewer_count=room.get("viewer_count")), cid))
                pre += 1
            current = room.get("current_link")
            previous = room.get("previous_link")
            if previous is not None and previous != last_link:
                out.append(Scheduled(int(start) + pre, _event(f"{cid}-switch-prev", room_id, "product_switch",
                                                              link_id=previous), cid))
                pre += 1
                last_link = previous
            if current is not None and current != last_link:
                out.append(Scheduled(int(start) + pre, _event(f"{cid}-switch", room_id, "product_switch",
                                                              link_id=current), cid))
                pre += 1
            rooms[room_id] = (campaign, current)
            for n, comment in enumerate(case.get("comments") or []):
                out.append(Scheduled(int(start) + pre + int(comment.get("offset_ms", 0)),
                                     _event(f"{cid}-c{n}", room_id, "comment", user_id=comment.get("user_id"),
                                            text=comment.get("text"), viewer_count=room.get("viewer_count")), cid))
        t = start + rng.expovariate(1.0 / mean_gap_ms) if mean_gap_ms > 0 else start
    out.sort(key=lambda s: s.at_ms)
    return out


async def play(timeline: Sequence[Scheduled], send: Send, *, speed: float = 1.0,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
               now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> int:
    """Publish the timeline with its timing (``speed`` 0 = as fast as possible); returns events sent."""
    t0 = clock()
    sent = 0
    for item in timeline:
        if speed > 0:
            due = t0 + item.at_ms / 1000.0 / speed
            delay = due - clock()
            if delay > 0:
                await sleep(delay)
        record = {**item.record, "ts_ms": now_ms()}
        await send(ROOM_EVENTS, record["room_id"], record)
        sent += 1
    return sent


async def play_over_kafka(timeline: Sequence[Scheduled], *, speed: float = 1.0, settings: Any = None) -> int:
    """``play`` through the project's Avro producer to the broker in the settings."""
    from livehost.config import load_settings
    from livehost.kafka import Producer, ensure_topics, wait_for_broker

    settings = settings or load_settings()
    await wait_for_broker(settings, attempts=10)
    await ensure_topics(settings, [ROOM_EVENTS])
    producer = Producer(settings)
    await producer.start()
    try:
        return await play(timeline, producer.send, speed=speed)
    finally:
        await producer.stop()
