"""Kafka plumbing shared by every service: topic creation, an Avro producer, and a consumer loop
that sends undecodable or unprocessable records to the dead-letter topic and keeps going.

Delivery is at-least-once by default: offsets are committed only after a batch was handled, and every
handler is idempotent (keyed by request id + step). Producers are idempotent (no duplicates from
their own retries). A consumer loop created with ``transactional=True`` runs each batch as one Kafka
transaction instead — the records it produces and its input offsets commit together or not at
all — so the consume-process-produce step is exactly-once for ``read_committed`` readers (all of
LiveHost's consumers read committed).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAlreadyExistsError, for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Int16, Int32, Schema, String

from livehost import codec, metrics
from livehost.config import Settings
from livehost.db import transient_db_error
from livehost.retry import backoff_delays
from livehost.topics import ALL_TOPICS, DEAD_LETTER, Topic, by_name

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of Kafka clients: verifies the brokers against ``kafka_ssl_cafile`` and presents
    ``kafka_ssl_certfile`` when set. None for the plaintext protocols."""
    if settings.kafka_security_protocol not in ("SSL", "SASL_SSL"):
        return None
    from aiokafka.helpers import create_ssl_context

    return create_ssl_context(
        cafile=str(settings.kafka_ssl_cafile) if settings.kafka_ssl_cafile else None,
        certfile=str(settings.kafka_ssl_certfile) if settings.kafka_ssl_certfile else None,
        keyfile=str(settings.kafka_ssl_keyfile) if settings.kafka_ssl_keyfile else None)


def client_options(settings: Settings) -> dict[str, Any]:
    """Connection and security options every aiokafka client of LiveHost shares."""
    protocol = settings.kafka_security_protocol
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"kafka_security_protocol {protocol!r} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
                         "SASL_SSL")
    out: dict[str, Any] = {"bootstrap_servers": settings.kafka_bootstrap, "security_protocol": protocol}
    context = ssl_context(settings)
    if context is not None:
        out["ssl_context"] = context
    if protocol.startswith("SASL_"):
        if not settings.kafka_sasl_username:
            raise ValueError(f"kafka_security_protocol {protocol} needs kafka_sasl_username and kafka_sasl_password")
        out.update(sasl_mechanism=settings.kafka_sasl_mechanism, sasl_plain_username=settings.kafka_sasl_username,
                   sasl_plain_password=settings.kafka_sasl_password.get_secret_value())
    return out


def producer_options(settings: Settings) -> dict[str, Any]:
    """Options every LiveHost producer shares on top of client_options: batch compression (its level
    is set for the whole process, see use_compression_level)."""
    kind = settings.kafka_compression_type
    codec = None if kind == "none" or settings.kafka_flavour == "tansu" else kind
    if codec is not None:
        use_compression_level(codec, settings.kafka_compression_level)
    return {"compression_type": codec}


# Levels each codec accepts (Kafka's own ranges, KIP-390); snappy has none.
COMPRESSION_LEVELS = {"gzip": (1, 9), "lz4": (1, 17), "zstd": (1, 22)}


def use_compression_level(codec: str, level: int) -> None:
    """Compress this process's record batches of ``codec`` at ``level`` (0: the codec's default).

    aiokafka has no compression.level setting: its batch builders (the C one and the pure-Python one)
    call ``aiokafka.codec.<codec>_encode(data)`` with the default level, lz4's being 9 (LZ4 HC), the
    most expensive single step of writing a request state. So the builders' module globals are
    replaced by the same function with a level. Per process: every producer here uses one setting."""
    from aiokafka import codec as codecs
    from aiokafka.record import default_records as py_records

    if level == 0 or codec not in COMPRESSION_LEVELS:
        return
    low, high = COMPRESSION_LEVELS[codec]
    if not low <= level <= high:
        raise ValueError(f"kafka_compression_level {level} is outside {codec}'s levels {low}..{high}")
    name = f"{codec}_encode"
    modules: list[Any] = [py_records]
    try:
        from aiokafka.record._crecords import default_records as c_records
        modules.append(c_records)
    except ImportError:  # aiokafka built without its C extensions (AIOKAFKA_NO_EXTENSIONS)
        pass
    encode = functools.partial(getattr(codecs, name), **{"compresslevel" if codec == "gzip" else "level": level})
    for module in modules:
        setattr(module, name, encode)


