"""The live-room simulator drives the running system over Kafka: every simulated comment gets a
recorded terminal outcome (reply, refusal, drop or cancellation) — nothing is lost under bursts."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer

from livehost import codec
from livehost.commerce.store import CommerceStore
from livehost.sim.generator import generate_cases
from livehost.sim.play import play_over_kafka, schedule
from livehost.stack.testing import kafka_client
from livehost.topics import REPLIES
from tests.e2e.conftest import System

pytestmark = pytest.mark.e2e


async def test_simulated_rooms_over_kafka(system: System) -> None:
    prefix = f"sim{uuid.uuid4().hex[:4]}-"
    seen_rooms: set[str] = set()
    cases = []
    for generated in generate_cases(seed=3, per_category=2, rooms=6):
        case = generated.case
        room = case["room"]["room_id"]
        if room not in seen_rooms:  # one catalog per room in the live scope
            seen_rooms.add(room)
            cases.append(case)
    pool = await asyncpg.create_pool(system.settings.postgres_dsn)
    try:
        await CommerceStore(pool).load_catalog({"rooms": [
            {**c["room"], "room_id": prefix + c["room"]["room_id"], "catalog": c["catalog"]} for c in cases]})
        timeline = schedule(cases, seed=3, mean_gap_ms=300, room_prefix=prefix)
        comment_ids = {s.record["event_id"] for s in timeline if s.record["type"] == "comment"}
        assert len(comment_ids) >= len(cases)
        sent = await play_over_kafka(timeline, speed=1.0, settings=system.settings)
        assert sent == len(timeline)
        consumer = AIOKafkaConsumer(REPLIES.name, **kafka_client(system.settings.kafka_bootstrap),
                                    group_id=f"sim-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest",
                                    fetch_max_wait_ms=10)
        await consumer.start()
        answered: set[str] = set()
        outcomes: dict[str, str] = {}
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not comment_ids <= answered:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    for rec in records:
                        reply = codec.decode(REPLIES.schema, rec.value)
                        if not reply["state"]["room_id"].startswith(prefix):
                            continue
                        ids = {c["event_id"] for c in reply["state"]["comments"]}
                        for step in reply["state"]["steps"]:
                            if step["kind"] == "input":
                                ids |= set(json.loads(step["data_json"]).get("event_ids", []))
                        answered |= ids
                        outcomes[reply["state"]["request_id"]] = reply["outcome"]
        finally:
            await consumer.stop()
        assert comment_ids <= answered, f"{len(comment_ids - answered)} simulated comments got no outcome"
        assert "reply" in outcomes.values()
        # Every outcome is also a stored trajectory.
        for _ in range(50):
            stored = await pool.fetchval("SELECT count(*) FROM trajectories WHERE request_id = ANY($1::text[])",
                                         list(outcomes))
            if stored == len(outcomes):
                break
            await asyncio.sleep(0.2)
        assert stored == len(outcomes)
    finally:
        await pool.close()
