"""`livehost up / ps / down` as an operator runs them: real service processes on the session's broker and
a fresh PostgreSQL database; a SIGKILLed replica is restarted by the supervisor; `down` leaves nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from livehost.stack import kafka
from livehost.stack.process import Running, pid_alive
from services.hooks import settings as hooks_settings

from .conftest import create_database

pytestmark = pytest.mark.timeout(300)


def _cli(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "livehost.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _state(state_dir: Path) -> dict[str, dict[str, object]]:
    doc = json.loads((state_dir / "services" / "state.json").read_text())
    return {row["name"]: row for row in doc["procs"]}


def test_up_ps_restart_down(tmp_path: Path, kafka_bootstrap: str, pg_server: str,
                                  kafka_broker: Running) -> None:
    dsn = asyncio.run(create_database(pg_server))
    state_dir = tmp_path / "state"
    env = {**os.environ, "LIVEHOST_STATE_DIR": str(state_dir), "LIVEHOST_KAFKA_BOOTSTRAP": kafka_bootstrap,
           "LIVEHOST_POSTGRES_DSN": dsn, "LIVEHOST_INGEST_GRPC_PORT": "0", "LIVEHOST_VOICE_ENGINE": "text"}
    assert kafka.bootstrap(kafka_broker) == kafka_bootstrap
    up = _cli(env, "up", "--no-stack", "--replicas", "2", "--services", "ingest,hooks", "--wait", "180")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        procs = _state(state_dir)
        assert set(procs) == {"ingest", "ingest-2", "hooks", "hooks-2"}
        assert all(p["state"] == "ready" for p in procs.values()), procs
        assert procs["ingest"]["grpc_target"] != procs["ingest-2"]["grpc_target"]  # own port per replica
        assert len({p["metrics_url"] for p in procs.values()}) == 4

        victim = procs["hooks-2"]
        os.kill(int(victim["pid"]), signal.SIGKILL)  # type: ignore[arg-type]
        killed_at = time.monotonic()
        while True:
            now = _state(state_dir)["hooks-2"]
            if now["restarts"] == 1 and now["state"] == "ready":
                break
            assert time.monotonic() - killed_at < 120, now
            time.sleep(0.3)
        print(f"\nhooks-2 SIGKILLed: restarted and ready again in {time.monotonic() - killed_at:.1f}s")
        assert now["pid"] != victim["pid"] and pid_alive(int(now["pid"]))  # type: ignore[arg-type]
        assert "exited" in str(now["last_exit"])
        # its peer hooks-1 was running, so the supervisor removed the dead static member from the group
        # at once (its partitions went to hooks-1 then, not when hooks-2 came back)
        log_text = Path(str(now["log_path"])).read_text()
        assert f"removed from its groups for its peers: {hooks_settings.APP_ID}: removed" in log_text, log_text[-2000:]

        ps = _cli({**env, "COLUMNS": "300"}, "ps", timeout=60)
        assert ps.returncode == 0, ps.stderr
        assert "hooks-2" in ps.stdout and "ready" in ps.stdout and str(now["pid"]) in ps.stdout, ps.stdout
        listed = {row["name"]: row for row in json.loads(_cli(env, "ps", "--json", timeout=60).stdout)["procs"]}
        assert listed["hooks-2"]["alive"] and listed["hooks-2"]["restarts"] == 1
        pids = [int(p["pid"]) for p in _state(state_dir).values()]  # type: ignore[call-overload]
        daemon = int((state_dir / "services" / "supervisor.pid").read_text())
    finally:
        down = _cli(env, "down", "--keep-stack", timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not pid_alive(daemon)
    assert not [pid for pid in pids if pid_alive(pid)], "`livehost down` left service processes behind"
    assert all(p["state"] == "stopped" for p in _state(state_dir).values())
