"""The demo transcript: whole segment counts, and which replies were cut (product switch, priority)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from livehost.demo.main import print_summary
from livehost.demo.runner import Outcome, SessionReport, describe


def _reply(rid: str, text: str = "Hello there. Second sentence.") -> dict[str, Any]:
    step = {"seq": 0, "turn": 0, "kind": "input", "name": None, "ts_ms": 10, "duration_ms": None,
            "data_json": json.dumps({"event_ids": [f"e-{rid}"]})}
    state = {"request_id": rid, "room_id": "room-a", "comments": [{"user_id": "u-1", "text": "hi"}],
             "created_ms": 0, "steps": [step]}
    return {"state": state, "outcome": "reply", "text": text, "reason": None, "completed_ms": 900}


def _seg(rid: str, seq: int, *, cancel: bool = False, reason: str | None = None) -> dict[str, Any]:
    return {"request_id": rid, "room_id": "room-a", "seq": seq, "text": "" if cancel else "x", "start_ms": 0.0,
            "end_ms": 1.0, "audio_ref": None, "visemes": [], "final": cancel, "cancel": cancel, "reason": reason,
            "ts_ms": 1000}


def test_segment_counts_and_cut_replies(tmp_path: Path) -> None:
    console = Console(record=True, width=200, color_system=None)
    describe(Outcome(_reply("req-1"), first_audio_ms=20.0, segments=1), console)
    describe(Outcome(_reply("req-2"), first_audio_ms=20.0, segments=3, cut="product_switch"), console)
    text = console.export_text()
    assert "1 segment)" in text and "3 segments)" in text and "1 segments" not in text
    assert "cut after 3 segments: product_switch" in text

    report = SessionReport(outcomes={"req-2": Outcome(_reply("req-2")), "req-3": Outcome(_reply("req-3"))})
    report.segments = [_seg("req-2", 0), _seg("req-2", 1, cancel=True, reason="product_switch"),
                       _seg("req-3", 0), _seg("req-3", 1),
                       _seg("req-3", 2, cancel=True, reason="preempted by higher-priority request req-4"),
                       _seg("req-old", 0, cancel=True, reason="product_switch")]  # an earlier session's
    console = Console(record=True, width=200, color_system=None)
    print_summary(console, report, str(tmp_path), {})
    text = console.export_text()
    assert "req-2: speech cut after 1 segment(s) — product_switch" in text
    assert "req-3: speech cut after 2 segment(s) — preempted by higher-priority request req-4" in text
    assert "req-old" not in text
