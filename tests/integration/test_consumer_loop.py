"""The shared consumer loop: infrastructure failures are retried (the record is not lost), a record
that fails by itself goes to the dead-letter topic, and the loop keeps going."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from livehost import codec, topics
from livehost.config import Settings
from livehost.kafka import ConsumerLoop, Producer, ensure_topics, now_ms
from livehost.stack.testing import kafka_client
from livehost.topics import DEAD_LETTER, ROOM_EVENTS, Topic

pytestmark = pytest.mark.integration


def event(text: str) -> dict[str, Any]:
    return {"event_id": uuid.uuid4().hex, "room_id": "room-x", "type": "comment", "ts_ms": now_ms(),
            "user_id": "u", "text": text, "link_id": None, "campaign_json": None, "viewer_count": None}


async def dead_letters(settings: Settings, seconds: float) -> list[dict[str, Any]]:
    consumer = AIOKafkaConsumer(DEAD_LETTER.name, **kafka_client(settings.kafka_bootstrap),
                                group_id=uuid.uuid4().hex, auto_offset_reset="earliest", fetch_max_wait_ms=10)
    await consumer.start()
    out = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out += [codec.decode(DEAD_LETTER.schema, r.value) for r in records]
    finally:
        await consumer.stop()
    return out


async def test_transient_failures_are_retried_and_poison_records_dead_lettered(kafka_bootstrap: str) -> None:
    bootstrap = kafka_bootstrap
    if bootstrap:
        settings = Settings(kafka_bootstrap=bootstrap, connect_backoff_initial_s=0.05, connect_backoff_max_s=0.2)
        await ensure_topics(settings)
        producer = Producer(settings)
        await producer.start()
        calls: dict[str, int] = {}
        handled: list[str] = []
        done = asyncio.Event()

        async def handler(topic: Topic, record: dict[str, Any], rec: Any) -> None:
            text = record["text"]
            calls[text] = calls.get(text, 0) + 1
            if text == "flaky" and calls[text] < 3:
                raise ConnectionError("database restarting")
            if text == "poison":
                raise ValueError("cannot handle this record")
            handled.append(text)
            if text == "after":
                done.set()

        loop = ConsumerLoop(settings, "test-loop", [ROOM_EVENTS], handler, producer)
        task = asyncio.create_task(loop.run())
        try:
            for text in ("flaky", "poison", "after"):
                await producer.send(ROOM_EVENTS, "room-x", event(text))
            await asyncio.wait_for(done.wait(), 20)
        finally:
            loop.stop()
            await asyncio.wait_for(task, 10)
        assert handled == ["flaky", "after"]
        assert calls["flaky"] == 3, "a transient failure must be retried, not dropped"
        dead = await dead_letters(settings, 2.0)
        assert [d["error"] for d in dead] == ["handler: ValueError: cannot handle this record"]
        await producer.stop()


def _sample(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_transactional_loop_reports_its_cycle(kafka_bootstrap: str) -> None:
    """The transaction metrics (what bench_throughput's cycle table reads) count every input record
    once and time both phases of each committed transaction."""
    settings = Settings(kafka_bootstrap=kafka_bootstrap)
    await ensure_topics(settings)
    producer = Producer(settings)
    await producer.start()
    group = f"test-txn-{uuid.uuid4().hex[:6]}"
    seen: list[str] = []  # every record the loop handled: the topic may hold other tests' records too
    ours = [event(f"metric {i}") for i in range(5)]
    done = asyncio.Event()

    async def handler(topic: Topic, record: dict[str, Any], rec: Any) -> None:
        seen.append(record["event_id"])
        if {e["event_id"] for e in ours} <= set(seen):
            done.set()

    loop = ConsumerLoop(settings, group, [ROOM_EVENTS], handler, producer, transactional=True)
    task = asyncio.create_task(loop.run())
    try:
        for i, record in enumerate(ours):
            await producer.send(ROOM_EVENTS, f"room-{i}", record)
        await asyncio.wait_for(done.wait(), 30)
        await asyncio.sleep(0.5)  # the last transaction commits after its handler returned
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)
        await producer.stop()
    transactions = _sample("livehost_kafka_transaction_records_count", group=group)
    assert _sample("livehost_kafka_transaction_records_sum", group=group) == len(seen)
    assert 1 <= transactions <= len(seen)
    for phase in ("handle", "commit"):
        assert _sample("livehost_kafka_transaction_seconds_count", group=group, phase=phase) == transactions
        assert _sample("livehost_kafka_transaction_seconds_sum", group=group, phase=phase) > 0


async def test_an_at_least_once_loop_commits_at_its_interval_while_records_flow(kafka_bootstrap: str,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit is a broker write: while records keep coming, an at-least-once loop commits every
    kafka_commit_interval_ms, not after each batch; once the flow pauses it commits what it handled."""
    topic = Topic(f"test.commits.{uuid.uuid4().hex[:6]}", "room_id", 1, ROOM_EVENTS.schema, "commit interval")
    monkeypatch.setattr(topics, "ALL_TOPICS", (*topics.ALL_TOPICS, topic))
    settings = Settings(kafka_bootstrap=kafka_bootstrap, kafka_commit_interval_ms=60_000)
    await ensure_topics(settings, [topic])
    producer = Producer(settings)
    await producer.start()
    group = f"test-commits-{uuid.uuid4().hex[:6]}"
    handled: list[str] = []

    async def handler(_topic: Topic, record: dict[str, Any], _rec: Any) -> None:
        handled.append(record["text"])

    async def committed() -> int | None:
        probe = AIOKafkaConsumer(**kafka_client(kafka_bootstrap), group_id=group, enable_auto_commit=False)
        await probe.start()
        try:
            return await probe.committed(TopicPartition(topic.name, 0))  # type: ignore[no-any-return]
        finally:
            await probe.stop()

    loop = ConsumerLoop(settings, group, [topic], handler, producer)
    task = asyncio.create_task(loop.run())
    try:
        await asyncio.wait_for(loop.ready.wait(), 20)
        n = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:  # a record every 50 ms: the loop never waits 200 ms for one
            await producer.send(topic, "room-x", event(f"c{n}"))
            n += 1
            await asyncio.sleep(0.05)
        during = await committed()
        await asyncio.sleep(1.5)  # the flow paused
        after = await committed()
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)
        await producer.stop()
    assert handled == [f"c{i}" for i in range(n)]
    assert during is None or during < n // 4, (during, n)  # not committed batch by batch
    assert after == n


async def test_a_loop_that_fetches_in_batches_still_hands_on_a_lone_record(kafka_bootstrap: str) -> None:
    """The voice's room-events reader waits for a fetch's worth of bytes: a record that no others follow
    is still handed on, once the shared fetch wait (not the byte count) ends the fetch."""
    settings = Settings(kafka_bootstrap=kafka_bootstrap)
    await ensure_topics(settings)
    producer = Producer(settings)
    await producer.start()
    seen: list[str] = []
    done = asyncio.Event()

    async def handler(topic: Topic, record: dict[str, Any], rec: Any) -> None:
        seen.append(record["text"])
        done.set()

    loop = ConsumerLoop(settings, f"test-batch-{uuid.uuid4().hex[:6]}", [ROOM_EVENTS], handler, producer,
                        fetch_min_bytes=10 * 1024 * 1024)
    task = asyncio.create_task(loop.run())
    try:
        await asyncio.wait_for(loop.ready.wait(), 20)
        await producer.send(ROOM_EVENTS, "room-x", event("alone"))  # the topic is fresh: the only record
        await asyncio.wait_for(done.wait(), 15)
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)
        await producer.stop()
    assert seen == ["alone"]
