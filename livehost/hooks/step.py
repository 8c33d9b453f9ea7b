"""Step stage: checks on every policy action, by hook kind.

Each check gets the hook (its parameters come from the harness), the harness, the request state
and the parsed action, and returns a failure reason or None.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema

from livehost.agent import state as st
from livehost.commerce.operations import OPERATIONS
from livehost.harness.model import Harness, Hook
from livehost.hooks.disclosure import DEFAULT_LINE_WORDS, DEFAULT_RUN_WORDS, disclosure_reason
from livehost.hooks.gate import policy_for, static_reason
from livehost.hooks.verdict import Verdict, VerdictKind
from livehost.understanding.quote import derived_numbers

CONTROL_TOKEN = re.compile(r"<[^<>\s]{1,24}>|\[[a-z]+_[a-z0-9]+\]")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
STOPWORDS = {"in", "on", "the", "a", "an", "of", "is", "are", "and", "to", "for"}


def strip_control_tokens(text: str) -> str:
    return CONTROL_TOKEN.sub(" ", text)


def _numbers(text: str) -> set[str]:
    out = set()
    for raw in NUMBER.findall(text):
        try:
            value = float(raw.replace(",", ""))
        except ValueError:
            continue
        out.add(f"{value:g}")
    return out


def evidence_text(state: dict[str, Any]) -> str:
    """Everything the reply may rely on: ok tool results, the product data and FAQ the prompt showed,
    and the live-room state (campaign)."""
    # JSON written with its characters as they are: an escaped Chinese character ("满199" as "\u6ee1199")
    # would glue its hex digits to the number next to it
    room = state.get("room_json") or ""
    try:
        room = json.dumps(json.loads(room), ensure_ascii=False) if room else ""
    except ValueError:
        pass
    parts = [room]
    shown: set[str] = set()  # every turn's prompt usually shows the same evidence: written out once
    for step in state["steps"]:
        if step["kind"] == "tool_result":
            data = json.loads(step.get("data_json") or "{}")
            if data.get("ok"):
                parts.append(json.dumps(data.get("result"), default=str, ensure_ascii=False))
        elif step["kind"] == "prompt":
            evidence = _prompt_evidence(step.get("data_json") or "{}")
            if evidence not in shown:
                shown.add(evidence)
                parts.append(evidence)
    return "\n".join(parts)


@functools.lru_cache(maxsize=256)
def _prompt_evidence(data_json: str) -> str:
    """The evidence a prompt step showed, as evidence_text writes it. A prompt step is ~7 KB of JSON (its
    text) for a few hundred bytes of evidence, and every action's check decoded every turn's prompt
    again: cached by the step's JSON (a step never changes, and a clone shares its string)."""
    return json.dumps(json.loads(data_json).get("evidence"), default=str, ensure_ascii=False)


