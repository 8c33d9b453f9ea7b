"""``livehost up / ps / down``: every service long-lived under the supervisor daemon.

``up`` starts (or reuses) the embedded stack unless told not to, then starts ``python -m livehost.supervisor``
detached: that daemon starts every replica of every service, restarts a crashed one with backoff and
rewrites ``<state_dir>/services/state.json`` four times a second. ``ps`` reads that file (and checks each
pid), ``down`` stops the daemon (which stops its services), kills whatever a dead daemon left behind and
stops the embedded stack.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from livehost.config import REPO_ROOT, load_settings, state_dir
from livehost.stack.process import log_tail, pid_alive, start_detached, stop_pid

Echo = Callable[[str], None]
DAEMON_MATCH = "livehost.supervisor"


class ServicesError(RuntimeError):
    pass


def root() -> Path:
    return state_dir() / "services"


def state_path() -> Path:
    return root() / "state.json"


def daemon_path() -> Path:
    return root() / "supervisor.pid"


def _read_state() -> dict[str, Any] | None:
    try:
        return dict(json.loads(state_path().read_text()))
    except (OSError, ValueError):
        return None


def daemon_pid() -> int | None:
    try:
        pid = int(daemon_path().read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid, DAEMON_MATCH) else None


def up(*, replicas: int = 1, stack: bool = True, wait_s: float = 180.0, echo: Echo = print,
       services: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Start the daemon (the stack first when ``stack``); wait until every replica is ready."""
    if daemon_pid() is not None:
        raise ServicesError(f"the supervisor already runs (pid {daemon_pid()}); `livehost down` first")
    env = dict(os.environ)
    if stack:
        from livehost.stack import StackError
        from livehost.stack import up as stack_up

        try:
            info = stack_up(echo=echo)
        except StackError as exc:
            raise ServicesError(f"the embedded stack did not start\n{exc}") from None
        env.update(info.env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    root().mkdir(parents=True, exist_ok=True)
    state_path().unlink(missing_ok=True)
    argv = [sys.executable, "-m", "livehost.supervisor", "--replicas", str(replicas)]
    if services:
        argv += ["--services", ",".join(services)]
    log = root() / "supervisor.log"
    proc = start_detached(argv, log, env=env, cwd=REPO_ROOT)
    daemon_path().write_text(f"{proc.pid}\n")
    echo(f"supervisor started (pid {proc.pid}, {replicas} replica(s) per service, log {log})")
    deadline = time.monotonic() + wait_s
    while wait_s > 0:
        if not pid_alive(proc.pid):
            raise ServicesError(f"the supervisor exited\n{log_tail(log)}")
        doc = _read_state()
        if doc and doc["procs"] and all(p["state"] == "ready" for p in doc["procs"]):
            echo(f"all {len(doc['procs'])} processes ready")
            return doc
        if time.monotonic() > deadline:
            waiting = [p["name"] for p in (doc or {}).get("procs", []) if p["state"] != "ready"]
            raise ServicesError(f"not ready after {wait_s:.0f}s: {', '.join(waiting) or 'no state yet'} "
                                f"(`livehost ps` shows the logs; `livehost down` stops everything)")
        time.sleep(0.5)
    return _read_state() or {}


def ps() -> dict[str, Any] | None:
    """The daemon's last state with each pid checked now; None when nothing was started."""
    doc = _read_state()
    if doc is None:
        return None
    doc["supervisor_alive"] = pid_alive(int(doc["supervisor_pid"]), DAEMON_MATCH)
    for row in doc["procs"]:
        row["alive"] = pid_alive(int(row["pid"]))
    return doc


def down(*, keep_stack: bool = False, echo: Echo = print) -> list[int]:
    """Stop the daemon and every process it recorded; then the embedded stack unless ``keep_stack``.
    Returns the pids that were still alive afterwards (empty when all is gone)."""
    pid = daemon_pid()
    if pid is not None:
        stop_pid(pid, timeout=30.0, cmd_match=DAEMON_MATCH)
        echo(f"stopped the supervisor (pid {pid})")
    doc = _read_state()
    leftovers: list[int] = []
    for row in (doc or {}).get("procs", []):  # a daemon killed with -9 leaves its services running
        if pid_alive(int(row["pid"]), "services."):
            stop_pid(int(row["pid"]), timeout=10.0, cmd_match="services.")
            echo(f"stopped {row['name']} (pid {row['pid']}), left by the supervisor")
        if pid_alive(int(row["pid"]), "services."):
            leftovers.append(int(row["pid"]))
    daemon_path().unlink(missing_ok=True)
    if not keep_stack:
        from livehost.stack import down as stack_down

        stack_down(load_settings(), echo=echo)
    return leftovers
