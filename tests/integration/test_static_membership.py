"""Static group membership (livehost.kafka.group_instance_id): a supervised replica that is SIGKILLed and
started again takes its partitions back at once, instead of waiting for the dead process's session to
time out — which an unnamed (dynamic) member still has to. Each member is its own process, killed -9."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from livehost.config import Settings
from livehost.kafka import ensure_topics
from livehost.topics import ROOM_EVENTS

pytestmark = pytest.mark.integration

SESSION_MS = 12_000

MEMBER = """
import asyncio, sys
from aiokafka import AIOKafkaConsumer
from livehost.config import Settings
from livehost.kafka import consumer_options, group_instance_id

async def main() -> None:
    settings = Settings(kafka_bootstrap=sys.argv[1], replica_id=sys.argv[3])
    consumer = AIOKafkaConsumer(sys.argv[4], **consumer_options(settings), group_id=sys.argv[2],
                                group_instance_id=group_instance_id(settings, sys.argv[2]),
                                session_timeout_ms=int(sys.argv[5]), heartbeat_interval_ms=1000)
    await consumer.start()
    while not consumer.assignment():
        await asyncio.sleep(0.05)
    print("ASSIGNED", sorted(tp.partition for tp in consumer.assignment()), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def _start(bootstrap: str, group: str, replica: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", MEMBER, bootstrap, group, replica, ROOM_EVENTS.name,
                             str(SESSION_MS)], stdout=subprocess.PIPE, text=True, start_new_session=True)


def _assigned_after(proc: subprocess.Popen[str], started: float) -> float:
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the member has partitions (or the process died)
    assert line.startswith("ASSIGNED"), (line, proc.poll())
    return time.monotonic() - started


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _restart_gap(bootstrap: str, replica: str) -> float:
    """Seconds from starting a replacement of a SIGKILLed member until it has partitions again."""
    group = f"static-{uuid.uuid4().hex[:8]}"
    first = _start(bootstrap, group, replica)
    try:
        _assigned_after(first, time.monotonic())
    finally:
        _kill(first)
    started = time.monotonic()
    second = _start(bootstrap, group, replica)
    try:
        return _assigned_after(second, started)
    finally:
        _kill(second)


def test_a_named_replica_takes_its_partitions_back_without_waiting_for_its_session(kafka_bootstrap: str) -> None:
    asyncio.run(ensure_topics(Settings(kafka_bootstrap=kafka_bootstrap)))
    static = _restart_gap(kafka_bootstrap, "hooks-1")
    dynamic = _restart_gap(kafka_bootstrap, "")  # no replica name: no instance id
    print(f"\nreassigned after a SIGKILL: static {static:.1f} s, dynamic {dynamic:.1f} s (session "
          f"{SESSION_MS / 1000:.0f} s)")
    # The dynamic member waits for the dead one's session (the control: the test can tell the two apart);
    # the static one is handed its partitions by the coordinator as soon as it joins.
    assert dynamic > SESSION_MS / 2000
    assert static < SESSION_MS / 2000
