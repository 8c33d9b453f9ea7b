"""Two members of one consumer group (the services' ConsumerLoop, real processes, the session's Apache
Kafka); one is SIGKILLed under load. The survivor takes over the dead member's partitions (the handover
time is printed: it is bounded below by the group's session timeout, LIVEHOST_KAFKA_SESSION_TIMEOUT_MS)
and per-room order holds across the rebalance: the first time each record of a room is handled, the
room's records come in the order they were produced (redelivered records are repeats, never reorderings),
and none is lost."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from livehost.config import REPO_ROOT, Settings
from livehost.kafka import Producer, ensure_topics
from livehost.stack.process import start_detached
from livehost.topics import ROOM_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
ROOMS = 20
RATE = 40.0  # records/s over all rooms
SECONDS = 14.0
KILL_AT = 5.0


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


async def test_killing_one_of_two_members_hands_over_its_partitions_in_order(tmp_path: Path,
                                                                              kafka_bootstrap: str) -> None:
    settings = Settings(kafka_bootstrap=kafka_bootstrap)
    await ensure_topics(settings, [ROOM_EVENTS])
    group = f"rebalance-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "LIVEHOST_KAFKA_BOOTSTRAP": kafka_bootstrap, "LIVEHOST_STATE_DIR": str(tmp_path / "state"),
           "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    outs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [start_detached([sys.executable, "-m", "tests.integration.rebalance_member", str(o), group], lg,
                            env=env, cwd=REPO_ROOT) for o, lg in zip(outs, logs, strict=True)]
    producer = Producer(settings)
    await producer.start()
    try:
        deadline = time.monotonic() + 60
        while not all("MEMBER READY" in lg.read_text() for lg in logs if lg.exists()) or not all(
                lg.exists() for lg in logs):
            assert time.monotonic() < deadline, [lg.read_text()[-2000:] for lg in logs if lg.exists()]
            await asyncio.sleep(0.2)
        seq: dict[str, int] = defaultdict(int)
        n = int(RATE * SECONDS)
        t0 = time.monotonic()
        killed_at = 0.0
        for i in range(n):
            await asyncio.sleep(max(0.0, t0 + i / RATE - time.monotonic()))
            room = f"room-{i % ROOMS:02d}"
            seq[room] += 1
            await producer.send(ROOM_EVENTS, room, {
                "event_id": f"{group}-{i}", "room_id": room, "type": "comment", "ts_ms": int(time.time() * 1000),
                "user_id": "u-1", "text": str(seq[room]), "link_id": None, "campaign_json": None,
                "viewer_count": None})
            if not killed_at and time.monotonic() - t0 >= KILL_AT:
                if not (_lines(outs[0]) and _lines(outs[1])):
                    t0 += 0.5  # both members must own partitions before one dies
                    continue
                os.killpg(procs[0].pid, signal.SIGKILL)
                killed_at = time.time()
        want = {(room, s) for room, last in seq.items() for s in range(1, last + 1)}
        deadline = time.monotonic() + 60
        while {(r["room"], r["seq"]) for r in _lines(outs[0]) + _lines(outs[1])} < want:
            assert time.monotonic() < deadline, "records were lost in the rebalance"
            await asyncio.sleep(0.5)
    finally:
        await producer.stop()
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    a, b = _lines(outs[0]), _lines(outs[1])
    dead_parts = {r["partition"] for r in a}
    taken = [float(r["t"]) for r in b if r["partition"] in dead_parts and float(r["t"]) > killed_at]  # type: ignore[arg-type]
    handover = min(taken) - killed_at
    redelivered = len(a) + len(b) - len(want)
    print(f"\nkilled 1 of 2 members at {KILL_AT:.0f}s of {RATE:.0f} records/s: its {len(dead_parts)} partition(s) "
          f"handed over in {handover:.2f}s (session timeout {settings.kafka_session_timeout_ms} ms, heartbeat "
          f"{settings.kafka_heartbeat_interval_ms} ms); {redelivered} record(s) handled twice, 0 lost")
    by_room: dict[str, list[int]] = defaultdict(list)
    first_seen: set[tuple[str, int]] = set()
    for r in sorted(a + b, key=lambda r: float(r["t"])):  # type: ignore[arg-type]
        key = (str(r["room"]), int(r["seq"]))  # type: ignore[call-overload]
        if key not in first_seen:
            first_seen.add(key)
            by_room[key[0]].append(key[1])
    for room, seqs in by_room.items():
        assert seqs == sorted(seqs), f"{room} handled out of order across the rebalance: {seqs}"
    assert dead_parts and taken
