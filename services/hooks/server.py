"""The hooks processor as a Faust app: room events and policy actions in, requests/tool calls/replies out."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import faust

from livehost import codec
from livehost.config import Settings, load_settings
from livehost.faustutil import dead_letter, faust_topic, make_app, send
from livehost.harness.runtime import provider_for
from livehost.kafka import ensure_topics, now_ms, wait_for_broker
from livehost.topics import ACTIONS, DEAD_LETTER, REPLIES, REQUESTS, ROOM_EVENTS, TOOL_CALLS
from services.hooks import settings as hooks_settings
from services.hooks.handlers import Handled, HooksHandler


def create_app(settings: Settings | None = None) -> faust.App:
    settings = settings or load_settings()
    app = make_app(hooks_settings.APP_ID, settings)
    topics = {t.name: faust_topic(app, t) for t in (ROOM_EVENTS, ACTIONS, REQUESTS, TOOL_CALLS, REPLIES, DEAD_LETTER)}
    rooms = app.Table("rooms", default=None, partitions=ROOM_EVENTS.partitions,
                      key_type=str, value_type=str)
    holder: dict[str, HooksHandler] = {}
    lock = asyncio.Lock()

    async def handler() -> HooksHandler:
        async with lock:
            if "h" not in holder:
                holder["h"] = HooksHandler(settings, await provider_for(settings, "hooks"), rooms)
        return holder["h"]

    async def emit(done: Handled) -> None:
        for e in done.emits:
            await send(topics[e.topic.name], e.topic, e.key, e.record)
        for token in done.tokens:
            token.ack()

    @app.task
    async def warm_up() -> None:
        await handler()  # connect the harness registry before the first event needs it

    @app.agent(topics[ROOM_EVENTS.name])
    async def room_events(stream: Any) -> None:
        # Comments are acknowledged only when the request they merged into was published.
        async for event in stream.noack().events():
            try:
                record = codec.decode(ROOM_EVENTS.schema, event.value)
            except codec.DecodeError as exc:
                await dead_letter(topics[DEAD_LETTER.name], ROOM_EVENTS, event, f"decode: {exc}", app.conf.id)
                event.ack()
                continue
            h = await handler()
            await emit(await h.on_room_event(record, now_ms(), event))

    @app.timer(hooks_settings.FLUSH_INTERVAL_S)
    async def flush_windows() -> None:
        h = await handler()
        await emit(await h.flush(now_ms()))

    @app.agent(topics[ACTIONS.name])
    async def actions(stream: Any) -> None:
        async for event in stream.events():
            try:
                record = codec.decode(ACTIONS.schema, event.value)
            except codec.DecodeError as exc:
                await dead_letter(topics[DEAD_LETTER.name], ACTIONS, event, f"decode: {exc}", app.conf.id)
                continue
            h = await handler()
            try:
                done = await h.on_action(record, now_ms())
            except Exception as exc:  # a poison action must not stop the room
                await dead_letter(topics[DEAD_LETTER.name], ACTIONS, event, f"handler: {exc!r}", app.conf.id)
                continue
            await emit(done)

    return app


def main() -> None:
    settings = load_settings()
    started = time.monotonic()
    asyncio.run(_prepare(settings))
    app = create_app(settings)
    print(f"STARTING hooks (broker ready after {time.monotonic() - started:.1f}s)", flush=True)
    worker = faust.Worker(app, loglevel=settings.log_level.lower(), quiet=True)
    worker.execute_from_commandline()


async def _prepare(settings: Settings) -> None:
    await wait_for_broker(settings)
    await ensure_topics(settings)
