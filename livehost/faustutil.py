"""Faust apps configured for LiveHost.

A short session timeout makes the first group join take seconds rather than half a minute.

Faust hard-codes ``fetch_max_wait_ms=1500`` for its worker consumer; it gets the configured wait
(``kafka_fetch_max_wait_ms``, as every other consumer). On Apache Kafka a long wait costs nothing in
steady state (the broker answers a waiting fetch when data arrives), but the consumer keeps one fetch
in flight per broker, so a partition resumed or sought after a rebalance waited up to 1.5 s for the
fetch already in flight. On the optional Tansu broker the short wait is needed anyway: Tansu does not
answer a waiting fetch when data arrives (~380 ms per hop). Only on Tansu, a changelog table
recovered one record short unless producer batches hold one record.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, cast

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka

from livehost import codec
from livehost.config import Settings, state_dir
from livehost.kafka import group_instance_id, now_ms, patch_sync_group_load_in_progress, producer_options
from livehost.topics import DEAD_LETTER, Topic

log = logging.getLogger(__name__)
_PATCHED: dict[str, Any] = {}
# What each app's worker awaits before the app starts, i.e. before its consumer joins the group.
_BEFORE_JOIN: weakref.WeakKeyDictionary[faust.App, list[Callable[[], Awaitable[None]]]] = weakref.WeakKeyDictionary()


def before_join(app: faust.App, step: Callable[[], Awaitable[None]]) -> None:
    """Run ``step`` in the worker's event loop before the app's consumer joins its group.

    For what a processor needs before it can handle its first event (database pools, the harness,
    a trained classifier): done after the join, it delays the first events of every partition the
    worker is handed — measured on a restarted hooks replica, ~1 s after its "Worker ready" before it
    handled an action, while its peer had already given those partitions up. Done before, the group
    keeps the partitions with the peer until the newcomer is able to serve them."""
    _BEFORE_JOIN.setdefault(app, []).append(step)


class _Worker(faust.Worker):
    async def on_first_start(self) -> None:
        await super().on_first_start()
        for step in _BEFORE_JOIN.get(cast(faust.App, self.app)) or []:
            await step()
        from livehost.service import freeze_startup_heap

        freeze_startup_heap()


def _patch_faust_clients(fetch_max_wait_ms: int | None, read_committed: bool, idempotent: bool,
                         instance_id: str | None = None, fetch_min_bytes: int = 1) -> None:
    """Faust builds its worker consumer and its producers itself, with settings it does not expose:

    - ``isolation_level`` is read_committed only under its own exactly_once guarantee, but the steps
      upstream of the stream processors write in Kafka transactions, so records of an aborted
      transaction must never reach them;
    - its producers are idempotent only under exactly_once;
    - its worker consumer's fetch wait is hard-coded (see the module's docstring), and so is its
      fetch.min.bytes (1: every fetch returns as soon as one record is there);
    - it has no setting for static group membership (``livehost.kafka.group_instance_id``).
    """
    wanted = (fetch_max_wait_ms, read_committed, idempotent, instance_id, fetch_min_bytes)
    if _PATCHED.get("wanted") == wanted:
        return
    thread_cls: Any = faust_aiokafka.AIOKafkaConsumerThread
    producer_cls: Any = faust_aiokafka.Producer
    original = _PATCHED.setdefault("consumer", thread_cls._create_worker_consumer)
    original_extra = _PATCHED.setdefault("extra", producer_cls._settings_extra)

    def create(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        if fetch_max_wait_ms is not None:
            consumer._fetch_max_wait_ms = fetch_max_wait_ms
        consumer._fetch_min_bytes = fetch_min_bytes
        if read_committed:
            consumer._isolation_level = "read_committed"  # these three are read by the fetcher it creates at start()
        if instance_id is not None:
            consumer._group_instance_id = instance_id  # read by the group coordinator it creates at start()
        return consumer

    def extra(self: Any) -> Any:
        out = dict(original_extra(self))
        if idempotent:
            out.update(acks="all", enable_idempotence=True)
        return out

    thread_cls._create_worker_consumer = create
    producer_cls._settings_extra = extra
    _PATCHED["wanted"] = wanted


def credentials(settings: Settings) -> Any:
    """Faust's form of the Kafka security settings (the same as every aiokafka client's)."""
    from livehost.kafka import ssl_context

    protocol = settings.kafka_security_protocol
    context = ssl_context(settings)
    if protocol.startswith("SASL_"):
        return faust.SASLCredentials(username=settings.kafka_sasl_username,
                                     password=settings.kafka_sasl_password.get_secret_value(),
                                     ssl_context=context, mechanism=settings.kafka_sasl_mechanism)
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def _patch_faust_ack_gaps() -> None:
    """Never commit past a record that was delivered but not acknowledged.

    Faust commits the first run of consecutive acknowledged offsets, and guards against a gap at its
    head only when the partition already has a committed offset, and then off by one
    (``min(acked) - committed > 1``, with ``committed`` the next offset to read). A stream that
    acknowledges out of order (the hooks processor holds a comment until its request is published) then
    had its held comments skipped: a worker killed at that moment lost them (measured: 32 of 120
    comments in a hooks kill right after start-up). Here the acknowledged offsets considered for a commit
    are only those below the lowest offset still unacknowledged on that partition.
    """
    from faust.transport.consumer import Consumer

    if getattr(Consumer, "_livehost_ack_gaps", False):
        return
    original = Consumer._new_offset

    def _new_offset(self: Any, tp: Any) -> int | None:
        pending = [m.offset for m in list(self._unacked_messages) if m.tp == tp and not m.acked]
        if not pending:
            return cast(int | None, original(self, tp))
        low = min(pending)
        acked = self._acked[tp]
        above = [o for o in acked if o >= low]
        acked[:] = sorted(o for o in acked if o < low)
        try:
            return cast(int | None, original(self, tp)) if acked else None
        finally:
            acked.extend(above)
            acked.sort()

    Consumer._new_offset = _new_offset  # type: ignore[method-assign]
    Consumer._livehost_ack_gaps = True  # type: ignore[attr-defined]


def _patch_faust_untracked_acks() -> None:
    """An offset counts toward a commit only if a stream took its message.

    During a rebalance Faust's stream skips the messages it pulls from its buffer (flow control
    suspended, or fetched under the previous group generation) and acknowledges them "so the lag does
    not grow", although no agent saw them; the partition is then sought back to its committed offset.
    Those acknowledgements stayed in the commit bookkeeping: the next commit could jump over records
    that no agent ever handled. Measured: a hooks SIGKILL with supervisor restart lost 4 of 200 comments
    (offsets 296 and 297 of one partition among them, all sent within 1.6 s of the kill; the restarted
    worker went through a second generation right after joining). Such a message is still marked
    acknowledged (Faust waits for it on shutdown), but its offset is not recorded; the stream takes it
    again after the seek."""
    from faust.transport.consumer import Consumer

    if getattr(Consumer, "_livehost_untracked_acks", False):
        return
    original = Consumer.ack

    def ack(self: Any, message: Any) -> bool:
        if not getattr(message, "tracked", True) and not message.acked:
            message.acked = True  # never handed to a stream: nothing handled, nothing to commit
            return False
        return cast(bool, original(self, message))

    Consumer.ack = ack  # type: ignore[method-assign]
    Consumer._livehost_untracked_acks = True  # type: ignore[attr-defined]


def apply_deferred(consumer: Any) -> None:
    """Resume the partitions whose resume waited for the seek (see _patch_faust_seek_before_resume)."""
    deferred = getattr(consumer, "_livehost_deferred", None)
    consumer._livehost_deferred = None
    if deferred:
        consumer.resume_partitions(deferred)


def resume_after_seek(original: Any) -> Any:
    """Wrap a Faust recovery step: the partitions it resumes are resumed once its seek is done."""
    async def run(self: Any, generation_id: int = 0) -> None:
        consumer = self.app.consumer
        consumer._livehost_deferred = set()
        try:
            await original(self, generation_id)
        finally:  # an early return or a new rebalance: resume as Faust would have
            apply_deferred(consumer)
    return run


def _patch_faust_seek_before_resume() -> None:
    """After a rebalance, seek the stream partitions to their committed offsets *before* resuming them.

    Faust's recovery (``Recovery._resume_streams`` and ``on_recovery_completed``) resumes the stream
    partitions and only then seeks them; its fetcher is already running (it read the changelogs), so
    it fetches stream records at the pre-seek positions while the seek is under way, and records of
    that first batch were never handed to the agent. Measured on a hooks worker SIGKILLed and
    restarted with comments pending: the first batch's records were yielded by the consumer but never
    reached the stream in 4 of 8 runs; when the seek did not cause a refetch they were lost (1 to 11
    of 18 comments), and Faust's gap bookkeeping then committed past them. Here the resume waits
    until the seek has finished, so the first fetch of a stream partition starts at its committed
    offset.

    Faust's pause of a partition is its own bookkeeping: the aiokafka consumer under it keeps fetching,
    and records it handed over while Faust was not taking them were consumed and gone (measured after
    the reordering alone: 2 of 8 restarts still lost 12 of 18 comments, positions at the end of the
    partition, nothing delivered). So stream partitions are also paused in the aiokafka consumer while
    Faust has them paused; changelog partitions are left to Faust's recovery."""
    from aiokafka import TopicPartition
    from faust.tables.recovery import Recovery
    from faust.transport.consumer import Consumer

    if getattr(Recovery, "_livehost_seek_first", False):
        return
    pause_partitions = Consumer.pause_partitions
    resume_partitions = Consumer.resume_partitions
    perform_seek = Consumer.perform_seek

    def streams_in_client(consumer: Any, tps: Any, pause: bool) -> None:
        thread = getattr(consumer, "_thread", None)
        if thread is None:  # not the aiokafka driver
            return
        client = thread._ensure_consumer()
        assigned = client.assignment()
        stream_tps = [TopicPartition(tp.topic, tp.partition) for tp in tps
                      if tp in assigned and not consumer._is_changelog_tp(tp)]
        if stream_tps:
            (client.pause if pause else client.resume)(*stream_tps)

    def pausing(self: Any, tps: Any) -> None:
        tps = set(tps)
        pause_partitions(self, tps)
        streams_in_client(self, tps, pause=True)

    def resuming(self: Any, tps: Any) -> None:
        tps = set(tps)
        resume_partitions(self, tps)
        streams_in_client(self, tps, pause=False)

    def deferring_resume(self: Any, tps: Any) -> None:
        deferred = getattr(self, "_livehost_deferred", None)
        if deferred is None:
            resuming(self, tps)
        else:
            deferred.update(tps)

    async def seek_then_resume(self: Any) -> None:
        await perform_seek(self)
        apply_deferred(self)

    Consumer.pause_partitions = pausing  # type: ignore[method-assign]
    Consumer.resume_partitions = deferring_resume  # type: ignore[method-assign]
    Consumer.perform_seek = seek_then_resume  # type: ignore[method-assign]
    Recovery._resume_streams = resume_after_seek(Recovery._resume_streams)  # type: ignore[method-assign]
    Recovery.on_recovery_completed = resume_after_seek(Recovery.on_recovery_completed)  # type: ignore[method-assign]
    Recovery._livehost_seek_first = True  # type: ignore[attr-defined]


