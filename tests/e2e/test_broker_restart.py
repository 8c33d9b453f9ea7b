"""The broker is killed with SIGKILL under load and restarted: every service reconnects by itself, every
accepted comment gets exactly one outcome, one trajectory and its speech once.

Counts are printed (pytest -s shows them) and asserted: lost comments, duplicate outcomes, duplicate
trajectories (PostgreSQL rows, and records on agent.trajectories), duplicate speech segments.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer

from livehost import codec
from livehost.kafka import Producer, now_ms
from livehost.stack import kafka
from livehost.stack.process import Running, pid_alive, read_record
from livehost.stack.testing import kafka_client
from livehost.topics import AVATAR_SEGMENTS, REPLIES, ROOM_EVENTS, TRAJECTORIES, Topic
from tests.e2e.conftest import System

pytestmark = pytest.mark.e2e

ROOMS = ("room-a", "room-b")
QUESTIONS = ("how much is link {n}?", "is link {n} in stock?", "what colors does link {n} come in?")
SEND_SECONDS = 9.0
KILL_AFTER_S = 3.0
DOWN_S = 2.0


def event_ids_of(reply: dict[str, Any]) -> set[str]:
    ids = {c["event_id"] for c in reply["state"]["comments"]}
    for step in reply["state"]["steps"]:
        if step["kind"] == "input":
            ids |= set(json.loads(step["data_json"]).get("event_ids", []))
    return ids


async def read_topic(system: System, topic: Topic, prefix_rooms: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every committed record of ``topic`` for the given rooms, up to the end offsets."""
    consumer = AIOKafkaConsumer(topic.name, **kafka_client(system.settings.kafka_bootstrap), group_id=None,
                                auto_offset_reset="earliest", isolation_level="read_committed")
    await consumer.start()
    out: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for rec in records:
                    value = codec.decode(topic.schema, rec.value)
                    room = value.get("room_id") or value.get("state", {}).get("room_id")
                    if room in prefix_rooms:
                        out.append(value)
            parts = consumer.assignment()
            if parts:
                ends = await consumer.end_offsets(list(parts))
                positions = {tp: await consumer.position(tp) for tp in parts}
                if all(positions[tp] >= ends[tp] for tp in parts):
                    return out
        return out
    finally:
        await consumer.stop()


