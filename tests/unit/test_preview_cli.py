"""``livehost preview``: a busy port is a one-line error with the fix; the help says how to watch a session."""

from __future__ import annotations

import socket

import typer
from typer.testing import CliRunner

from livehost.preview.cli import app as preview_app


def _main() -> typer.Typer:
    main = typer.Typer()
    main.command("noop")(lambda: None)
    main.add_typer(preview_app, name="preview")
    return main


def test_busy_port_is_one_line_with_the_fix() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(_main(), ["preview", "--room", "room-a", "--port", str(port)])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert f"port {port}" in lines[0] and "in use" in lines[0] and "--port" in lines[0]
    assert "Traceback" not in result.output


def test_help_explains_live_and_finished_sessions() -> None:
    out = CliRunner().invoke(_main(), ["preview", "--help"], terminal_width=100).output
    assert "--from-beginning" in out and "--keep-stack" in out and "make demo-preview" in out
