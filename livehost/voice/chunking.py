"""Turn reply text into speakable chunks (one sentence each, long sentences split).

Pipeline: control tokens are parsed (:mod:`livehost.voice.tokens`), unsupported characters are
stripped, the text is cut into sentences, the whole reply is bounded to ``max_total_chars``
(truncated at a sentence boundary), and sentences longer than ``max_chunk_chars`` are split at
clause punctuation (``, ; : —``) or, failing that, between words. The first chunk may use a
smaller limit (``first_chunk_max_chars``) so the first audio is ready sooner.

Pauses belong to the chunk whose text precedes them (rendered as trailing silence in that chunk's
audio); a pause before any text becomes leading silence of the first chunk.

Empty text, text made only of control tokens, or text with nothing speakable yields a plan with
``skipped_reason`` set and no chunks.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from livehost.voice.tokens import SENTENCE_END_RE, Pause, Piece, TextPiece, parse_control_tokens

DEFAULT_MAX_CHUNK_CHARS = 200
DEFAULT_FIRST_CHUNK_MAX_CHARS = 120
DEFAULT_MAX_TOTAL_CHARS = 1500

SKIP_EMPTY = "empty_text"
SKIP_ONLY_TOKENS = "only_control_tokens"
SKIP_NOTHING_SPEAKABLE = "no_speakable_text"

# Symbols an en_US voice reads sensibly. Everything in Unicode categories L (Latin script only),
# N, P, Zs and these symbols is kept; other characters (emoji, pictographs, other scripts, control
# characters, private use, ...) are stripped and reported.
_ALLOWED_SYMBOLS = set("$€£¥¢%&+=<>@#/*°^~|\\_©®™±×÷§")
_CLAUSE_RE = re.compile(r"[,;:—–](?=\s)|\s[-–—]\s")
_WS_RE = re.compile(r"[ \t\r\f\v]+")
_NL_RE = re.compile(r"\s*\n\s*")
_SPACE_BEFORE_PUNCT_RE = re.compile(r" +(?=[.,!?;:…])")


@dataclass
class Chunk:
    """One speakable unit: a sequence of text runs (with rate) and pauses."""

    items: list[Piece]

    @property
    def text(self) -> str:
        """Spoken text of the chunk (no tokens), whitespace-normalised."""
        return " ".join("".join(p.text for p in self.items if isinstance(p, TextPiece)).split())

    @property
    def pause_seconds(self) -> float:
        return sum(p.seconds for p in self.items if isinstance(p, Pause))


@dataclass
class ChunkPlan:
    chunks: list[Chunk] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped_reason: str | None = None
    truncated: bool = False
    removed_chars: list[str] = field(default_factory=list)
    unknown_tokens: list[str] = field(default_factory=list)


def _is_speakable(text: str) -> bool:
    return any(c.isalnum() for c in text)


def _char_ok(c: str) -> bool:
    if c in " \n":
        return True
    cat = unicodedata.category(c)
    if cat[0] == "L":
        if c.isascii():
            return True
        try:
            return unicodedata.name(c).startswith("LATIN")
        except ValueError:
            return False
    if cat[0] in "NP" or cat == "Zs":
        return True
    return c in _ALLOWED_SYMBOLS


def clean_text(text: str) -> tuple[str, list[str]]:
    """NFC-normalise, fold whitespace, and strip characters the voice cannot speak.

    Returns the cleaned text and the distinct removed characters (in order of appearance).
    Whitespace runs become one space; line breaks are kept (they end a sentence).
    """
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\u00a0", " ").replace("\t", " ")
    removed: list[str] = []
    kept: list[str] = []
    for c in text:
        if c in "\r\n\u2028\u2029":
            kept.append("\n")
        elif c.isspace():
            kept.append(" ")
        elif _char_ok(c):
            kept.append(c)
        else:
            cat = unicodedata.category(c)
            # combining marks / joiners that glue emoji sequences are dropped silently
            silent = cat[0] == "M" or c in "\u200d\ufeff"
            if not silent and c not in removed:
                removed.append(c)
            kept.append("" if silent or cat == "Cf" else " ")
    out = _NL_RE.sub("\n", _WS_RE.sub(" ", "".join(kept)))
    if removed:  # "items 中文." -> "items ." -> "items."
        out = _SPACE_BEFORE_PUNCT_RE.sub("", out)
    return out, removed


# ---- flattened representation: spoken text + per-char rate + pauses at char offsets ----


@dataclass
class _Flat:
    text: str
    rates: list[float]
    pauses: list[tuple[int, float]]  # (offset in text, seconds); offset = index of next char

    def slice(self, lo: int, hi: int, *, leading_pauses: bool) -> list[Piece]:
        """Items of span [lo, hi): pauses at offsets in (lo, hi] (trailing silence belongs to the
        text before it), plus pauses at offsets <= lo when ``leading_pauses``."""
        sel = [(o, s) for o, s in self.pauses if lo < o <= hi or (leading_pauses and o <= lo)]
        items: list[Piece] = []
        pi = 0
        i = lo
        while True:
            while pi < len(sel) and sel[pi][0] <= i:
                items.append(Pause(sel[pi][1]))
                pi += 1
            if i >= hi:
                break
            nxt = min(sel[pi][0] if pi < len(sel) else hi, hi)
            j = i + 1
            while j < nxt and self.rates[j] == self.rates[i]:
                j += 1
            items.append(TextPiece(self.text[i:j], self.rates[i]))
            i = j
        return items


def _flatten(pieces: list[Piece]) -> _Flat:
    text_parts: list[str] = []
    rates: list[float] = []
    pauses: list[tuple[int, float]] = []
    n = 0
    for p in pieces:
        if isinstance(p, Pause):
            pauses.append((n, p.seconds))
        else:
            text_parts.append(p.text)
            rates.extend([p.rate] * len(p.text))
            n += len(p.text)
    return _Flat("".join(text_parts), rates, pauses)


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for m in SENTENCE_END_RE.finditer(text):
        end = m.end()
        # swallow following whitespace into this sentence
        while end < len(text) and text[end].isspace():
            end += 1
        if end > start:
            spans.append((start, end))
        start = end
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _split_long(text: str, lo: int, hi: int, limit: int) -> list[tuple[int, int]]:
    """Split span [lo, hi) of text into spans of at most ``limit`` chars (clause > word > hard)."""
    out: list[tuple[int, int]] = []
    while hi - lo > limit:
        window = text[lo : lo + limit]
        cut = -1
        for m in _CLAUSE_RE.finditer(window):
            if m.end() >= limit // 3:  # avoid tiny first pieces
                cut = m.end()
        if cut < 0:
            sp = window.rfind(" ", limit // 3)
            cut = sp + 1 if sp > 0 else limit
        # keep following whitespace with the left part
        while lo + cut < hi and text[lo + cut].isspace():
            cut += 1
        out.append((lo, lo + cut))
        lo += cut
    if hi > lo:
        out.append((lo, hi))
    return out


def plan_chunks(
    text: str,
    *,
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
    first_chunk_max_chars: int | None = DEFAULT_FIRST_CHUNK_MAX_CHARS,
    max_total_chars: int = DEFAULT_MAX_TOTAL_CHARS,
) -> ChunkPlan:
    """Parse tokens, clean, bound and chunk ``text``. See the module docstring."""
    plan = ChunkPlan()
    if text is None or not text.strip():
        plan.skipped_reason = SKIP_EMPTY
        plan.warnings.append("skipped: reply text is empty")
        return plan

    parsed = parse_control_tokens(text)
    plan.warnings.extend(parsed.warnings)
    plan.unknown_tokens = list(parsed.unknown_tokens)

    cleaned: list[Piece] = []
    for p in parsed.pieces:
        if isinstance(p, TextPiece):
            t, removed = clean_text(p.text)
            for c in removed:
                if c not in plan.removed_chars:
                    plan.removed_chars.append(c)
            if t:
                cleaned.append(TextPiece(t, p.rate))
        else:
            cleaned.append(p)
    if plan.removed_chars:
        shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in plan.removed_chars[:10])
        more = "" if len(plan.removed_chars) <= 10 else f" and {len(plan.removed_chars) - 10} more"
        plan.warnings.append(f"unsupported characters stripped: {shown}{more}")

    flat = _flatten(cleaned)
    if not _is_speakable(flat.text):
        if parsed.control_tokens or parsed.unknown_tokens:
            plan.skipped_reason = SKIP_ONLY_TOKENS
            plan.warnings.append("skipped: reply contains only control tokens")
        else:
            plan.skipped_reason = SKIP_NOTHING_SPEAKABLE
            plan.warnings.append("skipped: reply has no speakable text")
        return plan

    spans = _sentence_spans(flat.text)

    # ---- bound the total length (truncate at a sentence boundary) ----
    if len(flat.text.rstrip()) > max_total_chars:
        kept = [s for s in spans if len(flat.text[: s[1]].rstrip()) <= max_total_chars]
        where = "a sentence boundary"
        if not kept or kept[-1][1] < max_total_chars // 2:
            # no sentence boundary keeps at least half the budget: cut between words instead
            cut = flat.text.rfind(" ", 0, max_total_chars + 1)
            cut = cut + 1 if cut > 0 else max_total_chars
            kept = [s for s in spans if s[1] <= cut]
            start = kept[-1][1] if kept else 0
            if cut > start:
                kept.append((start, cut))
            where = "a word boundary"
        dropped = len(flat.text) - kept[-1][1]
        plan.truncated = True
        plan.warnings.append(
            f"reply truncated to {kept[-1][1]} characters at {where} "
            f"(limit {max_total_chars}, {dropped} characters dropped)"
        )
        spans = kept
        end = spans[-1][1]
        flat = _Flat(flat.text[:end], flat.rates[:end], [(o, s) for o, s in flat.pauses if o <= end])

    # ---- split long sentences ----
    pieces_spans: list[tuple[int, int]] = []
    for lo, hi in spans:
        limit = first_chunk_max_chars if (not pieces_spans and first_chunk_max_chars) else max_chunk_chars
        parts = _split_long(flat.text, lo, hi, limit)
        if len(parts) > 1 and limit != max_chunk_chars:
            # only the very first piece uses the smaller limit
            first = parts[0]
            parts = [first] + _split_long(flat.text, first[1], hi, max_chunk_chars)
        pieces_spans.extend(parts)

    # ---- build chunks; pause-only / unspeakable pieces merge into neighbours ----
    chunks: list[Chunk] = []
    leading: list[Piece] = []
    for idx, (lo, hi) in enumerate(pieces_spans):
        items = flat.slice(lo, hi, leading_pauses=idx == 0)
        if not _is_speakable(flat.text[lo:hi]):
            pauses = [p for p in items if isinstance(p, Pause)]
            if chunks:
                chunks[-1].items.extend(pauses)
            else:
                leading.extend(pauses)
            continue
        if leading:
            items = leading + items
            leading = []
        chunks.append(Chunk(_strip_items(items)))
    if leading and chunks:
        chunks[-1].items.extend(leading)
    plan.chunks = chunks
    return plan


def _strip_items(items: list[Piece]) -> list[Piece]:
    """Drop whitespace-only text runs, keep order."""
    return [p for p in items if isinstance(p, Pause) or p.text.strip()]
