"""Export lines a training engineer can use as they are: the SFT system message does not repeat what
the line carries elsewhere, raw steps nest their payload, RL lines always carry a reward, and the
trajectory names the policy model that answered."""

from __future__ import annotations

import copy
import json

import pytest

from livehost.agent.prompt import Sources, _render_section, build_context, render
from livehost.config import REPO_ROOT
from livehost.harness.loader import load
from livehost.training import formats
from livehost.training.export import ExportStats, HarnessCache, _convert
from livehost.training.synthetic import good_script, retry_script, run_script
from services.trajectories.handlers import policy_of, trajectory_from_reply

HARNESS = load(REPO_ROOT / "harness" / "default")


@pytest.fixture(scope="module")
def good() -> dict:
    """A scripted trajectory whose first prompt step is the real assembled prompt."""
    row = run_script(HARNESS, good_script(HARNESS), 1)
    state = {**row, "turn": 0, "loaded_skills": [], "steps": [], "room": {}}
    state["comments"] = [{"event_id": "e1", "user_id": "u-17", "text": "how much is link 3? it looks nice",
                          "ts_ms": 1}]
    row["comments"] = state["comments"]
    prompt = render(HARNESS, build_context(HARNESS, state, Sources(product={"link_id": 3, "title": "Silk scarf",
                                                                             "price": 299, "currency": "CNY"})))
    for s in row["steps"]:
        if s["kind"] == "prompt":
            data = json.loads(s["data_json"])
            data["text"] = prompt.text
            s["data_json"] = json.dumps(data)
            break
    return row


def test_sft_system_message_carries_no_comment_and_no_tool_list(good: dict) -> None:
    prompt = next(json.loads(s["data_json"])["text"] for s in good["steps"] if s["kind"] == "prompt")
    tool_descriptions = [t.description for t in HARNESS.tools]
    assert "it looks nice" in prompt and all(d in prompt for d in tool_descriptions)  # the case is real
    line = formats.to_sft(good, HARNESS)
    assert line is not None
    formats.validate("sft", line)
    system, user = line["messages"][0]["content"], line["messages"][1]["content"]
    assert "it looks nice" not in system and "it looks nice" in user
    assert not any(d in system for d in tool_descriptions)
    assert {t["function"]["description"] for t in line["tools"]} >= set(tool_descriptions)
    # everything else of the prompt stays
    assert HARNESS.instructions.strip()[:60] in system and "Silk scarf" in system
    assert all(s.description in system for s in HARNESS.skills)


def test_raw_steps_nest_their_payload(good: dict) -> None:
    line = formats.to_raw(good)
    formats.validate("raw", line)
    for step, stored in zip(line["steps"], good["steps"], strict=True):
        assert "data_json" not in step and isinstance(step["data"], dict)
        assert step["data"] == json.loads(stored["data_json"])
    bad = copy.deepcopy(line)
    bad["steps"][0]["data"] = json.dumps(bad["steps"][0]["data"])  # a string inside JSON is refused
    with pytest.raises(formats.ExportValidationError):
        formats.validate("raw", bad)


async def test_rl_line_of_an_unscored_request_is_scored_during_the_export() -> None:
    row = run_script(HARNESS, retry_script(HARNESS), 2)
    stats = ExportStats("rl")
    line = await _convert({**row, "judged": None}, "rl", HarnessCache(None, REPO_ROOT / "harness" / "default"),
                          0.1, stats)
    assert line is not None and line["reward"] is not None
    formats.validate("rl", line)
    assert set(line["reward"]) >= set(formats.REWARD_KEYS) and line["reward"]["accuracy"] in (0, 1)
    assert stats.rewards_on_the_fly == 1 and stats.rewards_stored == 0
    stored = {"accuracy": 0, "effectiveness": 0.5, "tool_rationality": 1.0, "skill_selection": 1.0, "judge": "x"}
    line = await _convert({**row, "judged": stored}, "rl", HarnessCache(None, None), 0.1, stats)
    assert line is not None and line["reward"] == {**stored}
    assert stats.rewards_stored == 1


def test_trajectory_names_the_policy_model() -> None:
    row = run_script(HARNESS, good_script(HARNESS), 1)
    steps = [{**s, "name": "policy_llm" if s["kind"] == "model_output" else s["name"]} for s in row["steps"]]
    state = {**row, "policy": "", "steps": steps, "turn": 0}
    assert any(s["kind"] == "model_output" for s in steps)
    assert policy_of(state) == "policy_llm"
    assert policy_of({**state, "policy": "react:policy_reference"}) == "react:policy_reference"
    assert policy_of({**state, "steps": []}) == ""
    reply = {"state": state, "outcome": "reply", "text": "hi", "reason": None, "completed_ms": 5}
    assert trajectory_from_reply(reply)["policy"] == "policy_llm"


def test_sft_cut_survives_a_bundle_whose_json_keys_were_reordered(good: dict) -> None:
    """A version read back from the registry (PostgreSQL jsonb) may order schema keys differently
    from the folder the live prompt was rendered with: the tool section is still cut, by its heading."""
    reordered = HARNESS.model_copy(update={"tools": [
        t.model_copy(update={"parameters": {**t.parameters, "properties": {
            k: dict(sorted(v.items(), reverse=True)) for k, v in reversed(list(t.parameters["properties"].items()))}}})
        for t in HARNESS.tools]})
    prompt = next(json.loads(s["data_json"])["text"] for s in good["steps"] if s["kind"] == "prompt")
    section = next(s for s in reordered.prompt.sections if s.source == "tool_index")
    ctx = {"tools": [{"name": t.name, "description": t.description, "parameters": t.parameters}
                     for t in reordered.tools]}
    assert _render_section(section, ctx, {}) not in prompt  # the verbatim cut cannot work here
    line = formats.to_sft(good, reordered)
    assert line is not None
    system = line["messages"][0]["content"]
    assert not any(t.description in system for t in HARNESS.tools)
    assert "it looks nice" not in system
    assert all(s.description in system for s in HARNESS.skills) and "Silk scarf" in system
