"""The trajectory recorder as a Faust app: terminal replies in, PostgreSQL rows and trajectory records out.

A reply is acknowledged only after its trajectory is stored and published; PostgreSQL outages are
waited out with backoff, so nothing is lost, and the primary key makes redelivery harmless.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import faust

from livehost import codec
from livehost.config import Settings, load_settings
from livehost.db import connect_pool, migrate
from livehost.faustutil import dead_letter, faust_topic, make_app, send
from livehost.kafka import ensure_topics, wait_for_broker
from livehost.retry import backoff_delays
from livehost.topics import DEAD_LETTER, REPLIES, TRAJECTORIES
from services.trajectories import settings as traj_settings
from services.trajectories.handlers import TrajectoryStore, trajectory_from_reply

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> faust.App:
    settings = settings or load_settings()
    app = make_app(traj_settings.APP_ID, settings)
    topics = {t.name: faust_topic(app, t) for t in (REPLIES, TRAJECTORIES, DEAD_LETTER)}
    holder: dict[str, Any] = {}
    lock = asyncio.Lock()

    async def store() -> TrajectoryStore:
        async with lock:
            if "store" not in holder:
                pool = await connect_pool(settings.postgres_dsn)
                await migrate(pool)
                holder["pool"] = pool
                holder["store"] = TrajectoryStore(pool)
        return holder["store"]

    async def save(trajectory: dict[str, Any]) -> None:
        for delay in backoff_delays(settings.connect_backoff_initial_s, settings.connect_backoff_max_s):
            try:
                await (await store()).save(trajectory)
                return
            except (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError,
                    asyncpg.CannotConnectNowError, ConnectionError) as exc:
                log.warning("PostgreSQL write failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    @app.task
    async def warm_up() -> None:
        await store()

    @app.agent(topics[REPLIES.name])
    async def record(stream: Any) -> None:
        async for event in stream.events():
            try:
                reply = codec.decode(REPLIES.schema, event.value)
            except codec.DecodeError as exc:
                await dead_letter(topics[DEAD_LETTER.name], REPLIES, event, f"decode: {exc}", app.conf.id)
                continue
            trajectory = trajectory_from_reply(reply)
            await save(trajectory)
            await send(topics[TRAJECTORIES.name], TRAJECTORIES, trajectory["room_id"], trajectory)

    return app


def main() -> None:
    settings = load_settings()
    asyncio.run(_prepare(settings))
    app = create_app(settings)
    faust.Worker(app, loglevel=settings.log_level.lower(), quiet=True).execute_from_commandline()


async def _prepare(settings: Settings) -> None:
    await wait_for_broker(settings)
    await ensure_topics(settings)
