"""Harness-State Augmentation: the same harness re-rendered under renamed ids, rewritten wording,
reordered prompt sections and changed numbers, with a mapping to rewrite trajectories consistently.

Every transform reads the harness it is given; nothing here knows any shipped name.
"""

from __future__ import annotations

import copy
import json
import random
import re
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


# ---------------------------------------------------------------------------------------------
# Harness-State Augmentation (HSA): N seeded variants covering every kind of harness edit, and the
# consistent rewrite of recorded trajectories into each variant.
# ---------------------------------------------------------------------------------------------

AUGMENT_KINDS: tuple[str, ...] = ("skills", "tools", "prompt", "hooks", "constraints")
KIND_DOC = {
    "skills": "renamed skills, rewritten skill descriptions and content",
    "tools": "renamed tools, renamed and reordered argument fields, rewritten descriptions",
    "prompt": "reordered prompt sections, reworded section headings and instructions, renamed section ids",
    "hooks": "renamed hooks, changed retry budgets and thresholds",
    "constraints": "changed numeric constraints (reply length, discount cap, turn and token budgets)",
}

# Meaning-preserving rewordings of ordinary English (never of names: names are replaced first and
# matched as whole identifiers).
_PHRASES: list[tuple[str, list[str]]] = [
    ("briefly", ["concisely", "in a few words"]),
    ("warmly", ["kindly", "in a friendly way"]),
    ("viewer's", ["audience member's"]),
    ("viewers'", ["audience members'"]),
    ("viewers", ["audience members", "people watching"]),
    ("viewer", ["audience member", "person watching"]),
    ("comments", ["messages", "chat messages"]),
    ("comment", ["message", "chat message"]),
    ("questions", ["queries"]),
    ("question", ["query"]),
    ("Answer", ["Respond to", "Reply to"]),
    ("details", ["information"]),
    ("exactly", ["precisely"]),
    ("Never", ["Do not ever", "Under no circumstances"]),
    ("never", ["under no circumstances"]),
    ("only when", ["solely when"]),
    ("suggest", ["propose"]),
    ("Current", ["Present"]),
    ("current", ["present"]),
]
# Domain words of descriptions in other words (the augmentation family; the test split measures
# retention with a different family, eval/test/paraphrases.json). Link numbers keep their word: tool
# arguments are found by it.
_DOMAIN_PHRASES: list[tuple[str, list[str]]] = [
    ("price", ["amount charged", "selling price"]),
    ("stock", ["quantity on hand", "units in the warehouse"]),
    ("coupons", ["promo codes"]),
    ("coupon", ["promo code"]),
    ("discount", ["reduction", "price cut"]),
    ("product", ["article", "good"]),
    ("products", ["articles"]),
    ("colors", ["colourways"]),
    ("sizes", ["size range"]),
    ("shipping", ["postage"]),
    ("delivery", ["drop-off"]),
    ("refuse", ["decline"]),
    ("greet", ["say hello to"]),
    ("sold out", ["out of units"]),
    ("minimum spend", ["spending threshold"]),
    ("features", ["selling points"]),
]
_HEADING_STYLES = ["## {t}", "### {t}", "[{t}]", "{T}:", "== {t} ==", "**{t}**"]
_SECTION_WORDS = {"Active": "Current", "Relevant": "Related", "Live": "Streaming", "Loaded": "Active",
                  "Skills": "Skill catalogue", "Tools": "Available tools", "so far": "until now"}
_ARG_STYLES = ("camel", "suffix", "prefix", "short")
_ARG_SUFFIX = ["value", "ref", "input", "param"]
_ARG_PREFIX = ["the", "req", "in", "q"]


@dataclass
class Variant:
    """One augmented harness, how it was derived, and the mapping to rewrite trajectories."""

    index: int
    seed: int
    base_version: str
    harness: Harness
    renaming: Renaming
    kinds: list[str]
    changes: list[str] = field(default_factory=list)

    def mapping(self) -> dict[str, Any]:
        return {"index": self.index, "seed": self.seed, "base_version": self.base_version,
                "version": self.harness.version(), "name": self.harness.name, "kinds": self.kinds,
                "renaming": self.renaming.as_dict(), "changes": self.changes}


def _names_pattern(mapping: dict[str, str]) -> re.Pattern[str] | None:
    names = sorted((k for k, v in mapping.items() if k != v), key=len, reverse=True)
    if not names:
        return None
    return re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(n) for n in names) + r")(?![A-Za-z0-9_])")


