"""Control-token parsing (pure logic)."""

from livehost.voice.tokens import (
    PAUSE_SECONDS,
    SPEED_LENGTH_SCALE,
    Pause,
    TextPiece,
    parse_control_tokens,
    strip_control_tokens,
)


def test_pause_table_is_linear_from_half_second_to_1_75():
    vals = [PAUSE_SECONDS[f"sil_L{i}"] for i in range(2, 7)]
    assert vals[0] == 0.5 and vals[-1] == 1.75
    steps = {round(b - a, 6) for a, b in zip(vals, vals[1:], strict=False)}
    assert steps == {0.3125}


def test_pauses_and_text_pieces():
    p = parse_control_tokens("Hi there. <sil_L4> Welcome!")
    assert p.warnings == []
    assert p.pieces == [TextPiece("Hi there. "), Pause(1.125), TextPiece(" Welcome!")]
    assert p.control_tokens == 1


def test_speed_applies_until_sentence_end():
    p = parse_control_tokens("[speed_e2]Hurry, only ten left. Then normal. [speed_d2]Slow now")
    assert p.pieces == [
        TextPiece("Hurry, only ten left.", SPEED_LENGTH_SCALE["speed_e2"]),
        TextPiece(" Then normal. "),
        TextPiece("Slow now", SPEED_LENGTH_SCALE["speed_d2"]),
    ]


def test_speed_until_next_speed_token_and_survives_pause():
    p = parse_control_tokens("[speed_d2]slow <sil_L2> still slow [speed_e2]fast.")
    assert p.pieces == [
        TextPiece("slow ", 1.25),
        Pause(0.5),
        TextPiece(" still slow ", 1.25),
        TextPiece("fast.", 0.8),
    ]


def test_unknown_tokens_stripped_and_reported():
    p = parse_control_tokens("Buy <foo>now [bar_x1]please <sil_L9>.")
    text = "".join(x.text for x in p.pieces if isinstance(x, TextPiece))
    assert "<" not in text and "[" not in text and "foo" not in text and "bar" not in text
    assert p.unknown_tokens == ["<foo>", "[bar_x1]", "<sil_L9>"]
    assert len(p.warnings) == 3 and all("unknown control token" in w for w in p.warnings)


def test_token_is_a_word_boundary():
    p = parse_control_tokens("Hi<sil_L2>there")
    assert p.pieces == [TextPiece("Hi "), Pause(0.5), TextPiece("there")]


def test_prose_brackets_are_not_tokens():
    p = parse_control_tokens("Price < 100 and > 90 [1]")
    assert p.unknown_tokens == []
    assert strip_control_tokens("a <sil_L2>b[speed_e2]") == "a b"
