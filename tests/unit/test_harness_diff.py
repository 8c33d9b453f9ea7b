"""The per-component diff: skills, tools, hooks, prompt order and rules (names picked generically)."""

from __future__ import annotations

from typing import Any

from livehost.config import REPO_ROOT
from livehost.harness.diff import diff, format_diff, unified
from livehost.harness.loader import load
from livehost.harness.model import Harness, Skill

DEFAULT = load(REPO_ROOT / "harness" / "default")


def modified(**changes: Any) -> Harness:
    return DEFAULT.model_copy(update=changes)


def test_identical_is_empty() -> None:
    assert diff(DEFAULT, DEFAULT) == []
    assert format_diff(DEFAULT, DEFAULT) == ""


def test_skills_added_removed_changed_renamed() -> None:
    skills = list(DEFAULT.skills)
    first, second, third = skills[0], skills[1], skills[2]
    new_body = first.body.replace("\n", "\nAn extra operator line.\n", 1)
    changed = first.model_copy(update={"body": new_body, "description": first.description + " Also sizes."})
    renamed = third.model_copy(update={"id": third.id + "_v2"})
    added = Skill(id="brand_new_skill", kind="strategy", description="A new strategy.", tools=[], body="Do it.\n")
    b = modified(skills=[changed, renamed, added, *skills[3:]])
    text = format_diff(DEFAULT, b)
    assert "== skills (+1 -1 ~2) ==" in text
    assert "+ skill brand_new_skill (strategy)" in text
    assert f"- skill {second.id} ({second.kind})" in text
    assert f"~ skill {third.id} → {third.id}_v2 (renamed)" in text
    assert f"~ skill {first.id}" in text
    assert "+An extra operator line." in text
    assert "Also sizes." in text


def test_tool_schema_changes() -> None:
    tool = DEFAULT.tools[0]
    params = dict(tool.parameters)
    props = dict(params["properties"])
    gone = next(iter(props))
    del props[gone]
    props["new_arg"] = {"type": "string"}
    params.update(properties=props, required=["new_arg"])
    changed = tool.model_copy(update={"parameters": params, "timeout_ms": tool.timeout_ms + 500})
    text = format_diff(DEFAULT, modified(tools=[changed, *DEFAULT.tools[1:]]))
    assert f"~ tool {tool.name}" in text
    assert "argument new_arg added" in text
    assert f"argument {gone} removed" in text
    assert f"required: +new_arg -{gone}" in text
    assert f"timeout_ms: {tool.timeout_ms} → {tool.timeout_ms + 500}" in text


def test_hooks_and_prompt_order_and_rules() -> None:
    hook = DEFAULT.hooks[0]
    key = next(iter(hook.params), "limit")
    hook2 = hook.model_copy(update={"params": {**hook.params, key: "changed"}, "retry_budget": hook.retry_budget + 1})
    hooks = [hook2, *DEFAULT.hooks[2:]]
    sections = list(DEFAULT.prompt.sections)
    sections[0], sections[1] = sections[1], sections[0]
    prompt = DEFAULT.prompt.model_copy(update={"sections": sections})
    rules = DEFAULT.rules.model_copy(update={"max_discount_pct": DEFAULT.rules.max_discount_pct + 5,
                                             "banned_phrases": [*DEFAULT.rules.banned_phrases, "best ever"]})
    changes = diff(DEFAULT, modified(hooks=hooks, prompt=prompt, rules=rules))
    text = format_diff(DEFAULT, modified(hooks=hooks, prompt=prompt, rules=rules))
    assert {c.component for c in changes} == {"hooks", "prompt", "rules"}
    assert f"- hook {DEFAULT.hooks[1].id}" in text
    assert f"params.{key}:" in text and '"changed"' in text
    assert "~ section order" in text
    assert f"now: {sections[0].id} > {sections[1].id}" in text
    assert "~ max_discount_pct" in text
    assert "items: +best ever" in text


def test_unified_shows_changed_lines_only() -> None:
    lines = unified("a\nb\nc\nd\ne\n", "a\nb\nX\nd\ne\n")
    assert "-c" in lines and "+X" in lines
    assert not any(line.startswith(("---", "+++")) for line in lines)
