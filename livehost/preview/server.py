"""The avatar preview page, served locally with aiohttp.

Routes:

* ``GET /`` (and ``/?room=ROOM``) — the page (``static/index.html``); it plays a room's segments.
* ``GET /static/<file>`` — the page's script and style.
* ``GET /api/rooms/{room}/segments`` — Server-Sent Events: one ``segment`` event per avatar segment
  of the room (JSON of avatar_segment.avsc plus ``audio_url``), as it is produced, with an ``id``.
  ``?replay=1`` first sends the room's recent history. A reconnecting page sends ``Last-Event-ID``
  and first gets every kept segment after that id (nothing is lost). The stream stays open: a
  ``: keep-alive`` comment every 15 s without a segment.
* ``GET /api/rooms/{room}/recent`` — the same recent history as a JSON list.
* ``GET /audio/<path>`` — the WAV files referenced by ``audio_ref``: only ``.wav`` files that
  resolve (symlinks included) under the audio directory; anything else is 404.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from livehost.preview.hub import SegmentHub
from livehost.voice.synth import audio_ref_path

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
KEEPALIVE_S = 15.0
HUB_KEY = web.AppKey("hub", SegmentHub)
KEEPALIVE_KEY = web.AppKey("keepalive_s", float)
AUDIO_DIR_KEY = web.AppKey("audio_dir", Path)
ROOM_KEY = web.AppKey("room", str)


def audio_url(audio_ref: str | None, audio_dir: Path) -> str | None:
    """``/audio/<relative path>`` for an audio_ref under ``audio_dir``; None otherwise."""
    if not audio_ref:
        return None
    try:
        rel = audio_ref_path(audio_ref).resolve().relative_to(audio_dir.resolve())
    except (ValueError, OSError):
        return None
    return "/audio/" + quote(rel.as_posix())


def to_wire(seg: dict[str, Any], audio_dir: Path) -> dict[str, Any]:
    return {**seg, "audio_url": audio_url(seg.get("audio_ref"), audio_dir)}


async def index(request: web.Request) -> web.StreamResponse:
    room = request.query.get("room")
    if not room:
        default = request.app[ROOM_KEY]
        if default:
            raise web.HTTPFound(f"/?room={quote(default)}")
    return web.FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})


async def segments_stream(request: web.Request) -> web.StreamResponse:
    room = request.match_info["room"]
    hub = request.app[HUB_KEY]
    audio_dir = request.app[AUDIO_DIR_KEY]
    keepalive = request.app[KEEPALIVE_KEY]
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                       "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    # reconnect after 1 s; the browser then sends the last id it saw as Last-Event-ID
    await resp.write(b"retry: 1000\n: connected\n\n")
    last_id = request.headers.get("Last-Event-ID") or request.query.get("last_event_id") or None
    sub = hub.subscribe(room, replay=request.query.get("replay") in ("1", "true", "yes"), last_event_id=last_id)
    try:
        while True:
            event = await sub.next(timeout=keepalive)
            if event is None:
                await resp.write(b": keep-alive\n\n")
                continue
            event_id, seg = event
            data = json.dumps(to_wire(seg, audio_dir), separators=(",", ":"))
            await resp.write(f"id: {event_id}\nevent: segment\ndata: {data}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        sub.close()
    return resp


async def recent(request: web.Request) -> web.Response:
    room = request.match_info["room"]
    audio_dir = request.app[AUDIO_DIR_KEY]
    return web.json_response([to_wire(s, audio_dir) for s in request.app[HUB_KEY].history(room)])


async def audio(request: web.Request) -> web.StreamResponse:
    root = request.app[AUDIO_DIR_KEY].resolve()
    try:
        path = (root / request.match_info["path"]).resolve()
    except (OSError, RuntimeError):
        raise web.HTTPNotFound() from None
    if not path.is_relative_to(root) or path.suffix.lower() != ".wav" or not path.is_file():
        raise web.HTTPNotFound()
    return web.FileResponse(path, headers={"Content-Type": "audio/wav", "Cache-Control": "no-store"})


def make_app(hub: SegmentHub, audio_dir: Path | str, room: str = "",
             keepalive_s: float = KEEPALIVE_S) -> web.Application:
    app = web.Application()
    app[HUB_KEY] = hub
    app[KEEPALIVE_KEY] = keepalive_s
    app[AUDIO_DIR_KEY] = Path(audio_dir)
    app[ROOM_KEY] = room
    app.router.add_get("/", index)
    app.router.add_get("/api/rooms/{room}/segments", segments_stream)
    app.router.add_get("/api/rooms/{room}/recent", recent)
    app.router.add_get("/audio/{path:.+}", audio)
    app.router.add_static("/static/", STATIC_DIR)
    return app


async def start(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start serving; returns the runner (``await runner.cleanup()`` to stop) and the bound port."""
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return runner, int(bound)