def replace_names(text: str, mapping: dict[str, str]) -> str:
    """Replace whole identifiers (not parts of longer identifiers) by their new names."""
    pattern = _names_pattern(mapping)
    return pattern.sub(lambda m: mapping[m.group(1)], text) if pattern and text else text


def reword(text: str, rng: random.Random, rate: float = 0.6) -> str:
    """Swap ordinary and domain phrases for other words (each phrase with probability ``rate``),
    word-bounded."""
    for phrase, options in _PHRASES + _DOMAIN_PHRASES:
        if rng.random() >= rate:
            continue
        choice = rng.choice(options)
        text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(phrase)}(?![A-Za-z0-9_])", choice, text)
    return text


def _rewrite_body(body: str, rng: random.Random) -> str:
    """Rewrite skill content: reworded, re-headed, numbered steps as bullets or vice versa."""
    lines = body.rstrip("\n").split("\n")
    out: list[str] = []
    bullets = rng.random() < 0.5
    step = 0
    for line in lines:
        heading = re.match(r"^#+\s+(.*)$", line)
        numbered = re.match(r"^\s*(\d+)[.)]\s+(.*)$", line)
        if heading:
            out.append(rng.choice(["# ", "## ", "### "]) + rng.choice(["", "How to: ", "Skill: "]) + heading.group(1))
        elif numbered:
            step += 1
            out.append(("- " if bullets else f"{step}) ") + reword(numbered.group(2), rng))
        else:
            out.append(reword(line, rng))
    return "\n".join(out) + "\n"


def _describe(text: str, rng: random.Random) -> str:
    text = reword(text, rng)
    prefix = rng.choice(["", *_DESCRIPTION_PREFIXES])
    if not prefix or not text:
        return text
    return f"{prefix} {text[0].lower()}{text[1:]}"


def _arg_name(old: str, rng: random.Random, used: set[str]) -> str:
    parts = [p for p in re.split(r"_+", old) if p]
    for _ in range(20):
        style = rng.choice(_ARG_STYLES)
        if style == "camel" and len(parts) > 1:
            new = parts[0].lower() + "".join(p.title() for p in parts[1:])
        elif style == "camel":
            new = f"{old}{rng.choice(_ARG_SUFFIX).title()}"
        elif style == "suffix":
            new = f"{old}_{rng.choice(_ARG_SUFFIX)}"
        elif style == "prefix":
            new = f"{rng.choice(_ARG_PREFIX)}_{old}"
        else:
            new = "_".join(p[:3] for p in parts) + f"_{rng.randint(1, 9)}"
        if new != old and new not in used:
            used.add(new)
            return new
    new = f"{old}_{len(used)}"
    used.add(new)
    return new


def _heading(template: str, rng: random.Random) -> str:
    """Reword a section template's heading line; the {content} placeholder stays."""
    match = re.match(r"^(#+\s*)?([^\n{]+?)\s*\n(.*)$", template, re.S)
    if not match:
        return template
    title = match.group(2).strip().strip("[]*:=# ")
    for old, new in _SECTION_WORDS.items():
        if rng.random() < 0.5:
            title = re.sub(rf"\b{re.escape(old)}\b", new, title)
    style = rng.choice(_HEADING_STYLES)
    return style.format(t=title, T=title.upper()) + "\n" + match.group(3)


def _scaled(rng: random.Random, value: float, lo: float, hi: float, low_factor: float, high_factor: float) -> float:
    return min(hi, max(lo, value * rng.uniform(low_factor, high_factor)))