def _patch_faust_table_start() -> None:
    """Start Faust's table manager without its fixed one-second pause.

    ``TableManager.on_start`` sleeps 1.0 s so that tables declared after the worker started are
    still registered; LiveHost's processors declare every table in ``build()``, before the worker
    starts, so the pause only delayed every start and every supervisor restart (measured: 1.0 s
    between "Waiting for tables to be registered" and the table starting, of a 2.8 s hooks restart,
    with the killed replica's partitions unserved meanwhile)."""
    from faust.tables.manager import TableManager

    if getattr(TableManager, "_livehost_no_pause", False):
        return

    async def on_start(self: Any) -> None:
        await self.sleep(0)
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()

    TableManager.on_start = on_start  # type: ignore[method-assign]
    TableManager._livehost_no_pause = True  # type: ignore[attr-defined]


def put_back_unhanded(client: Any, batch: Any, handed: dict[Any, int]) -> list[tuple[Any, int]]:
    """Seek each partition of ``batch`` (records per partition, as an aiokafka client returned them)
    back to its first record past ``handed`` (the last offset handed on per partition), unless the
    partition was unassigned or moved since the fetch. Returns the (partition, offset) seeks made."""
    subscription = client._subscription
    done = []
    for tp, records in batch.items():
        rest = [r for r in records if r.offset > handed.get(tp, -1)]
        if not rest or not subscription.is_assigned(tp):
            continue
        state = subscription.subscription.assignment.state_value(tp)
        if state is None or not state.has_valid_position or state.position != records[-1].offset + 1:
            continue  # sought since the fetch: that seek decides where reading goes on
        log.info("putting back %d records of %s[%d] that Faust did not hand on (from offset %d)",
                 len(rest), tp.topic, tp.partition, rest[0].offset)
        client.seek(tp, rest[0].offset)
        done.append((tp, rest[0].offset))
    return done


