"""Trajectory rows -> export records (raw, sft, rl), and their JSON Schemas (schemas/export/*.json).

Pure functions, no database: ``livehost.training.export`` streams rows through them. Nothing here
names a skill, tool, hook or prompt section: names come from the trajectory and from the harness
version it ran on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema

from livehost.config import REPO_ROOT
from livehost.harness.model import Harness

FORMATS = ("sft", "rl", "raw")
SCHEMA_DIR = REPO_ROOT / "schemas" / "export"
ROW_FIELDS = ("request_id", "room_id", "harness_version", "policy", "outcome", "reply_text", "reason",
              "merged_text", "comments", "steps", "created_ms", "completed_ms")
REWARD_KEYS = ("accuracy", "effectiveness", "tool_rationality", "skill_selection")
# Protocol actions that are not harness tools, rendered as functions in the SFT format.
LOAD_SKILL, NO_REPLY = "load_skill", "no_reply"
SFT_OUTCOMES = ("reply", "no_reply")  # trajectories whose last action was the model's own, accepted


class ExportValidationError(ValueError):
    def __init__(self, fmt: str, line: int, errors: list[str]):
        self.fmt, self.line, self.errors = fmt, line, errors
        super().__init__(f"{fmt} export line {line} does not match schemas/export/{fmt}.json: " + "; ".join(errors))


@cache
def schema(fmt: str) -> dict[str, Any]:
    return dict(json.loads((SCHEMA_DIR / f"{fmt}.json").read_text()))


@cache
def validator(fmt: str) -> jsonschema.Draft202012Validator:
    s = schema(fmt)
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def validate(fmt: str, record: dict[str, Any], line: int = 0) -> None:
    """Raise ExportValidationError listing (up to five) schema violations of one export line."""
    errors = sorted(validator(fmt).iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        raise ExportValidationError(fmt, line, [
            f"{'/'.join(map(str, e.absolute_path)) or '(line)'}: {e.message[:200]}" for e in errors[:5]])


# -- helpers over stored steps --------------------------------------------------------------

def steps_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Steps with their payload decoded into ``data``."""
    out = []
    for s in row["steps"]:
        data = s.get("data")
        if data is None:
            data = json.loads(s.get("data_json") or "{}")
        out.append({**s, "data": data})
    return out


def retries(steps: list[dict[str, Any]]) -> int:
    return sum(1 for s in steps if s["kind"] == "correction")


def keep_whole(request_id: str, fraction: float) -> bool:
    """Deterministic per request: the same request is always kept whole (or always trimmed)."""
    if fraction <= 0:
        return False
    bucket = int(hashlib.sha256(request_id.encode()).hexdigest()[:8], 16) / 0x1_0000_0000
    return bucket < fraction


def passed(row: dict[str, Any]) -> bool:
    """--only-passed: outcome ``reply`` and no hook rejected or dropped anything (corrections allowed)."""
    if row["outcome"] != "reply":
        return False
    for s in steps_of(row):
        if s["kind"] in ("hook_verdict", "input_hook") and s["data"].get("verdict") in ("reject", "drop"):
            return False
    return True


@dataclass
class Turn:
    number: int
    action: dict[str, Any] | None = None  # kind, skill, tool, arguments, text, reason
    raw: str | None = None  # raw model output
    tool_call: dict[str, Any] | None = None
    tool_result: dict[str, Any] | None = None
    skill_load: str | None = None
    correction: dict[str, Any] | None = None
    terminal: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.correction is not None


def turns_of(steps: list[dict[str, Any]]) -> list[Turn]:
    by: dict[int, Turn] = {}
    for s in steps:
        t = by.setdefault(int(s["turn"]), Turn(int(s["turn"])))
        t.steps.append(s)
        kind, data = s["kind"], s["data"]
        if kind == "action":
            t.action = dict(data)
        elif kind == "model_output":
            t.raw = data.get("raw")
        elif kind == "tool_call":
            t.tool_call = data
        elif kind == "tool_result":
            t.tool_result = data
        elif kind == "skill_load":
            t.skill_load = data.get("skill") or s.get("name")
        elif kind == "correction":
            t.correction = data
        elif kind in ("reply", "no_reply", "fallback", "cancel"):
            t.terminal = {"kind": kind, **data}
    for t in by.values():  # trajectories recorded without policy 'action' steps: infer the action
        if t.action is None:
            if t.tool_call is not None:
                t.action = {"kind": "call_tool", "tool": t.tool_call.get("tool"),
                            "arguments": t.tool_call.get("arguments") or {}}
            elif t.skill_load is not None:
                t.action = {"kind": "load_skill", "skill": t.skill_load}
            elif t.terminal is not None and t.terminal["kind"] in ("reply", "no_reply") \
                    and t.terminal.get("outcome") in ("reply", "no_reply"):
                t.action = {"kind": t.terminal["kind"], "text": t.terminal.get("text"),
                            "reason": t.terminal.get("reason")}
    return [by[k] for k in sorted(by)]


