"""Starts every LiveHost service as its own process and waits until each is ready; as a long-lived
daemon (``livehost up``) it also restarts crashed processes with backoff and records their state.

gRPC services are ready when their standard health check says SERVING (which they only do once
broker, database and Triton are reachable); the Faust processors when their worker reports ready.

Replicas: ``replicas=N`` starts N processes per service. Every replica gets
``LIVEHOST_REPLICA_ID=<service>-<n>`` (stable across restarts, so a restarted replica fences its dead
predecessor's Kafka transactions at once), its own metrics port and, for gRPC services, its own gRPC port
(replica 1 keeps the configured port, the others take free ones). Replicas of a service share its consumer
group. Replica 1 is keyed by the service name in ``procs`` (``procs["ingest"]``), replica n>1 by
``<service>-<n>``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from livehost.config import REPO_ROOT, Settings
from livehost.grpcutil import health_status, make_channel
from livehost.kafka import group_instance_id, remove_static_members
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


# Restart backoff of the daemon: the first restart after RESTART_BACKOFF_INITIAL_S, doubling per crash in a
# row up to RESTART_BACKOFF_MAX_S; a process that stayed up RESTART_RESET_AFTER_S counts as healthy again.
# The first restart is nearly immediate (the recovery target is 5 s from a crash to the next reply, and a
# Python service needs ~1.5 s to start); only a process that keeps crashing is held back.
RESTART_BACKOFF_INITIAL_S = 0.1
RESTART_BACKOFF_MAX_S = 10.0
RESTART_RESET_AFTER_S = 10.0
PORT_CLASH_RETRIES = 3  # start-up attempts on fresh ports when a port chosen here was taken first


@dataclass
class Proc:
    name: str
    pid: int
    log_path: Path
    grpc_target: str | None = None
    metrics_url: str = ""
    service: str = ""
    replica: int = 1
    env: dict[str, str] = field(default_factory=dict, repr=False)
    state: str = "starting"  # starting | ready | backoff | stopped
    restarts: int = 0
    started_at: float = 0.0
    log_offset: int = 0  # where this incarnation's output starts in the (appended) log
    last_exit: str = ""
    restart_at: float = 0.0
    crashes_in_row: int = 0
    picked_ports: tuple[str, ...] = ()  # env keys of the ports chosen here (not configured): re-picked on a clash
    port_clashes: int = 0

    def row(self) -> dict[str, object]:
        """What ``livehost ps`` shows (JSON-safe)."""
        out = asdict(self)
        out.pop("env")
        out["log_path"] = str(self.log_path)
        return out


def replica_key(service: str, replica: int) -> str:
    return service if replica == 1 else f"{service}-{replica}"


@dataclass
class Supervisor:
    settings: Settings
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    services: tuple[str, ...] = ALL_SERVICES
    procs: dict[str, Proc] = field(default_factory=dict)
    replicas: int = 1

    def start(self) -> None:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        # Every service serves mutual TLS with its own certificate from the PKI folder (made if missing).
        ensure_pki(self.pki_dir(env), self.settings.grpc_roles.keys())
        for name in self.services:
            for replica in range(1, self.replicas + 1):
                key = replica_key(name, replica)
                svc_env = dict(env)
                svc_env["LIVEHOST_REPLICA_ID"] = f"{name}-{replica}"
                picked = ["LIVEHOST_METRICS_PORT"]  # every process serves Prometheus metrics on its own port
                if name in GRPC_SERVICES:
                    configured = getattr(self.settings, f"{name}_grpc_port") if replica == 1 else 0
                    if configured:
                        svc_env[self._grpc_port_key(name)] = str(configured)
                    else:
                        picked.append(self._grpc_port_key(name))
                log_path = self.log_dir / f"{key}.log"
                log_path.parent.mkdir(parents=True, exist_ok=True)
                log_path.write_text("")
                proc = Proc(key, 0, log_path, service=name, replica=replica, env=svc_env,
                            picked_ports=tuple(picked))
                self._pick_ports(proc)
                self._spawn(proc)
                self.procs[key] = proc

    @staticmethod
    def _grpc_port_key(service: str) -> str:
        return f"LIVEHOST_{service.upper()}_GRPC_PORT"

    def _pick_ports(self, proc: Proc) -> None:
        """Choose the process's unconfigured ports afresh and point its probes at them."""
        for env_key in proc.picked_ports:
            proc.env[env_key] = str(free_port())
        host = self.settings.grpc_host
        if proc.service in GRPC_SERVICES:
            proc.grpc_target = f"{host}:{proc.env[self._grpc_port_key(proc.service)]}"
        proc.metrics_url = f"http://{host}:{proc.env['LIVEHOST_METRICS_PORT']}/metrics"

    def _port_clash(self, proc: Proc) -> bool:
        """True when this incarnation exited because a port chosen here was taken before it bound it
        (another program can take a free port between our check and the child's bind)."""
        try:
            with open(proc.log_path, "rb") as fh:
                fh.seek(proc.log_offset)
                return b"Address already in use" in fh.read() and bool(proc.picked_ports)
        except OSError:
            return False

    def _spawn(self, proc: Proc) -> None:
        proc.log_offset = proc.log_path.stat().st_size if proc.log_path.exists() else 0
        popen = start_detached([sys.executable, "-m", f"services.{proc.service}"], proc.log_path,
                               env=proc.env, cwd=REPO_ROOT)
        proc.pid = popen.pid
        proc.state = "starting"
        proc.started_at = time.time()

    def pki_dir(self, env: dict[str, str]) -> Path:
        if env.get("LIVEHOST_GRPC_PKI_DIR"):
            return Path(env["LIVEHOST_GRPC_PKI_DIR"])
        if env.get("LIVEHOST_STATE_DIR"):
            return Path(env["LIVEHOST_STATE_DIR"]).resolve() / "pki"
        return pki_dir(self.settings)

    def _ready(self, proc: Proc) -> bool:
        if proc.grpc_target is not None:
            async def check() -> str:
                # A local subchannel pool: a refused early probe must not hand its reconnect backoff
                # (growing to minutes) to the next probe's channel through gRPC's global pool.
                async with make_channel(proc.grpc_target,  # type: ignore[arg-type]
                                        options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
                    return await health_status(channel, GRPC_SERVICES[proc.service or proc.name])
            try:
                return run_async(check) == "SERVING"
            except Exception:
                return False
        try:
            with open(proc.log_path, "rb") as fh:
                fh.seek(proc.log_offset)
                return FAUST_READY.encode() in fh.read()
        except OSError:
            return False

    def wait_ready(self, timeout: float = 90.0) -> dict[str, float]:
        """Seconds until each service was ready; raises StackError naming the service that was not."""
        started = time.monotonic()
        waiting = dict(self.procs)
        ready_at: dict[str, float] = {}
        while waiting:
            for name, proc in list(waiting.items()):
                if not pid_alive(proc.pid):
                    if self._port_clash(proc) and proc.port_clashes < PORT_CLASH_RETRIES:
                        proc.port_clashes += 1
                        self._pick_ports(proc)
                        self._spawn(proc)
                        continue
                    raise StackError(name, "the service exited during start-up", proc.log_path)
                if proc.state == "ready":
                    ready_at[name] = 0.0
                    del waiting[name]
                    continue
                if self._ready(proc):
                    proc.state = "ready"
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

    def restart(self, key: str, env: dict[str, str]) -> None:
        """Stop one process and start it again with ``env`` on top of its environment (an operator's
        setting change on one replica; the tests switch options this way). Returns when it is ready."""
        old = self.procs[key]
        self.stop((key,))
        proc = replace(old, pid=0, env={**old.env, **env}, state="starting", restarts=0)
        self._spawn(proc)
        self.procs[key] = proc
        self.wait_ready(timeout=120)

    def tail(self, name: str) -> str:
        return log_tail(self.procs[name].log_path)

    # --- the long-lived daemon (`livehost up`) -----------------------------------------------------

    def check_once(self, now: float | None = None) -> list[str]:
        """One supervision step: mark exits, restart due processes with backoff, track readiness.
        Returns the names restarted in this step."""
        now = time.time() if now is None else now
        restarted: list[str] = []
        for proc in self.procs.values():
            if proc.state in ("starting", "ready") and not pid_alive(proc.pid):
                uptime = now - proc.started_at
                proc.crashes_in_row = 1 if uptime >= RESTART_RESET_AFTER_S else proc.crashes_in_row + 1
                delay = min(RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_INITIAL_S * 2 ** (proc.crashes_in_row - 1))
                proc.last_exit = f"pid {proc.pid} exited after {uptime:.1f}s at {time.strftime('%H:%M:%S')}"
                proc.state = "backoff"
                proc.restart_at = now + delay
                with open(proc.log_path, "ab") as log:
                    log.write(f"\n=== supervisor: {proc.last_exit}; restart in {delay:.1f}s\n".encode())
                self._hand_over(proc)
            if proc.state == "backoff" and now >= proc.restart_at:
                if self._port_clash(proc):
                    self._pick_ports(proc)
                self._spawn(proc)
                proc.restarts += 1
                restarted.append(proc.name)
            elif proc.state == "starting" and self._ready(proc):
                proc.state = "ready"
        return restarted

    def _hand_over(self, dead: Proc) -> None:
        """Remove a crashed replica from its consumer groups when a peer replica runs, so the peer takes
        its partitions now rather than when the restarted process rejoins (~2 s of Python start-up on
        these cores) or the dead one's session ends: a static member never leaves on its own. Best
        effort: if the broker cannot be reached the partitions move the slow way, and nothing is lost."""
        peers = [p for p in self.procs.values()
                 if p.service == dead.service and p is not dead and p.state in ("starting", "ready")]
        if not peers:
            return
        replica = dead.env.get("LIVEHOST_REPLICA_ID", "")
        groups = importlib.import_module(f"services.{dead.service}.settings").CONSUMER_GROUPS
        named = self.settings.model_copy(update={"replica_id": replica})
        # no instance id (Tansu, or static membership off): a dynamic member is dropped when its session ends
        instances = {g: i for g in groups if (i := group_instance_id(named, g)) is not None}

        async def remove_all() -> list[str]:
            outcome = []
            for group, instance in instances.items():
                try:
                    removed = await remove_static_members(self.settings, group, [instance], timeout_s=3.0)
                    outcome.append(f"{group}: {removed.get(instance, 'no answer')}")
                except Exception as exc:  # noqa: BLE001 - the session timeout still hands the partitions over
                    outcome.append(f"{group}: not removed ({type(exc).__name__}: {exc})")
            return outcome

        outcome = run_async(remove_all) if instances else []
        if outcome:
            with open(dead.log_path, "ab") as log:
                log.write(f"=== supervisor: removed from its groups for its peers: {'; '.join(outcome)}\n".encode())

    def write_state(self, path: Path) -> None:
        doc = {"supervisor_pid": os.getpid(), "replicas": self.replicas, "updated_at": time.time(),
               "procs": [p.row() for p in self.procs.values()]}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(path)

    def run_forever(self, state_path: Path, interval: float = 0.25) -> None:
        """Start every replica and supervise until SIGTERM/SIGINT; then stop them all."""
        stopping: list[int] = []
        signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
        signal.signal(signal.SIGINT, lambda signum, frame: stopping.append(signum))
        state_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.start()
            while not stopping:
                self.check_once()
                self.write_state(state_path)
                time.sleep(interval)
        finally:
            for proc in self.procs.values():
                stop_pid(proc.pid, timeout=10.0)
                proc.state = "stopped"
            self.write_state(state_path)


def services_dir(settings: Settings) -> Path:
    """Where `livehost up` keeps the daemon's state file and the service logs."""
    del settings
    from livehost.config import state_dir

    return state_dir() / "services"


def main(argv: list[str] | None = None) -> None:
    """``python -m livehost.supervisor --replicas N``: the daemon `livehost up` starts detached."""
    import argparse

    from livehost.config import load_settings

    parser = argparse.ArgumentParser(prog="livehost.supervisor")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--services", default=",".join(ALL_SERVICES))
    args = parser.parse_args(argv)
    settings = load_settings()
    root = services_dir(settings)
    sup = Supervisor(settings, root / "logs", services=tuple(s for s in args.services.split(",") if s),
                     replicas=args.replicas)
    sup.run_forever(root / "state.json")


if __name__ == "__main__":
    main()
