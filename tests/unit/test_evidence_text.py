"""``evidence_text`` reads each prompt step's evidence once per step text (cached): the same text as
decoding every step at every check, as it did before."""

from __future__ import annotations

import json
from typing import Any

from livehost.agent import state as st
from livehost.hooks.step import evidence_text


def decoding_every_step(state: dict[str, Any]) -> str:
    """The function before the cache, as the reference."""
    room = state.get("room_json") or ""
    room = json.dumps(json.loads(room), ensure_ascii=False) if room else ""
    parts = [room]
    shown: list[Any] = []
    for step in st.steps(state, "tool_result", "prompt"):
        data = step["data"]
        if step["kind"] == "tool_result" and data.get("ok"):
            parts.append(json.dumps(data.get("result"), default=str, ensure_ascii=False))
        elif step["kind"] == "prompt" and data.get("evidence") not in shown:
            shown.append(data.get("evidence"))
            parts.append(json.dumps(data.get("evidence"), default=str, ensure_ascii=False))
    return "\n".join(parts)


def a_request() -> dict[str, Any]:
    s = st.new_state(room_id="room-a", harness_version="v1",
                     comments=[{"event_id": "e1", "user_id": "u-1", "text": "满199减20?", "ts_ms": 1}],
                     room={"room_id": "room-a", "current_link": 3, "campaign": {"name": "满199减20"}},
                     ttl_ms=10_000, time_budget_ms=8_000)
    shown = {"product": {"link_id": 3, "title": "Jacket", "price": 299}, "faq": [], "lineup": []}
    st.add_step(s, "prompt", None, {"text": "long prompt " * 500, "evidence": shown})
    st.add_step(s, "tool_result", "t", {"ok": True, "result": {"stock": 4}})
    st.add_step(s, "tool_result", "t", {"ok": False, "result": {"stock": 999}})
    st.add_step(s, "prompt", None, {"text": "next turn " * 500, "evidence": shown})  # the same evidence again
    st.add_step(s, "prompt", None, {"text": "x", "evidence": {**shown, "faq": [{"q": "warm?", "a": "200 g"}]}})
    st.add_step(s, "prompt", None, {"text": "no evidence"})
    return s


def test_the_same_text_as_decoding_every_step() -> None:
    s = a_request()
    assert evidence_text(s) == decoding_every_step(s)
    assert evidence_text(s) == evidence_text(st.clone(s))  # again, from the cache
    text = evidence_text(s)
    assert "299" in text and '"stock": 4' in text and "999" not in text and "200 g" in text
    assert text.count('"title": "Jacket"') == 2  # the repeated evidence once, the changed one once more


def test_a_changed_step_text_is_read_again() -> None:
    s = a_request()
    evidence_text(s)
    s["steps"][0] = {**s["steps"][0], "data_json": json.dumps({"evidence": {"product": {"price": 1234}}})}
    assert "1234" in evidence_text(s) and evidence_text(s) == decoding_every_step(s)