# -- raw ------------------------------------------------------------------------------------

def _raw_step(s: dict[str, Any]) -> dict[str, Any]:
    """A stored step with its payload nested as ``data`` (an object, not a JSON string)."""
    data = s.get("data")
    if data is None:
        data = json.loads(s.get("data_json") or "{}")
    return {"seq": s["seq"], "turn": s["turn"], "kind": s["kind"], "name": s.get("name"), "ts_ms": s["ts_ms"],
            "duration_ms": s.get("duration_ms"), "data": json.loads(json.dumps(data, default=str))}


def to_raw(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row[k] for k in ROW_FIELDS}
    out["steps"] = [_raw_step(s) for s in row["steps"]]
    recorded: Any = row.get("recorded_at")
    out["recorded_at"] = recorded.isoformat() if hasattr(recorded, "isoformat") else recorded
    return out


# -- sft ------------------------------------------------------------------------------------

def tool_definitions(harness: Harness) -> list[dict[str, Any]]:
    """The harness version's tools as function definitions, plus the protocol's skill loading and
    no-reply decisions (described with this harness's skills)."""
    skills = "; ".join(f"{s.id} ({s.kind}): {s.description}" for s in harness.skills)
    fns = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                             "parameters": t.parameters}} for t in harness.tools]
    fns.append({"type": "function", "function": {
        "name": LOAD_SKILL, "description": f"Load a skill's full instructions. Skills: {skills}",
        "parameters": {"type": "object", "properties": {"skill": {"type": "string",
                                                                  "enum": [s.id for s in harness.skills]}},
                       "required": ["skill"], "additionalProperties": False}}})
    fns.append({"type": "function", "function": {
        "name": NO_REPLY, "description": "Decide not to reply to these comments.",
        "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"],
                       "additionalProperties": False}}})
    return fns


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _turn_messages(t: Turn, harness: Harness, request_id: str) -> list[dict[str, Any]]:
    a = t.action or {}
    kind = a.get("kind")
    call_id = (t.tool_call or {}).get("call_id") or f"{request_id}-t{t.number}"
    msgs: list[dict[str, Any]] = []
    answer: str | None = None  # what the tool message says back
    if kind == "call_tool":
        msgs.append(_call(call_id, str(a.get("tool")), a.get("arguments") or {}))
        if t.tool_result is not None:
            r = t.tool_result
            answer = json.dumps(r.get("result") if r.get("ok") else
                                {"error": r.get("error_code"), "message": r.get("error_message")}, default=str)
    elif kind == "load_skill":
        msgs.append(_call(call_id, LOAD_SKILL, {"skill": a.get("skill")}))
        if not t.failed:
            skill = harness.skill(str(a.get("skill")))
            answer = skill.body if skill is not None else "(loaded)"
    elif kind == "no_reply":
        msgs.append(_call(call_id, NO_REPLY, {"reason": a.get("reason") or ""}))
        answer = "(no reply)" if not t.failed else None
    elif kind == "reply":
        msgs.append({"role": "assistant", "content": a.get("text") or ""})
    else:  # invalid output: what the model said
        msgs.append({"role": "assistant", "content": t.raw or a.get("error") or ""})
    if t.failed:
        message = (t.correction or {}).get("message") or (t.correction or {}).get("reason") or ""
        if msgs[-1].get("tool_calls"):
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": message})
        else:
            msgs.append({"role": "user", "name": "hook", "content": message})
    elif answer is not None:
        msgs.append({"role": "tool", "tool_call_id": call_id, "content": answer})
    return msgs


# Prompt sources whose content the SFT line carries elsewhere: the comments are the user message and
# the tools are the structured ``tools`` list, so their sections are cut from the system message.
CARRIED_ELSEWHERE = ("comments", "tool_index")


def system_prompt(steps: list[dict[str, Any]], harness: Harness, comments: list[dict[str, Any]] | None = None,
                  ) -> str:
    """The first turn's assembled prompt without the sections the line carries elsewhere
    (``CARRIED_ELSEWHERE``): each such section of the harness version is rendered again from the
    trajectory's comments and the version's tools, and cut out where the prompt holds it verbatim."""
    from livehost.agent.prompt import _render_section

    first = next((s for s in steps if s["kind"] == "prompt" and s["data"].get("text")), None)
    if first is None:
        return harness.instructions
    text = str(first["data"]["text"])
    ctx = {"comments": [{"user_id": c["user_id"], "text": c["text"]} for c in comments or []],
           "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters}
                     for t in harness.tools]}
    sections = list(harness.prompt.sections)
    for k, section in enumerate(sections):
        if section.source not in CARRIED_ELSEWHERE:
            continue
        try:
            rendered = _render_section(section, ctx, {})
        except KeyError:  # the template also shows other sources: keep it whole
            continue
        for cut in ("\n\n" + rendered, rendered + "\n\n", rendered):
            if rendered and cut in text:
                text = text.replace(cut, "", 1)
                break
        else:  # not verbatim (e.g. a bundle from the registry orders JSON keys differently): cut by headings
            text = _cut_by_heading(text, section.template, [s.template for s in sections[k + 1:]])
    return text


