"""Screenshots of the evaluation report and of the avatar preview, taken in headless Chromium.

The report comes from a real run: every third dev-set case (172, every category) through the
request path on real PostgreSQL and Triton (``run_cases``), judged, rendered to HTML. The page
must fit a 1,000 px wide window (no horizontal scrolling: every plot scales to the page) and its
plots must be loaded images. The preview plays espeak segments, with a cancelled request in its
log (a text badge).

``make screenshots`` runs this with ``LIVEHOST_SCREENSHOTS=docs/img`` and so refreshes
``docs/img/report.png`` and ``docs/img/preview.png``; otherwise the pictures go to a temporary folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from livehost.config import REPO_ROOT
from livehost.preview.hub import SegmentHub
from livehost.preview.server import make_app, start
from livehost.stack.testing import running_postgres, running_triton
from livehost.voice import cancel_segment, synthesize_reply
from tests.integration.test_preview import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.integration

DEVSET = REPO_ROOT / "eval" / "devset.jsonl"
WIDTH = 1000


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("LIVEHOST_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("shots")
    with running_postgres(root) as dsn, \
            running_triton(root, REPO_ROOT / "infra" / "triton" / "models", timeout=120) as triton_url:
        old = dict(os.environ)
        os.environ.update({"LIVEHOST_POSTGRES_DSN": dsn, "LIVEHOST_TRITON_URL": triton_url,
                           "LIVEHOST_STATE_DIR": str(root / "state")})
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(old)


def _png_size(path: Path) -> tuple[int, int]:
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    return int(width), int(height)


async def _browser(pw: Any) -> Any:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    return await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


async def test_report_screenshot_fits_the_page(stack: None, out_dir: Path, tmp_path: Path) -> None:
    import playwright.async_api as playwright_api

    from livehost.eval.judge import judge_results_sync
    from livehost.eval.report import build_report, render_html
    from livehost.harness.loader import load
    from livehost.runner.api import run_cases

    cases = [json.loads(line) for line in DEVSET.read_text().splitlines() if line.strip()][::3]
    results = await run_cases(load(REPO_ROOT / "harness" / "default"), cases, "policy_reference")
    assert len(results) == len(cases) and all(r.get("latency_ms") is not None for r in results)
    report = build_report(judge_results_sync(results, cases), cases, n_boot=300)
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(report))
    async with playwright_api.async_playwright() as pw:
        browser = await _browser(pw)
        try:
            page = await browser.new_page(viewport={"width": WIDTH, "height": 900})
            await page.goto(page_file.as_uri())
            images = await page.evaluate(
                "[...document.images].map(i => ({alt: i.alt, natural: i.naturalWidth, shown: i.clientWidth}))")
            assert {i["alt"] for i in images} == {"per-category scores", "latency histogram"}
            assert all(i["natural"] > 0 and 0 < i["shown"] <= WIDTH for i in images), images
            overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"the report scrolls sideways by {overflow}px"
            # the picture: the summary, the category chart and the latency histogram
            top = await page.evaluate("document.querySelector('h2').getBoundingClientRect().top")
            hist = await page.evaluate(
                "(() => { const r = document.querySelector('img[alt=\"latency histogram\"]')"
                ".getBoundingClientRect(); return r.bottom + window.scrollY; })()")
            await page.set_viewport_size({"width": WIDTH, "height": int(hist + 20)})
            shot = out_dir / "report.png"
            await page.screenshot(path=str(shot), clip={"x": 0, "y": max(0, top - 120), "width": WIDTH,
                                                        "height": int(hist + 20 - max(0, top - 120))})
        finally:
            await browser.close()
    width, height = _png_size(shot)
    assert width == WIDTH and height > 600


async def test_preview_screenshot(out_dir: Path, tmp_path: Path) -> None:
    import playwright.async_api as playwright_api

    audio_dir = tmp_path / "audio"
    hub = SegmentHub()
    runner, port = await start(make_app(hub, audio_dir, "room-a"), "127.0.0.1", 0)

    def speech(rid: str, text: str) -> list[dict[str, Any]]:
        return synthesize_reply(text, engine="espeak", out_dir=audio_dir / "room-a", request_id=rid,
                                room_id="room-a").segments

    try:
        async with playwright_api.async_playwright() as pw:
            browser = await _browser(pw)
            try:
                page = await browser.new_page(viewport={"width": 1000, "height": 560})
                await page.goto(f"http://127.0.0.1:{port}/?room=room-a")
                await page.wait_for_function("window.preview && window.preview.connected", timeout=10_000)
                await asyncio.wait_for(hub.wait_subscribers("room-a"), 5)
                cut = speech("req-a1", "The boots on link 2 are waterproof. They come in sizes 38 to 45.")
                hub.publish(cut[0])
                hub.publish(cancel_segment("req-a1", "room-a", 1, 300.0, "product_switch"))
                for seg in speech("req-a2", "Link 3 is the Alpine shell jacket, 299 yuan! <sil_L2> "
                                            "Tap link 3 to grab it before the sale ends."):
                    hub.publish(seg)
                await page.wait_for_function(
                    "window.preview.current && window.preview.current.request_id === 'req-a2' "
                    "&& document.getElementById('audio').currentTime > 0.4", timeout=10_000)
                await page.evaluate("document.getElementById('audio').pause()")  # a still frame
                badge = page.locator(".badge")
                assert await badge.text_content() == "cancelled"
                shot = out_dir / "preview.png"
                await page.screenshot(path=str(shot))
            finally:
                await browser.close()
    finally:
        await runner.cleanup()
    assert _png_size(shot) == (1000, 560)
