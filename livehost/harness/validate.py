"""Every check of a harness bundle, reporting all problems at once with file and field.

The checks run on the *raw* bundle (plain data as read from the folder, or the canonical JSON stored
in the registry), so one broken part never hides the problems of another: an unknown hook kind does
not stop the check of the tools a skill names. The type model (pydantic) runs as well; its errors
are merged in, minus those the checks here already explain more precisely.

Nothing here names a skill, tool, hook or section of any particular harness: the checks read the
vocabulary of the format (kinds, stages, sources, backend operations) and cross-reference names
found in the bundle itself.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import jsonschema
from pydantic import ValidationError

from livehost.harness.loader import Problem, read_raw
from livehost.harness.model import HOOK_KINDS, HOOK_STAGES, PROMPT_SOURCES, FailAction, Harness, SkillKind
from livehost.security.parsing import MAX_NESTING, PatternError, compile_pattern, nesting_depth

SKILL_KINDS: tuple[str, ...] = SkillKind.__args__  # type: ignore[attr-defined]
FAIL_ACTIONS: tuple[str, ...] = FailAction.__args__  # type: ignore[attr-defined]

# Where a hook of each kind can run. A kind checks something that exists only at some stages.
KIND_STAGES: dict[str, tuple[str, ...]] = {
    "input_validation": ("input",),
    "tool_arguments": ("tool_call",),
    "skill_load_requirement": ("before_reply", "reply"),
    "reply_format": ("before_reply", "reply"),
    "factual_risk": ("before_reply", "reply"),
    "retry_control": HOOK_STAGES,
    "side_effect_gate": ("tool_call",),
    "internal_disclosure": ("before_reply", "reply"),
}

# Parameters each hook kind understands (what livehost/hooks reads): name -> (type, minimum for
# numbers or None). Others are reported as warnings (unused). Parameters named ``tools`` /
# ``skills`` (any kind) must name tools / skills of the bundle.
_INT, _BOOL, _STRS, _NUM = "int", "bool", "list[str]", "number"
HOOK_PARAMS: dict[str, dict[str, tuple[str, float | None]]] = {
    "input_validation": {
        "max_chars": (_INT, 1), "min_chars": (_INT, 0), "abuse_terms": (_STRS, None),
        "injection_patterns": (_STRS, None), "spam_repeat_chars": (_INT, 0),
        "compliance_terms": (_STRS, None), "block_links": (_BOOL, None),
        # the trained screening classifier: {thresholds: {class: 0..1}, word_list_boost, enabled}
        "classifier": ("dict", None),
    },
    "tool_arguments": {"tools": (_STRS, None)},
    "skill_load_requirement": {"skills": (_STRS, None)},
    "reply_format": {
        "allowed_control_tokens": (_STRS, None), "max_chars": (_INT, 1), "banned_phrases": (_STRS, None),
    },
    "factual_risk": {"check_numbers": (_BOOL, None), "check_claims": (_BOOL, None)},
    "retry_control": {"max_corrections": (_INT, 0), "max_identical_calls": (_INT, 1)},
    "side_effect_gate": {
        "allowed_tools": (_STRS, None), "coupon_allowlist": (_STRS, None), "require_campaign_cap": (_BOOL, None),
        "max_per_viewer": (_INT, 0), "max_per_room": (_INT, 0), "max_per_minute": (_INT, 0), "rooms": ("dict", None),
    },
    # the shortest run of consecutive words shared with internal text that fails, and the shortest
    # whole internal line that fails (below 3 words, ordinary phrases would fail every reply)
    "internal_disclosure": {"min_run_words": (_INT, 3), "min_line_words": (_INT, 3)},
}
# Regular-expression parameters (must compile on the linear-time engine, RE2).
REGEX_PARAMS = frozenset({"injection_patterns"})
# Fields an on_fail message may use.
ON_FAIL_FIELDS = frozenset({"reason"})

TOOL_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
ID_RE = re.compile(r"^[^\s/\\]+$")


@dataclass
class Report:
    """Outcome of a validation: the harness (when it could be built) and every problem found."""

    harness: Harness | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != "error"]

    @property
    def ok(self) -> bool:
        return self.harness is not None and not self.errors


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_num(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Checker:
    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.problems: list[Problem] = []
        self.skills = [s for s in _list(raw.get("skills")) if isinstance(s, dict)]
        self.tools = [t for t in _list(raw.get("tools")) if isinstance(t, dict)]
        self.hooks = [h for h in _list(raw.get("hooks")) if isinstance(h, dict)]
        self.prompt = _dict(raw.get("prompt"))
        self.sections = [s for s in _list(self.prompt.get("sections")) if isinstance(s, dict)]
        self.tool_names = {t.get("name") for t in self.tools if isinstance(t.get("name"), str)}
        self.skill_ids = {s.get("id") for s in self.skills if isinstance(s.get("id"), str)}

    def err(self, file: str, where: str, message: str) -> None:
        self.problems.append(Problem(file, where, message))

    def warn(self, file: str, where: str, message: str) -> None:
        self.problems.append(Problem(file, where, message, "warning"))

    def run(self) -> list[Problem]:
        self.top()
        self.skill_checks()
        self.tool_checks()
        self.hook_checks()
        self.prompt_checks()
        self.rules_checks()
        return self.problems

    # -- harness.yaml ---------------------------------------------------------------------------
    def top(self) -> None:
        for key in ("name", "instructions"):
            value = self.raw.get(key)
            if isinstance(value, str) and not value.strip():
                self.err("harness.yaml", key, "must not be empty")
        limits = _dict(self.raw.get("limits"))
        if _is_int(limits.get("max_turns")) and limits["max_turns"] < 1:
            self.err("harness.yaml", "limits.max_turns", f"must be at least 1, got {limits['max_turns']}")
        if _is_num(limits.get("time_budget_ms")) and limits["time_budget_ms"] <= 0:
            self.err("harness.yaml", "limits.time_budget_ms", "must be positive")
        fallback = _dict(self.raw.get("fallback"))
        mode = fallback.get("mode", "reply")
        if mode not in ("reply", "silence"):
            self.err("harness.yaml", "fallback.mode", f"unknown fallback mode {mode!r}; known: reply, silence")
        elif mode == "reply" and not str(fallback.get("text", "")).strip():
            self.warn("harness.yaml", "fallback.text", "fallback mode is 'reply' but the text is empty")

    # -- skills ---------------------------------------------------------------------------------
    def skill_checks(self) -> None:
        seen: dict[str, str] = {}
        for i, skill in enumerate(self.skills):
            sid = skill.get("id")
            file = skill.get("_file") or (f"skills/{sid}.md" if isinstance(sid, str) else f"skills[{i}]")
            if isinstance(sid, str):
                if not ID_RE.match(sid):
                    self.err(file, "id", f"skill id {sid!r} must not be empty or contain spaces or slashes")
                if sid in seen:
                    self.err(file, "id", f"duplicate skill id {sid!r} (also in {seen[sid]})")
                seen.setdefault(sid, file)
                if "_file" in skill and Path(file).stem != sid:
                    self.warn(file, "id", f"skill id {sid!r} does not match its file name {Path(file).name!r}")
            kind = skill.get("kind")
            if kind is not None and kind not in SKILL_KINDS:
                self.err(file, "kind", f"unknown skill kind {kind!r}; known: {', '.join(SKILL_KINDS)}")
            description = skill.get("description")
            if isinstance(description, str) and not description.strip():
                self.err(file, "description", "must not be empty: the model chooses skills by it")
            if not str(skill.get("body", "")).strip():
                self.warn(file, "body", "skill body is empty: loading it gives the model nothing")
            tools = _list(skill.get("tools"))
            for tool in tools:
                if not isinstance(tool, str) or tool not in self.tool_names:  # (a list is unhashable)
                    self.err(file, "tools", f"unknown tool {tool!r}")
            for tool in {t for t in tools if isinstance(t, str) and tools.count(t) > 1}:
                self.warn(file, "tools", f"tool {tool!r} listed more than once")
            if kind == "strategy" and not tools:
                self.warn(file, "tools", "strategy skill names no tools")
        if not any(s.get("kind") == "reply" for s in self.skills):
            self.err("skills/", "kind", "no reply skill at all: a reply needs one loaded")

    # -- tools.yaml -----------------------------------------------------------------------------
    def tool_checks(self) -> None:
        from livehost.commerce.operations import OPERATIONS

        seen: set[str] = set()
        used = {t for s in self.skills for t in _list(s.get("tools")) if isinstance(t, str)}
        for i, tool in enumerate(self.tools):
            name = tool.get("name")
            where = f"tools[{i}] ({name})"
            if isinstance(name, str):
                if not TOOL_NAME_RE.match(name):
                    self.err("tools.yaml", f"{where}.name",
                             "tool name must start with a letter and use only letters, digits, '_' or '-' "
                             "(at most 64)")
                if name in seen:
                    self.err("tools.yaml", f"{where}.name", f"duplicate tool name {name!r}")
                seen.add(name)
                if name not in used:
                    self.warn("tools.yaml", where, "no skill names this tool")
            description = tool.get("description")
            if isinstance(description, str) and not description.strip():
                self.err("tools.yaml", f"{where}.description", "must not be empty")
            timeout = tool.get("timeout_ms")
            if _is_num(timeout) and timeout <= 0:
                self.err("tools.yaml", f"{where}.timeout_ms", "must be positive")
            budget = _dict(self.raw.get("limits")).get("time_budget_ms")
            if _is_num(timeout) and _is_num(budget) and timeout > budget:
                self.warn("tools.yaml", f"{where}.timeout_ms", f"longer than the whole time budget ({budget} ms)")
            props = self._schema(tool, where)
            binding = _dict(tool.get("binding"))
            op_name = binding.get("operation")
            op = OPERATIONS.get(op_name) if isinstance(op_name, str) else None
            if isinstance(op_name, str) and op is None:
                self.err("tools.yaml", f"{where}.binding.operation",
                         f"unknown backend operation {op_name!r}; known: {', '.join(sorted(OPERATIONS))}")
            arguments = _dict(binding.get("arguments"))
            for op_param, arg in arguments.items():
                if props is not None and (not isinstance(arg, str) or arg not in props):
                    self.err("tools.yaml", f"{where}.binding.arguments.{op_param}",
                             f"binds to undefined argument {arg!r}")
                if op is not None and op_param not in op.params:
                    self.err("tools.yaml", f"{where}.binding.arguments.{op_param}",
                             f"operation {op.name!r} has no parameter {op_param!r}; "
                             f"its parameters: {', '.join(op.params)}")
            if op is not None:
                for op_param in op.params:
                    if op_param not in arguments:
                        self.warn("tools.yaml", f"{where}.binding.arguments",
                                  f"operation parameter {op_param!r} is fed by no argument")
                if op.side_effect and tool.get("side_effect") is not True:
                    self.err("tools.yaml", f"{where}.side_effect",
                             f"operation {op.name!r} has side effects: the tool must say side_effect: true "
                             "(it then gets an idempotency key)")

    def _schema(self, tool: dict[str, Any], where: str) -> dict[str, Any] | None:
        """Check the argument schema; return its properties (None when the schema is unusable)."""
        schema = tool.get("parameters")
        if not isinstance(schema, dict):
            return None
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            path = ".".join(str(p) for p in exc.absolute_path)
            self.err("tools.yaml", f"{where}.parameters{'.' + path if path else ''}",
                     f"invalid JSON Schema: {exc.message}")
            return None
        if schema.get("type") != "object":
            self.err("tools.yaml", f"{where}.parameters.type", "tool arguments must be a JSON Schema of type 'object'")
        props = _dict(schema.get("properties"))
        for req in _list(schema.get("required")):
            if req not in props:
                self.err("tools.yaml", f"{where}.parameters.required", f"required argument {req!r} is not a property")
        return props

    # -- hooks.yaml -----------------------------------------------------------------------------
    def hook_checks(self) -> None:
        seen: set[str] = set()
        for i, hook in enumerate(self.hooks):
            hid = hook.get("id")
            where = f"hooks[{i}] ({hid})"
            if isinstance(hid, str):
                if not ID_RE.match(hid):
                    self.err("hooks.yaml", f"{where}.id", "hook id must not be empty or contain spaces or slashes")
                if hid in seen:
                    self.err("hooks.yaml", f"{where}.id", f"duplicate hook id {hid!r}")
                seen.add(hid)
            kind, stage = hook.get("kind"), hook.get("stage")
            if kind is not None and kind not in HOOK_KINDS:
                self.err("hooks.yaml", f"{where}.kind", f"unknown hook kind {kind!r}; known: {', '.join(HOOK_KINDS)}")
            if stage is not None and stage not in HOOK_STAGES:
                self.err("hooks.yaml", f"{where}.stage",
                         f"unknown hook stage {stage!r}; known: {', '.join(HOOK_STAGES)}")
            if isinstance(kind, str) and isinstance(stage, str) and kind in KIND_STAGES and stage in HOOK_STAGES \
                    and stage not in KIND_STAGES[kind]:
                self.err("hooks.yaml", f"{where}.stage",
                         f"a {kind} hook cannot run at stage {stage!r}; allowed: {', '.join(KIND_STAGES[kind])}")
            budget = hook.get("retry_budget", 2)
            if _is_int(budget) and budget < 0:
                self.err("hooks.yaml", f"{where}.retry_budget", "must not be negative")
            on_fail = _dict(hook.get("on_fail"))
            action = on_fail.get("action")
            if action is not None and action not in FAIL_ACTIONS:
                self.err("hooks.yaml", f"{where}.on_fail.action",
                         f"unknown failure action {action!r}; known: {', '.join(FAIL_ACTIONS)}")
            message = on_fail.get("message", "")
            if isinstance(message, str):
                try:
                    fields = {f for _, f, _, _ in string.Formatter().parse(message) if f is not None}
                except ValueError as exc:
                    self.err("hooks.yaml", f"{where}.on_fail.message", f"bad template: {exc}")
                    fields = set()
                for name in sorted(fields - ON_FAIL_FIELDS):
                    self.err("hooks.yaml", f"{where}.on_fail.message",
                             f"uses undefined field {{{name}}}; available: "
                             + ", ".join(f"{{{f}}}" for f in sorted(ON_FAIL_FIELDS)))
                if action == "correct" and not message.strip():
                    self.warn("hooks.yaml", f"{where}.on_fail.message",
                              "correct-and-retry without a message tells the model nothing")
            if action == "correct" and _is_int(budget) and budget == 0:
                self.warn("hooks.yaml", f"{where}.retry_budget",
                          "correct-and-retry with a retry budget of 0 never retries")
            self._params(hook, where, kind)

    def _params(self, hook: dict[str, Any], where: str, kind: Any) -> None:
        params = hook.get("params", {})
        if params is None:
            return
        if not isinstance(params, dict):
            return  # the type model reports it
        spec = HOOK_PARAMS.get(kind) if isinstance(kind, str) else None
        for key, value in params.items():
            at = f"{where}.params.{key}"
            if key in ("tools", "allowed_tools"):
                for name in _list(value):
                    if not isinstance(name, str) or name not in self.tool_names:
                        self.err("hooks.yaml", at, f"unknown tool {name!r}")
            if key == "skills":
                for name in _list(value):
                    if not isinstance(name, str) or name not in self.skill_ids:
                        self.err("hooks.yaml", at, f"unknown skill {name!r}")
            if spec is None:
                continue
            if key not in spec:
                self.warn("hooks.yaml", at, f"parameter not used by {kind} hooks; known: {', '.join(sorted(spec))}")
                continue
            typ, minimum = spec[key]
            if typ == _INT and not _is_int(value) or typ == _NUM and not _is_num(value):
                self.err("hooks.yaml", at, f"must be a {'whole ' if typ == _INT else ''}number, got {value!r}")
            elif typ == "dict" and not isinstance(value, dict):
                self.err("hooks.yaml", at, "must be a mapping")
            elif typ == _BOOL and not isinstance(value, bool):
                self.err("hooks.yaml", at, f"must be true or false, got {value!r}")
            elif typ == _STRS and not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
                self.err("hooks.yaml", at, "must be a list of non-empty strings")
            elif minimum is not None and _is_num(value) and value < minimum:
                self.err("hooks.yaml", at, f"must be at least {minimum:g}, got {value}")
            elif key in REGEX_PARAMS:
                for j, pattern in enumerate(value):
                    try:
                        compile_pattern(pattern)
                    except PatternError as exc:
                        self.err("hooks.yaml", f"{at}[{j}]", f"not a valid regular expression: {exc}")
        lo, hi = params.get("min_chars"), params.get("max_chars")
        if _is_int(lo) and _is_int(hi) and lo > hi:
            self.err("hooks.yaml", f"{where}.params", f"min_chars ({lo}) is greater than max_chars ({hi})")

    # -- prompt.yaml ----------------------------------------------------------------------------
    def prompt_checks(self) -> None:
        if not self.prompt:
            return
        budget = self.prompt.get("token_budget")
        if _is_num(budget) and budget <= 0:
            self.err("prompt.yaml", "token_budget", "must be positive")
        if isinstance(self.prompt.get("sections"), list) and not self.sections:
            self.err("prompt.yaml", "sections", "the prompt pipeline has no sections")
        ids: set[str] = set()
        sources: set[str] = set()
        for i, section in enumerate(self.sections):
            sid = section.get("id")
            where = f"sections[{i}] ({sid})"
            if isinstance(sid, str):
                if sid in ids:
                    self.err("prompt.yaml", f"{where}.id", f"duplicate section id {sid!r}")
                ids.add(sid)
            source = section.get("source")
            if source is not None:
                if source not in PROMPT_SOURCES:
                    self.err("prompt.yaml", f"{where}.source",
                             f"unknown source {source!r}; known: {', '.join(PROMPT_SOURCES)}")
                else:
                    sources.add(source)
            template = section.get("template", "{content}")
            if not isinstance(template, str):
                continue
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
            except ValueError as exc:
                self.err("prompt.yaml", f"{where}.template", f"bad template: {exc}")
                continue
            for name in fields:
                if name != "content" and name not in PROMPT_SOURCES:
                    self.err("prompt.yaml", f"{where}.template",
                             f"uses undefined source {{{name}}}; use {{content}} or one of: "
                             + ", ".join(PROMPT_SOURCES))
            if "content" not in fields:
                self.warn("prompt.yaml", f"{where}.template", "template does not include {content}")
        order = _list(self.prompt.get("truncation_order"))
        for sid in order:
            if not isinstance(sid, str) or sid not in ids:
                self.err("prompt.yaml", "truncation_order", f"unknown section {sid!r}")
        for sid in {s for s in order if isinstance(s, str) and order.count(s) > 1}:
            self.warn("prompt.yaml", "truncation_order", f"section {sid!r} listed more than once")
        for needed, why in (("skill_index", "the model cannot see which skills exist"),
                            ("loaded_skills", "loaded skill bodies never reach the model")):
            if self.sections and needed not in sources:
                self.warn("prompt.yaml", "sections", f"no section with source {needed!r}: {why}")

    # -- rules.yaml -----------------------------------------------------------------------------
    def rules_checks(self) -> None:
        rules = _dict(self.raw.get("rules"))
        pct = rules.get("max_discount_pct")
        if _is_num(pct) and not 0 <= pct <= 100:
            self.err("rules.yaml", "max_discount_pct", f"must be between 0 and 100, got {pct}")
        chars = rules.get("max_reply_chars")
        if _is_num(chars) and chars <= 0:
            self.err("rules.yaml", "max_reply_chars", "must be positive")
        for key in ("banned_phrases", "claims_requiring_evidence", "extra"):
            values = _list(rules.get(key))
            for j, value in enumerate(values):
                if isinstance(value, str) and not value.strip():
                    self.err("rules.yaml", f"{key}[{j}]", "must not be empty")
            for value in {v for v in values if isinstance(v, str) and values.count(v) > 1}:
                self.warn("rules.yaml", key, f"{value!r} listed more than once")


UNCHECKABLE = "the bundle could not be checked (malformed structure)"


def check_raw(raw: dict[str, Any]) -> list[Problem]:
    """Cross-reference and sanity checks on raw bundle data (errors and warnings).

    A bundle whose shape the checks do not expect (a list where a name belongs, ...) is reported as
    one error rather than raised: the Harness API answers INVALID_ARGUMENT, never INTERNAL. (The fuzz
    tests treat this message as a crash to fix.)"""
    try:
        return _Checker(raw).run()
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
        return [Problem("bundle", "-", f"{UNCHECKABLE}: {type(exc).__name__}: {exc}")]


# pydantic literal errors at these places are explained by check_raw in plainer words.
_EXPLAINED = (
    ("skills", int, "kind"), ("hooks", int, "kind"), ("hooks", int, "stage"),
    ("hooks", int, "on_fail", "action"), ("prompt", "sections", int, "source"), ("fallback", "mode"),
)


def _explained(loc: tuple[Any, ...]) -> bool:
    for pattern in _EXPLAINED:
        if len(pattern) == len(loc) and all(
                isinstance(x, int) if p is int else p == x for p, x in zip(pattern, loc, strict=True)):
            return True
    return False


def validate_raw(raw: dict[str, Any], read_problems: list[Problem] | None = None) -> Report:
    """Validate raw bundle data: the type model plus every check, all problems together."""
    from livehost.harness.loader import _locate

    problems = list(read_problems or [])
    clean = dict(raw)
    if isinstance(raw.get("skills"), list):
        clean["skills"] = [{k: v for k, v in s.items() if k != "_file"} if isinstance(s, dict) else s
                           for s in raw["skills"]]
    harness: Harness | None = None
    try:
        harness = Harness.model_validate(clean)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            if error["type"] == "literal_error" and _explained(loc):
                continue
            file, where = _locate(loc, raw)
            problems.append(Problem(file, where, error["msg"]))
    problems.extend(check_raw(raw))
    return Report(harness, problems)


def validate_path(path: Path | str) -> Report:
    """Validate a harness folder."""
    path = Path(path)
    raw, read_problems = read_raw(path)
    if not path.is_dir():
        return Report(None, read_problems)
    return validate_raw(raw, read_problems)


def validate_bundle(data: dict[str, Any]) -> Report:
    """Validate a bundle in canonical JSON form (as pushed over the API or stored in the registry)."""
    if not isinstance(data, dict):
        return Report(None, [Problem("bundle", "-", "a harness bundle must be a JSON object")])
    if nesting_depth(data) > MAX_NESTING:  # before any check walks it recursively
        return Report(None, [Problem("bundle", "-", f"nested more than {MAX_NESTING} levels deep")])
    return validate_raw(data)
