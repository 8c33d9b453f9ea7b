"""The throughput benchmark's count of record batches, read from a real broker's log segment files:
records sent together make one batch, records each waited for make one batch apiece."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from benchmarks.bench_throughput import batches_since, log_sizes
from livehost.stack import kafka
from livehost.stack.process import Running
from livehost.stack.testing import kafka_client

pytestmark = pytest.mark.integration


async def test_batches_and_records_per_topic_come_from_the_log(kafka_broker: Running) -> None:
    bootstrap = kafka.bootstrap(kafka_broker)
    log_dir = Path(kafka_broker.workdir) / "data"
    topic = f"bench-batches-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(**kafka_client(bootstrap))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()
    before = log_sizes(log_dir)
    producer = AIOKafkaProducer(**kafka_client(bootstrap), linger_ms=50, acks="all")
    await producer.start()
    try:
        acks = [await producer.send(topic, value=f"together {i}".encode()) for i in range(10)]
        await asyncio.gather(*acks)  # one batch
        for i in range(3):  # three batches
            await producer.send_and_wait(topic, value=f"alone {i}".encode())
    finally:
        await producer.stop()
    assert batches_since(before, log_dir)[topic] == (4, 13)
    later = log_sizes(log_dir)
    assert topic not in batches_since(later, log_dir)  # nothing since
