"""A reply spoken, the voice process SIGKILLed and restarted (its in-memory state gone), the same reply
delivered again (a redelivery or a duplicate record of a crashed upstream): it is spoken once, because the
claim taken before speaking is durable (PostgreSQL, livehost/claims.py). Real broker, database, process."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from livehost import codec
from livehost.config import REPO_ROOT, Settings
from livehost.kafka import Producer, ensure_topics, now_ms
from livehost.stack.process import start_detached
from livehost.stack.testing import kafka_client
from livehost.topics import AVATAR_SEGMENTS, REPLIES

from .conftest import create_database

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def reply(request_id: str, room: str, text: str) -> dict[str, Any]:
    state = {"request_id": request_id, "room_id": room, "harness_version": "v-test", "policy": "",
             "created_ms": now_ms(), "deadline_ms": now_ms() + 60_000, "priority": 1, "turn": 0,
             "comments": [], "merged_text": "", "room_json": "{}", "loaded_skills": [], "retries": 0, "steps": []}
    return {"state": state, "outcome": "reply", "text": text, "reason": None, "completed_ms": now_ms()}


def start_voice(env: dict[str, str], log: Path, timeout: float = 90) -> int:
    before = log.read_text(errors="replace").count("SERVING voice") if log.exists() else 0
    proc = start_detached([sys.executable, "-m", "services.voice"], log, env=env, cwd=REPO_ROOT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.read_text(errors="replace").count("SERVING voice") > before:
            return proc.pid
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"voice not serving after {timeout}s:\n{log.read_text()[-3000:]}")


async def first_segments(settings: Settings, request_id: str) -> int:
    """How many times the request's speech started (segments with seq 0) on avatar.segments."""
    consumer = AIOKafkaConsumer(**kafka_client(settings.kafka_bootstrap), group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=50)
    await consumer.start()
    try:
        parts = [TopicPartition(AVATAR_SEGMENTS.name, p) for p in range(AVATAR_SEGMENTS.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(parts)
        n = 0
        while True:
            for msgs in (await consumer.getmany(timeout_ms=200)).values():
                for m in msgs:
                    seg = codec.decode(AVATAR_SEGMENTS.schema, m.value)
                    n += seg["request_id"] == request_id and seg["seq"] == 0 and not seg["cancel"]
            positions = [await consumer.position(tp) for tp in parts]
            if all(pos >= ends[tp] for pos, tp in zip(positions, parts, strict=True)):
                return n
    finally:
        await consumer.stop()


async def test_a_reply_redelivered_after_a_voice_restart_is_spoken_once(
        tmp_path: Path, kafka_bootstrap: str, pg_server: str) -> None:
    dsn = await create_database(pg_server)
    settings = Settings(kafka_bootstrap=kafka_bootstrap, postgres_dsn=dsn)
    await ensure_topics(settings)
    env = {**os.environ, "LIVEHOST_KAFKA_BOOTSTRAP": kafka_bootstrap, "LIVEHOST_POSTGRES_DSN": dsn,
           "LIVEHOST_STATE_DIR": str(tmp_path / "state"), "LIVEHOST_VOICE_ENGINE": "text",
           "LIVEHOST_VOICE_GRPC_PORT": "0", "LIVEHOST_REPLICA_ID": "voice-1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    log = tmp_path / "voice.log"
    pid = await asyncio.to_thread(start_voice, env, log)
    producer = Producer(settings)
    await producer.start()
    room, request_id = f"room-{uuid.uuid4().hex[:6]}", f"req-{uuid.uuid4().hex[:12]}"
    record = reply(request_id, room, "Link three is the silk scarf. It is twenty nine ninety nine today.")
    try:
        await producer.send(REPLIES, room, record)
        deadline = time.monotonic() + 60
        while await first_segments(settings, request_id) == 0:
            assert time.monotonic() < deadline, "the reply was never spoken"
            await asyncio.sleep(0.5)
        os.killpg(pid, signal.SIGKILL)
        pid = await asyncio.to_thread(start_voice, env, log)
        await producer.send(REPLIES, room, record)  # the same reply again, to a voice that forgot it
        marker = reply(f"req-{uuid.uuid4().hex[:12]}", room, "Thanks for watching!")
        await producer.send(REPLIES, room, marker)  # same room, after it: once spoken, the duplicate was seen
        deadline = time.monotonic() + 60
        while await first_segments(settings, marker["state"]["request_id"]) == 0:
            assert time.monotonic() < deadline, "the reply after the duplicate was never spoken"
            await asyncio.sleep(0.5)
        spoken = await first_segments(settings, request_id)
    finally:
        await producer.stop()
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    print(f"\nreply delivered twice around a voice SIGKILL+restart: spoken {spoken} time(s)")
    assert spoken == 1
    assert "already spoken" in log.read_text()
