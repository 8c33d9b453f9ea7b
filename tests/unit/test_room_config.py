"""Per-room agent selection: a room_config event switches a room to another policy model or to the
ReAct baseline for its new requests; Ingest validates the value."""

from __future__ import annotations

import pytest

from livehost import codec
from livehost.topics import ROOM_EVENTS
from services.ingest.handlers import InvalidEvent, room_config_event
from tests.unit.test_agent_room_queue import T0, comment, handler, no_reply, requests


async def test_room_config_selects_the_agent_of_new_requests() -> None:
    h = handler()
    first = requests(await comment(h, 1, "how much is link 3?", T0))
    assert first and not first[0]["policy"]
    await h.on_action(no_reply(first[0]), T0 + 900)  # frees the room
    event = room_config_event("room-1", "react:policy_reference")
    await h.on_room_event(codec.decode(ROOM_EVENTS.schema, codec.encode(ROOM_EVENTS.schema, event)), T0 + 1000)
    second = requests(await comment(h, 2, "how much is link 3?", T0 + 2000))
    assert second and second[0]["policy"] == "react:policy_reference"
    assert not second[0]["steps"][-1]["kind"] == "input_hook"  # the ReAct baseline has no input hooks


def test_room_config_validation() -> None:
    assert room_config_event("room-1", "policy_llm")["policy"] == "policy_llm"
    assert room_config_event("room-1", "")["policy"] == ""
    for bad in ("react:../../etc", "a model with spaces", "x" * 80):
        with pytest.raises(InvalidEvent):
            room_config_event("room-1", bad)


def test_old_producers_without_the_policy_field_still_encode() -> None:
    legacy = {"event_id": "e", "room_id": "r", "type": "comment", "ts_ms": 1, "user_id": "u", "text": "hi"}
    assert codec.decode(ROOM_EVENTS.schema, codec.encode(ROOM_EVENTS.schema, legacy))["policy"] is None
