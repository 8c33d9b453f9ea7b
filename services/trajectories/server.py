"""The trajectory recorder as a Faust app: terminal replies in, PostgreSQL rows and trajectory records out.

Delivery guarantees:

- PostgreSQL holds exactly one row per request: the insert is keyed by ``request_id`` (``ON CONFLICT
  DO NOTHING``), so redelivery after a crash or rebalance is harmless.
- A reply is acknowledged (its offset may be committed) only after its trajectory is stored and
  published, so a recorder killed with SIGKILL re-reads what it had not finished: nothing is lost.
  Replies are handled in batches (up to ``BATCH_MAX``, or what arrived within ``BATCH_WITHIN_S``): one
  transaction stores a batch's rows and one marks their records published, instead of two per reply.
- PostgreSQL outages (restart, crash and recovery, failover, connection drops) are waited out with
  capped backoff, for as long as they last (``livehost.db.transient_db_error`` says which errors are
  the server's, not the record's); after repeated failures, or at once when a connection's protocol
  state is lost, the pool is thrown away and reconnected, so stale connections never wedge it. Only
  an error the record itself causes (a value the table refuses) dead-letters it, with the reason.
- A row is written with ``synchronous_commit`` on (handlers.py), so a trajectory whose offset may be
  committed survives a database crash even on a server that runs with it off.
- ``agent.trajectories`` gets one record per request: the row remembers whether its record went out,
  so a reply delivered twice (a stream processor re-emits replies after a restart) publishes nothing
  the second time. A recorder killed between publishing a batch and marking its rows leaves rows
  that say "not published"; when their replies come back, the topic is read from those replies'
  completion time on (``clients.PublishedScan``) and only records not found there go out. What is
  left: a scan that hits its bound, or a partition moved to another replica while its old owner is
  still between publishing and marking; consumers that must be exact deduplicate by ``request_id``.

``build`` returns the app and its parts, and accepts a store factory and a sender, so unit tests run
the agent with ``agent.test_context()`` and a fake store (the agent yields each trajectory it handled).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import faust

from livehost import codec, metrics
from livehost.config import Settings, load_settings
from livehost.db import broken_connection, connect_pool, migrate, transient_db_error
from livehost.faustutil import dead_letter, faust_topic, make_app, run_worker, send
from livehost.kafka import now_ms
from livehost.retry import backoff_delays
from livehost.security.ids import InvalidId
from livehost.topics import DEAD_LETTER, REPLIES, TRAJECTORIES, Topic
from services.trajectories import settings as traj_settings
from services.trajectories.clients import PublishedLookup, PublishedScan
from services.trajectories.handlers import Saved, TrajectoryStore, trajectory_from_reply

log = logging.getLogger(__name__)

RESET_POOL_AFTER = 3  # consecutive transient failures before the pool is rebuilt


class Store(Protocol):
    async def save_many(self, ts: list[dict[str, Any]]) -> Saved: ...

    async def mark_published_many(self, request_ids: list[str]) -> None: ...


StoreFactory = Callable[[Settings], Awaitable[Store]]
Sender = Callable[[Topic, str, dict[str, Any]], Awaitable[None]]


class PostgresStoreFactory:
    """Opens (and on demand re-opens) the pool; the recorder's production store."""

    def __init__(self) -> None:
        self.pool: asyncpg.Pool | None = None

    async def __call__(self, settings: Settings) -> Store:
        pool = await connect_pool(settings.postgres_dsn, initial_s=settings.connect_backoff_initial_s,
                                  max_s=settings.connect_backoff_max_s)
        try:
            await migrate(pool)
        except BaseException:  # the database went away again: do not leak this pool's connections
            pool.terminate()
            raise
        self.pool = pool
        return TrajectoryStore(pool)


@dataclass
class RecorderApp:
    app: faust.App
    record: Any  # faust agent
    save: Callable[[dict[str, Any]], Awaitable[bool]]
    reset_store: Callable[[], Awaitable[None]]


