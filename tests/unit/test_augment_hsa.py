"""Harness-State Augmentation: variants cover every kind of edit, validate, are reproducible, and
rewritten trajectories replay against their variant. Nothing here names a shipped skill/tool/hook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livehost.config import REPO_ROOT
from livehost.harness.augment import (
    AUGMENT_KINDS,
    augment,
    plan_kinds,
    replay,
    rewrite_trajectory,
    step_data,
    variants,
)
from livehost.harness.loader import load
from livehost.harness.validate import validate_path
from livehost.training import formats
from livehost.training.cli import augment_app
from livehost.training.synthetic import good_script, retry_script, run_script

HARNESS = load(REPO_ROOT / "harness" / "default")


@pytest.fixture(scope="module")
def trajectories() -> list[dict]:
    rows = [run_script(HARNESS, good_script(HARNESS), 1), run_script(HARNESS, retry_script(HARNESS), 2)]
    return [formats.to_raw(r) for r in rows]


def test_plans_cover_every_kind() -> None:
    assert plan_kinds(1, 5) == [list(AUGMENT_KINDS)]
    for n in (2, 3, 5, 8):
        plans = plan_kinds(n, 11)
        assert len(plans) == n and all(plans) and set().union(*map(set, plans)) == set(AUGMENT_KINDS)


def test_each_kind_changes_what_it_says() -> None:
    base = HARNESS
    v = augment(base, seed=3, kinds=["skills"])
    assert not {s.id for s in v.harness.skills} & {s.id for s in base.skills}
    for old in base.skills:
        new = v.harness.skill(v.renaming.skills[old.id])
        assert new is not None and new.kind == old.kind and new.body != old.body
    v = augment(base, seed=3, kinds=["tools"])
    assert not {t.name for t in v.harness.tools} & {t.name for t in base.tools}
    for old, new in zip(base.tools, v.harness.tools, strict=True):
        assert set(new.parameters["properties"]) == set(v.renaming.arguments[new.name].values())
        assert new.binding.operation == old.binding.operation
        assert set(new.binding.arguments.values()) <= set(new.parameters["properties"])
    assert any(t.description != o.description for t, o in zip(v.harness.tools, base.tools, strict=True))
    for skill in v.harness.skills:  # skills point at the renamed tools
        assert set(skill.tools) <= {t.name for t in v.harness.tools}
    v = augment(base, seed=3, kinds=["prompt"])
    assert [s.source for s in v.harness.prompt.sections] != [s.source for s in base.prompt.sections]
    assert all("{content}" in s.template for s in v.harness.prompt.sections)
    v = augment(base, seed=4, kinds=["hooks"])
    assert not {h.id for h in v.harness.hooks} & {h.id for h in base.hooks}
    assert [(h.retry_budget, h.params) for h in v.harness.hooks] != [(h.retry_budget, h.params) for h in base.hooks]
    v = augment(base, seed=3, kinds=["constraints"])
    assert (v.harness.rules.max_reply_chars, v.harness.rules.max_discount_pct) != \
        (base.rules.max_reply_chars, base.rules.max_discount_pct)
    assert 120 <= v.harness.rules.max_reply_chars <= 600 and 5 <= v.harness.rules.max_discount_pct <= 60
    assert v.harness.limits.max_turns >= base.limits.max_turns


def test_no_shipped_name_survives_in_free_text_when_renamed() -> None:
    v = augment(HARNESS, seed=9)
    old = {s.id for s in HARNESS.skills} | {t.name for t in HARNESS.tools}
    blob = json.dumps(v.harness.canonical())
    assert not [n for n in old if f'"{n}"' in blob or f" {n} " in blob]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_variants_validate_and_trajectories_replay(seed: int, trajectories: list[dict]) -> None:
    for t in trajectories:
        assert replay(t, HARNESS) == []
    for v in variants(HARNESS, 6, seed):
        for t in trajectories:
            new = rewrite_trajectory(t, v)
            formats.validate("raw", new)
            assert new["harness_version"] == v.harness.version()
            assert replay(new, v.harness) == [], (v.kinds, v.renaming.as_dict())
            if "tools" in v.kinds:  # the original does not replay against a renamed variant
                assert replay(t, v.harness)


def test_rewrite_is_consistent(trajectories: list[dict]) -> None:
    v = augment(HARNESS, seed=21)
    t = trajectories[1]
    new = rewrite_trajectory(t, v)
    for old_step, new_step in zip(t["steps"], new["steps"], strict=True):
        od, nd = step_data(old_step), step_data(new_step)
        if old_step["kind"] == "tool_call":
            tool = v.renaming.tools[od["tool"]]
            assert nd["tool"] == new_step["name"] == tool
            assert nd["arguments"] == {v.renaming.arguments[tool][k]: val for k, val in od["arguments"].items()}
        if old_step["kind"] == "skill_load":
            assert nd["skill"] == new_step["name"] == v.renaming.skills[od["skill"]]
        if old_step["kind"] in ("hook_verdict", "correction"):
            assert nd["hook"] == v.renaming.hooks.get(od["hook"], od["hook"])
        if old_step["kind"] == "prompt":
            assert [s["id"] for s in nd["sections"]] == [v.renaming.sections[s["id"]] for s in od["sections"]]
        if old_step["kind"] == "model_output":
            raw = json.loads(nd["raw"])
            if raw.get("tool"):
                assert raw["tool"] in v.renaming.tools.values()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_cli_writes_valid_reproducible_variants(tmp_path: Path, trajectories: list[dict]) -> None:
    src = tmp_path / "raw.jsonl"
    other = dict(trajectories[0], harness_version="0000000000000000", request_id="req-other")
    # an experiment's ReAct arm: same harness version, no skills of it used; skipped, not replayed
    react = dict(trajectories[0], policy="react:policy_llm", request_id="req-react")
    src.write_text("".join(json.dumps(t) + "\n" for t in [*trajectories, other, react]))
    runner = CliRunner()
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        res = runner.invoke(augment_app, ["--harness", str(REPO_ROOT / "harness" / "default"), "--variants", "4",
                                          "--seed", "42", "--trajectories", str(src), "--out", str(out)])
        assert res.exit_code == 0, res.output
        outs.append(out)
    assert _tree(outs[0]) == _tree(outs[1])  # same seed, identical output
    index = json.loads((outs[0] / "index.json").read_text())
    assert index["trajectories"] == {"read": 4, "rewritten_per_variant": 2, "skipped_react_baseline": 1,
                                     "skipped_other_version": 1}
    assert set().union(*(set(v["kinds"]) for v in index["variants"])) == set(AUGMENT_KINDS)
    for entry in index["variants"]:
        folder = outs[0] / entry["path"]
        report = validate_path(folder / "harness")
        assert not report.errors and report.harness is not None
        assert report.harness.version() == entry["version"]
        mapping = json.loads((folder / "mapping.json").read_text())
        assert mapping["base_version"] == HARNESS.version() and mapping["version"] == entry["version"]
        lines = [json.loads(x) for x in (folder / "trajectories.jsonl").read_text().splitlines()]
        assert len(lines) == 2 and all(replay(x, report.harness) == [] for x in lines)
    res = CliRunner().invoke(augment_app, ["--harness", str(REPO_ROOT / "harness" / "default"), "--variants", "2",
                                           "--seed", "43", "--out", str(tmp_path / "c")])
    assert res.exit_code == 0 and _tree(tmp_path / "c") != _tree(outs[0])