def _patch_faust_put_back_unhanded() -> None:
    """Records the client fetched but Faust did not hand on are put back: their partition is sought to
    the first of them, so they are fetched again.

    Faust's ``Consumer.getmany`` drops, without a trace, the records of a fetch that returns while its
    flow is stopped (a rebalance under way), or that belong to a partition it has paused meanwhile, or
    that were left when the generation changed mid-batch. Faust then seeks the *stream* partitions back
    to their committed offsets, but nothing seeks a table's changelog partitions back: their records were
    consumed and gone, and the table recovery waited for them for ever (Faust logs "No event received
    for active tp ... since recovery start"). Measured on the hooks worker that survives the SIGKILL of
    its one peer: a fetch started before the rebalance returned the changelog records just after the
    recovery had sought to their start and before it resumed the flow, in 1 of 3 to 1 of 4 runs; the
    survivor then never resumed its streams and 24 of 36 comments got no outcome.

    A partition is sought back only if nothing else moved it since (its position is still just past the
    fetched batch): a seek by the recovery or by Faust's own seek-to-committed wins."""
    from faust.transport.consumer import Consumer

    if getattr(Consumer, "_livehost_put_back", False):
        return
    wait_next_records = Consumer._wait_next_records
    getmany = Consumer.getmany

    async def _wait_next_records(self: Any, timeout: float) -> Any:
        records, active = await wait_next_records(self, timeout)
        self._livehost_batch = records
        return records, active

    async def getmany_(self: Any, timeout: float) -> Any:
        handed: dict[Any, int] = {}
        self._livehost_batch = None
        try:
            async for tp, message in getmany(self, timeout):
                handed[tp] = message.offset
                yield tp, message
        finally:
            batch, self._livehost_batch = self._livehost_batch, None
            client = getattr(getattr(self, "_thread", None), "_consumer", None)
            if batch and client is not None:  # the aiokafka driver, not stopped
                put_back_unhanded(client, batch, handed)

    Consumer._wait_next_records = _wait_next_records  # type: ignore[method-assign]
    Consumer.getmany = getmany_  # type: ignore[method-assign]
    Consumer._livehost_put_back = True  # type: ignore[attr-defined]


