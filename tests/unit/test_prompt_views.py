"""A harness version's views are made once and change nothing: the context's JSON and the prompt text
are the same text as when every turn made them again."""

from __future__ import annotations

import copy
import json
from typing import Any

from livehost.agent import prompt
from livehost.agent import state as st
from livehost.agent.prompt import HARNESS_VIEWS_KEPT, Sources, build_context, context_json, render
from livehost.harness.model import Harness
from tests.unit.test_prompt_evidence import HARNESS, LINEUP, PRODUCT

FACTS = Sources(PRODUCT, [{"q": "Is it warm?", "a": "Yes, 200 g down."}], ["said before"], LINEUP)


def state_of(harness: Harness, text: str = "how much? <b>\"quoted\"</b> 价格") -> dict[str, Any]:
    s = st.new_state(room_id="room-a", harness_version=harness.version(),
                     comments=[{"event_id": "e1", "user_id": "u-1", "text": text, "ts_ms": 1}],
                     room={"room_id": "room-a", "current_link": 3}, ttl_ms=10_000, time_budget_ms=8_000)
    st.add_step(s, "tool_result", "some_tool", {"result": {"stock": 0, "note": "ünïcode"}, "ok": True})
    if harness.skills:
        s["loaded_skills"] = [harness.skills[0].id]
    return s


def renamed(harness: Harness) -> Harness:
    """The same harness with other instructions and every skill and tool description changed."""
    return harness.model_copy(update={
        "instructions": harness.instructions + "\nBe brief.",
        "skills": [s.model_copy(update={"description": s.description + " (v2)"}) for s in harness.skills],
        "tools": [t.model_copy(update={"description": t.description + " (v2)"}) for t in harness.tools]})


def fresh(ctx: dict[str, Any]) -> dict[str, Any]:
    """The same context with nothing shared with the views (a deep copy): what every turn built before."""
    return copy.deepcopy(ctx)


def test_the_context_json_is_the_same_text() -> None:
    for harness in (HARNESS, renamed(HARNESS)):
        ctx = build_context(harness, state_of(harness), FACTS)
        assert context_json(ctx) == json.dumps(fresh(ctx), default=str)
        assert json.loads(context_json(ctx))["instructions"] == harness.instructions
    # a context of one version never shows another's parts
    other = renamed(HARNESS)
    ctx = build_context(HARNESS, state_of(HARNESS), FACTS)
    ctx["harness_version"] = other.version()
    build_context(other, state_of(other), FACTS)
    assert context_json(ctx) == json.dumps(fresh(ctx), default=str)


def test_the_prompt_text_is_the_same_text() -> None:
    for harness in (HARNESS, renamed(HARNESS)):
        ctx = build_context(harness, state_of(harness), FACTS)
        made_once, made_now = render(harness, ctx), render(harness, fresh(ctx))
        assert made_once.text == made_now.text and made_once.sections == made_now.sections
        assert harness.instructions.strip() in made_once.text


def test_an_edited_harness_shows_its_own_parts() -> None:
    edited = renamed(HARNESS)
    before, after = (json.loads(context_json(build_context(h, state_of(h), FACTS))) for h in (HARNESS, edited))
    assert before["instructions"] != after["instructions"] == edited.instructions
    assert [t["description"] for t in after["tools"]] == [t.description for t in edited.tools]
    assert "(v2)" in render(edited, build_context(edited, state_of(edited), FACTS)).text


def test_views_are_bounded() -> None:
    for i in range(HARNESS_VIEWS_KEPT + 5):
        h = HARNESS.model_copy(update={"instructions": f"{HARNESS.instructions}\nEdit {i}."})
        ctx = build_context(h, state_of(h), FACTS)
        assert context_json(ctx) == json.dumps(fresh(ctx), default=str)
    assert len(prompt._VIEWS) <= HARNESS_VIEWS_KEPT
