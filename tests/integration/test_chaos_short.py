"""The short fault suite of `make test` (the full one is `make chaos`, benchmarks/chaos.py): its own
embedded stack, 20 rooms at 10 comments/s, the hooks worker SIGKILLed (supervisor restart), then the
broker killed -9 and restarted. Prints the table rows; fails when a comment is lost or speech duplicated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.chaos import HEADER, fmt, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


async def test_short_fault_suite(tmp_path: Path) -> None:
    saved = dict(os.environ)
    try:
        rows = await run(["kill:hooks", "broker"], replicas=1, rooms=20, rate=10.0, phase_s=12.0, fault_at_s=4.0,
                         drain_s=40.0, voice="text", root=tmp_path)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    print("\n" + HEADER + "\n" + "\n".join(fmt(r) for r in rows))
    for row in rows:
        assert row["lost"] == 0, row
        assert row["dup_speech"] == 0, row
        assert row["dup_fx"] == 0, row
