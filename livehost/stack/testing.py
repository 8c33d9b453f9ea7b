"""Context managers that run ONE stack component on free ports in a given directory, for tests.

They raise :class:`~livehost.stack.process.StackError` (with the component's log tail) when the
component cannot start — they never skip — and always stop what they started.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from livehost.stack import kafka, postgres, triton
from livehost.stack.process import Running, read_record, run_async


def _pki() -> Path:
    from livehost.security import ensure_local_pki, pki_dir

    ensure_local_pki()
    return pki_dir()


@contextmanager
def running_broker(tmpdir: Path | str, timeout: float = 60.0, broker: str = "kafka",
                   secure: bool = True) -> Iterator[Running]:
    """The embedded broker (Apache Kafka unless ``broker="tansu"``) on free ports; yields its record.

    A test may kill and :func:`~livehost.stack.kafka.restart` it; what is stopped at the end is the
    process recorded last in its work dir."""
    rec = kafka.start(Path(tmpdir) / "kafka", timeout=timeout, broker=broker, pki=_pki() if secure else None)
    try:
        yield rec
    finally:
        kafka.stop(read_record(Path(rec.workdir), kafka.NAME) or rec)


@contextmanager
def running_kafka(tmpdir: Path | str, timeout: float = 60.0, broker: str = "kafka",
                  secure: bool = False) -> Iterator[str]:
    """The embedded broker on free ports; yields the bootstrap address ``127.0.0.1:PORT``. Plaintext
    unless ``secure`` (then use :func:`running_broker` and :func:`livehost.stack.kafka.client_security`
    for the credentials)."""
    with running_broker(tmpdir, timeout, broker, secure=secure) as rec:
        yield kafka.bootstrap(rec)


async def _reset_topics(bootstrap: str, timeout_s: float) -> None:
    import asyncio
    import time

    from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]

    from livehost.config import load_settings
    from livehost.kafka import client_options

    options = {**client_options(load_settings()), "bootstrap_servers": bootstrap}  # security from the env
    admin = AIOKafkaAdminClient(**options, request_timeout_ms=10000)
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if not t.startswith("__")]
        if names:
            await admin.delete_topics(names)
        deadline = time.monotonic() + timeout_s
        while set(names) & set(await admin.list_topics()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics still listed {timeout_s} s after deletion")
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


def reset_topics(bootstrap: str, timeout_s: float = 30.0) -> None:
    """Delete every non-internal topic (with it, the offsets groups committed on it): a test that
    shares the session's broker starts from no topics and creates the ones it declares."""
    run_async(lambda: _reset_topics(bootstrap, timeout_s))


@contextmanager
def running_postgres(tmpdir: Path | str, timeout: float = 60.0) -> Iterator[str]:
    """PostgreSQL on a free port; yields the DSN of role/database ``livehost``."""
    rec = postgres.start(Path(tmpdir) / "postgres", timeout=timeout)
    try:
        yield postgres.dsn(rec)
    finally:
        postgres.stop(rec)


@contextmanager
def running_triton(
    tmpdir: Path | str, model_repo: Path | str, timeout: float = 60.0, exit_timeout_s: int = 5
) -> Iterator[str]:
    """Triton on free ports serving ``model_repo``; yields the gRPC address ``127.0.0.1:PORT``."""
    rec = triton.start(
        Path(tmpdir) / "triton", Path(model_repo), timeout=timeout, exit_timeout_s=exit_timeout_s
    )
    try:
        yield triton.grpc_url(rec)
    finally:
        triton.stop(rec)


def kafka_client(bootstrap: str) -> dict[str, object]:
    """aiokafka keyword arguments for ``bootstrap`` with the Kafka security settings of the environment
    (the test session's broker runs SASL_SSL and tests/conftest.py exports its client settings)."""
    from livehost.config import Settings
    from livehost.kafka import client_options

    return client_options(Settings(kafka_bootstrap=bootstrap))