def build(settings: Settings | None = None, *, store_factory: StoreFactory | None = None,
          sender: Sender | None = None, published: PublishedLookup | None = None) -> RecorderApp:
    settings = settings or load_settings()
    app = make_app(traj_settings.APP_ID, settings, exactly_once=traj_settings.EXACTLY_ONCE,
                   fetch_min_bytes=traj_settings.FETCH_MIN_BYTES, fetch_max_wait_ms=traj_settings.FETCH_WAIT_MS)
    topics = {t.name: faust_topic(app, t) for t in (REPLIES, TRAJECTORIES, DEAD_LETTER)}
    holder: dict[str, Any] = {}
    lock = asyncio.Lock()
    pg_factory = PostgresStoreFactory() if store_factory is None else None
    factory: StoreFactory = store_factory or pg_factory  # type: ignore[assignment]

    async def faust_send(topic: Topic, key: str, record: dict[str, Any]) -> None:
        await send(topics[topic.name], topic, key, record)

    out: Sender = sender if sender is not None else faust_send
    lookup: PublishedLookup = published or PublishedScan(
        settings, max_records=traj_settings.PUBLISHED_SCAN_MAX_RECORDS, max_s=traj_settings.PUBLISHED_SCAN_MAX_S,
        client_id=f"{settings.kafka_client_id}-trajectories-scan")

    async def store() -> Store:
        async with lock:
            if "store" not in holder:
                holder["store"] = await factory(settings)
        return holder["store"]

    async def reset_store() -> None:
        """Forget the store; the next save reconnects (a fresh pool)."""
        async with lock:
            holder.pop("store", None)
            if pg_factory is not None and pg_factory.pool is not None:
                pool, pg_factory.pool = pg_factory.pool, None
                pool.terminate()

    async def save_many(trajectories: list[dict[str, Any]]) -> Saved:
        """Store the rows, waiting out database outages."""
        first = trajectories[0]["request_id"]
        saved: Saved = await retrying(first, lambda s: s.save_many(trajectories))
        return saved

    async def save(trajectory: dict[str, Any]) -> bool:
        return trajectory["request_id"] in (await save_many([trajectory])).unpublished

    async def published_before(saved: Saved, trajectories: list[dict[str, Any]]) -> set[str]:
        """Of the rows stored before but never marked, those whose record is on the topic already (a
        recorder died between publishing and marking); they are marked now and not published again."""
        if not saved.unmarked:
            return set()
        since = min(t["completed_ms"] for t in trajectories if t["request_id"] in saved.unmarked)
        try:
            found = await lookup(set(saved.unmarked), since - traj_settings.PUBLISHED_SCAN_SKEW_MS)
        except Exception:  # the broker is away: publishing again is the at-least-once fallback
            log.exception("cannot read %s for %d unmarked trajectories; they are published again",
                          TRAJECTORIES.name, len(saved.unmarked))
            metrics.TRAJECTORIES_UNMARKED.labels("no").inc(len(saved.unmarked))
            return set()
        metrics.TRAJECTORIES_UNMARKED.labels("yes").inc(len(found))
        metrics.TRAJECTORIES_UNMARKED.labels("no").inc(len(saved.unmarked - found))
        if found:
            log.info("%d trajectory records were published before a restart; marking them", len(found))
            try:
                await mark_published(sorted(found))
            except Exception:  # they are on the topic either way; unmarked rows only cost another scan
                log.exception("cannot mark %d trajectories as published", len(found))
        return found

    async def mark_published(request_ids: list[str]) -> None:
        await retrying(request_ids[0], lambda s: s.mark_published_many(request_ids))

    async def retrying(request_id: str, write: Callable[[Store], Awaitable[Any]]) -> Any:
        failures = 0
        for delay in backoff_delays(settings.connect_backoff_initial_s, settings.connect_backoff_max_s):
            try:
                return await write(await store())
            except Exception as exc:
                if not transient_db_error(exc):
                    raise  # the record's own fault: the agent dead-letters it
                failures += 1
                log.warning("PostgreSQL write of %s failed (%r); retry %d in %.1fs",
                            request_id, exc, failures, delay)
                if failures % RESET_POOL_AFTER == 0 or broken_connection(exc):
                    await reset_store()
                await asyncio.sleep(delay)

    async def to_dead_letter(event: Any, error: str) -> None:
        if sender is None:
            await dead_letter(topics[DEAD_LETTER.name], REPLIES, event, error, app.conf.id)
        else:
            msg = event.message
            await out(DEAD_LETTER, REPLIES.name, {
                "source_topic": REPLIES.name, "partition": msg.partition, "offset": msg.offset, "key": msg.key,
                "value": msg.value, "error": error[:2000], "consumer": app.conf.id, "ts_ms": now_ms()})

    @app.task
    async def warm_up() -> None:
        await store()

    @app.agent(topics[REPLIES.name])
    async def record(stream: Any) -> Any:
        # take_events acknowledges a batch's replies when the next batch is taken, i.e. after their
        # trajectories were stored and published.
        async for events in stream.take_events(traj_settings.BATCH_MAX, within=traj_settings.BATCH_WITHIN_S):
            batch: list[tuple[Any, dict[str, Any]]] = []
            for event in events:
                try:
                    reply = codec.decode(REPLIES.schema, event.value)
                    batch.append((event, trajectory_from_reply(reply)))  # refuses malformed room / request ids
                except (codec.DecodeError, InvalidId) as exc:
                    await to_dead_letter(event, f"decode: {exc}")
                    yield None
            if not batch:
                continue
            refused: dict[int, Exception] = {}  # position in the batch -> why the table refused its row
            try:
                saved = await save_many([t for _, t in batch])
            except Exception as exc:  # not transient (save_many retries those): a value the table refuses
                # It failed the whole batch: store the rows one by one (a batch of one is that row), so
                # only the refused reply is dead-lettered.
                saved = Saved()
                if len(batch) == 1:
                    refused[0] = exc
                else:
                    for i, (_, trajectory) in enumerate(batch):
                        try:
                            saved |= await save_many([trajectory])
                        except Exception as row_exc:
                            refused[i] = row_exc
            for i, error in refused.items():
                event, trajectory = batch[i]
                log.error("cannot store trajectory %s: %r", trajectory["request_id"], error)
                await to_dead_letter(event, f"store: {error!r}")
                yield None
            batch = [item for i, item in enumerate(batch) if i not in refused]
            unpublished = saved.unpublished - await published_before(saved, [t for _, t in batch])
            sent: dict[str, dict[str, Any]] = {}  # published now, in order (a reply twice in a batch: once)
            for _, trajectory in batch:
                request_id = trajectory["request_id"]
                if request_id in sent:
                    continue
                if request_id in unpublished:
                    sent[request_id] = trajectory
                else:
                    log.info("reply %s delivered again: its trajectory is already stored and published", request_id)
            # All of a batch's records at once: one after the other, each waited for its acknowledgement
            # (and the producer's linger) alone, so each went in a produce request of its own.
            await asyncio.gather(*(out(TRAJECTORIES, t["room_id"], t) for t in sent.values()))
            if sent:
                try:
                    await mark_published(list(sent))
                except Exception:  # published already; an unmarked row only risks a second record later
                    log.exception("cannot mark %d trajectories as published", len(sent))
            for _, trajectory in batch:
                yield trajectory

    return RecorderApp(app=app, record=record, save=save, reset_store=reset_store)


def create_app(settings: Settings | None = None, *, store_factory: StoreFactory | None = None,
               sender: Sender | None = None) -> faust.App:
    return build(settings, store_factory=store_factory, sender=sender).app


def main() -> None:
    run_worker("trajectories", create_app)