def patch_sync_group_load_in_progress() -> None:
    """Make aiokafka's consumer retry a SyncGroup the coordinator refuses while it loads the group.

    aiokafka retries a JoinGroup answered with COORDINATOR_LOAD_IN_PROGRESS (error 14), but raises on the
    same answer to the SyncGroup that follows: its group coordination task ends, and the consumer never
    joins again. A Faust worker then sits without partitions for good; found by `make chaos`'s broker
    restart (the trajectory recorder stopped writing rows for the rest of the run). The broker answers so
    while it reloads ``__consumer_offsets`` after a restart, and the Java client treats it as retriable:
    back off and join again. Idempotent; called wherever LiveHost makes a group consumer."""
    from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance
    from aiokafka.errors import GroupLoadInProgressError

    if getattr(CoordinatorGroupRebalance, "_livehost_sync_retry", False):
        return
    original = CoordinatorGroupRebalance._send_sync_group_request

    async def send_sync_group_request(self: Any, request: Any) -> Any:
        try:
            return await original(self, request)
        except KafkaError as exc:
            # aiokafka wraps the broker's error as KafkaError(repr(error)) after requesting a rejoin
            if GroupLoadInProgressError.__name__ not in str(exc):
                raise
            log.warning("group %s: SyncGroup refused while the coordinator loads the group; joining again",
                        self.group_id)
            await asyncio.sleep(self._retry_backoff_ms / 1000)
            return None  # no assignment: perform_group_join returns None and the rejoin it requested runs

    CoordinatorGroupRebalance._send_sync_group_request = send_sync_group_request  # type: ignore[method-assign]
    CoordinatorGroupRebalance._livehost_sync_retry = True  # type: ignore[attr-defined]
    CoordinatorGroupRebalance._livehost_sync_original = original  # type: ignore[attr-defined]


def consumer_options(settings: Settings) -> dict[str, Any]:
    """Options of every LiveHost consumer (and patch_sync_group_load_in_progress, once).

    ``read_committed``: records of an aborted or still-open transaction are never handed out, so a
    transactional step that crashed mid-batch leaves nothing behind for its readers.
    """
    patch_sync_group_load_in_progress()
    return {**client_options(settings), "fetch_max_wait_ms": settings.kafka_fetch_max_wait_ms,
            "isolation_level": "read_committed"}


async def wait_for_broker(settings: Settings, attempts: int | None = None) -> None:
    """Block until the broker answers a metadata request (backoff between tries)."""
    last: Exception | None = None
    for attempt, delay in enumerate(backoff_delays(settings.connect_backoff_initial_s,
                                                   settings.connect_backoff_max_s)):
        if attempts is not None and attempt >= attempts:
            break
        admin = AIOKafkaAdminClient(**client_options(settings), request_timeout_ms=3000)
        try:
            await admin.start()
            await admin.list_topics()
            return
        except (TimeoutError, KafkaError, OSError) as exc:
            last = exc
            log.warning("broker %s not reachable (%s); retrying in %.1fs", settings.kafka_bootstrap, exc, delay)
        finally:
            await admin.close()
        await asyncio.sleep(delay)
    raise ConnectionError(f"Kafka broker {settings.kafka_bootstrap} unreachable: {last}")


async def ensure_topics(settings: Settings, topics: Iterable[Topic] = ALL_TOPICS) -> list[str]:
    """Create the declared topics that do not exist yet, with their configs; returns the names created."""
    admin = AIOKafkaAdminClient(**client_options(settings), request_timeout_ms=10000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in topics if t.name not in existing]
        created = []
        for topic in missing:
            configs = topic.configs()
            if settings.kafka_flavour == "tansu":
                configs = {}  # accepted but never applied by Tansu; don't pretend
            response = await admin.create_topics([NewTopic(topic.name, topic.partitions,
                                                           settings.kafka_replication_factor, topic_configs=configs)])
            for name, code, *rest in response.topic_errors:  # errors come back per topic, not raised
                if code == TopicAlreadyExistsError.errno:
                    continue  # another service created it concurrently
                if code:
                    raise for_code(code)(f"cannot create topic {name}: {rest[0] if rest else ''}")
                created.append(name)
        if created:
            await _wait_for_leaders(admin, {t.name: t.partitions for t in missing if t.name in created})
        return created
    finally:
        await admin.close()


