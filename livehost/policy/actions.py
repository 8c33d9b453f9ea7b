"""The policy's action protocol: one JSON object per turn, and a parser that survives bad output.

Actions::

    {"action": "load_skill", "skill": ID}
    {"action": "call_tool", "tool": NAME, "arguments": {...}}
    {"action": "reply", "text": STR}
    {"action": "no_reply", "reason": STR}

An optional ``"thought"`` key is allowed by the parser and stripped; ``ACTION_JSON_SCHEMA`` (used for
constrained decoding) leaves it out so a small model does not spend its tokens on it. Nothing here
names a skill or tool.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ActionKind = Literal["load_skill", "call_tool", "reply", "no_reply", "invalid"]
ACTION_KINDS: tuple[str, ...] = ("load_skill", "call_tool", "reply", "no_reply")


ACTION_JSON_SCHEMA: dict[str, Any] = {
    "title": "LiveHost policy action",
    "type": "object",
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "action": {"const": "load_skill"},
                "skill": {"type": "string", "minLength": 1, "maxLength": 100},
            },
            "required": ["action", "skill"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "action": {"const": "call_tool"},
                "tool": {"type": "string", "minLength": 1, "maxLength": 100},
                "arguments": {"type": "object"},
            },
            "required": ["action", "tool", "arguments"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "action": {"const": "reply"},
                "text": {"type": "string", "minLength": 1, "maxLength": 600},
            },
            "required": ["action", "text"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "action": {"const": "no_reply"},
                "reason": {"type": "string", "maxLength": 200},
            },
            "required": ["action", "reason"],
            "additionalProperties": False,
        },
    ],
}


@dataclass
class ParsedAction:
    kind: ActionKind
    skill: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    reason: str | None = None
    repaired: bool = False
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.kind != "invalid"

    def to_action(self) -> dict[str, Any]:
        """The canonical action object (``{"action": "invalid", "error": ...}`` for invalid output)."""
        if self.kind == "load_skill":
            return {"action": "load_skill", "skill": self.skill}
        if self.kind == "call_tool":
            return {"action": "call_tool", "tool": self.tool, "arguments": dict(self.arguments)}
        if self.kind == "reply":
            return {"action": "reply", "text": self.text}
        if self.kind == "no_reply":
            return {"action": "no_reply", "reason": self.reason or ""}
        return {"action": "invalid", "error": self.error}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- text clean-up

_THINK_RE = re.compile(r"<(think|thinking|reasoning|analysis)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_OPEN_THINK_RE = re.compile(r"<(think|thinking|reasoning|analysis)>.*\Z", re.IGNORECASE | re.DOTALL)
_STRAY_TAG_RE = re.compile(r"</?(think|thinking|reasoning|analysis)>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>`` style internal reasoning (closed, or unclosed at the end)."""
    out = _THINK_RE.sub(" ", text)
    out = _OPEN_THINK_RE.sub(" ", out)
    out = _STRAY_TAG_RE.sub(" ", out)
    return re.sub(r"[ \t]{2,}", " ", out).strip()


def _strip_fences(text: str) -> str:
    m = re.search(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", text, re.DOTALL)
    if m and "{" in m.group(1):
        return m.group(1)
    return text.replace("```json", "").replace("```", "")


def _first_object(text: str) -> tuple[str | None, bool]:
    """The first balanced ``{…}`` (string-aware, both quote styles); (None, truncated?) if none."""
    start = text.find("{")
    if start < 0:
        return None, False
    depth = 0
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            # an apostrophe inside a bare word (it's) is not a quote
            if ch == "'" and i > 0 and text[i - 1].isalnum():
                continue
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1], False
    return None, True


