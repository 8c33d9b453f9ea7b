"""Hot reload: serve what operators activated in the registry, switch within seconds, no restart.

:class:`RegistryHarnessProvider` implements :class:`~livehost.harness.provider.HarnessProvider`:

- on start it reads every target's active version from the registry (a service that starts later
  gets the current state), then follows the ``harness.events`` topic (each replica reads the whole
  topic without a consumer group, so EVERY replica sees every event) and re-reads the registry on
  each announcement; a poll every few seconds covers a missed announcement;
- ``for_new_request(room_id)`` gives the room's own activation if any, else the experiment arm's
  (when asked), else the global one, else the configured fallback harness;
- ``get(version)`` gives a pinned version: a request keeps the version it started with, even after a
  switch (versions are immutable, so they are cached);
- a version that fails to load (corrupt bundle, hash mismatch, a check of this service) leaves the
  previous one in place; the failure is logged, counted in ``livehost_harness_load_failures_total``
  and recorded in the registry's ``harness_load_status`` for (service, version).

:class:`KafkaHarnessPublisher` is the registry's publisher: it announces activations and rollbacks
(``livehost.HarnessEvent``) after the database commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from prometheus_client import Counter

from livehost import codec
from livehost.config import Settings
from livehost.harness.loader import from_dict
from livehost.harness.model import Harness
from livehost.harness.registry import GLOBAL, Registry, arm_target, room_target
from livehost.kafka import client_options, consumer_options, producer_options
from livehost.retry import backoff_delays
from livehost.topics import HARNESS_EVENTS

log = logging.getLogger(__name__)

LOAD_FAILURES = Counter("livehost_harness_load_failures_total",
                        "Harness versions a service failed to load (it kept the previous one).", ["service"])
RELOADS = Counter("livehost_harness_reloads_total", "Active harness switches applied by a service.", ["service"])


async def ensure_events_topic(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(**client_options(settings), request_timeout_ms=10000)
    await admin.start()
    try:
        if HARNESS_EVENTS.name not in set(await admin.list_topics()):
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(HARNESS_EVENTS.name, HARNESS_EVENTS.partitions, 1,
                                                    topic_configs=HARNESS_EVENTS.configs())])
    finally:
        await admin.close()


class KafkaHarnessPublisher:
    """Announces harness activations and rollbacks on the ``harness.events`` topic."""

    def __init__(self, settings: Settings, *, client_id: str = "livehost-harness"):
        self.settings = settings
        self.client_id = client_id
        self._producer: AIOKafkaProducer | None = None

    async def start(self, timeout_s: float = 10.0) -> None:
        producer = AIOKafkaProducer(**client_options(self.settings), **producer_options(self.settings),
                                    client_id=self.client_id, acks="all",
                                    enable_idempotence=self.settings.kafka_enable_idempotence,
                                    linger_ms=0, request_timeout_ms=int(timeout_s * 1000))
        try:
            await asyncio.wait_for(producer.start(), timeout_s)
        except BaseException:
            await producer.stop()
            raise
        self._producer = producer

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def __call__(self, event: dict[str, Any]) -> None:
        if self._producer is None:
            raise RuntimeError("publisher not started")
        await self._producer.send_and_wait(
            HARNESS_EVENTS.name, value=codec.encode(HARNESS_EVENTS.schema, event), key=event["target"].encode(),
            headers=[(codec.SCHEMA_HEADER, HARNESS_EVENTS.schema.encode())])


class RegistryHarnessProvider:
    """Serves the harnesses activated in the registry and hot-reloads them (see module docstring)."""

    def __init__(self, registry: Registry, *, service: str, settings: Settings | None = None,
                 fallback: Harness | None = None, poll_interval_s: float = 5.0,
                 check: Callable[[Harness], None] | None = None, replica: str | None = None,
                 cache_size: int = 64, close_registry: bool = False):
        self.registry = registry
        self.service = service
        self.settings = settings
        self.fallback = fallback
        self.poll_interval_s = poll_interval_s
        self.check = check  # a service's own check of a harness (raise to refuse loading it)
        self.replica = replica or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self._cache: OrderedDict[str, Harness] = OrderedDict()
        self._cache_size = cache_size
        self._failed: dict[str, str] = {}
        self._active: dict[str, Harness] = {}
        self._lock = asyncio.Lock()
        self._changed = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self._started_ms = 0
        self._close_registry = close_registry
        if fallback is not None:
            self._remember(fallback)

    # -- HarnessProvider ------------------------------------------------------------------------

    async def for_new_request(self, room_id: str, arm: tuple[str, str] | None = None) -> Harness:
        """The harness a request starting now must be pinned to: room, then arm, then global."""
        candidates = [room_target(room_id)] if room_id else []
        if arm is not None:
            candidates.append(arm_target(*arm))
        candidates.append(GLOBAL)
        for target in candidates:
            harness = self._active.get(target)
            if harness is not None:
                return harness
        if self.fallback is not None:
            return self.fallback
        raise LookupError("no harness is active and no fallback is configured")

    async def get(self, version: str) -> Harness:
        """The harness of a pinned version (KeyError when the registry does not know it)."""
        harness = self._cache.get(version)
        if harness is not None:
            self._cache.move_to_end(version)
            return harness
        if self.fallback is not None and self.fallback.version() == version:
            return self.fallback
        harness = await self.registry.harness(version)
        if harness.version() != version:
            raise KeyError(f"harness version {version!r} is stored under a different content hash")
        return self._remember(harness)

    # -- state ----------------------------------------------------------------------------------

    def active_versions(self) -> dict[str, str]:
        """target -> version this replica serves now."""
        return {t: h.version() for t, h in self._active.items()}

    def failed_versions(self) -> dict[str, str]:
        """version -> error, for versions this replica refused to load."""
        return dict(self._failed)

    async def wait_for(self, predicate: Callable[[dict[str, str]], bool], within_s: float) -> bool:
        """Wait until ``predicate(active_versions())`` holds (tests, readiness checks)."""
        return await self.wait_until(lambda: predicate(self.active_versions()), within_s)

    async def wait_until(self, condition: Callable[[], bool], within_s: float) -> bool:
        """Wait until ``condition()`` holds; re-checked whenever this replica applies or refuses a version."""
        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(condition)
        try:
            await asyncio.wait_for(_wait(), within_s)
            return True
        except TimeoutError:
            return False

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _remember(self, harness: Harness) -> Harness:
        self._cache[harness.version()] = harness
        self._cache.move_to_end(harness.version())
        pinned = {h.version() for h in self._active.values()}
        while len(self._cache) > self._cache_size:
            oldest = next((v for v in self._cache if v not in pinned), None)
            if oldest is None:
                break
            del self._cache[oldest]
        return harness

    async def _report(self, version: str, ok: bool, error: str = "") -> None:
        try:
            await self.registry.record_load_status(self.service, version, ok, error, self.replica)
        except Exception as exc:
            log.warning("could not record load status of %s: %s", version, exc)

    async def _load(self, version: str) -> Harness | None:
        """Load a version for activation; None (previous one kept) when it fails."""
        cached = self._cache.get(version)
        if cached is not None:
            return cached
        if version in self._failed:
            return None
        try:
            harness = from_dict(await self.registry.bundle(version))
            if harness.version() != version:
                raise ValueError(f"content hash is {harness.version()}, not {version}")
            if self.check is not None:
                self.check(harness)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._failed[version] = error
            LOAD_FAILURES.labels(self.service).inc()
            log.error("service %s cannot load harness %s, keeping the previous one: %s", self.service, version, error)
            await self._report(version, False, error)
            await self._notify()
            return None
        await self._report(version, True)
        return self._remember(harness)

    async def refresh(self) -> None:
        """Re-read every target's active version from the registry and apply it."""
        async with self._lock:
            wanted = await self.registry.active_all()
            changed = False
            for target, version in wanted.items():
                current = self._active.get(target)
                if current is not None and current.version() == version:
                    continue
                harness = await self._load(version)
                if harness is not None:
                    self._active[target] = harness
                    changed = True
                    RELOADS.labels(self.service).inc()
                    log.info("service %s now serves harness %s on %s", self.service, version, target)
            for target in [t for t in self._active if t not in wanted]:
                del self._active[target]  # a cleared room/arm override: follow global again
                changed = True
            if changed:
                await self._notify()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self._started_ms = int(time.time() * 1000)
        await self.refresh()
        if self.settings is not None:
            self._tasks.append(asyncio.create_task(self._follow_events(), name="harness-events"))
        if self.poll_interval_s > 0:
            self._tasks.append(asyncio.create_task(self._poll(), name="harness-poll"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._close_registry:
            await self.registry.close()

    async def __aenter__(self) -> RegistryHarnessProvider:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval_s)
            try:
                await self.refresh()
            except Exception as exc:
                log.warning("harness poll failed: %s", exc)

    async def _follow_events(self) -> None:
        assert self.settings is not None
        s = self.settings
        for delay in backoff_delays(s.connect_backoff_initial_s, s.connect_backoff_max_s):
            # No consumer group: each replica reads every partition itself (every replica must see
            # every event, and there is no group join to wait for). Reading from the earliest offset
            # and skipping events older than our start avoids Tansu's unreliable "latest" offset.
            # Idle nearly always, so it polls at the idle wait: at the shared 100 ms the followers of
            # the hooks, prompt and tools services made 30 of the broker's ~290 fetches/s at 100/s
            # offered. Apache Kafka answers a waiting fetch when an event arrives, so an activation is
            # seen as soon; on Tansu, which does not, up to that wait later.
            consumer = AIOKafkaConsumer(
                HARNESS_EVENTS.name, **{**consumer_options(s), "fetch_max_wait_ms": s.kafka_idle_fetch_max_wait_ms},
                group_id=None,
                client_id=f"{s.kafka_client_id}-{self.service}-harness", auto_offset_reset="earliest",
                enable_auto_commit=False, metadata_max_age_ms=5000)
            try:
                await ensure_events_topic(s)
                await consumer.start()
                while True:
                    batches = await consumer.getmany(timeout_ms=1000)
                    if any(self._relevant(rec.value) for recs in batches.values() for rec in recs):
                        await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("harness event consumer failed (%s); retrying in %.1fs", exc, delay)
            finally:
                with contextlib.suppress(Exception):
                    await consumer.stop()
            await asyncio.sleep(delay)

    def _relevant(self, value: bytes | None) -> bool:
        try:
            event = codec.decode(HARNESS_EVENTS.schema, value)
        except codec.DecodeError as exc:
            log.warning("ignoring undecodable harness event: %s", exc)
            return False
        return int(event["ts_ms"]) >= self._started_ms - 1000  # older ones: start-up read covered them


async def start_registry_provider(settings: Settings, service: str, *, registry: Registry | None = None,
                                  poll_interval_s: float | None = None,
                                  check: Callable[[Harness], None] | None = None) -> RegistryHarnessProvider:
    """Connect to the registry (unless given), start a provider that follows it, and return it.

    The shipped folder ``settings.harness_path`` is the fallback while nothing was activated; a
    service's own ``check`` can refuse a version (the previous one is kept)."""
    from livehost.harness.loader import load
    from livehost.harness.registry import load_harness_settings

    hs = load_harness_settings()
    owned = registry is None
    if registry is None:
        registry = await Registry.connect(settings.postgres_dsn, attempts=None, max_size=3)
    fallback = load(settings.harness_path) if settings.harness_path else None
    provider = RegistryHarnessProvider(
        registry, service=service, settings=settings, fallback=fallback, check=check, close_registry=owned,
        poll_interval_s=hs.harness_poll_interval_s if poll_interval_s is None else poll_interval_s)
    await provider.start()
    return provider
