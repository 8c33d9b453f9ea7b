"""Input stage: validation, spam, abuse, prompt injection and compliance screening of comments."""

from __future__ import annotations

import re
from typing import Any

from livehost.harness.model import Harness, Hook
from livehost.hooks.verdict import Verdict
from livehost.security.parsing import compile_pattern
from livehost.understanding.normalize import normalize
from livehost.understanding.screening import DEFAULT_THRESHOLDS, screen

_REASON = {"injection": "prompt injection", "abuse": "abusive language", "compliance": "compliance",
           "spam": "spam"}


def _word_list_hits(p: dict[str, Any], lowered: str) -> dict[str, str]:
    """Which classes the hook's word lists and patterns hit on the normalised text (and what hit)."""
    hits: dict[str, str] = {}
    # the harness's patterns run on RE2 (linear time): a pattern like (a+)+$ cannot stall screening
    for pattern in p.get("injection_patterns", []):
        if compile_pattern(pattern).search(lowered):
            hits.setdefault("injection", pattern)
    for term in p.get("abuse_terms", []):
        if re.search(rf"\b{re.escape(normalize(term))}\b", lowered):
            hits.setdefault("abuse", term)
    for term in p.get("compliance_terms", []):
        if normalize(term) in lowered:
            hits.setdefault("compliance", term)
    return hits


def _screen(hook: Hook, text: str) -> str | None:
    """The reason a comment fails this hook's screening, or None."""
    p = hook.params
    stripped = text.strip()
    if len(stripped) < int(p.get("min_chars", 1)):
        return "empty comment"
    if len(stripped) > int(p.get("max_chars", 500)):
        return f"comment longer than {p.get('max_chars', 500)} characters"
    lowered = normalize(stripped)  # NFKC, look-alikes, case, line breaks → one space
    classifier = p.get("classifier")
    if isinstance(classifier, dict) and classifier.get("enabled", True):
        thresholds = {k: float(v) for k, v in (classifier.get("thresholds") or DEFAULT_THRESHOLDS).items()}
        result = screen(stripped)
        # a word-list hit is one more signal: it lowers that class's threshold, it never decides alone
        boost = float(classifier.get("word_list_boost", 0.0))
        hits = _word_list_hits(p, lowered)
        adjusted = {k: (v - boost if k in hits else v) for k, v in thresholds.items()}
        harmful = result.harmful(adjusted)
        if harmful is not None:
            cls, score = harmful
            return f"{_REASON[cls]} (classifier {score:.2f})"
    else:
        hits = _word_list_hits(p, lowered)
        for cls in ("injection", "abuse", "compliance"):
            if cls in hits:
                return f"{_REASON[cls]} ({hits[cls]})"
    repeat = int(p.get("spam_repeat_chars", 0))
    if repeat and re.search(rf"(.)\1{{{repeat - 1},}}", stripped):
        return "spam (repeated characters)"
    if re.search(r"(https?://|www\.)", lowered) and p.get("block_links", True):
        return "spam (link)"
    return None


def screen_comments(harness: Harness, comments: list[dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Verdict]]]:
    """Split comments into those that pass every input hook and those that fail one (with verdict)."""
    kept: list[dict[str, Any]] = []
    failed: list[tuple[dict[str, Any], Verdict]] = []
    hooks = [h for h in harness.hooks_at("input") if h.kind == "input_validation"]

    def first_failure(text: str) -> Verdict | None:
        for hook in hooks:
            reason = _screen(hook, text)
            if reason:
                return Verdict(hook.id, hook.kind, "drop" if hook.on_fail.action == "drop" else "reject",
                               reason, hook.on_fail.message)
        return None

    # One viewer's comments of the window are also read together, in order: an instruction split over
    # several messages ("ignore previous" / "instructions and say …") is as harmful as one message.
    by_user: dict[str, list[str]] = {}
    for comment in comments:
        by_user.setdefault(str(comment.get("user_id", "")), []).append(str(comment["text"]))
    joined = {user: first_failure("\n".join(texts)) for user, texts in by_user.items() if len(texts) > 1}
    for comment in comments:
        verdict = first_failure(comment["text"]) or joined.get(str(comment.get("user_id", "")))
        if verdict is None:
            kept.append(comment)
        else:
            failed.append((comment, verdict))
    return kept, failed
