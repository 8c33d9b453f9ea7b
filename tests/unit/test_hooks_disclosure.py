"""The internal_disclosure hook kind: a reply repeating internal text of the harness in force (or of the
room's campaign, or of this request's corrections) fails like any other reply hook; ordinary replies
pass. Hooks are found by kind and skills by what they are, never by name — and renaming them all
changes nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest

from livehost.agent import state as st
from livehost.config import REPO_ROOT
from livehost.harness.augment import rename_everything
from livehost.harness.loader import load
from livehost.harness.model import Harness, Hook
from livehost.harness.validate import validate_bundle
from livehost.hooks.disclosure import longest_shared_run, words
from livehost.hooks.step import check_action
from livehost.hooks.verdict import Verdict
from livehost.sim.generator import generate_cases

HARNESS = load(REPO_ROOT / "harness" / "default")
RENAMED, _ = rename_everything(HARNESS, seed=11)
KIND = "internal_disclosure"


def hook_of(harness: Harness) -> Hook:
    (hook,) = [h for h in harness.hooks if h.kind == KIND and h.enabled]
    return hook


def state_for(harness: Harness, room: dict[str, Any] | None = None) -> dict[str, Any]:
    comment = {"event_id": "e-1", "user_id": "u1", "text": "tell me about link 1", "ts_ms": 1}
    return st.new_state(room_id="room-1", harness_version=harness.version(), comments=[comment],
                        room=room or {"room_id": "room-1", "current_link": 1}, ttl_ms=60_000,
                        time_budget_ms=60_000, created_ms=1_000)


def verdict(harness: Harness, text: str, room: dict[str, Any] | None = None,
            state: dict[str, Any] | None = None) -> Verdict:
    verdicts = check_action(harness, state or state_for(harness, room), {"kind": "reply", "text": text})
    (v,) = [v for v in verdicts if v.kind == KIND]
    return v


def long_sentence(text: str, at_least: int = 10) -> str:
    """The first sentence of ``text`` with at least ``at_least`` words (list markers dropped)."""
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*#>]+|\d+[.)])\s+", "", line)
        for sentence in re.split(r"(?<=[.!?])\s+", line):
            if len(sentence.split()) >= at_least:
                return sentence
    raise AssertionError("no long sentence")


def reply_skill_body(harness: Harness) -> str:
    return next(s.body for s in harness.skills if s.kind == "reply" and len(s.body.split()) >= 15)


@pytest.mark.parametrize("harness", [HARNESS, RENAMED], ids=["shipped", "renamed"])
def test_a_reply_quoting_a_skill_body_sentence_is_corrected(harness: Harness) -> None:
    sentence = long_sentence(reply_skill_body(harness))
    v = verdict(harness, f"Great question! {sentence} Tap link 1!")
    hook = hook_of(harness)
    assert v.verdict == hook.on_fail.action == "correct"
    assert v.hook == hook.id and "internal text" in v.reason and "skill" in v.reason
    # case and look-alike letters do not hide a copy (Cyrillic "о" for "o")
    assert verdict(harness, sentence.upper().replace("O", "\u041e")).failed


@pytest.mark.parametrize("harness", [HARNESS, RENAMED], ids=["shipped", "renamed"])
def test_ordinary_replies_pass(harness: Harness) -> None:
    replies = ["Link 1 is 240.9 CNY, tap link 1 to grab it!", "Thanks for joining us tonight! 💕",
               "Sorry, that one is sold out. The hiking daypack on link 3 is a great alternative!",
               "I'll check that for you and get back in a moment.",
               "Sorry, I can't share that. Happy to help with sizes or prices though!",
               harness.fallback.text]  # the fallback text is for viewers
    replies += [g.gold for g in generate_cases(seed=5, per_category=6) if g.gold]
    failed = [(r, v.reason) for r in replies if (v := verdict(harness, r)).failed]
    assert failed == []


def test_the_instructions_and_rules_are_internal() -> None:
    sentence = long_sentence(HARNESS.instructions, at_least=9)
    assert verdict(HARNESS, f"My instructions say: {sentence}").failed
    rule = next(r for r in HARNESS.rules.extra if len(r.split()) >= 8)
    assert "the rules" in verdict(HARNESS, f"Good news. {rule}").reason


def test_campaign_internal_rules_are_internal_and_viewer_rules_are_not() -> None:
    note = "compliance: do not make health claims"  # 6 words: a whole internal line
    room = {"room_id": "room-1", "current_link": 1,
            "campaign": {"name": "Spring", "rules": [note, "Free shipping on every order over 199 yuan this week"],
                         "internal_rules": [note]}}
    assert "campaign's internal rules" in verdict(HARNESS, f"Sure! {note.capitalize()}.", room).reason
    assert not verdict(HARNESS, "We can't make health claims, but it's a lovely tea!", room).failed
    # the campaign's own rules are for viewers: reading one out is fine
    assert not verdict(HARNESS, "Free shipping on every order over 199 yuan this week, tap link 1!", room).failed


def test_messages_other_hooks_sent_this_request_are_internal() -> None:
    state = state_for(HARNESS)
    message = "Only state facts the tool results show: numbers not supported by tool results or product data: 15"
    st.add_step(state, "correction", "some_other_hook", {"hook": "some_other_hook", "reason": "x", "message": message})
    assert "correction" in verdict(HARNESS, "Okay! Numbers not supported by tool results or product data: 15",
                                   state=state).reason
    assert not verdict(HARNESS, "Link 1 is 240.9 CNY!", state=state).failed


def test_parameters_come_from_the_harness() -> None:
    sentence = " ".join(long_sentence(reply_skill_body(HARNESS)).split()[:9])  # nine words
    assert verdict(HARNESS, sentence).failed
    data = HARNESS.canonical()
    hook = next(h for h in data["hooks"] if h["kind"] == KIND)
    hook["params"]["min_run_words"] = 12
    hook["id"] = "renamed_check"
    lenient = validate_bundle(data).harness
    assert lenient is not None
    assert not verdict(lenient, sentence).failed
    hook["enabled"] = False
    off = validate_bundle(data).harness
    assert off is not None
    assert not [v for v in check_action(off, state_for(off), {"kind": "reply", "text": sentence}) if v.kind == KIND]


def test_validation_of_the_hook() -> None:
    data = HARNESS.canonical()
    hook = next(h for h in data["hooks"] if h["kind"] == KIND)
    hook["params"]["min_run_words"] = 2
    hook["stage"] = "input"
    report = validate_bundle(data)
    messages = [p.message for p in report.errors if p.file == "hooks.yaml"]
    assert any("at least 3" in m for m in messages) and any("cannot run at stage 'input'" in m for m in messages)


def test_longest_shared_run() -> None:
    a, b = words("one two three four five"), words("zero two three four six")
    assert longest_shared_run(a, b) == (3, 1)
    assert longest_shared_run(a, ()) == (0, 0)
    assert words("满199减20 Hello, World") == ("满", "199", "减", "20", "hello", "world")
