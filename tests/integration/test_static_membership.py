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
from livehost.kafka import ensure_topics, group_instance_id, remove_static_members
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
    shown = None
    while True:  # a line per assignment it is handed
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned and assigned != shown:
            print("ASSIGNED", assigned, flush=True)
            shown = assigned
        await asyncio.sleep(0.05)

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


def test_a_crashed_static_member_removed_by_the_supervisor_hands_its_partitions_over_at_once(
        kafka_bootstrap: str) -> None:
    """A static member never leaves its group, so its peer waits out the dead one's session — unless the
    supervisor removes it by its instance id (livehost.kafka.remove_static_members, what the supervisor
    does for a crashed replica that has a live peer)."""
    settings = Settings(kafka_bootstrap=kafka_bootstrap)
    asyncio.run(ensure_topics(settings))
    group = f"static-{uuid.uuid4().hex[:8]}"
    first = _start(kafka_bootstrap, group, "hooks-1")
    second = _start(kafka_bootstrap, group, "hooks-2")
    try:
        _assigned_after(first, time.monotonic())
        assert second.stdout is not None
        while True:  # until the two share the partitions
            line = second.stdout.readline()
            assert line.startswith("ASSIGNED"), (line, second.poll())
            if len(line.split(",")) < ROOM_EVENTS.partitions:
                break
        _kill(first)
        started = time.monotonic()
        dead = group_instance_id(Settings(kafka_bootstrap=kafka_bootstrap, replica_id="hooks-1"), group)
        assert dead is not None
        removed = asyncio.run(remove_static_members(settings, group, [dead, f"{group}-never-joined"]))
        assert removed == {dead: "removed", f"{group}-never-joined": "UnknownMemberIdError"}
        line = second.stdout.readline()  # its next assignment: every partition
        took = time.monotonic() - started
        print(f"\nthe survivor had every partition {took:.1f} s after the removal (session {SESSION_MS / 1000:.0f} s)")
        assert line.startswith("ASSIGNED") and len(line.split(",")) == ROOM_EVENTS.partitions, line
        assert took < SESSION_MS / 2000
    finally:
        _kill(first)
        _kill(second)
