"""Transactional consumer loops on Apache Kafka: a step killed with SIGKILL mid-transaction leaves nothing
behind for read_committed readers, and its successor produces every output exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from livehost.config import Settings
from livehost.kafka import Producer, ensure_topics, now_ms
from livehost.stack.testing import kafka_client
from livehost.topics import ROOM_EVENTS

pytestmark = pytest.mark.integration

OUT = "txn.test.out"
GROUP = "txn-test-step"
TOTAL = 60

# The step under test, run as its own process so that it can be killed for real. Every input comment
# becomes one output record (its event id); with a delay it is slow enough to be killed mid-batch.
STEP = textwrap.dedent("""
    import asyncio, sys
    from livehost.config import Settings
    from livehost.kafka import ConsumerLoop, Producer
    from livehost.topics import ROOM_EVENTS

    async def main(bootstrap: str, delay: float) -> None:
        settings = Settings(kafka_bootstrap=bootstrap, replica_id="r0", connect_backoff_initial_s=0.05)
        producer = Producer(settings)
        await producer.start()

        async def handler(topic, record, rec):
            await producer.send_raw("%(out)s", rec.key, record["event_id"].encode())
            await asyncio.sleep(delay)

        loop = ConsumerLoop(settings, "%(group)s", [ROOM_EVENTS], handler, producer, transactional=True)
        print("RUNNING", flush=True)
        await loop.run()

    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
""") % {"group": GROUP, "out": OUT}


def comment(i: int) -> dict[str, Any]:
    return {"event_id": f"ev-{i:04d}", "room_id": f"room-{i % 3}", "type": "comment", "ts_ms": now_ms(),
            "user_id": "u", "text": f"comment {i}", "link_id": None, "campaign_json": None, "viewer_count": None}


def start_step(bootstrap: str, delay: float, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", STEP, bootstrap, str(delay)], stdout=open(log, "ab"),
                            stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2],
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


async def read_all(bootstrap: str, isolation: str, at_least: int = 0, timeout: float = 60) -> list[bytes]:
    """Every record of OUT visible at this isolation level (read up to the end offsets, which are the last
    stable offsets under read_committed), after waiting for at least ``at_least`` of them."""
    consumer = AIOKafkaConsumer(OUT, **kafka_client(bootstrap), group_id=None, auto_offset_reset="earliest",
                                isolation_level=isolation)
    await consumer.start()
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out += [bytes(r.value or b"") for r in records]
            parts = consumer.assignment()
            if len(out) >= at_least and parts:
                ends = await consumer.end_offsets(list(parts))
                positions = {tp: await consumer.position(tp) for tp in parts}
                if all(positions[tp] >= ends[tp] for tp in parts):
                    return out
        return out
    finally:
        await consumer.stop()


async def test_killed_transactional_step_leaves_no_duplicates(kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = Settings(kafka_bootstrap=kafka_bootstrap)
    await ensure_topics(settings, [ROOM_EVENTS])
    admin = AIOKafkaAdminClient(**kafka_client(kafka_bootstrap))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(OUT, 2, 1)])
    finally:
        await admin.close()
    producer = Producer(settings)
    await producer.start()
    try:
        for i in range(TOTAL):
            await producer.send(ROOM_EVENTS, f"room-{i % 3}", comment(i))
    finally:
        await producer.stop()

    log = tmp_path / "step.log"
    slow = start_step(kafka_bootstrap, 0.05, log)
    try:
        # Kill it once some outputs exist that are not yet committed (visible to read_uncommitted only).
        deadline = time.monotonic() + 60
        seen: list[bytes] = []
        while len(seen) < 15 and time.monotonic() < deadline:
            seen = await read_all(kafka_bootstrap, "read_uncommitted", 0, 10)
        assert len(seen) >= 15, log.read_text()
    finally:
        os.kill(slow.pid, signal.SIGKILL)
        slow.wait()

    fast = start_step(kafka_bootstrap, 0.0, log)
    try:
        await read_all(kafka_bootstrap, "read_committed", TOTAL, 60)
        await asyncio.sleep(1.0)  # a duplicate, if any, would be committed by now
        committed = await read_all(kafka_bootstrap, "read_committed", TOTAL, 10)
    finally:
        fast.terminate()
        fast.wait(15)
    uncommitted = await read_all(kafka_bootstrap, "read_uncommitted", 0, 10)
    # A read_committed reader sees every output exactly once.
    assert len(committed) == TOTAL and {v.decode() for v in committed} == {f"ev-{i:04d}" for i in range(TOTAL)}, \
        log.read_text()[-3000:]
    # The killed process had written outputs in a transaction that never committed: they are in the log
    # (a read_uncommitted reader sees them as duplicates) but no committed reader ever saw them.
    assert len(uncommitted) > TOTAL