def _tool_arguments(hook: Hook, harness: Harness, state: dict[str, Any], action: dict[str, Any]) -> str | None:
    if action["kind"] != "call_tool":
        return None
    tool = harness.tool(action.get("tool") or "")
    if tool is None:
        names = ", ".join(t.name for t in harness.tools)
        return f"unknown tool {action.get('tool')!r}; available tools: {names}"
    args = action.get("arguments") or {}
    errors = sorted(jsonschema.Draft202012Validator(tool.parameters).iter_errors(args), key=lambda e: e.path)
    if errors:
        return "; ".join(f"{'/'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:3])
    max_discount = harness.rules.max_discount_pct
    room = st.room(state)
    campaign_max = (room.get("campaign") or {}).get("max_discount_pct")
    limit = min(x for x in (max_discount, campaign_max) if x is not None) if (max_discount or campaign_max) else None
    for key, value in args.items():
        if limit is not None and "discount" in key.lower() and isinstance(value, int | float) and value > limit:
            return f"argument {key}={value} exceeds the campaign maximum discount of {limit:g}%"
    return None


def _retry_control(hook: Hook, harness: Harness, state: dict[str, Any], action: dict[str, Any]) -> str | None:
    """Loop detection: the same tool call with the same arguments repeated. (The correction budget
    of the request is applied in ``check_action``: it only matters when another hook fails.)"""
    if action["kind"] == "call_tool":
        signature = json.dumps([action.get("tool"), action.get("arguments")], sort_keys=True)
        same = sum(1 for s in st.steps(state, "tool_call")
                   if json.dumps([s["data"].get("tool"), s["data"].get("arguments")], sort_keys=True) == signature)
        if same >= int(hook.params.get("max_identical_calls", 2)):
            return f"identical call to {action.get('tool')} repeated {same} times (loop)"
    return None


def budget_spent(hook: Hook, state: dict[str, Any]) -> str | None:
    """The retry_control budget: corrections of this request across all hooks."""
    max_corrections = int(hook.params.get("max_corrections", 3))
    done = st.corrections(state)
    if done >= max_corrections:
        return f"{done} corrections already (budget {max_corrections})"
    return None


def _skill_load_requirement(hook: Hook, harness: Harness, state: dict[str, Any],
                            action: dict[str, Any]) -> str | None:
    if action["kind"] != "reply":
        return None
    reply_skills = [s.id for s in harness.skills if s.kind == "reply"]
    if not any(sid in reply_skills for sid in state.get("loaded_skills", [])):
        return "no reply skill loaded; load one of: " + ", ".join(reply_skills)
    return None


def _reply_format(hook: Hook, harness: Harness, state: dict[str, Any], action: dict[str, Any]) -> str | None:
    if action["kind"] != "reply":
        return None
    text = action.get("text") or ""
    limit = int(hook.params.get("max_chars", harness.rules.max_reply_chars))
    spoken = strip_control_tokens(text).strip()
    if not spoken:
        return "the reply is empty"
    if len(spoken) > limit:
        return f"reply is {len(spoken)} characters; the limit is {limit}"
    lowered = text.lower()
    for phrase in [*harness.rules.banned_phrases, *hook.params.get("banned_phrases", [])]:
        if phrase.lower() in lowered:
            return f"banned phrase {phrase!r}"
    allowed = hook.params.get("allowed_control_tokens")
    if allowed is not None:
        bad = [t for t in CONTROL_TOKEN.findall(text) if t not in allowed]
        if bad:
            return f"unknown control tokens {bad}; allowed: {allowed}"
    if re.search(r"</?think>|^thought:", lowered):
        return "internal reasoning in the reply"
    return None


def _factual_risk(hook: Hook, harness: Harness, state: dict[str, Any], action: dict[str, Any]) -> str | None:
    if action["kind"] != "reply":
        return None
    spoken = strip_control_tokens(action.get("text") or "")
    evidence = evidence_text(state)
    if hook.params.get("check_numbers", True):
        supported = _numbers(evidence)
        # a total, a price after a coupon or a per-unit price is supported when the reply shows its
        # calculation from supported numbers and the arithmetic is right
        derived = {f"{v:g}" for v in derived_numbers(spoken, {float(x) for x in supported})}
        unsupported = sorted(_numbers(spoken) - supported - derived)
        if unsupported:
            return f"numbers not supported by tool results or product data: {', '.join(unsupported)}"
    if hook.params.get("check_claims", True):
        lowered, ev = spoken.lower(), evidence.lower()
        for claim in harness.rules.claims_requiring_evidence:
            if claim.lower() in lowered:
                words = [w for w in re.findall(r"\w+", claim.lower()) if w not in STOPWORDS]
                if not all(w in ev for w in words):
                    return f"claim {claim!r} has no supporting tool result"
    return None


def _side_effect_gate(hook: Hook, harness: Harness, state: dict[str, Any], action: dict[str, Any]) -> str | None:
    """What the request alone shows against the room's side-effect policy (livehost/hooks/gate.py);
    the tools service enforces the whole policy, budgets included, where the side effect happens."""
    if action["kind"] != "call_tool":
        return None
    tool = harness.tool(action.get("tool") or "")
    op = OPERATIONS.get(tool.binding.operation) if tool is not None else None
    if tool is None or op is None or not (tool.side_effect or op.side_effect):
        return None
    policy = policy_for(harness, state["room_id"])
    if policy is None or policy.hook_id != hook.id:
        return None
    args = action.get("arguments") or {}
    params = {name: args.get(tool.binding.arguments.get(name, name)) for name in op.params}
    return static_reason(policy, tool.name, op.name, params, st.room(state).get("campaign"))


def _internal_disclosure(hook: Hook, harness: Harness, state: dict[str, Any],
                         action: dict[str, Any]) -> str | None:
    """A reply repeating internal text of the harness in force, the room or the request
    (livehost/hooks/disclosure.py)."""
    if action["kind"] != "reply":
        return None
    # what other hooks told the model in this request is internal too; this hook's own corrections
    # quote the reply back, so they are left out
    corrections = [str(s["data"].get("message") or "") for s in st.steps(state, "correction") if s["name"] != hook.id]
    return disclosure_reason(strip_control_tokens(action.get("text") or ""), harness, st.room(state), corrections,
                             run_words=int(hook.params.get("min_run_words", DEFAULT_RUN_WORDS)),
                             line_words=int(hook.params.get("min_line_words", DEFAULT_LINE_WORDS)))


CHECKS: dict[str, Callable[[Hook, Harness, dict[str, Any], dict[str, Any]], str | None]] = {
    "tool_arguments": _tool_arguments,
    "retry_control": _retry_control,
    "skill_load_requirement": _skill_load_requirement,
    "reply_format": _reply_format,
    "factual_risk": _factual_risk,
    "side_effect_gate": _side_effect_gate,
    "internal_disclosure": _internal_disclosure,
}

# Which hook stages look at which action kinds. Retry control watches every action.
STAGES_FOR_ACTION = {
    "call_tool": ("tool_call",),
    "reply": ("before_reply", "reply"),
    "load_skill": (),
    "no_reply": (),
}


def hook_corrections(state: dict[str, Any], hook_id: str) -> int:
    """Corrections this hook already asked for in this request (its own retry budget; the overall
    budget across hooks is the retry_control hook's)."""
    return sum(1 for s in state["steps"] if s["kind"] == "correction" and s.get("name") == hook_id)


def check_action(harness: Harness, state: dict[str, Any], action: dict[str, Any]) -> list[Verdict]:
    """Run the harness's step hooks on an action; returns every verdict, in hook order.

    A failing hook whose failure policy is ``correct`` becomes ``reject`` when its own retry budget
    is spent, or when a retry_control hook's budget of corrections for the whole request is spent
    (the request then ends in the fallback instead of another retry).
    """
    stages = set(STAGES_FOR_ACTION.get(action["kind"], ()))
    verdicts: list[Verdict] = []
    for hook in harness.hooks:
        if not hook.enabled or hook.kind not in CHECKS:
            continue
        applies = hook.stage in stages or hook.kind == "retry_control"
        if not applies:
            continue
        reason = CHECKS[hook.kind](hook, harness, state, action)
        if reason is None:
            verdicts.append(Verdict(hook.id, hook.kind, "pass"))
            continue
        action_on_fail = hook.on_fail.action
        verdict: VerdictKind = "correct" if action_on_fail == "correct" else "reject"
        if verdict == "correct" and hook_corrections(state, hook.id) >= hook.retry_budget:
            verdict = "reject"
            reason = f"{reason} (retry budget {hook.retry_budget} spent)"
        verdicts.append(Verdict(hook.id, hook.kind, verdict, reason, _message(hook, reason)))
    if not any(v.verdict == "correct" for v in verdicts):
        return verdicts
    for i, v in enumerate(verdicts):
        hook = next(h for h in harness.hooks if h.id == v.hook)
        if v.kind != "retry_control" or v.failed:
            continue
        spent = budget_spent(hook, state)
        if spent is not None:
            verdicts[i] = Verdict(hook.id, hook.kind, "reject", spent, _message(hook, spent))
            break
    else:
        return verdicts
    # The budget is spent: every correction becomes a rejection, the retry_control verdict first.
    first = verdicts.pop(i)
    return [first, *(Verdict(v.hook, v.kind, "reject", f"{v.reason} (correction budget spent)", v.message)
                     if v.verdict == "correct" else v for v in verdicts)]


def _message(hook: Hook, reason: str) -> str:
    return hook.on_fail.message.replace("{reason}", reason) if hook.on_fail.message else reason