def make_app(app_id: str, settings: Settings, *, exactly_once: bool = False, fetch_min_bytes: int = 1,
             fetch_max_wait_ms: int | None = None, **overrides: Any) -> faust.App:
    """A Faust app with LiveHost's settings; ``exactly_once`` is the processor's choice of Faust's
    exactly_once guarantee (transactions per source partition), which ``kafka_transactions`` can veto.
    ``fetch_min_bytes`` and ``fetch_max_wait_ms`` let a consumer off the reply's path fetch in batches
    (fewer, larger fetches: the broker's cost is per request); the default wait is the shared one."""
    tansu = settings.kafka_flavour == "tansu"
    patch_sync_group_load_in_progress()
    _patch_faust_ack_gaps()
    _patch_faust_untracked_acks()
    _patch_faust_seek_before_resume()
    _patch_faust_table_start()
    _patch_faust_put_back_unhanded()
    _patch_faust_clients(max(fetch_max_wait_ms or settings.kafka_fetch_max_wait_ms, 10),
                         read_committed=not tansu, idempotent=settings.kafka_enable_idempotence and not tansu,
                         instance_id=group_instance_id(settings, app_id), fetch_min_bytes=max(1, fetch_min_bytes))
    datadir = state_dir() / "faust"
    datadir.mkdir(parents=True, exist_ok=True)
    conf: dict[str, Any] = dict(
        broker=f"kafka://{settings.kafka_bootstrap}",
        broker_credentials=credentials(settings),
        store="memory://",
        broker_session_timeout=settings.kafka_session_timeout_ms / 1000,
        broker_heartbeat_interval=settings.kafka_heartbeat_interval_ms / 1000,
        consumer_auto_offset_reset="earliest",
        producer_linger_ms=settings.kafka_faust_linger_ms,
        producer_compression_type=producer_options(settings)["compression_type"],
        web_enabled=False,
        datadir=str(datadir),  # not the current directory
        topic_allow_declare=False,  # topics are declared once (livehost.topics) and created at start-up
        topic_disable_leader=True,
        table_cleanup_interval=30.0,
        # How often offsets (and, under exactly_once, the open transactions) are committed. Under
        # exactly_once a record is visible to read_committed readers only at that commit, so this is a
        # latency floor per hop; at-least-once it bounds what a crash re-reads.
        broker_commit_interval=settings.kafka_faust_commit_interval_s,
    )
    if tansu:
        conf["producer_max_batch_size"] = 1
    elif exactly_once and settings.kafka_transactions:
        conf["processing_guarantee"] = "exactly_once"
    conf.update(overrides)
    return faust.App(app_id, **conf)