def augment(harness: Harness, seed: int, index: int = 0, kinds: list[str] | tuple[str, ...] = AUGMENT_KINDS
            ) -> Variant:
    """One variant of ``harness`` with the given kinds of edits, deterministic in (seed, index)."""
    unknown = set(kinds) - set(AUGMENT_KINDS)
    if unknown:
        raise ValueError(f"unknown augmentation kinds {sorted(unknown)}; known: {', '.join(AUGMENT_KINDS)}")
    rng = random.Random(f"hsa:{seed}:{index}")
    data = harness.canonical()
    used: set[str] = {s["id"] for s in data["skills"]} | {t["name"] for t in data["tools"]} | \
        {h["id"] for h in data["hooks"]} | {s["id"] for s in data["prompt"]["sections"]}
    ren = Renaming()
    changes: list[str] = []
    ren.skills = {s["id"]: (_fresh_name(rng, used, "snake") if "skills" in kinds else s["id"]) for s in data["skills"]}
    ren.tools = {t["name"]: (_fresh_name(rng, used, rng.choice(["snake", "camel"])) if "tools" in kinds else t["name"])
                 for t in data["tools"]}
    ren.hooks = {h["id"]: (_fresh_name(rng, used, "snake") if "hooks" in kinds else h["id"]) for h in data["hooks"]}
    ren.sections = {s["id"]: (_fresh_name(rng, used, "snake") if "prompt" in kinds else s["id"])
                    for s in data["prompt"]["sections"]}
    names = {**ren.skills, **ren.tools}

    # Names in free text (instructions, skill content, descriptions, hook messages) follow the renames.
    data["instructions"] = replace_names(data["instructions"], names)
    data["fallback"]["text"] = replace_names(data["fallback"]["text"], names)
    data["rules"]["extra"] = [replace_names(x, names) for x in data["rules"]["extra"]]

    for skill in data["skills"]:
        skill["tools"] = [ren.tools[t] for t in skill["tools"]]
        skill["description"] = replace_names(skill["description"], names)
        skill["body"] = replace_names(skill["body"], names)
        if "skills" in kinds:
            skill["id"] = ren.skills[skill["id"]]
            skill["description"] = _describe(skill["description"], rng)
            skill["body"] = _rewrite_body(skill["body"], rng)
    if "skills" in kinds:
        changes.append(f"renamed {len(ren.skills)} skills and rewrote their descriptions and content")

    for tool in data["tools"]:
        old_name = tool["name"]
        tool["name"] = ren.tools[old_name]
        tool["description"] = replace_names(tool["description"], names)
        props = tool["parameters"].get("properties", {})
        if "tools" not in kinds:
            ren.arguments[tool["name"]] = {k: k for k in props}
            continue
        tool["description"] = _describe(tool["description"], rng)
        arg_used: set[str] = set(props)
        mapping = {old: _arg_name(old, rng, arg_used) for old in props}
        ren.arguments[tool["name"]] = mapping
        items = [(mapping[k], {**v, **({"description": reword(v["description"], rng)}
                                      if isinstance(v.get("description"), str) else {})})
                 for k, v in props.items()]
        rng.shuffle(items)
        tool["parameters"]["properties"] = dict(items)
        if "required" in tool["parameters"]:
            req = [mapping.get(r, r) for r in tool["parameters"]["required"]]
            rng.shuffle(req)
            tool["parameters"]["required"] = req
        tool["binding"]["arguments"] = {op: mapping.get(arg, arg) for op, arg in tool["binding"]["arguments"].items()}
    if "tools" in kinds:
        changes.append(f"renamed {len(ren.tools)} tools, renamed and reordered their arguments, rewrote descriptions")

    for hook in data["hooks"]:
        hook["id"] = ren.hooks[hook["id"]]
        hook["on_fail"]["message"] = replace_names(hook["on_fail"]["message"], names)
        params = hook["params"]
        if isinstance(params.get("tools"), list):
            params["tools"] = [ren.tools.get(t, t) for t in params["tools"]]
        if isinstance(params.get("skills"), list):
            params["skills"] = [ren.skills.get(s, s) for s in params["skills"]]
        if "hooks" not in kinds:
            continue
        if hook["on_fail"]["action"] == "correct":
            hook["retry_budget"] = rng.randint(1, 3)
        for key, lo, hi in (("max_corrections", 2, 5), ("max_identical_calls", 2, 3), ("spam_repeat_chars", 8, 16)):
            if isinstance(params.get(key), int) and not isinstance(params.get(key), bool):
                params[key] = rng.randint(lo, hi)
        if isinstance(params.get("max_chars"), int) and hook["kind"] == "input_validation":
            params["max_chars"] = rng.randint(300, 800)
        if isinstance(params.get("max_chars"), int) and hook["kind"] == "reply_format":
            params["max_chars"] = int(_scaled(rng, params["max_chars"], 120, 600, 0.8, 1.25))
    if "hooks" in kinds:
        changes.append("renamed hooks; new retry budgets "
                       + ", ".join(f"{h['id']}={h['retry_budget']}" for h in data["hooks"])
                       + "; thresholds " + json.dumps({h["id"]: {k: v for k, v in h["params"].items()
                                                                 if isinstance(v, int) and not isinstance(v, bool)}
                                                       for h in data["hooks"]}, sort_keys=True))

    sections = data["prompt"]["sections"]
    for section in sections:
        section["id"] = ren.sections[section["id"]]
        section["template"] = replace_names(section["template"], names)
    data["prompt"]["truncation_order"] = [ren.sections[s] for s in data["prompt"]["truncation_order"]]
    if "prompt" in kinds:
        for section in sections:
            section["template"] = _heading(section["template"], rng)
        head = [s for s in sections if s["source"] == "base_instructions"]
        rest = [s for s in sections if s["source"] != "base_instructions"]
        rng.shuffle(rest)
        data["prompt"]["sections"] = head + rest
        data["instructions"] = reword(data["instructions"], rng)
        changes.append("reordered prompt sections " + ", ".join(s["id"] for s in data["prompt"]["sections"])
                       + "; reworded headings and instructions")

    if "constraints" in kinds:
        rules, limits = data["rules"], data["limits"]
        rules["max_reply_chars"] = int(_scaled(rng, rules["max_reply_chars"], 120, 600, 0.75, 1.3))
        if rules["max_discount_pct"]:
            rules["max_discount_pct"] = float(round(_scaled(rng, rules["max_discount_pct"], 5, 60, 0.5, 1.5)))
        limits["max_turns"] = limits["max_turns"] + rng.randint(0, 2)  # never fewer turns than recorded
        limits["time_budget_ms"] = int(_scaled(rng, limits["time_budget_ms"], 4000, 20000, 0.9, 1.5))
        data["prompt"]["token_budget"] = int(_scaled(rng, data["prompt"]["token_budget"], 1000, 8000, 0.9, 1.3))
        changes.append(f"max_reply_chars={rules['max_reply_chars']}, max_discount_pct={rules['max_discount_pct']:g}, "
                       f"max_turns={limits['max_turns']}, time_budget_ms={limits['time_budget_ms']}, "
                       f"token_budget={data['prompt']['token_budget']}")

    data["skills"].sort(key=lambda sk: f"{sk['id']}.md")  # the order a harness folder loads in (one file each)
    data["name"] = f"{data['name']}-hsa-{seed}-{index}"
    data["description"] = f"{data['description']} (HSA variant {index} of seed {seed}: {', '.join(kinds)})".strip()
    return Variant(index=index, seed=seed, base_version=harness.version(), harness=Harness.model_validate(data),
                   renaming=ren, kinds=list(kinds), changes=changes)