async def _wait_for_leaders(admin: AIOKafkaAdminClient, wanted: dict[str, int], timeout_s: float = 15.0) -> None:
    """Creation returns before every partition has a leader; the first produce would then be refused."""
    deadline = time.monotonic() + timeout_s
    while True:
        described = await admin.describe_topics(list(wanted))
        ready = {d["topic"]: sum(1 for p in d["partitions"] if p.get("leader", -1) >= 0) for d in described}
        if all(ready.get(name, 0) >= n for name, n in wanted.items()) or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.05)


@dataclass
class TopicChange:
    topic: str
    action: str  # created | configs | partitions | ok
    detail: str = ""


async def apply_topics(settings: Settings, topics: Iterable[Topic] = ALL_TOPICS) -> list[TopicChange]:
    """Make the broker match ``livehost.topics``: create missing topics, add partitions to topics that
    have fewer than declared (never fewer: that would move keys), and set changed topic configs. What
    `livehost topics apply`, the compose ``topics`` job and the chart's topics Job run."""
    from aiokafka.admin import NewPartitions
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    topics = list(topics)
    created = set(await ensure_topics(settings, topics))
    changes = [TopicChange(name, "created") for name in sorted(created)]
    if settings.kafka_flavour == "tansu":
        return changes
    admin = AIOKafkaAdminClient(**client_options(settings), request_timeout_ms=10000)
    await admin.start()
    try:
        existing = [t for t in topics if t.name not in created]
        described = await admin.describe_topics([t.name for t in existing]) if existing else []
        partitions = {d["topic"]: len(d["partitions"]) for d in described}
        grow = {t.name: NewPartitions(t.partitions) for t in existing if partitions.get(t.name, 0) < t.partitions}
        if grow:
            await admin.create_partitions(grow)
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t.name, configs=None) for t in existing])
        current: dict[str, dict[str, str]] = {}
        for response in responses:
            for resource in response.resources:
                current[resource[3]] = {entry[0]: entry[1] for entry in resource[4]}
        for t in existing:
            diff = {k: v for k, v in t.configs().items() if current.get(t.name, {}).get(k) != v}
            if t.name in grow:
                changes.append(TopicChange(t.name, "partitions", f"{partitions.get(t.name)} -> {t.partitions}"))
            if diff:
                await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t.name, configs=t.configs())])
                changes.append(TopicChange(t.name, "configs", ", ".join(f"{k}={v}" for k, v in sorted(diff.items()))))
            elif t.name not in grow:
                changes.append(TopicChange(t.name, "ok"))
        return changes
    finally:
        await admin.close()