def faust_topic(app: faust.App, topic: Topic) -> Any:
    return app.topic(topic.name, key_type=bytes, value_type=bytes, key_serializer="raw",
                     value_serializer="raw", partitions=topic.partitions)


async def send(app_topic: Any, topic: Topic, key: str, record: dict[str, Any]) -> None:
    """Encode and send through Faust's producer, waiting for the broker's acknowledgement."""
    await (await send_nowait(app_topic, topic, key, record))


async def send_nowait(app_topic: Any, topic: Topic, key: str, record: dict[str, Any]) -> Any:
    """Encode and enqueue on Faust's producer; returns the future of the broker's acknowledgement (a
    caller sending several records awaits them together: one round trip instead of one per record)."""
    value = codec.encode(topic.schema, record)
    return await app_topic.send(key=key.encode(), value=value, headers={codec.SCHEMA_HEADER: topic.schema.encode()})


async def dead_letter(dlq_topic: Any, source: Topic, event: Any, error: str, consumer: str) -> None:
    msg = event.message
    log.error("dead-lettering %s[%d]@%d: %s", source.name, msg.partition, msg.offset, error)
    await send(dlq_topic, DEAD_LETTER, source.name, {
        "source_topic": source.name, "partition": msg.partition, "offset": msg.offset,
        "key": msg.key, "value": msg.value, "error": error[:2000], "consumer": consumer, "ts_ms": now_ms()})


def decode_event(source: Topic, value: bytes | None) -> dict[str, Any]:
    return codec.decode(source.schema, value)


def run_worker(name: str, create_app: Any) -> None:
    """Entry point of a Faust processor: wait for the broker, ensure topics, serve metrics, run."""
    import asyncio

    from prometheus_client import start_http_server

    from livehost.config import load_settings
    from livehost.kafka import ensure_topics, wait_for_broker
    from livehost.service import use_event_loop

    settings = load_settings()
    use_event_loop(settings.event_loop)

    async def prepare() -> None:
        await wait_for_broker(settings)
        await ensure_topics(settings)

    asyncio.run(prepare())
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.grpc_host)
    app = create_app(settings)
    policy = type(asyncio.get_event_loop_policy())
    print(f"STARTING {name} on {policy.__module__}.{policy.__name__}", flush=True)
    _Worker(app, loglevel=settings.log_level.lower(), quiet=True).execute_from_commandline()