def plan_kinds(n: int, seed: int) -> list[list[str]]:
    """Which kinds each of ``n`` variants applies: random subsets that together cover every kind
    (with one variant, all of them)."""
    rng = random.Random(f"hsa-plan:{seed}")
    plans = [[k for k in AUGMENT_KINDS if rng.random() < 0.7] for _ in range(n)]
    for i, plan in enumerate(plans):
        if not plan:
            plan.append(AUGMENT_KINDS[i % len(AUGMENT_KINDS)])
    for j, kind in enumerate(AUGMENT_KINDS):
        if n and not any(kind in p for p in plans):
            plans[j % n].append(kind)
    return [[k for k in AUGMENT_KINDS if k in p] for p in plans]


def variants(harness: Harness, n: int, seed: int) -> list[Variant]:
    """``n`` validated variants; raises HarnessError if one fails validation (a bug here)."""
    from livehost.harness.loader import HarnessError
    from livehost.harness.validate import validate_bundle

    out = []
    for i, kinds in enumerate(plan_kinds(n, seed)):
        v = augment(harness, seed, i, kinds)
        report = validate_bundle(v.harness.canonical())
        if report.errors:
            raise HarnessError(report.errors)
        out.append(v)
    return out


# -- trajectories ------------------------------------------------------------------------------

def _rewrite_action_json(raw: str, v: Variant) -> str:
    """A raw model output: rewritten field by field when it is a JSON action, else by names."""
    try:
        obj = json.loads(raw)
    except (ValueError, TypeError):
        return replace_names(raw, {**v.renaming.skills, **v.renaming.tools})
    if isinstance(obj, dict):
        obj = _rewrite_action(obj, v, key="action")
        return json.dumps(obj, ensure_ascii=False)
    return raw


def _rewrite_args(tool: str | None, args: Any, v: Variant) -> Any:
    if not isinstance(args, dict) or tool is None:
        return args
    mapping = v.renaming.arguments.get(tool, {})
    return {mapping.get(k, k): val for k, val in args.items()}


def _rewrite_action(data: dict[str, Any], v: Variant, key: str = "kind") -> dict[str, Any]:
    out = dict(data)
    if isinstance(out.get("skill"), str):
        out["skill"] = v.renaming.skills.get(out["skill"], out["skill"])
    if isinstance(out.get("tool"), str):
        out["tool"] = v.renaming.tools.get(out["tool"], out["tool"])
        if "arguments" in out:
            out["arguments"] = _rewrite_args(out["tool"], out["arguments"], v)
    return out


