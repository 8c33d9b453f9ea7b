"""The hooks worker SIGKILLed with comments in open merge windows and requests waiting in room queues,
then restarted: every comment still gets an outcome (a request published on agent.requests, or a reply)
— nothing accepted is lost. Real broker (the session's Apache Kafka), real PostgreSQL, the real worker.

Downstream (prompt/policy/tools) does not run here, so each room's first request stays in flight and the
later ones wait in the room queue: exactly the state a crash used to lose (their comments were
acknowledged at merge time, before the request was published)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from livehost import codec
from livehost.config import Settings
from livehost.kafka import Producer
from livehost.stack.testing import kafka_client
from livehost.topics import REPLIES, REQUESTS, ROOM_EVENTS, Topic

from .conftest import create_database
from .test_faust_workers import prepare_system, start_worker, stop_worker, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
ROOMS = 6
WINDOW_MS = 1500


async def read_all(settings: Settings, topic: Topic, timeout: float = 3.0) -> list[dict[str, Any]]:
    """Every committed record of ``topic`` (read_committed: an aborted transaction of the killed worker
    is not an outcome)."""
    consumer = AIOKafkaConsumer(**kafka_client(settings.kafka_bootstrap), group_id=None, fetch_max_wait_ms=50,
                                enable_auto_commit=False, isolation_level="read_committed")
    await consumer.start()
    out: list[dict[str, Any]] = []
    try:
        parts = [TopicPartition(topic.name, p) for p in range(topic.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(parts)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            for msgs in batch.values():
                out.extend(codec.decode(topic.schema, m.value) for m in msgs)
            positions = [await consumer.position(tp) for tp in parts]
            if all(pos >= ends[tp] for pos, tp in zip(positions, parts, strict=True)):
                break
    finally:
        await consumer.stop()
    return out


def outcomes(requests: list[dict[str, Any]], replies: list[dict[str, Any]]) -> dict[str, set[str]]:
    """event_id -> request ids whose published request (turn 0) or reply carries it."""
    seen: dict[str, set[str]] = defaultdict(set)
    for rec in [*requests, *replies]:
        state = rec["state"]
        for c in state.get("comments") or []:
            seen[c["event_id"]].add(state["request_id"])
        for step in state.get("steps") or []:  # comments dropped by input hooks stay in the input step
            if step.get("kind") == "input":
                for eid in json.loads(step.get("data_json") or "{}").get("event_ids", []):
                    seen[eid].add(state["request_id"])
    return seen


async def fresh_system(kafka_bootstrap: str, pg_server: str) -> Settings:
    """A new database on the session's PostgreSQL, migrated, and the topics created."""
    settings = Settings(kafka_bootstrap=kafka_bootstrap, postgres_dsn=await create_database(pg_server))
    await prepare_system(settings)
    return settings


async def send_switches(producer: Producer, rooms: list[str]) -> None:
    for room in rooms:
        await producer.send(ROOM_EVENTS, room, {"event_id": f"{room}-sw", "room_id": room,
                                                "type": "product_switch", "ts_ms": int(time.time() * 1000),
                                                "link_id": 1})


async def send_comments(producer: Producer, rooms: list[str], n: int, sent: list[str]) -> None:
    """Comment ``n`` in every room; its event ids are appended to ``sent``."""
    for room in rooms:
        eid = f"{room}-c{n}"
        sent.append(eid)
        await producer.send(ROOM_EVENTS, room, {"event_id": eid, "room_id": room, "type": "comment",
                                                "ts_ms": int(time.time() * 1000), "user_id": f"u{n}",
                                                "text": f"is link {n} still available?"})