def _heading(template: str) -> str:
    """The literal text a section template starts with (before its first ``{field}``)."""
    return template.split("{", 1)[0]


def _cut_by_heading(text: str, template: str, later: list[str]) -> str:
    """Cut a section that starts with its template's heading and ends where a later section's heading
    starts; unchanged when the heading is too short to be recognised or is not found."""
    head = _heading(template)
    if len(head.strip()) < 4:
        return text
    start = 0 if text.startswith(head) else text.find("\n\n" + head)
    if start < 0:
        return text
    ends = [i for h in map(_heading, later) if len(h.strip()) >= 4
            and (i := text.find("\n\n" + h, start + len(head))) >= 0]
    end = min(ends) if ends else len(text)
    return text[:start] + text[end:] if start else text[end:].lstrip("\n")


def to_sft(row: dict[str, Any], harness: Harness, keep_retries: float = 0.1) -> dict[str, Any] | None:
    """A chat example, or None when the trajectory holds no accepted final behaviour of the model
    (fallback, rejection, cancellation, or no policy turn at all)."""
    if row["outcome"] not in SFT_OUTCOMES:
        return None
    steps = steps_of(row)
    turns = [t for t in turns_of(steps) if t.action is not None]
    if not turns:
        return None
    n_retries = retries(steps)
    whole = n_retries > 0 and keep_whole(row["request_id"], keep_retries)
    kept = turns if whole else [t for t in turns if not t.failed]
    comments = "\n".join(f"{c['user_id']}: {c['text']}" for c in row["comments"]) or row["merged_text"]
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(steps, harness, row["comments"])},
                                      {"role": "user", "content": comments}]
    for t in kept:
        messages.extend(_turn_messages(t, harness, row["request_id"]))
    return {"request_id": row["request_id"], "room_id": row["room_id"], "harness_version": row["harness_version"],
            "policy": row.get("policy") or "", "outcome": row["outcome"], "retries": n_retries,
            "trimmed": n_retries > 0 and not whole, "messages": messages, "tools": tool_definitions(harness)}


# -- rl -------------------------------------------------------------------------------------

def reward_of(judged: dict[str, Any] | None) -> dict[str, Any] | None:
    if not judged:
        return None
    out: dict[str, Any] = {k: judged.get(k) for k in REWARD_KEYS}
    out["judge"] = judged.get("judge")
    return out


def to_rl(row: dict[str, Any], harness: Harness | None = None, judged: dict[str, Any] | None = None,
          ) -> dict[str, Any]:
    steps = steps_of(row)
    first_input: dict[str, Any] = next((s["data"] for s in steps if s["kind"] == "input"), {})
    first_prompt: dict[str, Any] = next((s["data"] for s in steps if s["kind"] == "prompt"), {})
    evidence = first_prompt.get("evidence") or {}
    results = {s["data"].get("call_id"): s["data"] for s in steps if s["kind"] == "tool_result"}
    calls = []
    for s in steps:
        if s["kind"] != "tool_call":
            continue
        d = s["data"]
        r = results.get(d.get("call_id"), {})
        calls.append({"call_id": d.get("call_id"), "tool": d.get("tool") or s.get("name"),
                      "arguments": d.get("arguments") or {}, "ok": bool(r.get("ok", False)),
                      "result": r.get("result"), "error_code": r.get("error_code"),
                      "error_message": r.get("error_message") if r else "no result recorded"})
    return {
        "task_id": row["request_id"], "request_id": row["request_id"], "room_id": row["room_id"],
        "policy": row.get("policy") or "", "created_ms": row["created_ms"],
        "harness": {"version": row["harness_version"], "name": harness.name if harness is not None else None},
        "input": {"comments": [{"user_id": c["user_id"], "text": c["text"]} for c in row["comments"]],
                  "merged_text": row["merged_text"], "room": first_input.get("room") or {}},
        "sandbox": {"product": evidence.get("product"), "faq": evidence.get("faq") or [], "tool_calls": calls},
        "reference": {
            "outcome": row["outcome"], "reply_text": row["reply_text"],
            "skills_loaded": [s["data"].get("skill") or s.get("name") for s in steps if s["kind"] == "skill_load"],
            "tools_called": [c["tool"] for c in calls], "retries": retries(steps),
            "hook_failures": [{"hook": s["data"].get("hook"), "kind": s["data"].get("kind"),
                               "verdict": s["data"].get("verdict"), "reason": s["data"].get("reason")}
                              for s in steps if s["kind"] in ("hook_verdict", "input_hook")
                              and s["data"].get("verdict") not in (None, "pass")],
        },
        "reward": reward_of(judged),
    }


def lines(records: Iterable[dict[str, Any]]) -> Iterable[str]:
    for r in records:
        yield json.dumps(r, ensure_ascii=False, sort_keys=True, default=str)
