"""Untrusted input is data: id formats at Ingest and on Kafka, paths kept in their folder, size limits
enforced before any processing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from livehost import codec
from livehost.config import Settings
from livehost.security.ids import InvalidId, check_id, check_room_event, inside
from livehost.topics import DEAD_LETTER, ROOM_EVENTS, Topic
from services.ingest import handlers as ingest
from services.voice.handlers import VoiceHandler

PATH_LIKE = ["../../x", "..", ".", "/etc/passwd", "a/b", "..\\x", "x\x00y", " room", "room\n", "r" * 129, "",
             "ｒｏｏｍ", "room‮"]


@pytest.mark.parametrize("value", PATH_LIKE)
def test_malformed_ids_are_refused(value: str) -> None:
    with pytest.raises(InvalidId):
        check_id("room_id", value)


@pytest.mark.parametrize("value", ["room-a", "sim-room-06", "u-31", "ev-0123abcd", "a", "user@shop", "arm:x.y_z"])
def test_well_formed_ids_pass(value: str) -> None:
    assert check_id("room_id", value) == value


def test_inside_keeps_paths_in_their_folder(tmp_path: Path) -> None:
    assert inside(tmp_path, "room-a") == (tmp_path / "room-a").resolve()
    for bad in ("../x", "/tmp/x", "a/../../x"):
        with pytest.raises(InvalidId):
            inside(tmp_path, bad)


@pytest.mark.parametrize("room", ["../../x", "a/b", "", "r" * 200])
def test_ingest_refuses_path_like_room_ids(room: str) -> None:
    with pytest.raises(ingest.InvalidEvent):
        ingest.comment_event(room, "u-1", "hello", 500)
    with pytest.raises(ingest.InvalidEvent):
        ingest.product_switch_event(room, 2)
    with pytest.raises(ingest.InvalidEvent):
        ingest.campaign_event(room, "{}")
    with pytest.raises(ingest.InvalidEvent):
        ingest.room_config_event(room, "")


def test_ingest_refuses_bad_user_and_client_event_ids() -> None:
    with pytest.raises(ingest.InvalidEvent, match="user_id"):
        ingest.comment_event("room-a", "../u", "hello", 500)
    with pytest.raises(ingest.InvalidEvent, match="client_event_id"):
        ingest.comment_event("room-a", "u-1", "hello", 500, client_event_id="x" * 200)
    with pytest.raises(ingest.InvalidEvent, match="client_event_id"):
        ingest.product_switch_event("room-a", 1, client_event_id="a b")
    assert ingest.comment_event("room-a", "u-1", "hello", 500, client_event_id="c-1")["event_id"] == "c-1"


def test_campaign_json_has_a_size_limit() -> None:
    big = '{"name": "' + "x" * 5000 + '"}'
    with pytest.raises(ingest.InvalidEvent, match="larger than 4096 bytes"):
        ingest.campaign_event("room-a", big, max_bytes=4096)
    assert ingest.campaign_event("room-a", '{"max_discount_pct": 10}', max_bytes=4096)["campaign_json"]


def test_a_30_mib_comment_is_refused_before_processing() -> None:
    """The size check comes before cleaning: refusing 30 MiB takes microseconds, not seconds (the
    figure itself is benchmarks/bench_reject.py's)."""
    huge = "\x01a" * (15 * 1024 * 1024)
    started = time.perf_counter()
    with pytest.raises(ingest.InvalidEvent, match="larger than"):
        ingest.comment_event("room-a", "u-1", huge, 500, max_bytes=2048)
    assert time.perf_counter() - started < 1.0  # generous bound; 2.2 s before the fix
    # multi-byte text: the byte limit counts bytes
    with pytest.raises(ingest.InvalidEvent, match="larger than 2048 bytes"):
        ingest.comment_event("room-a", "u-1", "好" * 700, 5000, max_bytes=2048)


def test_kafka_room_events_meet_the_ingest_rules() -> None:
    ok = {"room_id": "room-a", "event_id": "ev-1", "user_id": "u-1", "text": "hi", "campaign_json": None}
    check_room_event(ok, max_text_bytes=2048, max_campaign_bytes=4096)
    for bad in ({"room_id": "../../x"}, {"event_id": "a/b"}, {"user_id": "u 1"}, {"text": "x" * 3000},
                {"campaign_json": "{" + " " * 5000 + "}"}):
        with pytest.raises(InvalidId):
            check_room_event({**ok, **bad}, max_text_bytes=2048, max_campaign_bytes=4096)


def test_voice_handler_writes_nothing_outside_the_audio_folder(tmp_path: Path) -> None:
    audio = tmp_path / "state" / "audio"
    published: list[dict[str, Any]] = []

    async def publish(seg: dict[str, Any]) -> None:
        published.append(seg)

    handler = VoiceHandler("text", audio, publish)
    for room in ("../../x", "../x", "/tmp/x", "a/b"):
        with pytest.raises(InvalidId):
            handler.segments_for("hello there", "req-1", room)
    assert not (tmp_path / "x").exists() and not (tmp_path / "state" / "x").exists()
    assert list(tmp_path.rglob("*.wav")) == []


# -- on Kafka: the hooks processor dead-letters a path-like room event -------------------------------

class Sent(list[tuple[str, str, dict[str, Any]]]):
    async def __call__(self, topic: Topic, key: str, record: dict[str, Any]) -> None:
        self.append((topic.name, key, record))


@pytest.fixture
def hooks_app() -> Iterator[tuple[Any, Sent]]:
    from livehost.config import REPO_ROOT
    from livehost.harness.loader import load
    from livehost.harness.provider import HarnessProvider, StaticHarnessProvider
    from services.hooks.server import build

    async def provider(_: Settings) -> HarnessProvider:
        return StaticHarnessProvider(load(REPO_ROOT / "harness" / "default"))

    sent = Sent()
    parts = build(Settings(), sender=sent, provider_factory=provider, clock=lambda: 1_000_000)
    parts.app.finalize()
    parts.app.conf.store = "memory://"
    parts.app.flow_control.resume()
    yield parts, sent


async def test_path_like_room_event_on_kafka_is_dead_lettered(hooks_app: tuple[Any, Sent]) -> None:
    parts, sent = hooks_app
    record = {"event_id": "e-1", "room_id": "../../x", "type": "comment", "ts_ms": 1_000_000, "user_id": "u-1",
              "text": "hello", "link_id": None, "campaign_json": None, "viewer_count": None}
    async with parts.room_events.test_context() as agent:
        await agent.put(codec.encode(ROOM_EVENTS.schema, record), key=b"x")
    dead = [r for name, _, r in sent if name == DEAD_LETTER.name]
    assert len(dead) == 1 and "room_id" in dead[0]["error"]
    assert [name for name, _, _ in sent] == [DEAD_LETTER.name]


def test_every_consumer_refuses_path_like_ids_in_request_states() -> None:
    """Prompt, policy, hooks (actions), tools, voice and trajectories read request states from Kafka:
    each refuses malformed room / request ids (the consumer loop then dead-letters the record)."""
    import asyncio

    from services.policy.handlers import PolicyHandler
    from services.prompt.handlers import PromptHandler
    from services.trajectories.handlers import trajectory_from_reply

    bad = {"request_id": "req-1", "room_id": "../../x", "comments": [], "steps": []}
    with pytest.raises(InvalidId):
        trajectory_from_reply({"state": bad, "outcome": "reply", "text": "hi", "completed_ms": 1})
    with pytest.raises(InvalidId):
        asyncio.run(PromptHandler(None, None).next_prompt(dict(bad)))  # type: ignore[arg-type]
    with pytest.raises(InvalidId):
        asyncio.run(PolicyHandler({}, "m").act({"state": {**bad, "request_id": "a/b", "room_id": "r"}}))
