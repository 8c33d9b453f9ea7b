"""The throughput benchmark's accounting of comments: a comment the merge window collapsed into an
identical one is answered by that request, not lost (benchmarks/bench_throughput.py, ``comment_ids``).
The request comes from the real hooks handler, as the benchmark reads it off agent.replies."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.bench_throughput import Step, comment_ids, credit_answers
from livehost.config import REPO_ROOT, Settings
from livehost.harness.loader import load
from livehost.harness.provider import StaticHarnessProvider
from livehost.topics import REQUESTS
from services.hooks.handlers import HooksHandler

HARNESS = load(REPO_ROOT / "harness" / "default")
T0 = 1_000_000
WINDOW = 800


async def merged_request(texts: list[str], ids: list[str] | None = None) -> dict[str, Any]:
    """The request the hooks handler makes of ``texts`` (event ids ``ids``, else e-0, e-1, …), sent to one
    room within one merge window."""
    h = HooksHandler(Settings(merge_window_ms=WINDOW), StaticHarnessProvider(HARNESS),
                     {"room-1": json.dumps({"room_id": "room-1"})})
    for n, text in enumerate(texts):
        await h.on_room_event({"event_id": ids[n] if ids else f"e-{n}", "room_id": "room-1", "type": "comment",
                               "user_id": f"u-{n}", "text": text, "ts_ms": T0 + n}, T0 + n)
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


async def test_a_comment_merged_into_a_request_of_the_settling_counts_for_its_own_step() -> None:
    """The unmeasured settling's last comment and a step's first one, in one merge window: the request is
    filed under no step (its first comment's prefix is not registered), and the step's comment is still
    answered."""
    state = await merged_request(["how much is this?", "what sizes?"], ids=["settle0xaa-room-1-0", "s0xbb-room-1-0"])
    step, other = Step(100), Step(200)
    credit_answers({"s0xbb": step, "s1xcc": other}, comment_ids(state))
    assert step.answered == {"s0xbb-room-1-0"} and not other.answered


async def test_a_step_says_how_many_comments_and_turns_its_served_requests_held() -> None:
    """Only replies count, each with every comment it answers (collapsed duplicates too) and its prompts."""
    from benchmarks.bench_throughput import summarise
    from livehost.agent import state as st

    two = await merged_request(["how much is this?", "How much is this?", "what sizes?"], ["s-0", "s-1", "s-2"])
    one = await merged_request(["is it in stock?"], ["s-3"])
    shed = await merged_request(["and shipping?", "any discount?"], ["s-4", "s-5"])
    for state, prompts in ((two, 3), (one, 1), (shed, 0)):
        for _ in range(prompts):
            st.add_step(state, "prompt", None, {"text": "…"})
    step = Step(rate=10, sent=6)
    for state, outcome in ((two, "reply"), (one, "reply"), (shed, "cancelled")):
        step.outcomes[state["request_id"]] = {"state": state, "outcome": outcome, "reason": None,
                                              "completed_ms": state["created_ms"] + 900}
    load = summarise(step, 1.0)["served_load"]
    assert load == {"comments": 2.0, "turns": 2.0}


def test_reasons_of_one_kind_count_together() -> None:
    from benchmarks.reasons import reason_kind

    a = reason_kind("shed: system overloaded (70 requests in flight)")
    assert a == reason_kind("shed: system overloaded (73 requests in flight)")
    assert a != reason_kind("shed: room queue (2 ahead at 2653 ms each) cannot finish within the remaining 1 ms")
    assert reason_kind(None) == "no reason given"


async def test_a_stall_is_named_by_the_step_that_ended_it_and_when_it_began() -> None:
    """Requests cancelled after admission are placed by their longest wait; shed ones and replies are not."""
    from benchmarks.bench_throughput import late_work
    from livehost.agent import state as st

    outs = []
    for n, stall_ms in enumerate((9_000, 9_600, 0)):
        state = await merged_request([f"question {n}?"], [f"s-{n}"])
        created = int(state["created_ms"])
        for merged in state["steps"]:  # the input step, stamped by the clock: on the request's time line
            merged["ts_ms"] = created + 800
        st.add_step(state, "prompt", None, {"text": "…"})
        state["steps"][-1]["ts_ms"] = created + 900
        st.add_step(state, "action", None, {})
        state["steps"][-1]["ts_ms"] = created + 900 + stall_ms
        outs.append({"state": state, "outcome": "cancelled" if stall_ms else "reply",
                     "reason": "stale: request exceeded its time budget" if stall_ms else None,
                     "completed_ms": created + 1_000 + stall_ms})
    shed = await merged_request(["and shipping?"], ["s-9"])
    outs.append({"state": shed, "outcome": "cancelled", "reason": "shed: system overloaded (80 requests in flight)",
                 "completed_ms": int(shed["created_ms"]) + 20_000})
    line = late_work(outs)
    assert line is not None and line.startswith("2 cancelled after admission")
    assert "median 9.3 s" in line and "max 9.6 s" in line and "before action 2" in line
    assert late_work(outs[2:]) is None  # a reply and a shed request: nothing lost after admission
