"""A readable, per-component diff of two harnesses.

Components: top-level settings, skills (added / removed / renamed / changed lines), tools (schema
properties and required arguments, binding, timeout, side effects), hooks (params and failure
policy), the prompt pipeline (section order, sources, templates, truncation) and the rules.

``diff(a, b)`` gives structured :class:`Change` records (what a UI or the gRPC API can show);
``render(changes)`` / ``format_diff(a, b)`` the text an operator reads. Identical harnesses give no
changes and an empty text.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from livehost.harness.model import Harness, Hook, Skill, Tool


@dataclass
class Change:
    component: str  # harness | skills | tools | hooks | prompt | rules
    op: str  # "+" added, "-" removed, "~" changed
    name: str  # what changed, e.g. "skill item_x" or "max_discount_pct"
    details: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"{self.op} {self.name}"] + [f"    {d}" for d in self.details]


COMPONENTS = ("harness", "skills", "tools", "hooks", "prompt", "rules")


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def unified(old: str, new: str, context: int = 1) -> list[str]:
    """Changed lines of a text, unified-diff style without the file headers."""
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context):
        if line.startswith(("---", "+++")):
            continue
        out.append(line)
    return out


def _text_change(label: str, old: str, new: str) -> list[str]:
    if old == new:
        return []
    if "\n" not in old.strip() and "\n" not in new.strip():
        return [f"{label}: {old!r} → {new!r}"]
    return [f"{label}:"] + [f"  {line}" for line in unified(old, new)]


def _value_change(label: str, old: Any, new: Any) -> list[str]:
    return [] if old == new else [f"{label}: {_j(old)} → {_j(new)}"]


def _list_change(label: str, old: list[Any], new: list[Any]) -> list[str]:
    if old == new:
        return []
    added = [x for x in new if x not in old]
    removed = [x for x in old if x not in new]
    parts = [f"+{_j(x) if not isinstance(x, str) else x}" for x in added]
    parts += [f"-{_j(x) if not isinstance(x, str) else x}" for x in removed]
    if not parts:
        return [f"{label}: order {_j(old)} → {_j(new)}"]
    return [f"{label}: {' '.join(parts)}"]


def _dict_change(label: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            out.append(f"{label}.{key} added: {_j(new[key])}")
        elif key not in new:
            out.append(f"{label}.{key} removed (was {_j(old[key])})")
        elif old[key] != new[key]:
            out.append(f"{label}.{key}: {_j(old[key])} → {_j(new[key])}")
    return out


# -- components ---------------------------------------------------------------------------------

def _top(a: Harness, b: Harness) -> list[Change]:
    details = (_text_change("name", a.name, b.name) + _text_change("description", a.description, b.description)
               + _text_change("instructions", a.instructions, b.instructions)
               + _dict_change("limits", a.limits.model_dump(), b.limits.model_dump())
               + _dict_change("fallback", a.fallback.model_dump(), b.fallback.model_dump()))
    return [Change("harness", "~", "settings", details)] if details else []


def _skill_details(old: Skill, new: Skill) -> list[str]:
    return (_value_change("kind", old.kind, new.kind)
            + _text_change("description", old.description, new.description)
            + _list_change("tools", old.tools, new.tools)
            + _text_change("body", old.body, new.body))


def _skills(a: Harness, b: Harness) -> list[Change]:
    old = {s.id: s for s in a.skills}
    new = {s.id: s for s in b.skills}
    removed = [s for sid, s in old.items() if sid not in new]
    added = [s for sid, s in new.items() if sid not in old]
    changes: list[Change] = []
    # A removed and an added skill with the same body (or description) are a rename.
    for gone in list(removed):
        twin = next((s for s in added if s.body == gone.body or s.description == gone.description), None)
        if twin is not None:
            removed.remove(gone)
            added.remove(twin)
            changes.append(Change("skills", "~", f"skill {gone.id} → {twin.id} (renamed)",
                                  _skill_details(gone, twin)))
    for s in added:
        tools = [f"tools: {', '.join(s.tools)}"] if s.tools else []
        changes.append(Change("skills", "+", f"skill {s.id} ({s.kind})", [f"description: {s.description}", *tools]))
    for s in removed:
        changes.append(Change("skills", "-", f"skill {s.id} ({s.kind})"))
    for sid in old.keys() & new.keys():
        details = _skill_details(old[sid], new[sid])
        if details:
            changes.append(Change("skills", "~", f"skill {sid}", details))
    changes.sort(key=lambda c: (c.op != "+", c.op != "-", c.name))
    return changes


def _schema_details(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    op, np_ = old.get("properties", {}) or {}, new.get("properties", {}) or {}
    for key in sorted(set(op) | set(np_)):
        if key not in op:
            out.append(f"argument {key} added: {_j(np_[key])}")
        elif key not in np_:
            out.append(f"argument {key} removed")
        elif op[key] != np_[key]:
            out.extend(_dict_change(f"argument {key}", op[key], np_[key]))
    out += _list_change("required", old.get("required", []) or [], new.get("required", []) or [])
    rest_old = {k: v for k, v in old.items() if k not in ("properties", "required")}
    rest_new = {k: v for k, v in new.items() if k not in ("properties", "required")}
    out += _dict_change("schema", rest_old, rest_new)
    return out


def _tool_details(old: Tool, new: Tool) -> list[str]:
    return (_text_change("description", old.description, new.description)
            + _schema_details(old.parameters, new.parameters)
            + _value_change("binding.operation", old.binding.operation, new.binding.operation)
            + _dict_change("binding.arguments", old.binding.arguments, new.binding.arguments)
            + _value_change("timeout_ms", old.timeout_ms, new.timeout_ms)
            + _value_change("side_effect", old.side_effect, new.side_effect))


def _tools(a: Harness, b: Harness) -> list[Change]:
    old = {t.name: t for t in a.tools}
    new = {t.name: t for t in b.tools}
    removed = [t for n, t in old.items() if n not in new]
    added = [t for n, t in new.items() if n not in old]
    changes: list[Change] = []
    for gone in list(removed):
        twin = next((t for t in added if t.binding == gone.binding), None)
        if twin is not None:
            removed.remove(gone)
            added.remove(twin)
            changes.append(Change("tools", "~", f"tool {gone.name} → {twin.name} (renamed)", _tool_details(gone, twin)))
    for t in added:
        props = ", ".join(t.parameters.get("properties", {}) or {})
        changes.append(Change("tools", "+", f"tool {t.name}",
                              [f"description: {t.description}", f"arguments: {props or '(none)'}",
                               f"binding: {t.binding.operation}"]
                              + (["side_effect: true"] if t.side_effect else [])))
    for t in removed:
        changes.append(Change("tools", "-", f"tool {t.name}"))
    for name in old.keys() & new.keys():
        details = _tool_details(old[name], new[name])
        if details:
            changes.append(Change("tools", "~", f"tool {name}", details))
    changes.sort(key=lambda c: (c.op != "+", c.op != "-", c.name))
    return changes


def _hook_details(old: Hook, new: Hook) -> list[str]:
    return (_value_change("stage", old.stage, new.stage) + _value_change("kind", old.kind, new.kind)
            + _dict_change("params", old.params, new.params)
            + _value_change("on_fail.action", old.on_fail.action, new.on_fail.action)
            + _text_change("on_fail.message", old.on_fail.message, new.on_fail.message)
            + _value_change("retry_budget", old.retry_budget, new.retry_budget)
            + _value_change("enabled", old.enabled, new.enabled))


def _hooks(a: Harness, b: Harness) -> list[Change]:
    old = {h.id: h for h in a.hooks}
    new = {h.id: h for h in b.hooks}
    changes: list[Change] = []
    for hid, h in new.items():
        if hid not in old:
            changes.append(Change("hooks", "+", f"hook {hid} ({h.stage}/{h.kind})",
                                  [f"params: {_j(h.params)}", f"on_fail: {h.on_fail.action}",
                                   f"retry_budget: {h.retry_budget}"]))
    for hid, h in old.items():
        if hid not in new:
            changes.append(Change("hooks", "-", f"hook {hid} ({h.stage}/{h.kind})"))
    for hid in old.keys() & new.keys():
        details = _hook_details(old[hid], new[hid])
        if details:
            changes.append(Change("hooks", "~", f"hook {hid}", details))
    common_old = [h.id for h in a.hooks if h.id in new]
    common_new = [h.id for h in b.hooks if h.id in old]
    if common_old != common_new:
        changes.append(Change("hooks", "~", "hook order", [f"{', '.join(common_old)} → {', '.join(common_new)}"]))
    changes.sort(key=lambda c: (c.op != "+", c.op != "-", c.name))
    return changes


def _prompt(a: Harness, b: Harness) -> list[Change]:
    pa, pb = a.prompt, b.prompt
    changes: list[Change] = []
    if pa.token_budget != pb.token_budget:
        changes.append(Change("prompt", "~", "token_budget", [f"{pa.token_budget} → {pb.token_budget}"]))
    old = {s.id: s for s in pa.sections}
    new = {s.id: s for s in pb.sections}
    for s in pb.sections:
        if s.id not in old:
            changes.append(Change("prompt", "+", f"section {s.id} (source {s.source})",
                                  [f"at position {pb.sections.index(s) + 1}"]))
    for s in pa.sections:
        if s.id not in new:
            changes.append(Change("prompt", "-", f"section {s.id} (source {s.source})"))
    for sid in [s.id for s in pb.sections if s.id in old]:
        details = _value_change("source", old[sid].source, new[sid].source) + _text_change(
            "template", old[sid].template, new[sid].template)
        if details:
            changes.append(Change("prompt", "~", f"section {sid}", details))
    order_old = [s.id for s in pa.sections]
    order_new = [s.id for s in pb.sections]
    if [x for x in order_old if x in new] != [x for x in order_new if x in old]:
        changes.append(Change("prompt", "~", "section order",
                              [f"was: {' > '.join(order_old)}", f"now: {' > '.join(order_new)}"]))
    if pa.truncation_order != pb.truncation_order:
        changes.append(Change("prompt", "~", "truncation_order",
                              [f"{', '.join(pa.truncation_order) or '(none)'} → "
                               f"{', '.join(pb.truncation_order) or '(none)'}"]))
    return changes


def _rules(a: Harness, b: Harness) -> list[Change]:
    ra, rb = a.rules.model_dump(), b.rules.model_dump()
    changes: list[Change] = []
    for key in ra:
        if ra[key] == rb[key]:
            continue
        if isinstance(ra[key], list):
            changes.append(Change("rules", "~", key, _list_change("items", ra[key], rb[key])))
        else:
            changes.append(Change("rules", "~", key, [f"{_j(ra[key])} → {_j(rb[key])}"]))
    return changes


def diff(a: Harness, b: Harness) -> list[Change]:
    """Every change from ``a`` to ``b``, grouped by component in :data:`COMPONENTS` order."""
    return _top(a, b) + _skills(a, b) + _tools(a, b) + _hooks(a, b) + _prompt(a, b) + _rules(a, b)


def render(changes: list[Change], header: str = "") -> str:
    if not changes:
        return ""
    out = [header] if header else []
    for component in COMPONENTS:
        group = [c for c in changes if c.component == component]
        if not group:
            continue
        added = sum(c.op == "+" for c in group)
        removed = sum(c.op == "-" for c in group)
        changed = sum(c.op == "~" for c in group)
        out.append(f"== {component} (+{added} -{removed} ~{changed}) ==")
        for change in group:
            out.extend(change.lines())
    return "\n".join(out) + "\n"


def format_diff(a: Harness, b: Harness, a_label: str = "", b_label: str = "") -> str:
    """The text diff from ``a`` to ``b`` (empty when identical)."""
    header = f"harness {a_label or a.version()} → {b_label or b.version()}"
    return render(diff(a, b), header)
