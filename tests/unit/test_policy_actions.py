import json

import jsonschema
import pytest

from livehost.policy.actions import ACTION_JSON_SCHEMA, parse_action, strip_reasoning


@pytest.mark.parametrize(
    "action",
    [
        {"action": "load_skill", "skill": "s1"},
        {"action": "call_tool", "tool": "t1", "arguments": {"a": 3}},
        {"action": "reply", "text": "Hello!"},
        {"action": "no_reply", "reason": "spam"},
    ],
)
def test_canonical_actions_validate_and_round_trip(action):
    jsonschema.validate(action, ACTION_JSON_SCHEMA)
    parsed = parse_action(json.dumps(action))
    assert parsed.valid and not parsed.repaired and parsed.error is None
    assert parsed.to_action() == action


def test_schema_rejects_unknown_action():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": "dance"}, ACTION_JSON_SCHEMA)


def test_thought_is_stripped():
    parsed = parse_action('{"thought": "price q", "action": "reply", "text": "299 yuan"}')
    assert parsed.kind == "reply" and parsed.text == "299 yuan" and not parsed.repaired


@pytest.mark.parametrize(
    "raw, kind",
    [
        ('```json\n{"action": "reply", "text": "hi"}\n```', "reply"),
        ('Sure! Here is my action: {"action": "load_skill", "skill": "x"} hope it helps', "load_skill"),
        ('{"action": "call_tool", "tool": "t", "arguments": {"link_id": 3,},}', "call_tool"),
        ("{'action': 'reply', 'text': 'it's great'}", "reply"),
        ('{action: "reply", text: "ok"}', "reply"),
        ('{"tool_call": {"name": "t", "arguments": {"q": "x"}}}', "call_tool"),
        ('{"action": "tool_call", "name": "t", "args": {"q": "x"}}', "call_tool"),
        ('{"action": "call_tool", "tool": "t", "arguments": "{\\"a\\": 1}"}', "call_tool"),
        ('{"action": "respond", "reply": "hello"}', "reply"),
        ('{"action": "silence"}', "no_reply"),
        ('{"skill": "abc"}', "load_skill"),
        ("{'action': 'no_reply', 'reason': None}", "no_reply"),
    ],
)
def test_repairs(raw, kind):
    parsed = parse_action(raw)
    assert parsed.kind == kind, parsed.error
    assert parsed.repaired


def test_synonym_fields_are_mapped():
    parsed = parse_action('{"action": "tool_call", "name": "t", "args": {"q": "x"}}')
    assert parsed.tool == "t" and parsed.arguments == {"q": "x"}


@pytest.mark.parametrize(
    "raw",
    [
        "", "I think the price is 299", '{"action": "reply", "text": "unterminated', '{"action": "dance"}',
        '{"action": "reply", "text": ""}', '{"action": "call_tool", "arguments": {}}', "[1, 2]",
        '{"action": "call_tool", "tool": "t", "arguments": [1]}', "{{{{", '{"foo": 1}',
    ],
)
def test_invalid_outputs_never_raise(raw):
    parsed = parse_action(raw)
    assert parsed.kind == "invalid"
    assert parsed.error
    assert parsed.to_action()["action"] == "invalid"


def test_non_string_input():
    assert parse_action(None).kind == "invalid"  # type: ignore[arg-type]


def test_reasoning_is_stripped_from_reply_and_outside():
    raw = '<think>the viewer wants price</think>{"action": "reply", "text": "<think>x</think>It is 299 yuan."}'
    parsed = parse_action(raw)
    assert parsed.kind == "reply" and parsed.text == "It is 299 yuan."
    assert strip_reasoning("Hi <thinking>a\nb</thinking> there") == "Hi there"
    assert strip_reasoning("Answer. <think>unfinished reasoning") == "Answer."


def test_reply_that_is_only_reasoning_is_invalid():
    assert parse_action('{"action": "reply", "text": "<think>hmm</think>"}').kind == "invalid"


def test_fuzz_never_raises():
    import random

    rng = random.Random(7)
    alphabet = '{}[]":,\'abc action reply tool 123\n`<think>'
    for _ in range(2000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        parse_action(raw)