async def test_broker_kill_and_restart_loses_and_duplicates_nothing(system: System, kafka_broker: Running) -> None:
    marker = uuid.uuid4().hex[:6]
    started = time.monotonic()
    accepted: list[str] = []
    producer = Producer(system.settings)
    await producer.start()

    async def publish() -> None:
        n = 0
        while time.monotonic() - started < SEND_SECONDS:
            room = ROOMS[n % len(ROOMS)]
            event_id = f"brk-{marker}-{n:03d}"
            text = QUESTIONS[n % len(QUESTIONS)].format(n=1 + n % 3) + f" ({marker} #{n})"
            # Idempotent producer: while the broker is down this waits and retries, never duplicates.
            await producer.send(ROOM_EVENTS, room, {
                "event_id": event_id, "room_id": room, "type": "comment", "ts_ms": now_ms(), "user_id": f"u-{n % 7}",
                "text": text, "link_id": None, "campaign_json": None, "viewer_count": None})
            accepted.append(event_id)
            n += 1
            await asyncio.sleep(0.25)

    async def kill_and_restart() -> tuple[float, float]:
        await asyncio.sleep(KILL_AFTER_S)
        rec = read_record(Path(kafka_broker.workdir), kafka.NAME) or kafka_broker
        os.kill(rec.pid, signal.SIGKILL)
        for _ in range(100):
            if not pid_alive(rec.pid):
                break
            await asyncio.sleep(0.05)
        killed_wall = time.time()
        await asyncio.sleep(DOWN_S)
        await asyncio.to_thread(kafka.restart, rec)
        return killed_wall, time.time()

    try:
        (killed_wall, restarted_wall), _ = await asyncio.gather(kill_and_restart(), publish())
    finally:
        await producer.stop()
    assert accepted

    # Wait until every accepted comment has an outcome (or time runs out), then count.
    want = set(accepted)
    answered: set[str] = set()
    replies: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not want <= answered:
        replies = await read_topic(system, REPLIES, ROOMS)
        answered = set().union(*(event_ids_of(r) for r in replies)) if replies else set()
        await asyncio.sleep(1.0)
    mine = [r for r in replies if event_ids_of(r) & want]
    per_request = Counter(r["state"]["request_id"] for r in mine)
    after = [r["completed_ms"] / 1000 - killed_wall for r in mine if r["completed_ms"] / 1000 > restarted_wall]
    recovery = min(after) if after else None
    requests = set(per_request)

    pool = await asyncpg.create_pool(system.settings.postgres_dsn)
    try:
        stored = 0
        for _ in range(60):
            stored = await pool.fetchval("SELECT count(*) FROM trajectories WHERE request_id = ANY($1::text[])",
                                         list(requests))
            if stored == len(requests):
                break
            await asyncio.sleep(0.5)
    finally:
        await pool.close()
    trajectory_records = Counter(t["request_id"] for t in await read_topic(system, TRAJECTORIES, ROOMS)
                                 if t["request_id"] in requests)
    segments = [s for s in await read_topic(system, AVATAR_SEGMENTS, ROOMS) if s["request_id"] in requests]
    spoken = Counter((s["request_id"], s["seq"]) for s in segments if not s["cancel"])

    lost = len(want - answered)
    duplicate_outcomes = sum(n - 1 for n in per_request.values())
    duplicate_rows = len(requests) - stored if stored <= len(requests) else stored - len(requests)
    duplicate_trajectory_records = sum(n - 1 for n in trajectory_records.values())
    duplicate_speech = sum(n - 1 for n in spoken.values())
    print(f"\nbroker SIGKILL + restart under load: comments accepted {len(want)}, requests {len(requests)}, "
          f"outcomes {Counter(r['outcome'] for r in mine)}; lost {lost}, duplicate outcomes {duplicate_outcomes}, "
          f"trajectory rows {stored}/{len(requests)}, duplicate trajectory records {duplicate_trajectory_records}, "
          f"duplicate speech segments {duplicate_speech}; broker down {restarted_wall - killed_wall:.1f} s, "
          f"first outcome after the restart {'-' if recovery is None else f'{recovery:.1f} s'} after the kill")
    assert lost == 0, f"{lost} accepted comments got no outcome"
    assert duplicate_outcomes == 0
    assert stored == len(requests) and duplicate_rows == 0
    assert duplicate_speech == 0
    # agent.trajectories is written by the at-least-once recorder (README "Delivery guarantees"): its
    # duplicates are counted above, and the PostgreSQL rows are the record of truth.

    # The system serves new traffic without manual action.
    event_id = f"brk-{marker}-after"
    producer = Producer(system.settings)
    await producer.start()
    try:
        await producer.send(ROOM_EVENTS, "room-a", {
            "event_id": event_id, "room_id": "room-a", "type": "comment", "ts_ms": now_ms(), "user_id": "u-after",
            "text": "how much is link 1?", "link_id": None, "campaign_json": None, "viewer_count": None})
    finally:
        await producer.stop()
    deadline = time.monotonic() + 60
    after: dict[str, Any] | None = None
    while time.monotonic() < deadline and after is None:
        after = next((r for r in await read_topic(system, REPLIES, ("room-a",)) if event_id in event_ids_of(r)), None)
        await asyncio.sleep(0.5)
    assert after is not None, "no outcome for a comment sent after the restart"
    if after["outcome"] == "reply":  # and it is spoken: the voice service came through the restart too
        spoken_after = False
        while time.monotonic() < deadline and not spoken_after:
            spoken_after = any(s["request_id"] == after["state"]["request_id"] and not s["cancel"]
                               for s in await read_topic(system, AVATAR_SEGMENTS, ("room-a",)))
            await asyncio.sleep(0.5)
        assert spoken_after, "the reply after the restart was never spoken"
    # No service gave up on the broker: every process the test system started still runs.
    dead = [name for name, proc in system.supervisor.procs.items() if not pid_alive(proc.pid)]
    assert not dead, f"services that exited after the broker restart: {dead}"
