"""Bounded state: per-room state is evicted after inactivity, caches are bounded, retention purges old
audio, and no password reaches a log line or an error."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from livehost.config import REPO_ROOT, Settings
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.retention import purge_audio
from livehost.security.limits import BoundedMap, RateLimiter
from livehost.security.redact import RedactingFilter, redact
from services.hooks.handlers import EVICT_SWEEP_MS, HooksHandler
from services.voice.handlers import VoiceHandler


def switch(room: str, ts: int) -> dict[str, Any]:
    return {"event_id": f"e-{ts}", "room_id": room, "type": "product_switch", "ts_ms": ts, "user_id": None,
            "text": None, "link_id": 2, "campaign_json": None, "viewer_count": None}


async def test_hooks_room_state_is_evicted_after_inactivity() -> None:
    rooms: dict[str, Any] = {}
    provider = StaticHarnessProvider(load(REPO_ROOT / "harness" / "default"))
    handler = HooksHandler(Settings(room_idle_evict_s=10), provider, rooms)
    t0 = 1_000_000
    await handler.on_room_event(switch("room-old", t0), t0)
    await handler.on_room_event(switch("room-new", t0 + 9_000), t0 + 9_000)
    await handler.flush(t0 + 5_000)
    assert set(rooms) == {"room-old", "room-new"}  # nothing is idle yet
    await handler.flush(t0 + EVICT_SWEEP_MS + 11_000)
    assert set(rooms) == set()  # both idle past 10 s by then
    await handler.on_room_event(switch("room-x", t0 + 200_000), t0 + 200_000)
    await handler.flush(t0 + 200_000 + EVICT_SWEEP_MS)
    assert "room-x" not in rooms
    # a room the table holds from before a restart (never seen by this process) is idle from now on
    rooms["room-restored"] = "{}"
    await handler.flush(t0 + 400_000)
    assert "room-restored" in rooms
    await handler.flush(t0 + 400_000 + EVICT_SWEEP_MS + 11_000)
    assert "room-restored" not in rooms


async def test_voice_rooms_are_evicted_after_inactivity(tmp_path: Path) -> None:
    now = [0.0]

    async def publish(_: dict[str, Any]) -> None:
        return None

    handler = VoiceHandler("text", tmp_path, publish, clock=lambda: now[0], room_idle_s=10)
    for i in range(100):
        handler.live_requests(f"room-{i}")
        handler._room(f"room-{i}")
    assert handler.room_count == 100
    now[0] = 11_000.0
    handler._room("room-fresh")
    assert handler.room_count == 1


def test_bounded_map_and_rate_limiter() -> None:
    now = [0.0]
    m: BoundedMap[str, int] = BoundedMap(3, idle_s=10, clock=lambda: now[0])
    for i in range(5):
        m[f"k{i}"] = i
    assert len(m) == 3 and m.get("k0") is None and m["k4"] == 4
    now[0] = 11
    assert m.get("k4") is None and m.expire() == ["k2", "k3"] and len(m) == 0
    limiter = RateLimiter(2, 60, max_keys=2, clock=lambda: now[0])
    assert limiter.allow("a") and limiter.allow("a") and not limiter.allow("a")
    now[0] += 61
    assert limiter.allow("a")


def test_retention_purges_old_wavs_only_inside_the_audio_folder(tmp_path: Path) -> None:
    audio = tmp_path / "audio"
    (audio / "room-a").mkdir(parents=True)
    old, new = audio / "room-a" / "old.wav", audio / "room-a" / "new.wav"
    outside = tmp_path / "keep.wav"
    for p in (old, new, outside):
        p.write_bytes(b"RIFF")
    ten_days = time.time() - 10 * 86_400
    os.utime(old, (ten_days, ten_days))
    os.utime(outside, (ten_days, ten_days))
    (audio / "link.wav").symlink_to(outside)
    assert purge_audio(audio, 7 * 86_400, dry_run=True) == 1 and old.exists()
    assert purge_audio(audio, 7 * 86_400) == 1
    assert not old.exists() and new.exists() and outside.exists()


@pytest.mark.parametrize(("text", "secret"), [
    ("PostgreSQL at postgresql://livehost:s3cr3t@pg:5432/livehost unreachable", "s3cr3t"),
    ("dsn=host=pg user=livehost password=s3cr3t dbname=x", "s3cr3t"),
    ("sasl_plain_password='s3cr3t' bootstrap=kafka:9093", "s3cr3t"),
    ("LIVEHOST_POSTGRES_DSN=postgres://u:p%40ss@h/db", "p%40ss"),
    ("LIVEHOST_KAFKA_SASL_PASSWORD=5GQtfS-dqZ1e_2m5", "5GQtfS-dqZ1e_2m5"),  # what `stack up` prints
])
def test_passwords_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and "***" in out


def test_log_lines_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("livehost.test.redact")
    caplog.handler.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="livehost.test.redact"):
        logger.warning("connecting to %s", "postgresql://livehost:hunter2@pg/livehost")
    assert "hunter2" not in caplog.text and "livehost:***@pg" in caplog.text
