"""Validation reports every problem of a broken bundle at once, with file and field.

The tests edit a copy of the shipped harness generically (first reply skill, first hook of a kind,
...): they never name a shipped skill, tool, hook or section.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from livehost.config import REPO_ROOT
from livehost.harness.cli import app
from livehost.harness.loader import HarnessError, Problem, load
from livehost.harness.validate import validate_bundle, validate_path

DEFAULT = REPO_ROOT / "harness" / "default"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DEFAULT, tmp_path / "h"))


def edit(path: Path, fn: Callable[[Any], Any]) -> None:
    data = yaml.safe_load(path.read_text())
    result = fn(data)
    path.write_text(yaml.safe_dump(data if result is None else result, sort_keys=False))


def edit_skill(path: Path, fn: Callable[[dict[str, Any]], None]) -> None:
    text = path.read_text()
    _, front, body = text.split("---", 2)
    meta = yaml.safe_load(front)
    fn(meta)
    path.write_text(f"---\n{yaml.safe_dump(meta, sort_keys=False)}---{body}")


def skill_files(root: Path) -> list[Path]:
    return sorted((root / "skills").glob("*.md"))


def kind_of(path: Path) -> str:
    return str(yaml.safe_load(path.read_text().split("---", 2)[1])["kind"])


def first_hook(hooks: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(h for h in hooks if h["kind"] == kind)


def has(problems: list[Problem], file: str, field: str, text: str, severity: str = "error") -> bool:
    return any(p.file == file and field in p.field and text in p.message and p.severity == severity
               for p in problems)


def test_shipped_harness_is_clean() -> None:
    report = validate_path(DEFAULT)
    assert report.ok
    assert report.problems == []


def test_every_problem_is_reported_at_once(bundle: Path) -> None:
    skills = skill_files(bundle)
    # every skill becomes a strategy skill -> no reply skill at all; the first names an unknown tool
    for f in skills:
        edit_skill(f, lambda m: m.update(kind="strategy"))
    edit_skill(skills[0], lambda m: m["tools"].append("no_such_tool"))
    # a skill file whose name does not match its id (warning only)
    skills[1].rename(bundle / "skills" / "renamed_file.md")

    def tools(data: dict[str, Any]) -> None:
        data["tools"][0]["parameters"]["type"] = 12  # invalid JSON Schema
        data["tools"].append(copy.deepcopy(data["tools"][1]))  # duplicate tool name (a copy: YAML aliases are refused)
        data["tools"][2]["parameters"]["required"] = ["ghost_arg"]
    edit(bundle / "tools.yaml", tools)

    def hooks(data: dict[str, Any]) -> None:
        data["hooks"][0]["kind"] = "telepathy"
        data["hooks"][1]["stage"] = "afterlife"
        screen = first_hook(data["hooks"][2:], "reply_format")
        screen["params"]["max_chars"] = -5
        data["hooks"].append(copy.deepcopy(data["hooks"][3]))  # duplicate hook id
    edit(bundle / "hooks.yaml", hooks)

    def prompt(data: dict[str, Any]) -> None:
        data["sections"][0]["template"] = "{content} and {nonsense}"
        data["truncation_order"].append("missing_section")
    edit(bundle / "prompt.yaml", prompt)
    edit(bundle / "rules.yaml", lambda d: d.update(max_discount_pct=150))

    report = validate_path(bundle)
    problems = report.problems
    assert not report.ok
    assert has(problems, "skills/", "kind", "no reply skill")
    assert has(problems, f"skills/{skills[0].name}", "tools", "unknown tool 'no_such_tool'")
    assert has(problems, "skills/renamed_file.md", "id", "does not match its file name", "warning")
    assert has(problems, "tools.yaml", "tools[0]", "invalid JSON Schema")
    assert has(problems, "tools.yaml", "name", "duplicate tool name")
    assert has(problems, "tools.yaml", "tools[2]", "required argument 'ghost_arg'")
    assert has(problems, "hooks.yaml", "hooks[0]", "unknown hook kind 'telepathy'")
    assert has(problems, "hooks.yaml", "hooks[1]", "unknown hook stage 'afterlife'")
    assert has(problems, "hooks.yaml", "params.max_chars", "at least 1")
    assert has(problems, "hooks.yaml", ".id", "duplicate hook id")
    assert has(problems, "prompt.yaml", "sections[0]", "undefined source {nonsense}")
    assert has(problems, "prompt.yaml", "truncation_order", "unknown section 'missing_section'")
    assert has(problems, "rules.yaml", "max_discount_pct", "between 0 and 100")
    # one message per problem: the type model's own literal errors are not repeated
    assert sum("telepathy" in p.message for p in problems) == 1
    with pytest.raises(HarnessError) as exc:
        load(bundle)
    assert all(p.severity == "error" for p in exc.value.problems)
    assert len(exc.value.problems) == len(report.errors) >= 13


def test_cli_validate_lists_problems_and_exits_nonzero(bundle: Path) -> None:
    edit(bundle / "rules.yaml", lambda d: d.update(max_discount_pct=-1))
    edit(bundle / "prompt.yaml", lambda d: d["truncation_order"].append("nowhere"))
    result = CliRunner().invoke(app, ["validate", str(bundle)])
    assert result.exit_code == 1
    out = result.output
    assert "rules.yaml" in out and "max_discount_pct" in out
    assert "prompt.yaml" in out and "nowhere" in out
    ok = CliRunner().invoke(app, ["validate", str(DEFAULT)])
    assert ok.exit_code == 0, ok.output
    assert "ok" in ok.output


def test_missing_file_does_not_hide_other_problems(bundle: Path) -> None:
    (bundle / "hooks.yaml").unlink()
    edit(bundle / "rules.yaml", lambda d: d.update(max_reply_chars=0))
    (bundle / "skills" / "broken.md").write_text("no front matter here\n")
    problems = validate_path(bundle).problems
    assert has(problems, "hooks.yaml", "-", "missing")
    assert has(problems, "rules.yaml", "max_reply_chars", "positive")
    assert has(problems, "skills/broken.md", "front matter", "missing")


def test_hook_sanity_per_kind(bundle: Path) -> None:
    def hooks(data: dict[str, Any]) -> None:
        screen = first_hook(data["hooks"], "input_validation")
        screen["params"]["injection_patterns"] = ["(unclosed"]
        screen["params"]["min_chars"] = 900
        screen["params"]["max_chars"] = 10
        args = first_hook(data["hooks"], "tool_arguments")
        args["stage"] = "input"  # a tool-argument check cannot run on input
        args["params"]["tools"] = ["not_a_tool"]
        retry = first_hook(data["hooks"], "retry_control")
        retry["params"]["max_identical_calls"] = "two"
        retry["on_fail"]["action"] = "explode"
        fmt = first_hook(data["hooks"], "reply_format")
        fmt["on_fail"]["message"] = "bad {because}"
        fmt["params"]["mystery"] = 1
        fmt["retry_budget"] = -1
    edit(bundle / "hooks.yaml", hooks)
    problems = validate_path(bundle).problems
    assert has(problems, "hooks.yaml", "injection_patterns[0]", "not a valid regular expression")
    assert has(problems, "hooks.yaml", "params", "min_chars (900) is greater than max_chars (10)")
    assert has(problems, "hooks.yaml", "stage", "tool_arguments hook cannot run at stage 'input'")
    assert has(problems, "hooks.yaml", "params.tools", "unknown tool 'not_a_tool'")
    assert has(problems, "hooks.yaml", "max_identical_calls", "whole number")
    assert has(problems, "hooks.yaml", "on_fail.action", "unknown failure action 'explode'")
    assert has(problems, "hooks.yaml", "on_fail.message", "undefined field {because}")
    assert has(problems, "hooks.yaml", "params.mystery", "not used by reply_format", "warning")
    assert has(problems, "hooks.yaml", "retry_budget", "negative")


def test_tool_binding_checks(bundle: Path) -> None:
    def tools(data: dict[str, Any]) -> None:
        side = next(t for t in data["tools"] if t.get("side_effect"))
        side["side_effect"] = False
        data["tools"][0]["binding"]["operation"] = "teleport.item"
        data["tools"][1]["binding"]["arguments"] = {"nope": "missing_arg"}
        data["tools"][2]["name"] = "has spaces"
    edit(bundle / "tools.yaml", tools)
    problems = validate_path(bundle).problems
    assert has(problems, "tools.yaml", "side_effect", "has side effects")
    assert has(problems, "tools.yaml", "binding.operation", "unknown backend operation 'teleport.item'")
    assert has(problems, "tools.yaml", "binding.arguments.nope", "undefined argument 'missing_arg'")
    assert has(problems, "tools.yaml", "binding.arguments.nope", "has no parameter 'nope'")
    assert has(problems, "tools.yaml", "tools[2]", "must start with a letter")


def test_duplicate_skill_ids_and_bad_limits(bundle: Path) -> None:
    files = skill_files(bundle)
    target_id = files[0].stem
    edit_skill(files[1], lambda m: m.update(id=target_id))
    edit(bundle / "harness.yaml", lambda d: d["limits"].update(max_turns=0))
    problems = validate_path(bundle).problems
    assert has(problems, f"skills/{files[1].name}", "id", f"duplicate skill id {target_id!r}")
    assert has(problems, "harness.yaml", "limits.max_turns", "at least 1")


def test_canonical_bundle_validation_reports_all() -> None:
    data = load(DEFAULT).canonical()
    data["skills"] = [dict(s, kind="strategy") for s in data["skills"]]
    data["hooks"][0] = dict(data["hooks"][0], kind="nope")
    data["prompt"] = dict(data["prompt"], truncation_order=["zzz"])
    data["rules"] = dict(data["rules"], max_discount_pct=101)
    data["unexpected"] = 1
    report = validate_bundle(data)
    assert report.harness is None
    msgs = [str(p) for p in report.errors]
    assert any("no reply skill" in m for m in msgs)
    assert any("unknown hook kind 'nope'" in m for m in msgs)
    assert any("unknown section 'zzz'" in m for m in msgs)
    assert any("max_discount_pct" in m for m in msgs)
    assert any("unexpected" in m for m in msgs)


def test_warnings_do_not_block_loading(bundle: Path) -> None:
    files = skill_files(bundle)
    reply = next(f for f in files if kind_of(f) == "reply")
    reply.rename(bundle / "skills" / "zz_other_name.md")
    report = validate_path(bundle)
    assert report.ok and report.warnings
    assert {s.id for s in load(bundle).skills} == {s.id for s in load(DEFAULT).skills}
