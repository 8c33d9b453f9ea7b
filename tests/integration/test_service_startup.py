"""A service whose dependencies are down waits with backoff, reports NOT_SERVING, and never crash-loops;
it becomes SERVING once they come up."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from livehost.config import REPO_ROOT
from livehost.grpcutil import health_status, make_channel
from livehost.stack import kafka, postgres, triton
from livehost.stack.process import free_port, pid_alive, run_async, start_detached, stop_pid

pytestmark = pytest.mark.integration


def health(target: str, service: str) -> str:
    async def check() -> str:
        async with make_channel(target) as channel:
            return await health_status(channel, service)
    try:
        return run_async(check)
    except Exception as exc:  # not listening yet
        return f"unreachable: {type(exc).__name__}"


def wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def start_service(name: str, env: dict[str, str], log: Path) -> tuple[int, str]:
    port = free_port()
    # The brokers these tests start are plaintext (what is tested is waiting, not authentication).
    full_env = {**os.environ, "LIVEHOST_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT", **env,
                f"LIVEHOST_{name.upper()}_GRPC_PORT": str(port),
                "LIVEHOST_CONNECT_BACKOFF_MAX_S": "0.5", "PYTHONPATH": str(REPO_ROOT)}
    proc = start_detached([sys.executable, "-m", f"services.{name}"], log, env=full_env, cwd=REPO_ROOT)
    return proc.pid, f"127.0.0.1:{port}"


def test_policy_waits_for_broker_and_triton(tmp_path: Path) -> None:
    kafka_port, triton_port = free_port(), free_port()
    env = {"LIVEHOST_KAFKA_BOOTSTRAP": f"127.0.0.1:{kafka_port}", "LIVEHOST_TRITON_URL": f"127.0.0.1:{triton_port}",
           "LIVEHOST_STATE_DIR": str(tmp_path / "state")}
    pid, target = start_service("policy", env, tmp_path / "policy.log")
    service = "livehost.policy.v1.PolicyService"
    broker = tri = None
    try:
        assert wait(lambda: health(target, service) == "NOT_SERVING", 20), health(target, service)
        time.sleep(2)
        assert pid_alive(pid), "the service exited instead of waiting for its dependencies"
        assert health(target, service) == "NOT_SERVING"
        broker = kafka.start(tmp_path / "kafka", port=kafka_port)
        time.sleep(2)
        assert health(target, service) == "NOT_SERVING", "serving without Triton"
        tri = triton.start(tmp_path / "triton", REPO_ROOT / "infra" / "triton" / "models", grpc_port=triton_port)
        assert wait(lambda: health(target, service) == "SERVING", 60), (tmp_path / "policy.log").read_text()[-3000:]
        assert pid_alive(pid)
        # the configured event loop (Settings.event_loop, uvloop by default) is the one that serves
        assert "on uvloop.Loop" in (tmp_path / "policy.log").read_text()
    finally:
        stop_pid(pid)
        if tri:
            triton.stop(tri)
        if broker:
            kafka.stop(broker)


def test_tools_waits_for_postgres(tmp_path: Path) -> None:
    pg_port = free_port()
    broker = kafka.start(tmp_path / "kafka")
    env = {"LIVEHOST_KAFKA_BOOTSTRAP": kafka.bootstrap(broker),
           # the embedded PostgreSQL authenticates with a password (made now, used when it starts)
           "LIVEHOST_POSTGRES_DSN": f"postgresql://livehost:{postgres.password(tmp_path / 'pg', 'livehost')}"
                                    f"@127.0.0.1:{pg_port}/livehost",
           "LIVEHOST_STATE_DIR": str(tmp_path / "state")}
    pid, target = start_service("tools", env, tmp_path / "tools.log")
    service = "livehost.tools.v1.ToolExecutionService"
    pg = None
    try:
        assert wait(lambda: health(target, service) == "NOT_SERVING", 20), health(target, service)
        time.sleep(2)
        assert pid_alive(pid) and health(target, service) == "NOT_SERVING"
        pg = postgres.start(tmp_path / "pg", port=pg_port)
        assert wait(lambda: health(target, service) == "SERVING", 60), (tmp_path / "tools.log").read_text()[-3000:]
    finally:
        stop_pid(pid)
        if pg:
            postgres.stop(pg)
        kafka.stop(broker)
