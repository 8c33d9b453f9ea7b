"""Process helpers shared by the embedded-stack components.

Every component runs as a detached process (own session, so it outlives the caller and its children
form one process group), writes stdout/stderr to a log file under its work dir and is recorded in a
JSON file next to a plain pid file. Nothing here holds state between calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

HOST = "127.0.0.1"
LOG_TAIL_LINES = 30
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

T = TypeVar("T")


class StackError(RuntimeError):
    """A stack component could not be started, checked or stopped."""

    def __init__(self, component: str, reason: str, log_path: Path | None = None) -> None:
        self.component = component
        self.reason = reason
        self.log_path = log_path
        message = f"{component}: {reason}"
        if log_path is not None:
            message += f"\n--- last {LOG_TAIL_LINES} lines of {log_path} ---\n{log_tail(log_path)}"
        super().__init__(message)


@dataclass
class Running:
    """What is recorded about one started component (``<workdir>/<name>.json``)."""

    name: str
    pid: int
    ports: dict[str, int]
    log_path: str
    workdir: str
    cmd_match: str  # a substring of /proc/<pid>/cmdline that proves the pid is still ours
    started_at: float = 0.0
    start_seconds: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def port(self) -> int:
        """The component's main port: the one named after it, else the first recorded."""
        return self.ports.get(self.name) or next(iter(self.ports.values()))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Running:
        return cls(**json.loads(text))


# --- ports ---------------------------------------------------------------------------------------


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


# Ports this process handed out recently. A port picked for a server that has not bound it yet looks
# free to the next call; a supervisor picking a dozen ports before its children bind them drew the same
# one twice (CI, 2026-12-03: a service's metrics port was another's). Bounded: the oldest are forgotten.
_HANDED_OUT: dict[int, None] = {}
_HANDED_OUT_MAX = 4096


def _hand_out(port: int) -> int:
    _HANDED_OUT[port] = None
    while len(_HANDED_OUT) > _HANDED_OUT_MAX:
        del _HANDED_OUT[next(iter(_HANDED_OUT))]
    return port


def free_port(host: str = HOST) -> int:
    """A TCP port nobody listens on right now, and not handed out by this process before.

    Drawn below the kernel's ephemeral range when there is room: a port from that range (bind to 0)
    can be taken, between this call and the server's bind, as the source port of any outgoing
    connection — a Kafka client's, say — and the server then fails with "address already in use"
    (seen once in the e2e suite's start-up)."""
    low = _ephemeral_low()
    if low > 12_000:
        for _ in range(50):
            port = random.randrange(10_000, low)
            if port not in _HANDED_OUT and not port_in_use(port, host):
                return _hand_out(port)
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            return _hand_out(port)
    raise OSError("no free TCP port found that was not handed out already")


def port_in_use(port: int, host: str = HOST) -> bool:
    """True when something is bound to ``host:port`` (we cannot bind it ourselves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def pick_ports(wanted: Mapping[str, int]) -> dict[str, int]:
    """Honour non-zero ports, pick distinct free ports for the zero ones."""
    ports: dict[str, int] = {}
    taken = {p for p in wanted.values() if p}
    for name, port in wanted.items():
        if not port:
            port = free_port()
            while port in taken:
                port = free_port()
            taken.add(port)
        ports[name] = port
    return ports


def busy_ports_hint(ports: Mapping[str, int], configured: Mapping[str, int]) -> str:
    """A sentence naming configured ports that another process holds, or ''."""
    busy = [f"{name}={port}" for name, port in ports.items() if configured.get(name) and port_in_use(port)]
    if not busy:
        return ""
    return f" (configured port {', '.join(busy)} on {HOST} is already in use by another process)"


# --- files ---------------------------------------------------------------------------------------


def record_path(workdir: Path, name: str) -> Path:
    return workdir / f"{name}.json"


def pid_path(workdir: Path, name: str) -> Path:
    return workdir / f"{name}.pid"


def write_record(rec: Running) -> None:
    workdir = Path(rec.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    pid_path(workdir, rec.name).write_text(f"{rec.pid}\n")
    tmp = record_path(workdir, rec.name).with_suffix(".json.tmp")
    tmp.write_text(rec.to_json())
    tmp.replace(record_path(workdir, rec.name))


def read_record(workdir: Path, name: str) -> Running | None:
    path = record_path(workdir, name)
    try:
        return Running.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None


def remove_record(workdir: Path, name: str) -> None:
    for path in (record_path(workdir, name), pid_path(workdir, name)):
        path.unlink(missing_ok=True)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read()
    except OSError:
        return f"(no log at {path})"
    text = _ANSI.sub("", data.decode("utf-8", errors="replace"))
    return "\n".join(text.splitlines()[-lines:])


# --- processes -----------------------------------------------------------------------------------


def start_detached(
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, stdout+stderr appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} start: {' '.join(argv)}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd is not None else None,
            start_new_session=True,
            close_fds=True,
        )


def _reap(pid: int) -> bool:
    """Reap ``pid`` if it is our exited child; True when it is gone for good."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def pid_alive(pid: int, cmd_match: str | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if given, its command line contains ``cmd_match``."""
    if pid <= 0:
        return False
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
    if state in ("Z", "X"):
        return False
    return cmd_match is None or cmd_match in cmdline


def wait_exit(pid: int, timeout: float, cmd_match: str | None = None) -> bool:
    """Wait until ``pid`` is gone; True if it went within ``timeout``."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid, cmd_match):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_pid(pid: int, timeout: float = 10.0, cmd_match: str | None = None) -> None:
    """SIGTERM ``pid``, SIGKILL its process group after ``timeout``, then kill any leftovers of the group.

    Nothing is signalled unless ``pid`` is alive (and matches ``cmd_match``): a stale pid may since
    belong to another process, and its group must not be killed."""
    if not pid_alive(pid, cmd_match):
        _reap(pid)
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not wait_exit(pid, timeout, cmd_match):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_exit(pid, 5.0, cmd_match)
    # Children of the group (e.g. Triton's python-backend stubs) must not outlive the leader. The
    # group id is the leader's pid (started in its own session), still reserved while it is a zombie.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _reap(pid)


def healthy_if(rec: Running, probe: Callable[[], bool]) -> bool:
    """The component's recorded process is ours and alive, and its probe answers."""
    if not pid_alive(rec.pid, rec.cmd_match):
        return False
    try:
        return probe()
    except Exception:
        return False


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, even when called inside a running event loop."""

    async def main() -> T:
        return await factory()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


def wait_healthy(
    component: str,
    check: Callable[[], bool],
    *,
    timeout: float,
    proc: subprocess.Popen[bytes] | None,
    log_path: Path,
    hint: Callable[[], str] = lambda: "",
    interval: float = 0.1,
) -> None:
    """Poll ``check`` until True; raise :class:`StackError` if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while True:
        if proc is not None and proc.poll() is not None:
            raise StackError(
                component, f"process exited with code {proc.returncode} during start-up{hint()}", log_path
            )
        try:
            if check():
                return
        except Exception as exc:  # any failure of a probe means "not yet"
            last_error = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            detail = f"; last probe error: {last_error}" if last_error else ""
            raise StackError(component, f"not healthy after {timeout:.0f} s{detail}{hint()}", log_path)
        time.sleep(interval)