class Producer:
    """Avro producer over one aiokafka producer; keys are encoded as UTF-8."""

    def __init__(self, settings: Settings):
        self._settings = settings
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        for delay in backoff_delays(self._settings.connect_backoff_initial_s, self._settings.connect_backoff_max_s):
            producer = AIOKafkaProducer(
                **client_options(self._settings), **producer_options(self._settings),
                client_id=self._settings.kafka_client_id,
                acks="all",
                linger_ms=1,
                enable_idempotence=self._settings.kafka_enable_idempotence,
            )
            try:
                await producer.start()
                self._producer = producer
                return
            except (KafkaConnectionError, OSError) as exc:
                await producer.stop()
                log.warning("producer cannot reach broker (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def send(self, topic: Topic, key: str, record: dict[str, Any]) -> tuple[int, int]:
        """Encode and send; waits for the broker's acknowledgement. Returns (partition, offset).

        Inside a consumer loop's batch it only enqueues the record (returns (-1, -1)): the loop waits
        for every acknowledgement of the batch before committing it."""
        ack = await self.enqueue(topic, key, record)
        pending = _PENDING.get()
        if pending is not None:
            pending.append(ack)
            return -1, -1
        meta = await ack
        return meta.partition, meta.offset

    async def enqueue(self, topic: Topic, key: str, record: dict[str, Any]) -> asyncio.Future[Any]:
        """Encode and hand to the producer; returns the broker's acknowledgement to await. Records
        enqueued one after another go in the same produce request, in order (per partition, also
        across retries: the producer is idempotent by default)."""
        if self._producer is None:
            raise RuntimeError("producer not started")
        value = codec.encode(topic.schema, record)
        producer = _TRANSACTION.get() or self._producer
        fut: asyncio.Future[Any] = await producer.send(
            topic.name, value=value, key=key.encode(), headers=[(codec.SCHEMA_HEADER, topic.schema.encode())])
        return fut

    async def send_raw(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        if self._producer is None:
            raise RuntimeError("producer not started")
        await (_TRANSACTION.get() or self._producer).send_and_wait(topic, value=value, key=key)


async def dead_letter(producer: Producer, rec: ConsumerRecord, error: str, consumer: str) -> None:
    log.error("dead-lettering %s[%d]@%d: %s", rec.topic, rec.partition, rec.offset, error)
    await producer.send(DEAD_LETTER, rec.topic, {
        "source_topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
        "key": rec.key, "value": rec.value, "error": error[:2000], "consumer": consumer, "ts_ms": now_ms(),
    })


def transient(exc: BaseException) -> bool:
    """A failure of the infrastructure, not of the record: retried, never dead-lettered. The broker's
    connection errors, and what livehost.db says is PostgreSQL being away (one list for every service:
    it includes the errors a crashing server leaves on pooled connections)."""
    return isinstance(exc, KafkaConnectionError) or transient_db_error(exc)


Handler = Callable[[Topic, dict[str, Any], ConsumerRecord], Awaitable[None]]

POISON_AFTER = 3  # failed transactions before a batch is narrowed, and again before a record is dead-lettered

# The transactional producer of the batch the current task is handling, if any: Producer.send routes
# through it, so handlers need not know whether their step is transactional.
_TRANSACTION: contextvars.ContextVar[AIOKafkaProducer | None] = contextvars.ContextVar(
    "livehost_kafka_transaction", default=None)
# The delivery futures of the batch the current task is handling, if any: Producer.send then enqueues
# without waiting, and the consumer loop awaits them all before it commits the batch's offsets (or its
# transaction), so a batch costs one round of acknowledgements instead of one per record.
_PENDING: contextvars.ContextVar[list[asyncio.Future[Any]] | None] = contextvars.ContextVar(
    "livehost_kafka_pending", default=None)


def transactional_id(settings: Settings, group_id: str) -> str:
    """Stable per replica when the supervisor names it (a restarted replica then fences its dead
    predecessor and aborts its open transaction at once); otherwise unique per process, and an open
    transaction of a dead process is aborted by the broker after ``kafka_transaction_timeout_ms``."""
    replica = settings.replica_id or f"{socket.gethostname()}-{os.getpid()}"
    return f"{group_id}-{replica}"


def group_instance_id(settings: Settings, group_id: str) -> str | None:
    """The consumer's static group membership id (KIP-345), when the supervisor names the replica.

    A static member that restarts within its session rejoins as itself: the coordinator hands it its
    partitions without waiting for the dead process's session to expire (measured on a hooks SIGKILL
    with supervisor restart: the new worker's assignment came 3.5 s after it joined, the session's
    remainder). The flip side: a static member does not leave the group when it stops, so a replica
    scaled away keeps its partitions until its session times out. Tansu does not implement it."""
    if not settings.kafka_static_membership or not settings.replica_id or settings.kafka_flavour == "tansu":
        return None
    return f"{group_id}-{settings.replica_id}"


class _LeaveGroupResponseV3(Response):
    API_KEY = 13
    API_VERSION = 3
    SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16),
                    ("members", Array(("member_id", String("utf-8")), ("group_instance_id", String("utf-8")),
                                      ("error_code", Int16))))


class _LeaveGroupRequestV3(RequestStruct):
    API_KEY = 13
    API_VERSION = 3
    RESPONSE_TYPE = _LeaveGroupResponseV3
    SCHEMA = Schema(("group_id", String("utf-8")),
                    ("members", Array(("member_id", String("utf-8")), ("group_instance_id", String("utf-8")))))


class _RemoveStaticMembers(Request[_LeaveGroupRequestV3]):
    """KIP-345's admin removal of static members: LeaveGroup v3 naming members by group instance id
    (the member id unknown, ""); aiokafka only sends LeaveGroup v0/v1, for a member leaving itself."""

    API_KEY = 13

    def __init__(self, group_id: str, instance_ids: list[str]):
        self._group_id = group_id
        self._instance_ids = instance_ids

    def build(self, request_struct_class: type[_LeaveGroupRequestV3]) -> _LeaveGroupRequestV3:
        return request_struct_class(self._group_id, [("", iid) for iid in self._instance_ids])


