"""The throughput benchmark's accounting of comments: a comment the merge window collapsed into an
identical one is answered by that request, not lost (benchmarks/bench_throughput.py, ``comment_ids``).
The request comes from the real hooks handler, as the benchmark reads it off agent.replies."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.bench_throughput import comment_ids
from livehost.config import REPO_ROOT, Settings
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.topics import REQUESTS
from services.hooks.handlers import HooksHandler

HARNESS = load(REPO_ROOT / "harness" / "default")
T0 = 1_000_000
WINDOW = 800


async def merged_request(texts: list[str]) -> dict[str, Any]:
    """The request the hooks handler makes of ``texts``, sent to one room within one merge window."""
    h = HooksHandler(Settings(merge_window_ms=WINDOW), StaticHarnessProvider(HARNESS),
                     {"room-1": json.dumps({"room_id": "room-1"})})
    for n, text in enumerate(texts):
        await h.on_room_event({"event_id": f"e-{n}", "room_id": "room-1", "type": "comment", "user_id": f"u-{n}",
                               "text": text, "ts_ms": T0 + n}, T0 + n)
    done = await h.flush(T0 + WINDOW + len(texts))
    (state,) = [e.record["state"] for e in done.emits if e.topic.name == REQUESTS.name]
    return state


async def test_a_collapsed_duplicate_counts_as_answered() -> None:
    state = await merged_request(["how much is this?", "How much is this?", "what sizes?"])
    assert len(state["comments"]) == 2, "the merge window should collapse the identical comment"
    assert sorted(comment_ids(state)) == ["e-0", "e-1", "e-2"]


async def test_distinct_comments_are_each_answered_once() -> None:
    state = await merged_request(["how much is this?", "what sizes?"])
    assert sorted(comment_ids(state)) == ["e-0", "e-1"]


def test_a_state_without_an_input_step_falls_back_to_its_comments() -> None:
    state = {"steps": [], "comments": [{"event_id": "e-7"}, {"event_id": "e-8"}]}
    assert comment_ids(state) == ["e-7", "e-8"]
