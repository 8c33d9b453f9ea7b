"""The hooks processor as a Faust app: room events and policy actions in, requests/tool calls/replies out.

``build`` wires the app and returns its parts (agents, a callable merge-window flush, the handler),
so unit tests can drive it with ``agent.test_context()``: every agent yields, per input event, the
list of records it emitted (``{"topic", "key", "record"}``), which the test wrapper collects in
``results``. Records leave through a *sender* — Faust topic sends in production, any recorder in a
test — and source events are acknowledged only after their records were sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import faust

from livehost import codec, metrics
from livehost.config import Settings, load_settings
from livehost.faustutil import before_join, dead_letter, faust_topic, make_app, run_worker, send, send_nowait
from livehost.harness.provider import HarnessProvider
from livehost.harness.runtime import provider_for
from livehost.kafka import now_ms
from livehost.security import pki_dir
from livehost.security.attest import Signer
from livehost.security.ids import InvalidId, check_room_event
from livehost.topics import (
    ACTIONS,
    DEAD_LETTER,
    HOOKS_ROOMS_CHANGELOG,
    REPLIES,
    REQUESTS,
    ROOM_EVENTS,
    TOOL_CALLS,
    Topic,
)
from livehost.understanding.screening import model as screening_model
from services.hooks import settings as hooks_settings
from services.hooks.handlers import SHED, Assigner, Handled, HooksHandler

log = logging.getLogger(__name__)

Sender = Callable[[Topic, str, dict[str, Any]], Awaitable[None]]
ProviderFactory = Callable[[Settings], Awaitable[HarnessProvider]]
AssignerFactory = Callable[[Settings], Awaitable[Assigner | None]]
Clock = Callable[[], int]


@dataclass
class HooksApp:
    """The Faust app and the parts a test drives directly."""

    app: faust.App
    room_events: Any  # faust agent
    actions: Any  # faust agent
    flush: Callable[[], Awaitable[list[dict[str, Any]]]]  # close due merge windows now; returns what it sent
    handler: Callable[[], Awaitable[HooksHandler]]
    rooms: MutableMapping[str, Any]


async def _no_assigner(settings: Settings) -> Assigner | None:
    return None


def observe_outcome(reply: dict[str, Any]) -> None:
    """Metrics of a terminal outcome: the outcome, its latency, and the request's hook verdicts."""
    state, outcome = reply["state"], reply["outcome"]
    metrics.OUTCOMES.labels(outcome).inc()
    metrics.REQUEST_SECONDS.labels(outcome).observe(max(0, reply["completed_ms"] - state["created_ms"]) / 1000)
    if outcome == "cancelled" and (reply.get("reason") or "").startswith(SHED):
        metrics.SHED.labels("system" if "in flight" in reply["reason"] else "budget").inc()
    for step in state["steps"]:
        if step["kind"] in ("hook_verdict", "input_hook"):
            data = json.loads(step["data_json"])
            metrics.HOOK_VERDICTS.labels(data.get("kind", "?"), data.get("verdict", "?")).inc()


def _emitted(done: Handled) -> list[dict[str, Any]]:
    return [{"topic": e.topic.name, "key": e.key, "record": e.record} for e in done.emits]


async def _registry_provider(settings: Settings) -> HarnessProvider:
    return await provider_for(settings, "hooks")


async def _experiment_assigner(settings: Settings) -> Assigner | None:
    from livehost.experiments.store import ExperimentStore
    from services.hooks.clients import ExperimentAssigner

    return ExperimentAssigner(await ExperimentStore.connect(settings.postgres_dsn, attempts=None))


