"""The short fault suite of `make test` (the full one is `make chaos`, benchmarks/chaos.py): its own
embedded stack, 20 rooms at 10 comments/s, the hooks worker SIGKILLed (supervisor restart), the broker
killed -9 and restarted, then poison records on every consumed topic (undecodable, wrong schema; on the
room-events topic also a 600 KB campaign_json and a path-like event id). Prints the table rows; fails
when a comment is lost, speech, a trajectory or a side effect is duplicated, a reply has no trajectory row,
or a poison record is not dead-lettered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.chaos import HEADER, POISONED, fmt, run
from livehost.topics import ROOM_EVENTS, TRAJECTORIES

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


# A hooks SIGKILL used to lose 0-3 of 120 comments here intermittently (issue 12) while the hooks
# processor ran Faust's exactly_once; at-least-once with static group membership lost none in every run
# since (README "The fault suite"), so any loss fails the test again.
async def test_short_fault_suite(tmp_path: Path) -> None:
    saved = dict(os.environ)
    try:
        rows = await run(["kill:hooks", "broker", "poison"], replicas=1, rooms=20, rate=10.0, phase_s=12.0,
                         fault_at_s=4.0, drain_s=40.0, voice="text", root=tmp_path)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    print("\n" + HEADER + "\n" + "\n".join(fmt(r) for r in rows))
    for row in rows:
        assert row["lost"] == 0, row
        assert row["dup_speech"] == 0, row
        assert row["dup_fx"] == 0, row
        assert row["dup_traj"] == 0 and row["miss_traj"] == 0, row
    dead = rows[-1]["dead_by_topic"]
    print(f"dead-lettered by source topic: {dead}")
    # Each consumed topic's two poison records reach the dead-letter topic (agent.trajectories has no
    # consumer among the services); on room events also the oversize campaign and the path-like id.
    for topic in POISONED:
        if topic is not TRAJECTORIES:
            assert dead.get(topic.name, 0) >= 2, (topic.name, dead)
    assert dead.get(ROOM_EVENTS.name, 0) >= 4, dead
