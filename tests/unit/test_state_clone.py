"""``clone``: nothing done to the copy reaches the original; the step dicts, never changed once added,
are shared."""

from __future__ import annotations

from livehost.agent import state as st


def a_state() -> dict:
    s = st.new_state(room_id="room-a", harness_version="v1", comments=[{"event_id": "e1", "user_id": "u-1",
                     "text": "hi", "ts_ms": 1}], room={"room_id": "room-a", "current_link": 3}, ttl_ms=10_000,
                     time_budget_ms=8_000)
    st.add_step(s, "input", None, {"comments": 1})
    st.add_step(s, "tool_result", "t", {"result": {"stock": [1, 2]}})
    s["attestation"] = {"viewers": ["u-1"], "sig": "x"}
    return s


def test_changes_to_a_clone_do_not_reach_the_original() -> None:
    original = a_state()
    before = st.clone(original)  # a second clone, as a record of the original's content
    copy = st.clone(original)
    st.add_step(copy, "prompt", None, {"text": "p"})
    copy["turn"] += 1
    copy["comments"][0]["text"] = "changed"
    copy["comments"].append({"event_id": "e2", "user_id": "u-2", "text": "x", "ts_ms": 2})
    copy["loaded_skills"].append("s")
    copy["attestation"]["viewers"].append("u-9")
    assert original == before
    assert len(original["steps"]) == 2 and len(copy["steps"]) == 3


def test_a_clone_shares_the_step_dicts_and_has_its_own_list() -> None:
    original = a_state()
    copy = st.clone(original)
    assert copy == original
    assert copy["steps"] is not original["steps"]
    assert all(a is b for a, b in zip(copy["steps"], original["steps"], strict=True))
    # what readers get is a copy with the data decoded: changing it changes no state
    st.steps(copy)[0]["kind"] = "changed"
    assert original["steps"][0]["kind"] == "input"
