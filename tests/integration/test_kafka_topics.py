"""Topics on Apache Kafka match livehost/topics.py: retention, compaction and partitions are applied at
creation, and `apply` repairs a topic that drifted."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from livehost.config import Settings
from livehost.kafka import apply_topics, ensure_topics
from livehost.stack.testing import kafka_client
from livehost.topics import ALL_TOPICS, HARNESS_EVENTS, REPLIES, by_name

pytestmark = pytest.mark.integration


async def broker_view(bootstrap: str) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    admin = AIOKafkaAdminClient(**kafka_client(bootstrap))
    await admin.start()
    try:
        described = await admin.describe_topics([t.name for t in ALL_TOPICS])
        partitions = {d["topic"]: len(d["partitions"]) for d in described}
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t.name, configs=None) for t in ALL_TOPICS])
        configs = {res[3]: {e[0]: e[1] for e in res[4]} for r in responses for res in r.resources}
        return partitions, configs
    finally:
        await admin.close()


async def test_declared_retention_and_compaction_are_applied_at_creation(kafka_bootstrap: str) -> None:
    settings = Settings(kafka_bootstrap=kafka_bootstrap)
    created = await ensure_topics(settings)
    assert sorted(created) == sorted(t.name for t in ALL_TOPICS)
    partitions, configs = await broker_view(kafka_bootstrap)
    for topic in ALL_TOPICS:
        assert partitions[topic.name] == topic.partitions
        for key, value in topic.configs().items():
            assert configs[topic.name][key] == value, (topic.name, key)
    assert configs[HARNESS_EVENTS.name]["cleanup.policy"] == "compact"
    assert configs["livehost-hooks-rooms-changelog"]["cleanup.policy"] == "compact"


async def test_apply_repairs_drifted_topics(kafka_bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(**kafka_client(kafka_bootstrap))
    await admin.start()
    try:  # as someone might have made it by hand: too few partitions, default retention
        await admin.create_topics([NewTopic(REPLIES.name, 1, 1, topic_configs={"retention.ms": "60000"})])
    finally:
        await admin.close()
    changes = {c.topic: c for c in await apply_topics(Settings(kafka_bootstrap=kafka_bootstrap))}
    assert changes[REPLIES.name].action in ("configs", "partitions")
    assert all(changes[t.name].action == "created" for t in ALL_TOPICS if t.name != REPLIES.name)
    partitions, configs = await broker_view(kafka_bootstrap)
    assert partitions[REPLIES.name] == by_name(REPLIES.name).partitions
    assert configs[REPLIES.name]["retention.ms"] == str(REPLIES.retention_ms)
    # A second apply finds nothing to do.
    again = await apply_topics(Settings(kafka_bootstrap=kafka_bootstrap))
    assert {c.action for c in again} == {"ok"}
