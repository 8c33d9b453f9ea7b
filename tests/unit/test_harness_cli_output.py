"""`harness audit` reads at 80 columns; `harness active` says what runs when nothing is activated."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from livehost.config import REPO_ROOT
from livehost.harness.cli import audit_table, no_active_message
from livehost.harness.loader import load
from livehost.harness.registry import Activation, AuditEntry

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)


def test_audit_table_fits_80_columns_and_keeps_every_fact() -> None:
    rows = [
        AuditEntry(3, AT, "bob", "activate", "1625bfc6dabe9ff2", "room:room-a", None,
                   {"forced": True, "reason": "canary in room A for the evening show", "previous": None}),
        AuditEntry(2, AT, "alice", "review.refused", None, None, 1,
                   {"error": "'alice' authored proposal 1: the reviewer must not be the author"}),
        AuditEntry(1, AT, "alice", "push", "2d7ad9cfc6267ebb", None, None, {"message": "shipped harness"}),
    ]
    console = Console(width=80, record=True, color_system=None)
    console.print(audit_table(rows))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    # the "what" column's wrapped lines, read back in order
    what = [line.split("│")[4].strip() for line in text.splitlines() if line.count("│") == 6]
    flat = " ".join(" ".join(what).split()) + " " + " ".join(text.split())
    for fact in ("activate", "room:room-a", "1625bfc6", "review.refused", "proposal 1", "push", "2d7ad9cf",
                 "bob", "alice"):
        assert fact in flat, fact
    # wrapped text is still all there (the reviewer rule is readable, not cut with an ellipsis)
    assert "…" not in text
    assert "must not be" in flat and "the author" in flat


def test_no_active_message_names_what_runs() -> None:
    shipped = load(REPO_ROOT / "harness" / "default").version()
    msg = no_active_message("", None)
    assert "shipped folder" in msg and shipped in msg
    assert "shipped folder" in no_active_message("room:room-a", None)
    glob = Activation(1, "global", "1625bfc6dabe9ff2", "activate", None, "bob", False, "", AT)
    msg = no_active_message("room:room-a", glob)
    assert "global" in msg and "1625bfc6dabe9ff2" in msg and "shipped" not in msg
