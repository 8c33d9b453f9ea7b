"""Outcome events on Kafka (topic ``livehost.topics.OUTCOMES``): a handler that stores them, and a consumer loop."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from livehost.experiments.store import ExperimentStore
from livehost.topics import OUTCOMES, Topic

log = logging.getLogger(__name__)



class OutcomeSink:
    """Consumer handler: store each OutcomeEvent once (the event id makes redelivery harmless)."""

    def __init__(self, store: ExperimentStore):
        self.store = store
        self.stored = 0
        self.duplicates = 0

    async def __call__(self, topic: Topic, record: dict[str, Any], rec: Any = None) -> None:
        if await self.store.record_outcome(record):
            self.stored += 1
        else:
            self.duplicates += 1


async def publish_outcomes(events: Sequence[dict[str, Any]], *, settings: Any = None) -> int:
    """Publish OutcomeEvent records (keyed by user id) — what the commerce side does; the simulator
    uses it to feed experiments."""
    from livehost.config import load_settings
    from livehost.kafka import Producer, ensure_topics, wait_for_broker

    settings = settings or load_settings()
    await wait_for_broker(settings, attempts=10)
    await ensure_topics(settings, [OUTCOMES])
    producer = Producer(settings)
    await producer.start()
    try:
        for event in events:
            await producer.send(OUTCOMES, str(event["user_id"]), event)
    finally:
        await producer.stop()
    return len(events)


async def run_consumer(store: ExperimentStore, *, settings: Any = None, group_id: str = "experiments-outcomes"
                       ) -> None:
    """Consume the outcome topic into the store until cancelled."""
    from livehost.config import load_settings
    from livehost.kafka import ConsumerLoop, Producer, ensure_topics

    settings = settings or load_settings()
    await ensure_topics(settings, [OUTCOMES])
    producer = Producer(settings)
    await producer.start()
    sink = OutcomeSink(store)
    loop = ConsumerLoop(settings, group_id, [OUTCOMES], sink, producer)
    try:
        await loop.run()
    finally:
        await producer.stop()
        log.info("outcome consumer stopped: %d stored, %d duplicates", sink.stored, sink.duplicates)
