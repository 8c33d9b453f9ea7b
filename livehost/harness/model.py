"""Typed model of a harness bundle.

Nothing here names a skill, tool, hook or section of any particular harness: the kinds, stages and
sources below are the *vocabulary* of the format (code), the names are data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

SkillKind = Literal["reply", "strategy"]
HookStage = Literal["input", "tool_call", "before_reply", "reply"]
HookKind = Literal[
    "input_validation", "tool_arguments", "skill_load_requirement", "reply_format", "factual_risk",
    "retry_control", "side_effect_gate", "internal_disclosure",
]
FailAction = Literal["reject", "correct", "drop"]
PromptSource = Literal[
    "base_instructions", "product", "faq", "room", "rules", "skill_index", "tool_index",
    "loaded_skills", "memory", "transcript", "comments",
]
HOOK_KINDS: tuple[str, ...] = HookKind.__args__  # type: ignore[attr-defined]
HOOK_STAGES: tuple[str, ...] = HookStage.__args__  # type: ignore[attr-defined]
PROMPT_SOURCES: tuple[str, ...] = PromptSource.__args__  # type: ignore[attr-defined]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Skill(_Strict):
    id: str
    kind: SkillKind
    description: str
    tools: list[str] = Field(default_factory=list)
    body: str = ""


class Binding(_Strict):
    """Binds a tool to a backend operation (code). ``arguments`` maps each operation parameter to
    the tool argument that feeds it, so tools can rename their arguments freely."""

    operation: str
    arguments: dict[str, str] = Field(default_factory=dict)


class Tool(_Strict):
    name: str
    description: str
    parameters: dict[str, Any]
    binding: Binding
    timeout_ms: int = 2000
    side_effect: bool = False


class OnFail(_Strict):
    action: FailAction
    message: str = ""


class Hook(_Strict):
    id: str
    stage: HookStage
    kind: HookKind
    params: dict[str, Any] = Field(default_factory=dict)
    on_fail: OnFail
    retry_budget: int = 2
    enabled: bool = True


class PromptSection(_Strict):
    id: str
    source: PromptSource
    template: str = "{content}"


class PromptPipeline(_Strict):
    token_budget: int = 3000
    sections: list[PromptSection]
    truncation_order: list[str] = Field(default_factory=list)


class Rules(_Strict):
    max_discount_pct: float = 0
    banned_phrases: list[str] = Field(default_factory=list)
    claims_requiring_evidence: list[str] = Field(default_factory=list)
    max_reply_chars: int = 280
    extra: list[str] = Field(default_factory=list)


class Limits(_Strict):
    max_turns: int = 6
    time_budget_ms: int = 8000


class Fallback(_Strict):
    mode: Literal["reply", "silence"] = "reply"
    text: str = ""


class Harness(_Strict):
    name: str
    description: str = ""
    instructions: str
    limits: Limits = Limits()
    fallback: Fallback = Fallback()
    skills: list[Skill]
    tools: list[Tool]
    hooks: list[Hook]
    prompt: PromptPipeline
    rules: Rules = Rules()

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    _version: str | None = PrivateAttr(default=None)  # the model is frozen: computed once

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Harness:
        copy = super().model_copy(update=update, deep=deep)
        copy._version = None  # an updated copy has other content
        return copy

    def __eq__(self, other: object) -> bool:
        # Content equality: the cached version (a private attribute) must not make equal harnesses differ.
        if not isinstance(other, Harness):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = BaseModel.__hash__  # frozen: hashed by its fields, as before

    def version(self) -> str:
        """Content address: sha256 of the canonical JSON bundle (first 16 hex digits)."""
        if self._version is None:
            blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":")).encode()
            self._version = hashlib.sha256(blob).hexdigest()[:16]
        return self._version

    def skill(self, skill_id: str) -> Skill | None:
        return next((s for s in self.skills if s.id == skill_id), None)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def hooks_at(self, stage: str) -> list[Hook]:
        return [h for h in self.hooks if h.enabled and h.stage == stage]
