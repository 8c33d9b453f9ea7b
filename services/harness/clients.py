"""The harness service's dependencies: the registry (PostgreSQL) and the announcement producer."""

from __future__ import annotations

from typing import Any

from livehost.harness.registry import HarnessSettings, Publisher, Registry
from livehost.kafka import Producer
from livehost.topics import HARNESS_EVENTS


def producer(settings: HarnessSettings) -> Producer:
    return Producer(settings)


def publisher(producer: Producer) -> Publisher:
    """Announce activations and rollbacks on the harness-events topic through the service's producer."""
    async def publish(event: dict[str, Any]) -> None:
        await producer.send(HARNESS_EVENTS, event["target"], event)

    return publish


async def registry(settings: HarnessSettings, publish: Publisher) -> Registry:
    return await Registry.connect(settings.postgres_dsn, attempts=None, publisher=publish,
                                  require_evaluation=settings.harness_require_evaluation)
