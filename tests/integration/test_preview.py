"""The avatar preview page in headless Chromium (Debian's chromium, driven by Playwright).

Known segments (real WAVs synthesized with espeak) are fed to the page's hub; the page must receive
them, play the audio (currentTime advances), change the mouth shape over time following the
visemes, and stop a request on its cancel segment.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from livehost.preview.hub import SegmentHub
from livehost.preview.server import audio_url, make_app, start
from livehost.voice import cancel_segment, synthesize_reply

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--autoplay-policy=no-user-gesture-required", "--mute-audio"]
ROOM = "room-p"


@dataclass
class Preview:
    hub: SegmentHub
    base: str
    audio_dir: Path


@pytest.fixture
async def preview(tmp_path: Path) -> AsyncIterator[Preview]:
    audio_dir = tmp_path / "audio"
    audio_dir.mkdir()
    hub = SegmentHub()
    runner, port = await start(make_app(hub, audio_dir, ROOM), "127.0.0.1", 0)
    try:
        yield Preview(hub, f"http://127.0.0.1:{port}", audio_dir)
    finally:
        await runner.cleanup()


def segments(p: Preview, request_id: str, text: str) -> list[dict[str, Any]]:
    res = synthesize_reply(text, engine="espeak", out_dir=p.audio_dir / ROOM, request_id=request_id, room_id=ROOM)
    assert res.segments and all(s["audio_ref"] for s in res.segments)
    return res.segments


async def test_page_plays_segments_animates_mouth_and_stops_on_cancel(preview: Preview) -> None:
    try:
        import playwright.async_api as playwright_api
    except ImportError:
        pytest.fail("playwright is not installed (pip install playwright==1.65.2; no browser download needed)")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    first = segments(preview, "r1", "Hello everyone, welcome to the show! <sil_L2> Link three is a soft silk scarf.")
    long = segments(preview, "r2", "Now for something special. This leather jacket is waterproof and warm. "
                                   "It comes in black, brown and olive. Sizes run from small to extra large.")
    last = segments(preview, "r3", "Bye for now!")
    assert len(first) == 2 and len(long) >= 3

    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{preview.base}/")  # redirects to ?room=ROOM
            assert page.url.endswith(f"/?room={ROOM}")
            await page.wait_for_function("window.preview && window.preview.connected", timeout=10_000)
            await asyncio.wait_for(preview.hub.wait_subscribers(ROOM), 5)
            assert await page.get_attribute("#mouth", "data-viseme") == "sil"

            for seg in first:
                preview.hub.publish(seg)
            await page.wait_for_function("window.preview.received.length === 2", timeout=5_000)
            await page.wait_for_function("window.preview.status === 'playing'", timeout=5_000)
            # sample the mouth and the audio clock while the first segment plays
            shapes: list[str] = []
            times: list[float] = []
            for _ in range(20):
                shapes.append(await page.get_attribute("#mouth", "data-viseme") or "")
                times.append(await page.evaluate("document.getElementById('audio').currentTime"))
                await asyncio.sleep(0.05)
            assert len(set(shapes)) >= 3, f"the mouth did not move: {shapes}"
            assert max(times) - min(times) > 0.3, f"audio did not play: {times}"
            assert await page.text_content("#caption") == first[0]["text"]
            expected_visemes = {v["viseme"] for s in first for v in s["visemes"]}
            await page.wait_for_function("window.preview.played.length === 2", timeout=15_000)
            played = await page.evaluate("window.preview.played")
            assert played == [{"request_id": "r1", "seq": 0}, {"request_id": "r1", "seq": 1}]
            seen = {m["v"] for m in await page.evaluate("window.preview.mouthLog")}
            assert len(seen) >= 6 and seen <= expected_visemes | {"sil"}
            assert await page.get_attribute("#mouth", "data-viseme") == "sil"
            assert await page.evaluate("window.preview.status") == "idle"

            # a long reply, cancelled while its first segment plays; then the next request plays
            for seg in long:
                preview.hub.publish(seg)
            await page.wait_for_function(
                "window.preview.current && window.preview.current.request_id === 'r2' "
                "&& document.getElementById('audio').currentTime > 0.3", timeout=5_000)
            preview.hub.publish(cancel_segment("r2", ROOM, len(long), 400.0))
            await page.wait_for_function("window.preview.status === 'cancelled'", timeout=2_000)
            assert await page.evaluate("document.getElementById('audio').paused")
            assert await page.get_attribute("#mouth", "data-viseme") == "sil"
            assert await page.text_content("#caption") == ""
            preview.hub.publish({**long[-1], "seq": len(long) + 1})  # a straggler after the cancel: ignored
            await asyncio.sleep(0.5)
            assert await page.evaluate("window.preview.current") is None
            for seg in last:
                preview.hub.publish(seg)
            await page.wait_for_function("window.preview.played.length === 3", timeout=10_000)
            played = await page.evaluate("window.preview.played")
            assert [p["request_id"] for p in played] == ["r1", "r1", "r3"], "a cancelled segment was played"
            assert await page.evaluate("window.preview.cancelled") == ["r2"]
            assert await page.evaluate("window.preview.received.length") == 2 + len(long) + 2 + len(last)
            assert errors == []
        finally:
            await browser.close()


async def test_event_stream_and_audio_files(preview: Preview, tmp_path: Path) -> None:
    segs = segments(preview, "r9", "Hello there.")
    url = audio_url(segs[0]["audio_ref"], preview.audio_dir)
    assert url == f"/audio/{ROOM}/r9_000.wav"
    secret = tmp_path / "secret.wav"
    secret.write_bytes(b"RIFF-not-yours")
    (preview.audio_dir / "escape.wav").symlink_to(secret)
    (preview.audio_dir / "notes.txt").write_text("not audio")
    assert audio_url(secret.as_uri(), preview.audio_dir) is None
    async with aiohttp.ClientSession() as http:
        async with http.get(preview.base + url) as r:
            assert r.status == 200 and r.content_type == "audio/wav"
            assert (await r.read())[:4] == b"RIFF"
        for bad in ("/audio/%2e%2e/secret.wav", "/audio/escape.wav", "/audio/notes.txt", "/audio/nope.wav",
                    "/audio/..%2fsecret.wav"):
            async with http.get(preview.base + bad) as r:
                assert r.status == 404, bad
        preview.hub.publish(segs[0])
        async with http.get(f"{preview.base}/api/rooms/{ROOM}/recent") as r:
            recent = await r.json()
        assert [s["request_id"] for s in recent] == ["r9"] and recent[0]["audio_url"] == url
        async with http.get(f"{preview.base}/api/rooms/{ROOM}/segments?replay=1") as r:
            assert r.content_type == "text/event-stream"
            body = b""
            async with asyncio.timeout(5):
                while b"data:" not in body or not body.endswith(b"\n\n"):
                    body += await r.content.readany()
        assert b"event: segment" in body and b'"request_id":"r9"' in body


async def test_kafka_feed_brings_the_rooms_segments(preview: Preview, kafka_bootstrap: str) -> None:
    from livehost.config import Settings
    from livehost.kafka import Producer, ensure_topics
    from livehost.preview.sources import kafka_feed
    from livehost.topics import AVATAR_SEGMENTS

    segs = segments(preview, "k1", "Hello from Kafka. Second sentence.")
    other = {**segs[0], "room_id": "room-other", "request_id": "k2"}
    if kafka_bootstrap:
        settings = Settings(kafka_bootstrap=kafka_bootstrap)
        await ensure_topics(settings, [AVATAR_SEGMENTS])
        producer = Producer(settings)
        await producer.start()
        ready = asyncio.Event()
        feed = asyncio.create_task(kafka_feed(settings, preview.hub, ROOM, ready=ready))
        try:
            await asyncio.wait_for(ready.wait(), 30)
            for seg in [segs[0], other, segs[1]]:
                await producer.send(AVATAR_SEGMENTS, seg["room_id"], seg)
            for _ in range(400):
                if len(preview.hub.history(ROOM)) >= 2:
                    break
                await asyncio.sleep(0.05)
            assert [(s["request_id"], s["seq"]) for s in preview.hub.history(ROOM)] == [("k1", 0), ("k1", 1)]
            assert preview.hub.history("room-other") == []
        finally:
            feed.cancel()
            await asyncio.gather(feed, return_exceptions=True)
            await producer.stop()


def test_cli_rejects_unknown_source() -> None:
    import typer
    from typer.testing import CliRunner

    from livehost.preview.cli import app as preview_app

    main = typer.Typer()
    main.command("noop")(lambda: None)
    main.add_typer(preview_app, name="preview")
    result = CliRunner().invoke(main, ["preview", "--room", "room-a", "--source", "carrier-pigeon"])
    assert result.exit_code == 2 and "unknown source" in result.output
    assert "--room" in CliRunner().invoke(main, ["preview", "--help"]).output


async def _read_events(resp: aiohttp.ClientResponse, n: int, timeout: float) -> list[tuple[str, str]]:
    """The next ``n`` SSE events of ``resp`` as (id, data); comments are skipped."""
    events: list[tuple[str, str]] = []
    fields: dict[str, str] = {}
    async with asyncio.timeout(timeout):
        while len(events) < n:
            line = (await resp.content.readline()).decode().rstrip("\n")
            if line == "":
                if "data" in fields:
                    events.append((fields.get("id", ""), fields["data"]))
                fields = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(": ")
                fields[key] = value
    return events


async def test_stream_stays_open_past_keepalive_and_resumes_after_last_event_id(tmp_path: Path) -> None:
    """Keep-alive comments, not a cancelled subscription: a segment published after two keep-alive
    periods without one still arrives on the same connection; a reconnect with Last-Event-ID gets
    exactly the segments published while it was away, none twice."""
    hub = SegmentHub()
    runner, port = await start(make_app(hub, tmp_path, ROOM, keepalive_s=0.3), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{port}/api/rooms/{ROOM}/segments"

    def seg(rid: str) -> dict[str, Any]:
        return {"request_id": rid, "room_id": ROOM, "seq": 0, "text": rid, "start_ms": 0.0, "end_ms": 10.0,
                "audio_ref": None, "visemes": [], "final": True, "cancel": False, "ts_ms": 0}

    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(base) as r:
                await asyncio.wait_for(hub.wait_subscribers(ROOM), 5)
                hub.publish(seg("a"))
                [(first_id, data)] = await _read_events(r, 1, 5)
                assert '"request_id":"a"' in data and first_id
                body = b""
                async with asyncio.timeout(5):
                    while body.count(b": keep-alive") < 2:
                        body += await r.content.readline()
                hub.publish(seg("b"))  # after the quiet period: same connection, nothing lost
                [(second_id, data)] = await _read_events(r, 1, 5)
                assert '"request_id":"b"' in data
            # the page is away: c and d are published, then it reconnects with the last id it saw
            hub.publish(seg("c"))
            hub.publish(seg("d"))
            async with http.get(base, headers={"Last-Event-ID": second_id}) as r:
                events = await _read_events(r, 2, 5)
                assert [json.loads(d)["request_id"] for _, d in events] == ["c", "d"]
                hub.publish(seg("e"))
                [(_, data)] = await _read_events(r, 1, 5)
                assert json.loads(data)["request_id"] == "e"
            # an id from another (restarted) preview: the whole kept history
            async with http.get(base, headers={"Last-Event-ID": "0000-7"}) as r:
                events = await _read_events(r, 5, 5)
                assert [json.loads(d)["request_id"] for _, d in events] == ["a", "b", "c", "d", "e"]
    finally:
        await runner.cleanup()


async def test_page_keeps_the_stream_60s_with_20s_gaps_and_sees_every_segment(preview: Preview) -> None:
    """Headless Chromium stays on the page for 60 s; segments come in three bursts 20 s apart, i.e.
    gaps longer than the keep-alive period (15 s, the production value): every segment arrives, on
    one connection, and the cancel of the last burst shows a text badge (no glyph box)."""
    from livehost.preview.server import KEEPALIVE_S

    try:
        import playwright.async_api as playwright_api
    except ImportError:
        pytest.fail("playwright is not installed (pip install playwright==1.65.2; no browser download needed)")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    gap_s = 20.0
    assert gap_s > KEEPALIVE_S  # the gap must outlast a keep-alive period for this test to mean anything
    bursts = [segments(preview, f"g{i}", f"Burst number {i}. It has two sentences.") for i in range(3)]
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{preview.base}/?room={ROOM}")
            await page.wait_for_function("window.preview && window.preview.connected", timeout=10_000)
            await asyncio.wait_for(preview.hub.wait_subscribers(ROOM), 5)
            opened = asyncio.get_running_loop().time()
            expected = 0
            for i, burst in enumerate(bursts):
                if i:
                    await asyncio.sleep(gap_s)
                for seg in burst:
                    preview.hub.publish(seg)
                expected += len(burst)
                await page.wait_for_function(f"window.preview.received.length === {expected}", timeout=5_000)
            preview.hub.publish(cancel_segment("g2", ROOM, len(bursts[2]), 0.0, "product_switch"))
            expected += 1
            remaining = 60.0 - (asyncio.get_running_loop().time() - opened)
            await asyncio.sleep(max(remaining, 0.0))
            await page.wait_for_function(f"window.preview.received.length === {expected}", timeout=5_000)
            received = await page.evaluate("window.preview.received.map(s => [s.request_id, s.seq, s.cancel])")
            assert received == [[s["request_id"], s["seq"], False] for b in bursts for s in b] + [["g2", 2, True]]
            assert await page.evaluate("window.preview.opens") == 1, "the stream was dropped and reopened"
            assert await page.evaluate("window.preview.connected")
            assert await page.text_content("#conn") == "connected"
            badge = page.locator(f"#seg-g2-{len(bursts[2])} .badge")
            assert await badge.text_content() == "cancelled"
            box = await badge.bounding_box()
            assert box is not None and box["width"] > 30  # a visible text badge, not a missing glyph
            assert errors == []
        finally:
            await browser.close()