async def remove_static_members(settings: Settings, group_id: str, instance_ids: list[str],
                                timeout_s: float = 5.0) -> dict[str, str]:
    """Remove static members from a consumer group now, so the group rebalances at once and the live
    members take their partitions, instead of waiting for the dead member's session to run out.

    What the supervisor does for a replica that crashed while a peer replica runs (a static member
    never leaves on its own: SIGKILL or not, its partitions stay with it for its whole session). The
    replacement process then joins as a new member, and the group rebalances once more. Returns per
    instance id "removed" or the broker's error (``UnknownMemberIdError``: it was not a member)."""
    client = AIOKafkaClient(**client_options(settings), request_timeout_ms=int(timeout_s * 1000))
    try:
        async with asyncio.timeout(timeout_s):
            await client.bootstrap()
            node = await client.coordinator_lookup(CoordinationType.GROUP, group_id)
            resp = await client.send(node, _RemoveStaticMembers(group_id, instance_ids))
    finally:
        await client.close()
    if resp.error_code:
        raise for_code(resp.error_code)(f"cannot remove members of {group_id}")
    return {iid: "removed" if not code else for_code(code).__name__ for _member, iid, code in resp.members}


@dataclass
class ConsumerLoop:
    """Consume topics in a consumer group, decode Avro, call the handler; commit what was handled (every
    ``kafka_commit_interval_ms``, or in the transaction of each batch).

    A record that fails decoding, or whose handler raises, goes to the dead-letter topic with the
    error and its source offset; the loop keeps going.
    """

    settings: Settings
    group_id: str
    topics: list[Topic]
    handler: Handler
    producer: Producer
    auto_offset_reset: str = "earliest"
    transactional: bool = False  # the step's choice; settings.kafka_transactions can turn it off
    # Bytes a fetch waits for (at most the shared fetch wait): 1 answers as soon as a record is there; a
    # reader that may lag a little fetches in batches, and the broker's cost is per request.
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int | None = None  # None: the shared kafka_fetch_max_wait_ms

    def __post_init__(self) -> None:
        self._stop = asyncio.Event()
        self.ready = asyncio.Event()
        self._txn_failures: dict[tuple[str, int, int], int] = {}
        self._committed_at = time.monotonic()  # last at-least-once commit (kafka_commit_interval_ms)

    def stop(self) -> None:
        self._stop.set()

    @property
    def in_transactions(self) -> bool:
        return self.transactional and self.settings.kafka_transactions and self.settings.kafka_flavour != "tansu"

    async def _start_client(self, factory: Callable[[], Any], what: str) -> Any:
        for delay in backoff_delays(self.settings.connect_backoff_initial_s, self.settings.connect_backoff_max_s):
            client = factory()
            try:
                await client.start()
                return client
            except (KafkaConnectionError, OSError) as exc:
                await client.stop()
                log.warning("%s %s cannot reach broker (%s); retrying in %.1fs", what, self.group_id, exc, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # backoff_delays is endless

    async def run(self) -> None:
        consumer: AIOKafkaConsumer = await self._start_client(lambda: AIOKafkaConsumer(
            *[t.name for t in self.topics],
            **{**consumer_options(self.settings),
               **({"fetch_max_wait_ms": self.fetch_max_wait_ms} if self.fetch_max_wait_ms is not None else {})},
            fetch_min_bytes=self.fetch_min_bytes,
            group_id=self.group_id,
            group_instance_id=group_instance_id(self.settings, self.group_id),
            client_id=f"{self.settings.kafka_client_id}-{self.group_id}",
            enable_auto_commit=False,
            auto_offset_reset=self.auto_offset_reset,
            session_timeout_ms=self.settings.kafka_session_timeout_ms,
            heartbeat_interval_ms=self.settings.kafka_heartbeat_interval_ms,
        ), "consumer")
        txn: AIOKafkaProducer | None = None
        if self.in_transactions:
            txn = await self._start_client(lambda: AIOKafkaProducer(
                **client_options(self.settings), **producer_options(self.settings),
                client_id=f"{self.settings.kafka_client_id}-{self.group_id}-txn",
                transactional_id=transactional_id(self.settings, self.group_id),
                transaction_timeout_ms=self.settings.kafka_transaction_timeout_ms, linger_ms=1,
            ), "transactional producer")
        self.ready.set()
        # At-least-once: offsets of fully handled batches only (never the consumer's position, which runs
        # ahead of a batch being handled), committed every kafka_commit_interval_ms and when stopping.
        handled: dict[TopicPartition, int] = {}
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=200)
                if not batches:
                    if handled:
                        await self._commit_handled(consumer, handled)
                    continue
                for tp, records in batches.items():  # saturation signal: records behind the partition end
                    high = consumer.highwater(tp)
                    if high is not None:
                        metrics.CONSUMER_LAG.labels(self.group_id, tp.topic, str(tp.partition)).set(
                            max(0, high - records[-1].offset - 1))
                if txn is None:
                    try:
                        await self._handle_batch(batches)
                    except KafkaError as exc:  # a send of the batch failed: handle the batch again
                        if self._stop.is_set():
                            raise
                        log.warning("sends of %s failed (%s); re-reading the batch", self.group_id, exc)
                        for tp, records in batches.items():
                            consumer.seek(tp, records[0].offset)
                        await asyncio.sleep(self.settings.connect_backoff_initial_s)
                        continue
                    for tp, records in batches.items():
                        handled[tp] = records[-1].offset + 1
                    if self._commit_due():
                        await self._commit_handled(consumer, handled)
                else:
                    await self._handle_in_transaction(consumer, txn, batches)
        finally:
            if handled:
                try:
                    await self._commit_handled(consumer, handled)
                except Exception as exc:  # noqa: BLE001 - stopping: the records are redelivered
                    log.warning("final commit of %s failed: %s", self.group_id, exc)
            if txn is not None:
                await txn.stop()
            await consumer.stop()

    def _commit_due(self) -> bool:
        return time.monotonic() - self._committed_at >= self.settings.kafka_commit_interval_ms / 1000

    async def _commit_handled(self, consumer: AIOKafkaConsumer, handled: dict[TopicPartition, int]) -> None:
        """Commit the handled offsets (and forget them). A failure is not a reason to stop the service."""
        self._committed_at = time.monotonic()
        offsets = {tp: off for tp, off in handled.items() if tp in consumer.assignment()}
        handled.clear()
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:
            # The group rebalanced (e.g. after a broker restart) and these partitions may be another
            # member's now: their records are redelivered to whoever owns them, and every handler is
            # idempotent.
            if self._stop.is_set():
                raise
            log.warning("commit of %s failed (%s: %s); the records will be redelivered", self.group_id,
                        type(exc).__name__, exc)
            metrics.RECORDS.labels(self.group_id, "*", "commit_failed").inc()

    async def _handle_in_transaction(self, consumer: AIOKafkaConsumer, txn: AIOKafkaProducer,
                                     batches: dict[Any, list[ConsumerRecord]]) -> None:
        """One batch, one transaction: its output records and its input offsets commit together.

        A failed transaction (broker restart, fenced, timed out, a record whose output the broker
        refuses) is aborted and re-read. A batch that keeps failing is narrowed to its first record;
        a record that fails alone ``POISON_AFTER`` more times is dead-lettered, so nothing loops forever.
        """
        first_tp, first_records = next(iter(batches.items()))
        first = first_records[0]
        key = (first.topic, first.partition, first.offset)
        failures = self._txn_failures.get(key, 0)
        poison = failures >= 2 * POISON_AFTER
        if failures >= POISON_AFTER:  # narrow to the first record; re-read the rest later
            for tp, records in batches.items():
                consumer.seek(tp, records[0].offset)
            batches = {first_tp: [first]}
        started = time.perf_counter()
        handled = started
        try:
            async with txn.transaction():
                token = _TRANSACTION.set(txn)
                try:
                    if poison:
                        metrics.RECORDS.labels(self.group_id, first.topic, "dead_letter").inc()
                        await dead_letter(self.producer, first, f"transaction failed {failures} times", self.group_id)
                    else:
                        await self._handle_batch(batches)
                finally:
                    _TRANSACTION.reset(token)
                # The offsets go after the batch's records on purpose. Sent first (to overlap the handlers'
                # waits), AddOffsetsToTxn becomes the transaction's first request and can meet the broker's
                # CONCURRENT_TRANSACTIONS while the previous commit's markers are written; aiokafka retries
                # that after a full retry_backoff_ms (100 ms) for AddOffsetsToTxn, after 20 ms for
                # AddPartitionsToTxn. Tried on 2026-12-02: no gain measured (bench_throughput, 25/s with
                # transactions: 20.8 replies/s with it, 22.6 without, within the run-to-run noise).
                handled = time.perf_counter()
                offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                await txn.send_offsets_to_transaction(offsets, self.group_id)
        except Exception as exc:
            if not (isinstance(exc, KafkaError) or transient(exc)):
                raise
            if self._stop.is_set():
                raise
            self._txn_failures[key] = failures + 1
            while len(self._txn_failures) > 1000:  # bounded: forget the oldest
                self._txn_failures.pop(next(iter(self._txn_failures)))
            log.warning("transaction of %s aborted (%s: %s); re-reading from %s[%d]@%d", self.group_id,
                        type(exc).__name__, exc, *key)
            metrics.RECORDS.labels(self.group_id, first.topic, "txn_abort").inc()
            for tp, records in batches.items():
                consumer.seek(tp, records[0].offset)
            await asyncio.sleep(self.settings.connect_backoff_initial_s)
            return
        committed = time.perf_counter()
        metrics.TXN_SECONDS.labels(self.group_id, "handle").observe(handled - started)
        metrics.TXN_SECONDS.labels(self.group_id, "commit").observe(committed - handled)
        metrics.TXN_RECORDS.labels(self.group_id).observe(sum(len(r) for r in batches.values()))
        self._txn_failures.pop(key, None)
        if failures >= POISON_AFTER:  # the narrowed batch went through: continue after its record
            consumer.seek(first_tp, first.offset + 1)

    async def _handle_batch(self, batches: dict[Any, list[ConsumerRecord]]) -> None:
        """Handle a batch: the records of one key (a room) in order, different keys concurrently; the
        output records are sent without waiting, and all their acknowledgements awaited at the end."""
        by_key: dict[Any, list[ConsumerRecord]] = {}
        for records in batches.values():
            for rec in records:
                by_key.setdefault((rec.topic, rec.partition, rec.key), []).append(rec)

        async def in_order(records: list[ConsumerRecord]) -> None:
            for rec in records:
                await self._handle(rec)

        pending: list[asyncio.Future[Any]] = []
        token = _PENDING.set(pending)
        try:
            # every key runs to its end before a failure is raised (a transaction is then aborted whole)
            failures = [r for r in await asyncio.gather(*(in_order(records) for records in by_key.values()),
                                                        return_exceptions=True) if isinstance(r, BaseException)]
        finally:
            _PENDING.reset(token)
        sent = await asyncio.gather(*pending, return_exceptions=True)
        failures += [r for r in sent if isinstance(r, BaseException)]
        if failures:
            raise failures[0]

    async def _handle(self, rec: ConsumerRecord) -> None:
        topic = by_name(rec.topic)
        try:
            record = codec.decode(topic.schema, rec.value)
        except codec.DecodeError as exc:
            metrics.RECORDS.labels(self.group_id, rec.topic, "dead_letter").inc()
            await dead_letter(self.producer, rec, f"decode: {exc}", self.group_id)
            return
        delays = backoff_delays(self.settings.connect_backoff_initial_s, self.settings.connect_backoff_max_s)
        while True:
            started = time.perf_counter()
            try:
                await self.handler(topic, record, rec)
                metrics.HANDLE_SECONDS.labels(self.group_id, rec.topic).observe(time.perf_counter() - started)
                metrics.RECORDS.labels(self.group_id, rec.topic, "ok").inc()
                return
            except Exception as exc:
                if transient(exc):
                    # The database or broker is restarting: wait it out and retry this record (its offset
                    # is not committed meanwhile), rather than dead-lettering an accepted request.
                    if self._stop.is_set():
                        raise
                    metrics.RECORDS.labels(self.group_id, rec.topic, "retry").inc()
                    delay = next(delays)
                    log.warning("transient failure on %s[%d]@%d (%s: %s); retrying in %.1fs", rec.topic,
                                rec.partition, rec.offset, type(exc).__name__, exc, delay)
                    await asyncio.sleep(delay)
                    continue
                # a poison record must not stop the room
                if isinstance(exc, KafkaError) and _TRANSACTION.get() is not None:
                    raise  # the batch's transaction is broken: abort it and re-read (_handle_in_transaction)
                log.exception("handler failed on %s[%d]@%d", rec.topic, rec.partition, rec.offset)
                metrics.RECORDS.labels(self.group_id, rec.topic, "dead_letter").inc()
                await dead_letter(self.producer, rec, f"handler: {type(exc).__name__}: {exc}", self.group_id)
                return
