"""Faust apps configured for LiveHost.

A short session timeout makes the first group join take seconds rather than half a minute.

Only on the optional Tansu broker (``kafka_flavour == "tansu"``) two workarounds apply: Faust
hard-codes ``fetch_max_wait_ms=1500`` for its worker consumer, and Tansu does not answer a waiting
fetch when data arrives (~380 ms per hop), so the worker consumer gets the configured short wait; and
a changelog table recovered one record short on Tansu unless producer batches hold one record.
Apache Kafka needs neither.
"""

from __future__ import annotations

import logging
from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka

from livehost import codec
from livehost.config import Settings, state_dir
from livehost.kafka import now_ms
from livehost.topics import DEAD_LETTER, Topic

log = logging.getLogger(__name__)
_PATCHED_WAIT: dict[str, Any] = {}


def _patch_fetch_wait(fetch_max_wait_ms: int) -> None:
    if _PATCHED_WAIT.get("ms") == fetch_max_wait_ms:
        return
    thread_cls: Any = faust_aiokafka.AIOKafkaConsumerThread
    original = _PATCHED_WAIT.get("original") or thread_cls._create_worker_consumer
    _PATCHED_WAIT["original"] = original

    def create(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = fetch_max_wait_ms
        return consumer

    thread_cls._create_worker_consumer = create
    _PATCHED_WAIT["ms"] = fetch_max_wait_ms


def make_app(app_id: str, settings: Settings, **overrides: Any) -> faust.App:
    tansu = settings.kafka_flavour == "tansu"
    if tansu:
        _patch_fetch_wait(max(settings.kafka_fetch_max_wait_ms, 10))
    datadir = state_dir() / "faust"
    datadir.mkdir(parents=True, exist_ok=True)
    conf: dict[str, Any] = dict(
        broker=f"kafka://{settings.kafka_bootstrap}",
        store="memory://",
        broker_session_timeout=settings.kafka_session_timeout_ms / 1000,
        broker_heartbeat_interval=settings.kafka_heartbeat_interval_ms / 1000,
        consumer_auto_offset_reset="earliest",
        producer_linger_ms=0,
        web_enabled=False,
        datadir=str(datadir),  # not the current directory
        topic_allow_declare=False,  # topics are declared once (livehost.topics) and created at start-up
        topic_disable_leader=True,
        table_cleanup_interval=30.0,
    )
    if tansu:
        conf["producer_max_batch_size"] = 1
    conf.update(overrides)
    return faust.App(app_id, **conf)


def faust_topic(app: faust.App, topic: Topic) -> Any:
    return app.topic(topic.name, key_type=bytes, value_type=bytes, key_serializer="raw",
                     value_serializer="raw", partitions=topic.partitions)


async def send(app_topic: Any, topic: Topic, key: str, record: dict[str, Any]) -> None:
    """Encode and send through Faust's producer, waiting for the broker's acknowledgement."""
    value = codec.encode(topic.schema, record)
    fut = await app_topic.send(key=key.encode(), value=value,
                               headers={codec.SCHEMA_HEADER: topic.schema.encode()})
    await fut


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

    settings = load_settings()

    async def prepare() -> None:
        await wait_for_broker(settings)
        await ensure_topics(settings)

    asyncio.run(prepare())
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.grpc_host)
    app = create_app(settings)
    print(f"STARTING {name}", flush=True)
    faust.Worker(app, loglevel=settings.log_level.lower(), quiet=True).execute_from_commandline()
