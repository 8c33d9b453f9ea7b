"""Starts every LiveHost service as its own process and waits until each is ready.

gRPC services are ready when their standard health check says SERVING (which they only do once
broker, database and Triton are reachable); the Faust processors when their worker reports ready.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from livehost.config import REPO_ROOT, Settings
from livehost.grpcutil import health_status, make_channel
from livehost.security import pki_dir
from livehost.security.pki import ensure_pki
from livehost.stack.process import StackError, free_port, log_tail, pid_alive, run_async, start_detached, stop_pid

GRPC_SERVICES: dict[str, str] = {
    "ingest": "livehost.ingest.v1.IngestService",
    "prompt": "livehost.prompt.v1.PromptAssemblyService",
    "policy": "livehost.policy.v1.PolicyService",
    "tools": "livehost.tools.v1.ToolExecutionService",
    "voice": "livehost.voice.v1.VoiceService",
    "harness": "livehost.harness.v1.HarnessService",
}
FAUST_SERVICES: tuple[str, ...] = ("hooks", "trajectories")
ALL_SERVICES: tuple[str, ...] = (*GRPC_SERVICES, *FAUST_SERVICES)
FAUST_READY = "Worker]: Ready"


@dataclass
class Proc:
    name: str
    pid: int
    log_path: Path
    grpc_target: str | None = None
    metrics_url: str = ""


@dataclass
class Supervisor:
    settings: Settings
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    services: tuple[str, ...] = ALL_SERVICES
    procs: dict[str, Proc] = field(default_factory=dict)

    def start(self) -> None:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        # Every service serves mutual TLS with its own certificate from the PKI folder (made if missing).
        ensure_pki(self.pki_dir(env), self.settings.grpc_roles.keys())
        for name in self.services:
            svc_env = dict(env)
            target = None
            if name in GRPC_SERVICES:
                port = getattr(self.settings, f"{name}_grpc_port") or free_port()
                svc_env[f"LIVEHOST_{name.upper()}_GRPC_PORT"] = str(port)
                target = f"{self.settings.grpc_host}:{port}"
            metrics_port = free_port()  # every service serves Prometheus metrics on its own port
            svc_env["LIVEHOST_METRICS_PORT"] = str(metrics_port)
            log_path = self.log_dir / f"{name}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text("")
            proc = start_detached([sys.executable, "-m", f"services.{name}"], log_path, env=svc_env, cwd=REPO_ROOT)
            self.procs[name] = Proc(name, proc.pid, log_path, target,
                                    f"http://{self.settings.grpc_host}:{metrics_port}/metrics")

    def pki_dir(self, env: dict[str, str]) -> Path:
        if env.get("LIVEHOST_GRPC_PKI_DIR"):
            return Path(env["LIVEHOST_GRPC_PKI_DIR"])
        if env.get("LIVEHOST_STATE_DIR"):
            return Path(env["LIVEHOST_STATE_DIR"]).resolve() / "pki"
        return pki_dir(self.settings)

    def _ready(self, proc: Proc) -> bool:
        if proc.grpc_target is not None:
            async def check() -> str:
                async with make_channel(proc.grpc_target) as channel:  # type: ignore[arg-type]
                    return await health_status(channel, GRPC_SERVICES[proc.name])
            try:
                return run_async(check) == "SERVING"
            except Exception:
                return False
        return FAUST_READY in proc.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 90.0) -> dict[str, float]:
        """Seconds until each service was ready; raises StackError naming the service that was not."""
        started = time.monotonic()
        waiting = dict(self.procs)
        ready_at: dict[str, float] = {}
        while waiting:
            for name, proc in list(waiting.items()):
                if not pid_alive(proc.pid):
                    raise StackError(name, "the service exited during start-up", proc.log_path)
                if self._ready(proc):
                    ready_at[name] = time.monotonic() - started
                    del waiting[name]
            if waiting and time.monotonic() - started > timeout:
                name, proc = next(iter(waiting.items()))
                raise StackError(name, f"not ready after {timeout:.0f}s", proc.log_path)
            time.sleep(0.2)
        return ready_at

    def stop(self, names: tuple[str, ...] | None = None) -> None:
        for name in names or tuple(self.procs):
            proc = self.procs.pop(name, None)
            if proc is not None:
                stop_pid(proc.pid, timeout=10.0)

    def tail(self, name: str) -> str:
        return log_tail(self.procs[name].log_path)
