"""Chunking, bounds, skips and character cleaning (pure logic)."""

from livehost.voice.chunking import (
    SKIP_EMPTY,
    SKIP_NOTHING_SPEAKABLE,
    SKIP_ONLY_TOKENS,
    plan_chunks,
)
from livehost.voice.tokens import Pause, TextPiece


def test_one_chunk_per_sentence_and_pause_is_trailing():
    plan = plan_chunks("First one. <sil_L3> Second one! Third?")
    assert [c.text for c in plan.chunks] == ["First one.", "Second one!", "Third?"]
    assert plan.chunks[0].items[-1] == Pause(0.8125)
    assert plan.skipped_reason is None


def test_leading_pause_goes_to_first_chunk():
    plan = plan_chunks("<sil_L2>Hello.")
    assert plan.chunks[0].items[0] == Pause(0.5)


def test_empty_and_whitespace_skip():
    for t in ["", "   \n "]:
        plan = plan_chunks(t)
        assert plan.skipped_reason == SKIP_EMPTY and plan.chunks == []


def test_only_control_tokens_skip():
    plan = plan_chunks("<sil_L2> [speed_e2] <sil_L6>")
    assert plan.skipped_reason == SKIP_ONLY_TOKENS and plan.chunks == []
    assert any("only control tokens" in w for w in plan.warnings)


def test_unknown_token_only_skip():
    assert plan_chunks("<foo>").skipped_reason == SKIP_ONLY_TOKENS


def test_emoji_only_is_nothing_speakable():
    plan = plan_chunks("😀🎉 !!")
    assert plan.skipped_reason == SKIP_NOTHING_SPEAKABLE
    assert "😀" in plan.removed_chars


def test_emoji_and_other_scripts_stripped_and_reported():
    plan = plan_chunks("Great😀deal 👍🏽 on these items 中文. Café crème is 5€.")
    assert [c.text for c in plan.chunks] == ["Great deal on these items.", "Café crème is 5€."]
    assert {"😀", "👍", "中"} <= set(plan.removed_chars)
    assert any("unsupported characters" in w for w in plan.warnings)


def test_long_sentence_split_at_clauses_then_words():
    sentence = ", ".join(f"clause number {i} with some words" for i in range(20)) + "."
    plan = plan_chunks(sentence, max_chunk_chars=100, first_chunk_max_chars=60)
    assert len(plan.chunks) > 3
    assert len(plan.chunks[0].text) <= 60
    assert all(len(c.text) <= 100 for c in plan.chunks)
    assert all(c.text.endswith((",", ".")) for c in plan.chunks)  # split at commas
    joined = " ".join(c.text for c in plan.chunks)
    assert joined == sentence
    words = "word " * 80
    plan = plan_chunks(words, max_chunk_chars=50, first_chunk_max_chars=None)
    assert all(len(c.text) <= 50 for c in plan.chunks)
    assert " ".join(c.text for c in plan.chunks) == words.strip()


def test_very_long_text_is_truncated_at_sentence_boundary():
    text = " ".join(f"Sentence number {i} is here." for i in range(500))
    plan = plan_chunks(text, max_total_chars=400)
    assert plan.truncated
    total = sum(len(c.text) + 1 for c in plan.chunks)
    assert total <= 401
    assert plan.chunks[-1].text.endswith(".")
    assert any("truncated" in w for w in plan.warnings)


def test_rates_kept_per_chunk():
    plan = plan_chunks("[speed_d2]Slow sentence. Normal sentence.")
    assert plan.chunks[0].items == [TextPiece("Slow sentence.", 1.25)]
    assert plan.chunks[1].items == [TextPiece("Normal sentence.", 1.0)]