def _text(value: Any, names: dict[str, str]) -> Any:
    return replace_names(value, names) if isinstance(value, str) else value


def rewrite_trajectory(traj: dict[str, Any], v: Variant) -> dict[str, Any]:
    """A raw-export trajectory re-expressed in a variant's names: skill loads, tool calls and results,
    argument names, hook names in verdicts and corrections, prompt section ids, names in texts."""
    ren = v.renaming
    names = {**ren.skills, **ren.tools, **ren.hooks}
    out = dict(traj)
    out["harness_version"] = v.harness.version()
    out["reason"] = _text(traj.get("reason"), names)
    steps = []
    for step in traj["steps"]:
        s = dict(step)
        data = step_data(s)
        kind, name = s["kind"], s.get("name")
        if kind == "skill_load":
            s["name"] = ren.skills.get(name, name) if name else name
            if "skill" in data:
                data["skill"] = ren.skills.get(data["skill"], data["skill"])
        elif kind in ("tool_call", "tool_result"):
            s["name"] = ren.tools.get(name, name) if name else name
            if "tool" in data:
                data["tool"] = ren.tools.get(data["tool"], data["tool"])
            if kind == "tool_call":
                data["arguments"] = _rewrite_args(data.get("tool"), data.get("arguments"), v)
            else:
                data["error_message"] = _text(data.get("error_message"), names)
        elif kind == "action":
            data = _rewrite_action(data, v)
            data["error"] = _text(data.get("error"), names)
        elif kind == "model_output":
            if isinstance(data.get("raw"), str):
                data["raw"] = _rewrite_action_json(data["raw"], v)
        elif kind in ("hook_verdict", "input_hook", "correction"):
            s["name"] = ren.hooks.get(name, name) if name else name
            if "hook" in data:
                data["hook"] = ren.hooks.get(data["hook"], data["hook"])
            for key in ("reason", "message"):
                data[key] = _text(data.get(key), names)
        elif kind == "prompt":
            for section in data.get("sections") or []:
                if isinstance(section, dict) and "id" in section:
                    section["id"] = ren.sections.get(section["id"], section["id"])
            data["text"] = _text(data.get("text"), {**ren.skills, **ren.tools})
        elif kind in ("fallback", "no_reply", "cancel", "reply"):
            data["reason"] = _text(data.get("reason"), names)
        if "data_json" in s:  # the topic's shape: the payload as a JSON string
            s["data_json"] = json.dumps(data, sort_keys=True, ensure_ascii=False)
        else:  # the raw export's shape: the payload nested
            s["data"] = data
        steps.append(s)
    out["steps"] = steps
    return out


def step_data(step: dict[str, Any]) -> dict[str, Any]:
    """A step's payload: nested ``data`` (raw export) or the ``data_json`` string (topic, table)."""
    if isinstance(step.get("data"), dict):
        return copy.deepcopy(dict(step["data"]))
    return dict(json.loads(step.get("data_json") or "{}"))


def replay(traj: dict[str, Any], harness: Harness) -> list[str]:
    """Problems replaying a trajectory's structure against a harness (empty when it replays): every
    tool call names a tool of the harness with arguments valid for its schema, every loaded skill
    exists, and a reply skill was loaded before a reply."""
    import jsonschema

    problems: list[str] = []
    loaded: list[str] = []
    for step in traj["steps"]:
        data = step_data(step)
        if step["kind"] == "tool_call":
            tool = harness.tool(data.get("tool") or "")
            if tool is None:
                problems.append(f"step {step['seq']}: unknown tool {data.get('tool')!r}")
                continue
            errors = list(jsonschema.Draft202012Validator(tool.parameters).iter_errors(data.get("arguments") or {}))
            problems += [f"step {step['seq']}: {tool.name} arguments: {e.message}" for e in errors]
        elif step["kind"] == "skill_load":
            skill = data.get("skill") or step.get("name")
            if harness.skill(skill or "") is None:
                problems.append(f"step {step['seq']}: unknown skill {skill!r}")
            loaded.append(skill or "")
        elif step["kind"] == "reply" and data.get("outcome", "reply") == "reply":
            kinds = {s.kind for s in harness.skills if s.id in loaded}
            if "reply" not in kinds:
                problems.append(f"step {step['seq']}: reply without a loaded reply skill (loaded {loaded})")
    return problems