def _requote_single(s: str) -> str:
    """Turn single-quoted JSON-ish strings into double-quoted ones (outside double-quoted strings)."""
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch == '"':
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            out.append(s[i : j + 1])
            i = j + 1
        elif ch == "'" and not (i > 0 and s[i - 1].isalnum()):
            j = i + 1
            buf: list[str] = []
            while j < n:
                c = s[j]
                if c == "\\" and j + 1 < n:
                    buf.append(s[j : j + 2])
                    j += 2
                    continue
                if c == "'" and not (j + 1 < n and s[j + 1].isalnum()):
                    break
                buf.append(c)
                j += 1
            inner = "".join(buf).replace('\\"', '"').replace("\\'", "'").replace('"', '\\"')
            out.append('"' + inner + '"')
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _outside_strings(s: str, fn: Any) -> str:
    """Apply ``fn`` to the parts of ``s`` outside double-quoted strings."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', s)
    return "".join(p if p.startswith('"') and p.endswith('"') and len(p) >= 2 else fn(p) for p in parts)


def _repair(obj_text: str) -> str:
    s = _requote_single(obj_text)

    def fix(part: str) -> str:
        part = re.sub(r",\s*([}\]])", r"\1", part)  # trailing commas
        part = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_\-]*)\s*:", r'\1"\2":', part)  # unquoted keys
        part = re.sub(r"\bTrue\b", "true", part)
        part = re.sub(r"\bFalse\b", "false", part)
        part = re.sub(r"\bNone\b", "null", part)
        return part

    return _outside_strings(s, fix)


# --------------------------------------------------------------------------- normalisation

_KIND_SYNONYMS: dict[str, str] = {
    "load_skill": "load_skill", "loadskill": "load_skill", "skill": "load_skill", "use_skill": "load_skill",
    "select_skill": "load_skill", "skill_load": "load_skill",
    "call_tool": "call_tool", "calltool": "call_tool", "tool_call": "call_tool", "tool": "call_tool",
    "function_call": "call_tool", "call": "call_tool", "use_tool": "call_tool", "invoke_tool": "call_tool",
    "reply": "reply", "respond": "reply", "response": "reply", "answer": "reply", "final": "reply",
    "say": "reply", "final_answer": "reply", "message": "reply",
    "no_reply": "no_reply", "noreply": "no_reply", "silence": "no_reply", "skip": "no_reply",
    "ignore": "no_reply", "none": "no_reply", "no_response": "no_reply", "stay_silent": "no_reply",
}
_ACTION_KEYS = ("action", "type", "kind", "action_type")
_TOOL_KEYS = ("tool", "name", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "params", "input", "tool_input")
_SKILL_KEYS = ("skill", "skill_id", "id", "name")
_TEXT_KEYS = ("text", "reply", "content", "message", "response", "answer")
_REASON_KEYS = ("reason", "why", "explanation")


def _first(d: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for k in keys:
        if k in d and d[k] is not None:
            return k, d[k]
    return None, None


def _norm_kind(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    key = re.sub(r"[\s\-]+", "_", value.strip().lower())
    return _KIND_SYNONYMS.get(key)


def _normalise(obj: dict[str, Any]) -> ParsedAction:
    repaired = False
    obj = {str(k).strip().lower(): v for k, v in obj.items() if str(k).strip().lower() != "thought"}
    # OpenAI-style wrappers: {"tool_call": {...}} / {"function_call": {...}} / {"function": {"name":..}}
    for wrapper in ("tool_call", "function_call", "function"):
        inner = obj.get(wrapper)
        if isinstance(inner, dict) and ("name" in inner or "tool" in inner):
            merged = {"action": "call_tool", **{k: v for k, v in obj.items() if k != wrapper}}
            merged.update({("tool" if k in ("name", "tool") else k): v for k, v in inner.items()})
            obj, repaired = merged, True
            break
    _, raw_kind = _first(obj, _ACTION_KEYS)
    kind = _norm_kind(raw_kind)
    if kind is not None and raw_kind != kind:
        repaired = True
    if kind is None:
        # infer from the keys present
        if raw_kind is not None and obj.get("action") not in (None, ""):
            return ParsedAction("invalid", error=f"unknown action {raw_kind!r}; use one of {list(ACTION_KINDS)}")
        if any(k in obj for k in ("tool", "tool_name", "function")) or (
            "name" in obj and any(k in obj for k in _ARG_KEYS)
        ):
            kind = "call_tool"
        elif any(k in obj for k in ("skill", "skill_id")):
            kind = "load_skill"
        elif any(k in obj for k in _TEXT_KEYS):
            kind = "reply"
        else:
            return ParsedAction("invalid", error="missing 'action' (load_skill, call_tool, reply or no_reply)")
        repaired = True
    if kind == "load_skill":
        key, skill = _first(obj, ("skill", "skill_id", "id", "name"))
        if key == "name" and isinstance(skill, str) and skill.strip().lower() == "load_skill":
            skill = None
        if not isinstance(skill, str) or not skill.strip():
            return ParsedAction("invalid", error="load_skill needs a non-empty 'skill' id")
        return ParsedAction("load_skill", skill=skill.strip(), repaired=repaired or key != "skill")
    if kind == "call_tool":
        key, tool = _first(obj, _TOOL_KEYS)
        if not isinstance(tool, str) or not tool.strip():
            return ParsedAction("invalid", error="call_tool needs a non-empty 'tool' name")
        akey, args = _first(obj, _ARG_KEYS)
        if args is None:
            args = {}
            repaired = True
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
                repaired = True
            except json.JSONDecodeError:
                return ParsedAction("invalid", error="'arguments' must be a JSON object")
        if not isinstance(args, dict):
            return ParsedAction("invalid", error="'arguments' must be a JSON object")
        return ParsedAction(
            "call_tool", tool=tool.strip(), arguments=args,
            repaired=repaired or key != "tool" or (akey not in (None, "arguments")),
        )
    if kind == "reply":
        key, text = _first(obj, _TEXT_KEYS)
        if not isinstance(text, str):
            return ParsedAction("invalid", error="reply needs a string 'text'")
        clean = strip_reasoning(text)
        if not clean:
            return ParsedAction("invalid", error="reply 'text' is empty")
        return ParsedAction("reply", text=clean, repaired=repaired or key != "text" or clean != text.strip())
    _, reason = _first(obj, _REASON_KEYS)
    return ParsedAction("no_reply", reason=str(reason) if reason is not None else "", repaired=repaired)


def parse_action(raw: str) -> ParsedAction:
    """Parse one policy turn's output. Never raises; ``kind == "invalid"`` carries ``error``."""
    if not isinstance(raw, str):
        return ParsedAction("invalid", error=f"output is {type(raw).__name__}, not text")
    text = strip_reasoning(raw)
    if not text:
        return ParsedAction("invalid", error="empty output (no JSON action object)")
    stripped = text.strip()
    # fast path: exactly one clean object
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        return _normalise(obj)
    repaired = True
    candidate_src = _strip_fences(stripped)
    obj_text, truncated = _first_object(candidate_src)
    if obj_text is None:
        if truncated:
            return ParsedAction("invalid", error="the JSON action object is not closed (output truncated?)")
        return ParsedAction("invalid", error="no JSON action object found in the output")
    parsed: Any = None
    try:
        parsed = json.loads(obj_text)
    except (ValueError, RecursionError):
        try:
            parsed = json.loads(_repair(obj_text))
        except json.JSONDecodeError as exc:
            return ParsedAction("invalid", error=f"the action is not valid JSON: {exc.msg} at char {exc.pos}")
        except (ValueError, RecursionError) as exc:
            return ParsedAction("invalid", error=f"the action is not valid JSON: {exc}")
    if not isinstance(parsed, dict):
        return ParsedAction("invalid", error="the action must be a JSON object")
    result = _normalise(parsed)
    result.repaired = result.repaired or repaired
    return result


def loads_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``, repaired like an action (single quotes, trailing commas,
    unquoted keys, Python literals); None when there is none. For free-form formats (ReAct's
    ``Action Input:``) that carry a JSON object."""
    stripped = _strip_fences(strip_reasoning(text)).strip()
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        obj_text, _ = _first_object(stripped)
        if obj_text is None:
            return None
        try:
            obj = json.loads(obj_text)
        except (ValueError, RecursionError):
            try:
                obj = json.loads(_repair(obj_text))
            except (ValueError, RecursionError):
                return None
    return obj if isinstance(obj, dict) else None


def action_json(action: dict[str, Any]) -> str:
    """Serialise an action object the way a model would output it."""
    return json.dumps(action, ensure_ascii=False, separators=(", ", ": "))
