"""Harness-State Augmentation: the same harness re-rendered under renamed ids, rewritten wording,
reordered prompt sections and changed numbers, with a mapping to rewrite trajectories consistently.

Every transform reads the harness it is given; nothing here knows any shipped name.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from livehost.harness.model import Harness

_ADJ = ["swift", "amber", "quiet", "bright", "lunar", "coral", "steady", "nimble", "velvet", "polar"]
_NOUN = ["otter", "harbor", "lantern", "meadow", "falcon", "quartz", "willow", "comet", "summit", "ember"]
_DESCRIPTION_PREFIXES = ["Use this to", "Helps you", "When needed:", "Purpose:"]


@dataclass
class Renaming:
    """How one variant renamed things (old -> new), to rewrite trajectories consistently."""

    skills: dict[str, str] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)
    arguments: dict[str, dict[str, str]] = field(default_factory=dict)  # new tool name -> old arg -> new arg
    hooks: dict[str, str] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"skills": self.skills, "tools": self.tools, "arguments": self.arguments, "hooks": self.hooks,
                "sections": self.sections}


def _fresh_name(rng: random.Random, used: set[str], style: str) -> str:
    while True:
        a, n = rng.choice(_ADJ), rng.choice(_NOUN)
        name = f"{a}_{n}_{rng.randint(10, 99)}" if style == "snake" else f"{a}{n.title()}{rng.randint(10, 99)}"
        if name not in used:
            used.add(name)
            return name


def rename_everything(harness: Harness, seed: int = 0, *, reword: bool = True, reorder: bool = True,
                      rename_arguments: bool = True) -> tuple[Harness, Renaming]:
    """Rename every skill, tool, tool argument, hook and prompt section (and every reference to
    them), optionally reword descriptions and reorder prompt sections."""
    rng = random.Random(seed)
    used: set[str] = set()
    ren = Renaming()
    data = harness.canonical()
    for skill in data["skills"]:
        ren.skills[skill["id"]] = _fresh_name(rng, used, "snake")
    for tool in data["tools"]:
        ren.tools[tool["name"]] = _fresh_name(rng, used, rng.choice(["snake", "camel"]))
    for hook in data["hooks"]:
        ren.hooks[hook["id"]] = _fresh_name(rng, used, "snake")
    for section in data["prompt"]["sections"]:
        ren.sections[section["id"]] = _fresh_name(rng, used, "snake")

    for skill in data["skills"]:
        skill["id"] = ren.skills[skill["id"]]
        skill["tools"] = [ren.tools[t] for t in skill["tools"]]
        if reword:
            skill["description"] = f"{rng.choice(_DESCRIPTION_PREFIXES)} {skill['description'][0].lower()}" \
                                   f"{skill['description'][1:]}"
    for tool in data["tools"]:
        new_name = ren.tools[tool["name"]]
        tool["name"] = new_name
        if reword:
            tool["description"] = f"{rng.choice(_DESCRIPTION_PREFIXES)} {tool['description'][0].lower()}" \
                                  f"{tool['description'][1:]}"
        if rename_arguments:
            props = tool["parameters"].get("properties", {})
            mapping = {old: f"{old}_{rng.choice(['v', 'arg', 'in', 'x'])}{rng.randint(1, 9)}" for old in props}
            ren.arguments[new_name] = mapping
            items = [(mapping[k], v) for k, v in props.items()]
            if reorder:
                rng.shuffle(items)
            tool["parameters"]["properties"] = dict(items)
            if "required" in tool["parameters"]:
                tool["parameters"]["required"] = [mapping[r] for r in tool["parameters"]["required"]]
            binding = tool["binding"]["arguments"]
            tool["binding"]["arguments"] = {op: mapping.get(arg, arg) for op, arg in binding.items()}
    for hook in data["hooks"]:
        hook["id"] = ren.hooks[hook["id"]]
    for section in data["prompt"]["sections"]:
        section["id"] = ren.sections[section["id"]]
    data["prompt"]["truncation_order"] = [ren.sections[s] for s in data["prompt"]["truncation_order"]]
    if reorder:
        rng.shuffle(data["prompt"]["sections"])
    data["name"] = f"{data['name']}-variant-{seed}"
    return Harness.model_validate(data), ren
