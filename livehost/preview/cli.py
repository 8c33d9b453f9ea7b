"""``livehost preview --room ROOM``: serve the avatar preview page for one room.

Mounted in ``livehost/cli.py`` with ``app.add_typer(preview_app, name="preview")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from pathlib import Path

import typer
from rich.console import Console

app = typer.Typer(help="Avatar preview page: see and hear a room's host (segments + visemes).")
console = Console()

WATCH_HELP = """Serve the page on http://HOST:PORT/?room=ROOM until Ctrl-C.

The page follows the room's segments on the avatar.segments topic of the running stack.

Watch a live session: in one terminal `livehost demo --keep-stack`, in another
`livehost preview --room room-a` (or both at once: `make demo-preview`).

Watch a finished session: the stack must still be up (`livehost demo --keep-stack`, or
`livehost stack up` before the demo); then `livehost preview --room room-a --from-beginning`
replays the room's segments already on the topic.
"""


@app.callback(invoke_without_command=True, help=WATCH_HELP)
def preview(
    room: str = typer.Option(..., "--room", "-r", help="Live room to follow, e.g. room-a."),
    port: int = typer.Option(8765, help="HTTP port of the page (0 = any free port)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (local only by default)."),
    source: str = typer.Option("kafka", help="Where segments come from: kafka (avatar.segments) or grpc "
                                             "(the voice service's StreamSegments)."),
    voice_target: str = typer.Option("", help="Voice gRPC address for --source grpc (default from settings)."),
    from_beginning: bool = typer.Option(False, "--from-beginning",
                                        help="Replay the room's segments already on the topic (kafka source)."),
    audio_dir: str = typer.Option("", help="Directory of the voice WAV files (default from settings)."),
) -> None:
    from livehost.config import load_settings, state_dir

    if source not in ("kafka", "grpc"):
        console.print(f"[red]unknown source {source!r}: kafka or grpc[/]")
        raise typer.Exit(2)
    settings = load_settings()
    audio = Path(audio_dir) if audio_dir else settings.voice_audio_dir or state_dir() / "audio"
    target = voice_target or f"{settings.grpc_host}:{settings.voice_grpc_port}"
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(room, host, port, source, target, from_beginning, Path(audio)))
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
            raise
        what = "is in use" if exc.errno == errno.EADDRINUSE else "is not allowed"
        console.print(f"[red]error:[/] port {port} on {host} {what}; use another: --port {port + 1} "
                      "(or --port 0 for any free port)", soft_wrap=True)
        raise typer.Exit(1) from None


async def _serve(room: str, host: str, port: int, source: str, target: str, from_beginning: bool,
                 audio_dir: Path) -> None:
    from livehost.config import load_settings
    from livehost.preview.hub import SegmentHub
    from livehost.preview.server import make_app, start
    from livehost.preview.sources import grpc_feed, kafka_feed

    hub = SegmentHub()
    runner, bound = await start(make_app(hub, audio_dir, room), host, port)
    if source == "kafka":
        feed = asyncio.create_task(kafka_feed(load_settings(), hub, room, from_beginning=from_beginning))
        where = f"avatar.segments on {load_settings().kafka_bootstrap}"
    else:
        feed = asyncio.create_task(grpc_feed(target, hub, room))
        where = f"voice StreamSegments at {target}"
    replay = "&replay=1" if from_beginning else ""
    console.print(f"avatar preview of [bold]{room}[/] ({where}); audio from {audio_dir}")
    console.print(f"open [bold]http://{host}:{bound}/?room={room}{replay}[/]  (Ctrl-C to stop)")
    if source == "kafka" and not from_beginning:
        console.print("segments appear as the room speaks; for a session that already ran add --from-beginning")
    try:
        await asyncio.gather(feed, asyncio.Event().wait())
    finally:
        feed.cancel()
        await runner.cleanup()
