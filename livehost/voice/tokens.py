"""Parse TTS control tokens out of reply text.

The policy model's reply may carry inline control tokens (TaoLive report): pauses ``<sil_L2>`` …
``<sil_L6>`` and speaking rate ``[speed_e2]`` / ``[speed_d2]``. Tokens are never spoken.

Pause table (linear, 0.3125 s per level, spanning the report's 0.5 s to 1.75 s):

    ========  ========
    token     seconds
    ========  ========
    <sil_L2>  0.5
    <sil_L3>  0.8125
    <sil_L4>  1.125
    <sil_L5>  1.4375
    <sil_L6>  1.75
    ========  ========

Speaking rate is expressed as a *length scale* (duration multiplier, Piper's convention: < 1 is
faster, > 1 is slower):

    ============  ============
    token         length scale
    ============  ============
    [speed_e2]    0.8   (faster: "expedite")
    [speed_d2]    1.25  (slower: "decelerate")
    ============  ============

Scope of a speed token: it applies to the text that follows it **until the next speed token or the
end of the current sentence** (the first ``.``, ``!``, ``?``, ``…`` or line break), whichever
comes first; after that the rate returns to normal (1.0). Pause tokens do not end the scope.

Anything else that looks like a token — ``<word>`` or ``[word]`` where word is letters, digits
and underscores — is stripped and reported in the warnings; it is never passed to the engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PAUSE_SECONDS: dict[str, float] = {
    "sil_L2": 0.5,
    "sil_L3": 0.8125,
    "sil_L4": 1.125,
    "sil_L5": 1.4375,
    "sil_L6": 1.75,
}
SPEED_LENGTH_SCALE: dict[str, float] = {
    "speed_e2": 0.8,
    "speed_d2": 1.25,
}
NORMAL_RATE = 1.0

# <name> or [name]; names are identifier-like so "price < 100 > 90" or "[1]" style prose is left
# alone unless it really looks like a token.
TOKEN_RE = re.compile(r"<\s*([A-Za-z][A-Za-z0-9_]{0,39})\s*>|\[\s*([A-Za-z][A-Za-z0-9_]{0,39})\s*\]")
# End of a sentence: terminal punctuation (+ closing quotes/brackets) followed by whitespace or end
# of text, or a line break.
SENTENCE_END_RE = re.compile(r"[.!?…。！？]+[\"'”’)\]]*(?=\s|$)|\n")


@dataclass(frozen=True)
class TextPiece:
    """Text to speak at a given length scale (1.0 normal, < 1 faster, > 1 slower)."""

    text: str
    rate: float = NORMAL_RATE


@dataclass(frozen=True)
class Pause:
    """Silence of the given duration."""

    seconds: float


Piece = TextPiece | Pause


@dataclass
class ParsedText:
    pieces: list[Piece] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    control_tokens: int = 0  # recognised tokens (pauses + speeds)
    unknown_tokens: list[str] = field(default_factory=list)


def _split_at_first_sentence_end(text: str) -> tuple[str, str]:
    m = SENTENCE_END_RE.search(text)
    if m is None:
        return text, ""
    return text[: m.end()], text[m.end() :]


def parse_control_tokens(text: str) -> ParsedText:
    """Split ``text`` into text pieces (with their rate) and pauses; strip and report unknown tokens.

    Adjacent text with the same rate is merged; empty text pieces are dropped.
    """
    out = ParsedText()
    rate = NORMAL_RATE
    pieces: list[Piece] = []

    def add_text(chunk: str) -> None:
        nonlocal rate
        while chunk:
            if rate == NORMAL_RATE:
                _append_text(pieces, chunk, rate)
                return
            head, chunk = _split_at_first_sentence_end(chunk)
            _append_text(pieces, head, rate)
            if chunk or SENTENCE_END_RE.search(head):
                rate = NORMAL_RATE  # the sentence ended: the speed token's scope is over

    pos = 0
    for m in TOKEN_RE.finditer(text):
        add_text(text[pos : m.start()])
        pos = m.end()
        # a token is a word boundary: "Hi<sil_L2>there" must not become "Hithere"
        last = pieces[-1] if pieces else None
        if isinstance(last, TextPiece) and not last.text[-1:].isspace():
            pieces[-1] = TextPiece(last.text + " ", last.rate)
        name = m.group(1) or m.group(2)
        is_angle = m.group(1) is not None
        if is_angle and name in PAUSE_SECONDS:
            pieces.append(Pause(PAUSE_SECONDS[name]))
            out.control_tokens += 1
        elif not is_angle and name in SPEED_LENGTH_SCALE:
            rate = SPEED_LENGTH_SCALE[name]
            out.control_tokens += 1
        else:
            out.unknown_tokens.append(m.group(0))
            out.warnings.append(f"unknown control token stripped: {m.group(0)!r}")
    add_text(text[pos:])
    out.pieces = pieces
    return out


def _append_text(pieces: list[Piece], text: str, rate: float) -> None:
    if not text:
        return
    last = pieces[-1] if pieces else None
    if isinstance(last, TextPiece) and last.rate == rate:
        pieces[-1] = TextPiece(last.text + text, rate)
    else:
        pieces.append(TextPiece(text, rate))


def strip_control_tokens(text: str) -> str:
    """The text with every token (known or not) removed — what a subtitle would show."""
    return TOKEN_RE.sub("", text)
