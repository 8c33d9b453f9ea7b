"""The supervisor starts a process again on fresh ports when a port it chose was taken before the
child bound it (a free port can be taken by anyone between the check and the bind)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from livehost import supervisor as sup_mod
from livehost.config import Settings
from livehost.stack.process import free_port, stop_pid
from livehost.supervisor import FAUST_READY, Supervisor

# Stands in for a service: binds its metrics port as a real one does, then says it is ready.
CHILD = f"""
import os, socket, time
s = socket.socket()
s.bind(("127.0.0.1", int(os.environ["LIVEHOST_METRICS_PORT"])))  # raises "Address already in use"
s.listen()
print({FAUST_READY[:3]!r} + {FAUST_READY[3:]!r}, flush=True)  # not in the echoed command line
time.sleep(60)
"""


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_port_taken_before_the_child_binds_it_is_picked_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, taken_port: int
) -> None:
    fresh = free_port()
    picks = iter([taken_port, fresh])
    monkeypatch.setattr(sup_mod, "free_port", lambda: next(picks))
    real_start = sup_mod.start_detached

    def start_child(_argv: Sequence[str], log_path: Path, **kw: Any) -> Any:
        return real_start([sys.executable, "-c", CHILD], log_path, **kw)

    monkeypatch.setattr(sup_mod, "start_detached", start_child)
    sup = Supervisor(Settings(), tmp_path / "logs", env={"LIVEHOST_STATE_DIR": str(tmp_path)},
                     services=("hooks",))
    try:
        sup.start()
        sup.wait_ready(timeout=30)
        proc = sup.procs["hooks"]
        assert proc.port_clashes == 1
        assert proc.env["LIVEHOST_METRICS_PORT"] == str(fresh)
        assert proc.metrics_url.endswith(f":{fresh}/metrics")
        assert "Address already in use" in proc.log_path.read_text()
    finally:
        for proc in sup.procs.values():
            stop_pid(proc.pid, timeout=5)