def build(settings: Settings | None = None, *, sender: Sender | None = None,
          provider_factory: ProviderFactory | None = None, clock: Clock = now_ms,
          assigner_factory: AssignerFactory | None = None) -> HooksApp:
    settings = settings or load_settings()
    # stream_wait_empty=False: on a rebalance, do not wait for the held comments to be acknowledged
    # (they cannot be while the rebalance stops the actions that would release them); they are
    # dropped and read again instead (forget_held below, HooksHandler.drop_held).
    app = make_app(hooks_settings.APP_ID, settings, exactly_once=hooks_settings.EXACTLY_ONCE,
                   stream_wait_empty=False)
    topics = {t.name: faust_topic(app, t) for t in (ROOM_EVENTS, ACTIONS, REQUESTS, TOOL_CALLS, REPLIES, DEAD_LETTER)}
    rooms = app.Table("rooms", default=None, partitions=ROOM_EVENTS.partitions, key_type=str, value_type=str)
    changelog = cast(Any, rooms).changelog_topic_name
    if changelog != HOOKS_ROOMS_CHANGELOG.name:  # declared (and created) in livehost.topics
        raise RuntimeError(f"table changelog {changelog} is not declared in livehost.topics")
    holder: dict[str, HooksHandler] = {}
    lock = asyncio.Lock()
    make_provider = provider_factory or _registry_provider
    # Live A/B experiments need PostgreSQL; a test that injects its own provider runs without them.
    make_assigner = assigner_factory or (_experiment_assigner if provider_factory is None else _no_assigner)

    async def faust_send(topic: Topic, key: str, record: dict[str, Any]) -> None:
        await send(topics[topic.name], topic, key, record)

    out: Sender = sender if sender is not None else faust_send

    async def handler() -> HooksHandler:
        async with lock:
            if "h" not in holder:
                holder["h"] = HooksHandler(settings, await make_provider(settings), rooms,
                                           assigner=await make_assigner(settings),
                                           signer=Signer.from_pki(pki_dir(settings), "hooks"))
        return holder["h"]

    def ack_when_delivered(tokens: list[Any], delivered: asyncio.Future[Any]) -> None:
        if delivered.cancelled() or delivered.exception() is not None:
            # never acknowledged: the worker stops, and its successor re-reads the source events
            exc = delivered.exception() if not delivered.cancelled() else asyncio.CancelledError()
            log.error("hooks: records not delivered (%r); stopping the worker", exc)
            asyncio.ensure_future(app.crash(cast(BaseException, exc)))
            return
        for token in tokens:
            token.ack()

    async def emit(done: Handled, wait: bool = True) -> list[dict[str, Any]]:
        """Send the records, then acknowledge their source events. ``wait=False``: return as soon as
        they are enqueued, and acknowledge when the broker has them (Faust commits offsets only up to
        the oldest unacknowledged event), so the agent takes its next event meanwhile."""
        for e in done.emits:
            if e.topic is REPLIES:
                observe_outcome(e.record)
        if sender is None:  # enqueue every record, then wait for all acknowledgements at once
            delivered = asyncio.gather(*[await send_nowait(topics[e.topic.name], e.topic, e.key, e.record)
                                         for e in done.emits])
            if not wait:
                delivered.add_done_callback(partial(ack_when_delivered, list(done.tokens)))
                return _emitted(done)
            await delivered
        else:
            for e in done.emits:
                await out(e.topic, e.key, e.record)
        for token in done.tokens:
            token.ack()
        return _emitted(done)

    async def to_dead_letter(source: Topic, event: Any, error: str) -> None:
        if sender is None:
            await dead_letter(topics[DEAD_LETTER.name], source, event, error, app.conf.id)
        else:  # the same record, through the injected sender
            msg = event.message
            await out(DEAD_LETTER, source.name, {
                "source_topic": source.name, "partition": msg.partition, "offset": msg.offset, "key": msg.key,
                "value": msg.value, "error": error[:2000], "consumer": app.conf.id, "ts_ms": clock()})

    async def forget_held(sender: Any, *args: Any, **kwargs: Any) -> None:
        revoked = args[0] if args else kwargs.get("revoked")
        if not revoked or "h" not in holder:
            return
        held = holder["h"].drop_held()
        consumer = cast(Any, app.consumer)
        for token in held:  # read again after the rebalance: nothing to wait for, nothing to commit
            consumer._unacked_messages.discard(token.message)
        # Faust dropped the revoked partitions' acknowledgements when the revocation began; a merge
        # window that closed since then acknowledged comments of the old assignment, which must not
        # count toward a commit ahead of the held comments read again before them
        for tp in [tp for tp in consumer._acked if tp.topic == ROOM_EVENTS.name]:
            consumer._acked.pop(tp, None)
            consumer._acked_index.pop(tp, None)
        log.info("hooks: rebalance; dropped %d held comments, read again from the committed offsets", len(held))

    app.on_partitions_revoked.connect(cast(Any, forget_held))

    async def warm_up() -> None:
        await handler()  # connect the harness registry before the first event needs it
        # train the screening classifier (a few tenths of a second) before the first comment waits for it
        await asyncio.to_thread(screening_model)

    before_join(app, warm_up)

    @app.agent(topics[ROOM_EVENTS.name])
    async def room_events(stream: Any) -> Any:
        # Comments are acknowledged only when the request they merged into was published.
        async for event in stream.noack().events():
            try:
                record = codec.decode(ROOM_EVENTS.schema, event.value)
                # the same id format and size limits as Ingest: a producer bypassing Ingest gets no further
                check_room_event(record, max_text_bytes=settings.max_comment_bytes,
                                 max_campaign_bytes=settings.max_campaign_json_bytes)
            except (codec.DecodeError, InvalidId) as exc:
                await to_dead_letter(ROOM_EVENTS, event, f"decode: {exc}")
                event.ack()
                yield [{"topic": DEAD_LETTER.name, "key": ROOM_EVENTS.name, "record": None}]
                continue
            h = await handler()
            yield await emit(await h.on_room_event(record, clock(), event))

    async def flush() -> list[dict[str, Any]]:
        h = await handler()
        sent = await emit(await h.flush(clock()))
        metrics.IN_FLIGHT.set(h.in_flight_count)
        metrics.IN_FLIGHT_LIMIT.set(h.limit.value)
        metrics.QUEUE_DEPTH.set(sum(len(s.queue) for s in h.schedules.values()))
        metrics.SERVICE_SECONDS.set(h.service_ms / 1000)
        return sent

    @app.timer(hooks_settings.FLUSH_INTERVAL_S)
    async def flush_windows() -> None:
        await flush()

    @app.agent(topics[ACTIONS.name])
    async def actions(stream: Any) -> Any:
        # An action is acknowledged once the records it led to were delivered (emit, wait=False).
        async for event in stream.noack().events():
            try:
                record = codec.decode(ACTIONS.schema, event.value)
            except codec.DecodeError as exc:
                await to_dead_letter(ACTIONS, event, f"decode: {exc}")
                event.ack()
                yield [{"topic": DEAD_LETTER.name, "key": ACTIONS.name, "record": None}]
                continue
            h = await handler()
            try:
                done = await h.on_action(record, clock())
            except Exception as exc:  # a poison action must not stop the room
                await to_dead_letter(ACTIONS, event, f"handler: {exc!r}")
                event.ack()
                yield [{"topic": DEAD_LETTER.name, "key": ACTIONS.name, "record": None}]
                continue
            done.tokens.append(event)
            yield await emit(done, wait=False)

    return HooksApp(app=app, room_events=room_events, actions=actions, flush=flush, handler=handler, rooms=rooms)


def create_app(settings: Settings | None = None, *, sender: Sender | None = None,
               provider_factory: ProviderFactory | None = None) -> faust.App:
    return build(settings, sender=sender, provider_factory=provider_factory).app


def main() -> None:
    run_worker("hooks", create_app)
