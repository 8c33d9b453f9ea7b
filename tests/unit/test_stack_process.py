"""Process helpers of the embedded stack, with throwaway processes (no broker, database or Triton)."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path

import pytest

from livehost.stack import manager
from livehost.stack.process import (
    Running,
    StackError,
    busy_ports_hint,
    free_port,
    log_tail,
    pick_ports,
    pid_alive,
    port_in_use,
    read_record,
    remove_record,
    run_async,
    start_detached,
    stop_pid,
    wait_healthy,
    write_record,
)


def test_free_port_is_bindable_and_port_in_use_sees_a_listener() -> None:
    port = free_port()
    assert not port_in_use(port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert port_in_use(port)
        assert busy_ports_hint({"kafka": port}, {"kafka": port}).endswith(
            "already in use by another process)"
        )
        assert busy_ports_hint({"kafka": port}, {"kafka": 0}) == ""  # picked, not configured


def test_pick_ports_honours_configured_and_picks_distinct_free_ones() -> None:
    ports = pick_ports({"grpc": 0, "http": 12345, "metrics": 0})
    assert ports["http"] == 12345
    assert len(set(ports.values())) == 3
    assert list(ports) == ["grpc", "http", "metrics"]


def test_log_tail_keeps_last_lines_and_strips_colour(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "\x1b[31mERROR\x1b[0m boom\n")
    tail = log_tail(log, 3).splitlines()
    assert tail == ["line 98", "line 99", "ERROR boom"]
    assert "no log" in log_tail(tmp_path / "missing.log")


def test_stack_error_names_component_reason_and_tail(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_text("starting\nFATAL: it broke\n")
    err = StackError("postgres", "process exited with code 1", log)
    text = str(err)
    assert text.startswith("postgres: process exited with code 1")
    assert f"last 30 lines of {log}" in text and "FATAL: it broke" in text
    assert err.component == "postgres"


def test_record_roundtrip(tmp_path: Path) -> None:
    rec = Running(
        name="kafka",
        pid=123,
        ports={"kafka": 9999},
        log_path=str(tmp_path / "kafka.log"),
        workdir=str(tmp_path),
        cmd_match="tansu",
        extra={"a": "b"},
    )
    write_record(rec)
    assert (tmp_path / "kafka.pid").read_text().strip() == "123"
    assert read_record(tmp_path, "kafka") == rec
    assert rec.port == 9999
    remove_record(tmp_path, "kafka")
    assert read_record(tmp_path, "kafka") is None and not (tmp_path / "kafka.pid").exists()


def test_start_detached_logs_and_stop_pid_terminates(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    proc = start_detached([sys.executable, "-c", "print('hi', flush=True); import time; time.sleep(60)"], log)
    deadline = time.monotonic() + 10

    def printed() -> bool:  # the line itself, not the header (which quotes the command)
        return "hi" in log.read_text().splitlines()

    while not printed() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert printed() and "=== " in log.read_text()
    assert pid_alive(proc.pid, "time.sleep"), f"exited early: rc={proc.poll()} log={log.read_text()!r}"
    assert not pid_alive(proc.pid, "no-such-command")
    stop_pid(proc.pid, 5.0)
    assert not pid_alive(proc.pid)


def test_stop_pid_kills_a_process_that_ignores_sigterm_and_its_children(tmp_path: Path) -> None:
    script = "trap '' TERM; sleep 60 & sleep 60; wait"
    proc = start_detached(["/bin/sh", "-c", script], tmp_path / "p.log")
    time.sleep(0.2)
    children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    assert children
    t0 = time.monotonic()
    stop_pid(proc.pid, 0.5)
    assert time.monotonic() - t0 < 5
    assert not pid_alive(proc.pid)
    time.sleep(0.1)
    assert not any(pid_alive(c) for c in children)


def test_wait_healthy_reports_exit_and_timeout(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    proc = start_detached([sys.executable, "-c", "print('bad config'); raise SystemExit(3)"], log)
    with pytest.raises(StackError, match=r"(?s)demo: process exited with code 3.*bad config"):
        wait_healthy("demo", lambda: False, timeout=10, proc=proc, log_path=log)

    def probe() -> bool:
        raise ConnectionRefusedError("nope")

    with pytest.raises(
        StackError, match="demo: not healthy after 0 s; last probe error: ConnectionRefusedError"
    ):
        wait_healthy("demo", probe, timeout=0.2, proc=None, log_path=log)


async def test_run_async_works_inside_a_running_loop() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert run_async(answer) == 42


def test_manager_rejects_unknown_components_and_reports_empty_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIVEHOST_STATE_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="unknown stack component"):
        manager.up(components=["redis"])
    st = manager.status()
    assert set(st) == {"kafka", "postgres", "triton"}
    assert not any(v["healthy"] or v["recorded"] for v in st.values())
    assert manager.down(echo=lambda _m: None) == []


def test_free_ports_stay_out_of_the_kernel_s_ephemeral_range_when_there_is_room() -> None:
    """Outgoing connections take their source ports from that range, and could take ours before the
    server binds it."""
    low, _ = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = [free_port() for _ in range(20)]
    if low > 12_000:
        assert all(p < low for p in ports), ports
    assert all(not port_in_use(p) for p in ports)


def test_free_port_never_hands_out_the_same_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port picked for a child that has not bound it yet still looks free; a supervisor picking a
    dozen ports in a row must not get one twice (a service's metrics port was another's once)."""
    from livehost.stack import process

    first = free_port()
    draws = iter([first, first, first + 1, first + 2])  # the random draw repeats a handed-out port
    monkeypatch.setattr(process, "_ephemeral_low", lambda: 60_000)
    monkeypatch.setattr(process.random, "randrange", lambda _a, _b: next(draws))
    second = free_port()
    assert second != first
    assert second in (first + 1, first + 2)
