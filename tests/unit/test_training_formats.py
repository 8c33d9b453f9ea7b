"""SFT / RL / raw export lines from scripted trajectories validate against schemas/export/*.json;
retry trimming; malformed lines are caught."""

from __future__ import annotations

import copy
import json

import pytest

from livehost.config import REPO_ROOT
from livehost.harness.loader import load
from livehost.training import formats
from livehost.training.synthetic import fallback_script, good_script, int_arg_tool, retry_script, run_script

HARNESS = load(REPO_ROOT / "harness" / "default")


@pytest.fixture(scope="module")
def good() -> dict:
    return run_script(HARNESS, good_script(HARNESS), 1)


@pytest.fixture(scope="module")
def retried() -> dict:
    return run_script(HARNESS, retry_script(HARNESS), 2)


@pytest.fixture(scope="module")
def failed() -> dict:
    return run_script(HARNESS, fallback_script(HARNESS), 3)


def test_schemas_are_valid_json_schemas() -> None:
    for fmt in formats.FORMATS:
        formats.validator(fmt)


def test_raw_lines_validate(good: dict, retried: dict, failed: dict) -> None:
    for row in (good, retried, failed):
        line = formats.to_raw(row)
        formats.validate("raw", line)
        assert json.loads(json.dumps(line)) == line


def test_sft_good_trajectory(good: dict) -> None:
    line = formats.to_sft(good, HARNESS)
    assert line is not None
    formats.validate("sft", line)
    roles = [m["role"] for m in line["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    tool, arg = int_arg_tool(HARNESS)
    call = line["messages"][2]["tool_calls"][0]
    assert call["function"]["name"] == tool.name and json.loads(call["function"]["arguments"]) == {arg: 3}
    assert line["messages"][3]["tool_call_id"] == call["id"] and "299" in line["messages"][3]["content"]
    assert line["messages"][4]["tool_calls"][0]["function"]["name"] == formats.LOAD_SKILL
    assert line["messages"][-1]["content"] == good["reply_text"]
    names = [t["function"]["name"] for t in line["tools"]]
    assert set(names) >= {t.name for t in HARNESS.tools} and formats.LOAD_SKILL in names
    assert not line["trimmed"] and line["retries"] == 0


def test_sft_retries_are_trimmed_by_default_and_kept_whole_for_a_fraction(retried: dict) -> None:
    trimmed = formats.to_sft(retried, HARNESS, keep_retries=0.0)
    whole = formats.to_sft(retried, HARNESS, keep_retries=1.0)
    assert trimmed is not None and whole is not None
    for line in (trimmed, whole):
        formats.validate("sft", line)
    assert trimmed["trimmed"] and not whole["trimmed"] and trimmed["retries"] == whole["retries"] == 2
    assert not any(m.get("name") == "hook" for m in trimmed["messages"])
    assert [m["content"] for m in trimmed["messages"] if m["role"] == "assistant" and m.get("content")] \
        == [retried["reply_text"]]
    hook_msgs = [m for m in whole["messages"] if m.get("name") == "hook"]
    assert len(hook_msgs) == 2 and all(m["role"] == "user" and m["content"] for m in hook_msgs)


def test_keep_fraction_is_deterministic_and_roughly_the_fraction() -> None:
    ids = [f"req-{i:05d}" for i in range(4000)]
    kept = [formats.keep_whole(i, 0.1) for i in ids]
    assert kept == [formats.keep_whole(i, 0.1) for i in ids]
    assert 0.08 < sum(kept) / len(ids) < 0.12


def test_sft_skips_trajectories_without_an_accepted_final_action(failed: dict) -> None:
    assert failed["outcome"] == "fallback"
    assert formats.to_sft(failed, HARNESS) is None


def test_rl_task(retried: dict) -> None:
    judged = {"accuracy": 1, "effectiveness": 0.5, "tool_rationality": 0.8, "skill_selection": 1, "judge": "j"}
    for j in (None, judged):
        line = formats.to_rl(retried, HARNESS, j)
        formats.validate("rl", line)
    assert line["harness"]["version"] == HARNESS.version()
    assert line["input"]["room"]["current_link"] == 3
    assert line["sandbox"]["product"]["price"] == 299
    (call,) = line["sandbox"]["tool_calls"]
    assert call["ok"] and call["result"]["price"] == 299
    assert line["reference"]["retries"] == 2 and line["reference"]["outcome"] == "reply"
    assert line["reward"]["effectiveness"] == 0.5
    assert formats.to_rl(retried, None, None)["reward"] is None


def test_only_passed(good: dict, retried: dict, failed: dict) -> None:
    assert formats.passed(good) and formats.passed(retried) and not formats.passed(failed)


@pytest.mark.parametrize(("fmt", "breaks"), [
    ("sft", lambda line: line["messages"].insert(0, {"role": "narrator", "content": "x"})),
    ("sft", lambda line: line["messages"][3].pop("tool_call_id")),
    ("sft", lambda line: line.update(tools=[])),
    ("rl", lambda line: line.update(reward={"accuracy": 2, "effectiveness": 0.3, "tool_rationality": None,
                                            "skill_selection": None})),
    ("rl", lambda line: line["sandbox"].pop("tool_calls")),
    ("raw", lambda line: line.update(outcome="maybe")),
    ("raw", lambda line: line["steps"][0].update(kind="dance")),
    ("raw", lambda line: line.update(unexpected=1)),
])
def test_malformed_lines_are_caught(good: dict, fmt: str, breaks) -> None:  # type: ignore[no-untyped-def]
    line = {"sft": lambda: formats.to_sft(good, HARNESS), "rl": lambda: formats.to_rl(good, HARNESS),
            "raw": lambda: formats.to_raw(good)}[fmt]()
    assert line is not None
    bad = copy.deepcopy(line)
    breaks(bad)
    with pytest.raises(formats.ExportValidationError) as exc:
        formats.validate(fmt, bad, 7)
    assert exc.value.line == 7 and f"{fmt}.json" in str(exc.value)
