"""A consumer loop that runs records of different keys (rooms) concurrently, at-least-once.

The shared :class:`~livehost.kafka.ConsumerLoop` handles records one after the other, so one room's
long reply (seconds of synthesis) would delay every other room on the partition. Here:

* ``admit(topic, record, rec)`` runs for every record as it arrives, in fetch order (cheap work that
  must not wait behind a room's queue: cancellations, duplicate checks, preemption). It returns
  whether the record needs ``handler``;
* ``handler`` runs per key (the record key: the room id) in offset order, one record at a time per
  key, different keys concurrently;
* offsets are committed only up to the first record of each partition that is not finished, so a
  reply is never acknowledged before its segments were published (at-least-once: after a crash,
  unfinished and later records are delivered again), every ``kafka_commit_interval_ms`` and when
  partitions are revoked or the loop stops;
* a handler failure dead-letters the record, which then counts as finished;
* at most ``max_in_flight`` records are held; fetching waits while the limit is reached.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError

from livehost import codec
from livehost.kafka import ConsumerLoop, consumer_options, dead_letter, group_instance_id
from livehost.retry import backoff_delays
from livehost.topics import Topic, by_name

log = logging.getLogger(__name__)

Admit = Callable[[Topic, dict[str, Any], ConsumerRecord], Awaitable[bool]]


class OffsetTracker:
    """Per partition: offsets in flight and done; what may be committed (first unfinished offset)."""

    def __init__(self) -> None:
        self._pending: dict[TopicPartition, dict[int, bool]] = {}
        self._committed: dict[TopicPartition, int] = {}

    def add(self, tp: TopicPartition, offset: int) -> None:
        self._pending.setdefault(tp, {})[offset] = False

    def done(self, tp: TopicPartition, offset: int) -> None:
        offsets = self._pending.get(tp)
        if offsets is not None and offset in offsets:
            offsets[offset] = True

    @property
    def in_flight(self) -> int:
        return sum(1 for offsets in self._pending.values() for finished in offsets.values() if not finished)

    def committable(self) -> dict[TopicPartition, int]:
        """Offsets to commit now (next offset to read), only for partitions that moved."""
        out: dict[TopicPartition, int] = {}
        for tp, offsets in self._pending.items():
            last = None
            for offset in list(offsets):  # insertion order = offset order within a partition
                if not offsets[offset]:
                    break
                del offsets[offset]
                last = offset
            if last is not None and self._committed.get(tp, -1) < last + 1:
                out[tp] = last + 1
                self._committed[tp] = last + 1
        return out

    def forget(self, tps: Any) -> None:
        for tp in tps:
            self._pending.pop(tp, None)
            self._committed.pop(tp, None)


@dataclass
class KeyedConsumerLoop(ConsumerLoop):
    """:class:`ConsumerLoop` with per-key concurrency and ordered commits (see the module doc)."""

    admit: Admit | None = None
    max_in_flight: int = 1000
    drain_timeout_s: float = 3.0
    _tracker: OffsetTracker = field(default_factory=OffsetTracker, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._queues: dict[str, deque[tuple[TopicPartition, ConsumerRecord, Topic, dict[str, Any]]]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._progress = asyncio.Event()

    async def _start(self) -> AIOKafkaConsumer:
        tracker = self._tracker

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                offsets = tracker.committable()
                if offsets:
                    try:
                        await consumer.commit({tp: off for tp, off in offsets.items() if tp in revoked})
                    except KafkaError as exc:
                        log.warning("commit on revoke failed: %s", exc)
                tracker.forget(revoked)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                return None

        for delay in backoff_delays(self.settings.connect_backoff_initial_s, self.settings.connect_backoff_max_s):
            consumer = AIOKafkaConsumer(
                **consumer_options(self.settings),
                group_id=self.group_id,
                group_instance_id=group_instance_id(self.settings, self.group_id),
                client_id=f"{self.settings.kafka_client_id}-{self.group_id}",
                enable_auto_commit=False,
                auto_offset_reset=self.auto_offset_reset,
                session_timeout_ms=self.settings.kafka_session_timeout_ms,
                heartbeat_interval_ms=self.settings.kafka_heartbeat_interval_ms,
            )
            consumer.subscribe([t.name for t in self.topics], listener=Listener())
            try:
                await consumer.start()
                return consumer
            except (KafkaConnectionError, OSError) as exc:
                await consumer.stop()
                log.warning("consumer %s cannot reach broker (%s); retrying in %.1fs", self.group_id, exc, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # backoff_delays is endless

    async def run(self) -> None:
        consumer = await self._start()
        self.ready.set()
        try:
            while not self._stop.is_set():
                if self._tracker.in_flight >= self.max_in_flight:
                    self._progress.clear()
                    try:
                        await asyncio.wait_for(self._progress.wait(), timeout=0.2)
                    except TimeoutError:
                        pass
                else:
                    batches = await consumer.getmany(timeout_ms=200, max_records=200)
                    for tp, records in batches.items():
                        for rec in records:
                            await self._dispatch(tp, rec)
                if self._commit_due():
                    await self._commit(consumer)
        finally:
            workers = list(self._workers.values())
            if workers:
                _, pending = await asyncio.wait(workers, timeout=self.drain_timeout_s)
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=1.0)
            try:
                await self._commit(consumer)
            finally:
                await consumer.stop()

    async def _commit(self, consumer: AIOKafkaConsumer) -> None:
        self._committed_at = time.monotonic()
        offsets = self._tracker.committable()
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:  # e.g. a rebalance in progress: committed later or redelivered
            log.warning("consumer %s commit failed: %s", self.group_id, exc)

    async def _dispatch(self, tp: TopicPartition, rec: ConsumerRecord) -> None:
        self._tracker.add(tp, rec.offset)
        topic = by_name(rec.topic)
        try:
            record = codec.decode(topic.schema, rec.value)
        except codec.DecodeError as exc:
            await dead_letter(self.producer, rec, f"decode: {exc}", self.group_id)
            self._tracker.done(tp, rec.offset)
            return
        try:
            needed = True if self.admit is None else await self.admit(topic, record, rec)
        except Exception as exc:
            log.exception("admit failed on %s[%d]@%d", rec.topic, rec.partition, rec.offset)
            await dead_letter(self.producer, rec, f"admit: {type(exc).__name__}: {exc}", self.group_id)
            needed = False
        if not needed:
            self._tracker.done(tp, rec.offset)
            return
        key = rec.key.decode("utf-8", "replace") if rec.key else ""
        self._queues.setdefault(key, deque()).append((tp, rec, topic, record))
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._drain(key), name=f"{self.group_id}:{key}")

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                tp, rec, topic, record = queue[0]
                try:
                    await self.handler(topic, record, rec)
                except asyncio.CancelledError:
                    raise  # stopping: not finished, so not committed
                except Exception as exc:  # a poison record must not stop the room
                    log.exception("handler failed on %s[%d]@%d", rec.topic, rec.partition, rec.offset)
                    try:
                        await dead_letter(self.producer, rec, f"handler: {type(exc).__name__}: {exc}",
                                          self.group_id)
                    except Exception:
                        log.exception("dead-lettering failed")
                queue.popleft()
                self._tracker.done(tp, rec.offset)
                self._progress.set()
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)

    @property
    def busy_keys(self) -> list[str]:
        return list(self._workers)
