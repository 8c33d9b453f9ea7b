"""Context managers that run ONE stack component on free ports in a given directory, for tests.

They raise :class:`~livehost.stack.process.StackError` (with the component's log tail) when the
component cannot start — they never skip — and always stop what they started.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from livehost.stack import kafka, postgres, triton


@contextmanager
def running_kafka(tmpdir: Path | str, timeout: float = 30.0) -> Iterator[str]:
    """Tansu on a free port; yields the bootstrap address ``127.0.0.1:PORT``."""
    rec = kafka.start(Path(tmpdir) / "kafka", timeout=timeout)
    try:
        yield kafka.bootstrap(rec)
    finally:
        kafka.stop(rec)


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
