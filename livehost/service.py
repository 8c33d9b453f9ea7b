"""The run loop every gRPC+Kafka service shares.

Start-up order: the gRPC server comes up first reporting NOT_SERVING; dependencies (broker, and
whatever the service needs: PostgreSQL, Triton) are connected with backoff, never crash-looping;
topics are ensured; then health flips to SERVING and the consumers run until SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from prometheus_client import start_http_server

from livehost.config import Settings
from livehost.db import connect_pool, migrate
from livehost.grpcutil import AddFn, RunningServer, start_server
from livehost.kafka import ConsumerLoop, Producer, ensure_topics, wait_for_broker
from livehost.security.redact import install_log_redaction

log = logging.getLogger(__name__)


def setup_logging(level: str, service: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format=f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    install_log_redaction()  # no password in any log line (DSNs, client settings)


def use_event_loop(kind: str) -> None:
    """Make every event loop this process creates from now on one of ``kind`` (Settings.event_loop).
    A policy, not ``uvloop.run``: Faust's worker creates its own loop."""
    if kind == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    else:
        asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())


def freeze_startup_heap() -> None:
    """Keep what start-up built (modules, the harness, models, clients) out of the collector's walks.

    It is never garbage, yet every full collection walked it again: 0.13–0.17 s each in the prompt
    step and the voice at 100 requests/s, 2.5–3.6% of their CPU (gc.callbacks, 2026-12-04). Called
    once a service is ready, after the objects of its start-up exist (gc.freeze in the CPython docs)."""
    gc.collect()
    gc.freeze()


class Database:
    """The PostgreSQL pool of a service: opened (and migrated) at start-up, closed at shutdown."""

    def __init__(self, settings: Settings):
        self._settings = settings
        self._pool: asyncpg.Pool | None = None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the database is not connected yet")
        return self._pool

    async def open(self) -> None:
        self._pool = await connect_pool(self._settings.postgres_dsn)
        await migrate(self._pool)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


@dataclass
class ServiceRuntime:
    """What a service's server module assembles: its gRPC servicers, consumers and dependencies."""

    name: str
    settings: Settings
    grpc_port: int
    producer: Producer
    servicers: list[tuple[AddFn, Any]] = field(default_factory=list)
    consumers: list[ConsumerLoop] = field(default_factory=list)
    connect: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    server: RunningServer | None = None

    def database(self) -> Database:
        """A database this service connects to before serving (with backoff) and closes at the end."""
        db = Database(self.settings)
        self.connect.append(db.open)
        self.close.append(db.close)
        return db


async def run(runtime: ServiceRuntime, stop: asyncio.Event | None = None) -> None:
    settings = runtime.settings
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.grpc_host)
    # The service's own certificate serves its mutual-TLS port (its name is its identity).
    runtime.server = await start_server(runtime.servicers, settings.grpc_host, runtime.grpc_port, serving=False,
                                        identity=runtime.name, settings=settings)
    log.info("%s gRPC on %s (not serving until dependencies are up)", runtime.name, runtime.server.target)
    print(f"LISTENING {runtime.name} {runtime.server.target}", flush=True)
    tasks: list[asyncio.Task[None]] = []
    try:
        await wait_for_broker(settings)
        await ensure_topics(settings)
        await runtime.producer.start()
        for connect in runtime.connect:
            await connect()
        tasks = [asyncio.create_task(c.run(), name=f"{runtime.name}:{c.group_id}") for c in runtime.consumers]
        await asyncio.gather(*(c.ready.wait() for c in runtime.consumers))
        await runtime.server.set_serving(True)
        freeze_startup_heap()
        log.info("%s serving", runtime.name)
        kind = type(asyncio.get_running_loop())
        print(f"SERVING {runtime.name} {runtime.server.target} on {kind.__module__}.{kind.__name__}", flush=True)
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopper and task.exception():
                log.error("%s consumer failed: %r", runtime.name, task.exception())
        stopper.cancel()
    finally:
        for consumer in runtime.consumers:
            consumer.stop()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        for closer in runtime.close:
            await closer()
        await runtime.producer.stop()
        await runtime.server.stop(grace=2)
        log.info("%s stopped", runtime.name)


def main(build: Callable[[], ServiceRuntime]) -> None:
    """Entry point shared by every service's ``__main__``."""
    runtime = build()
    setup_logging(runtime.settings.log_level, runtime.name)
    use_event_loop(runtime.settings.event_loop)
    asyncio.run(run(runtime))