async def test_hooks_worker_killed_mid_merge_window_loses_no_comment(
        tmp_path: Path, kafka_bootstrap: str, pg_server: str) -> None:
    settings = await fresh_system(kafka_bootstrap, pg_server)
    env = {**worker_env(kafka_bootstrap, settings.postgres_dsn, tmp_path), "LIVEHOST_MERGE_WINDOW_MS": str(WINDOW_MS),
           "LIVEHOST_REQUEST_TTL_MS": "120000", "LIVEHOST_REPLICA_ID": "hooks-1"}
    log = tmp_path / "hooks.log"
    worker = await asyncio.to_thread(start_worker, "hooks", env, log)
    producer = Producer(settings)
    await producer.start()
    tag = uuid.uuid4().hex[:6]
    rooms = [f"room-{tag}-{i}" for i in range(ROOMS)]
    sent: list[str] = []


    try:
        await send_switches(producer, rooms)
        await send_comments(producer, rooms, 1, sent)  # becomes each room's in-flight request
        await asyncio.sleep(WINDOW_MS / 1000 + 1.5)
        await send_comments(producer, rooms, 2, sent)  # merged, then queued behind the in-flight one
        await asyncio.sleep(WINDOW_MS / 1000 + 1.5)
        await send_comments(producer, rooms, 3, sent)  # still in its open merge window when the worker dies
        await asyncio.sleep(0.3)
        before = outcomes(await read_all(settings, REQUESTS), await read_all(settings, REPLIES))
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
        killed_at = time.monotonic()
        queued_at_kill = [e for e in sent if e.endswith("c2") and e not in before]
        open_at_kill = [e for e in sent if e.endswith("c3") and e not in before]
        worker = await asyncio.to_thread(start_worker, "hooks", env, log)
        print(f"\nhooks SIGKILLed with {len(queued_at_kill)} comments in queued requests and {len(open_at_kill)} "
              f"in open merge windows; restarted and ready in {time.monotonic() - killed_at:.1f}s")
        deadline = time.monotonic() + 60
        while True:
            seen = outcomes(await read_all(settings, REQUESTS), await read_all(settings, REPLIES))
            lost = [e for e in sent if e not in seen]
            if not lost or time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)
    finally:
        await producer.stop()
        stop_worker(worker)
    duplicated = {e: ids for e, ids in seen.items() if e in sent and len(ids) > 1}
    print(f"comments sent {len(sent)}, with an outcome {len(sent) - len(lost)}, lost {len(lost)}, "
          f"in more than one request {len(duplicated)}")
    assert queued_at_kill, "the scenario must have requests waiting in room queues when the worker dies"
    assert not lost, f"comments lost by the crash: {lost}"


async def test_one_of_two_hooks_workers_killed_the_survivor_merges_every_comment_once(
        tmp_path: Path, kafka_bootstrap: str, pg_server: str) -> None:
    """Two replicas; one SIGKILLed for good with comments held. The survivor's own held comments are
    revoked in the rebalance too: it drops them and reads them again with the dead worker's, so every
    comment gets an outcome and none lands in two requests (before HooksHandler.drop_held the survivor
    waited for its held comments until they went stale)."""
    settings = await fresh_system(kafka_bootstrap, pg_server)
    base = {**worker_env(kafka_bootstrap, settings.postgres_dsn, tmp_path), "LIVEHOST_MERGE_WINDOW_MS": str(WINDOW_MS),
            "LIVEHOST_REQUEST_TTL_MS": "120000"}
    workers = {}
    for n in (1, 2):
        workers[n] = await asyncio.to_thread(start_worker, "hooks", {**base, "LIVEHOST_REPLICA_ID": f"hooks-{n}"},
                                             tmp_path / f"hooks-{n}.log")
    producer = Producer(settings)
    await producer.start()
    tag = uuid.uuid4().hex[:6]
    rooms = [f"room-{tag}-{i}" for i in range(2 * ROOMS)]  # both workers own some rooms
    sent: list[str] = []


    try:
        await asyncio.sleep(3.0)  # the second join's rebalance settles
        await send_switches(producer, rooms)
        await send_comments(producer, rooms, 1, sent)  # in flight
        await asyncio.sleep(WINDOW_MS / 1000 + 1.5)
        await send_comments(producer, rooms, 2, sent)  # queued
        await asyncio.sleep(WINDOW_MS / 1000 + 1.5)
        await send_comments(producer, rooms, 3, sent)  # open windows
        await asyncio.sleep(0.3)
        before = outcomes(await read_all(settings, REQUESTS), await read_all(settings, REPLIES))
        held_at_kill = [e for e in sent if not e.endswith("c1") and e not in before]
        os.killpg(workers[1].pid, signal.SIGKILL)
        workers[1].wait(10)
        deadline = time.monotonic() + 60
        while True:
            seen = outcomes(await read_all(settings, REQUESTS), await read_all(settings, REPLIES))
            lost = [e for e in sent if e not in seen]
            if not lost or time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)
    finally:
        await producer.stop()
        for proc in workers.values():
            stop_worker(proc)
    duplicated = {e: ids for e, ids in seen.items() if e in sent and len(ids) > 1}
    print(f"\none of two hooks workers SIGKILLed with {len(held_at_kill)} comments held; comments sent {len(sent)}, "
          f"with an outcome {len(sent) - len(lost)}, lost {len(lost)}, in more than one request {len(duplicated)}")
    assert held_at_kill, "the scenario must have comments held when the worker dies"
    assert not lost, f"comments lost: {lost}"
    assert not duplicated, f"comments merged into more than one request: {duplicated}"
