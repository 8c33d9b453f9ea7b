"""The ``internal_disclosure`` hook kind: a reply must not repeat internal text word for word.

Internal text is what the model is shown but a viewer is not meant to hear, taken from the harness in
force and the request itself — never from a fixed phrase list:

- the harness: base instructions, skill descriptions and bodies, tool descriptions, the rules
  (``extra`` lines, banned phrases, claims needing evidence), every hook's ``on_fail`` message and
  every prompt section's template text;
- the room: the campaign's ``internal_rules`` (lines for the host, not for viewers; its ``rules`` are
  meant to be told to viewers and are not checked);
- the request: the corrections other hooks sent the model in this request.

A reply fails when it shares a run of ``min_run_words`` consecutive words (default 8) with one of
them, or when it contains a whole internal line of at least ``min_line_words`` words (default 6), so a
short rule such as a one-line compliance note is caught too. Words are compared after the text
normalisation screening uses (NFKC, look-alike letters, case), so a changed case or a look-alike
letter does not hide a copy; each CJK character counts as a word. The harness's fallback text is
meant for viewers and is not internal.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from livehost.harness.model import Harness
from livehost.security.limits import BoundedMap
from livehost.understanding.normalize import normalize

DEFAULT_RUN_WORDS = 8
DEFAULT_LINE_WORDS = 6
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
# a list marker or heading mark at the start of a line ("1.", "-", "##") is layout, not words
_MARKER = re.compile(r"^\s*(?:[-*#>]+|\d+[.)])\s+")


def words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(normalize(text)))


def _line_words(line: str) -> tuple[str, ...]:
    return words(_MARKER.sub("", line))


def _text_words(text: str) -> tuple[str, ...]:
    """The words of a whole text, lines joined (list markers dropped): a run may go on over a line break."""
    return tuple(w for line in text.splitlines() for w in _line_words(line))


@dataclass(frozen=True)
class Source:
    label: str  # what the text is, for the failure reason ("skill 'x'", "the rules")
    text: str


@dataclass(frozen=True)
class _Index:
    """The n-grams and whole lines of a set of sources, for lookups by the reply's own n-grams."""

    sources: tuple[Source, ...]
    runs: dict[tuple[str, ...], int]  # every run of `run_words` words -> index of a source having it
    lines: dict[int, dict[tuple[str, ...], int]]  # line length -> whole line -> source index


def _literal(template: str) -> str:
    """The text of a template without its ``{fields}`` (which are filled with other data)."""
    try:
        return " ".join(part for part, _f, _s, _c in string.Formatter().parse(template))
    except ValueError:
        return template


def harness_sources(harness: Harness) -> list[Source]:
    out = [Source("the instructions", harness.instructions)]
    for skill in harness.skills:
        out += [Source(f"skill {skill.id!r} description", skill.description), Source(f"skill {skill.id!r}", skill.body)]
    out += [Source(f"tool {tool.name!r} description", tool.description) for tool in harness.tools]
    rules = harness.rules
    out += [Source("the rules", line)
            for line in [*rules.extra, *rules.banned_phrases, *rules.claims_requiring_evidence]]
    out += [Source(f"hook {hook.id!r} message", _literal(hook.on_fail.message)) for hook in harness.hooks]
    out += [Source(f"prompt section {s.id!r}", _literal(s.template)) for s in harness.prompt.sections]
    return out


def request_sources(room: dict[str, Any], corrections: Iterable[str]) -> list[Source]:
    campaign = room.get("campaign")
    internal = campaign.get("internal_rules") if isinstance(campaign, dict) else None
    out = [Source("the campaign's internal rules", str(rule)) for rule in internal or [] if isinstance(rule, str)]
    return out + [Source("a correction of this request", text) for text in corrections]


def _index(sources: Iterable[Source], run_words: int, line_words: int) -> _Index:
    kept = tuple(sources)
    runs: dict[tuple[str, ...], int] = {}
    lines: dict[int, dict[tuple[str, ...], int]] = {}
    for i, source in enumerate(kept):
        for line in source.text.splitlines():
            w = _line_words(line)
            if line_words <= len(w) < run_words:  # longer lines are caught by their runs
                lines.setdefault(len(w), {}).setdefault(w, i)
        w = _text_words(source.text)
        for j in range(len(w) - run_words + 1):
            runs.setdefault(w[j:j + run_words], i)
    return _Index(kept, runs, lines)


def _find(index: _Index, reply: tuple[str, ...], run_words: int) -> int | None:
    """The index of a source the reply repeats (a run or a whole line), or None."""
    for j in range(len(reply) - run_words + 1):
        hit = index.runs.get(reply[j:j + run_words])
        if hit is not None:
            return hit
    for length, lines in index.lines.items():
        for j in range(len(reply) - length + 1):
            hit = lines.get(reply[j:j + length])
            if hit is not None:
                return hit
    return None


def longest_shared_run(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[int, int]:
    """Length and start (in ``a``) of the longest run of consecutive words ``a`` and ``b`` share."""
    best, start = 0, 0
    previous = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        current = [0] * (len(b) + 1)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, start = current[j], i - current[j]
        previous = current
    return best, start


# The harness part of the index is the same for every reply of a version: built once per version
# and parameters (a handful of versions are live at a time).
_HARNESS_INDEX: BoundedMap[tuple[str, int, int], _Index] = BoundedMap(16)


def disclosure_reason(reply_text: str, harness: Harness, room: dict[str, Any], corrections: Iterable[str], *,
                      run_words: int = DEFAULT_RUN_WORDS, line_words: int = DEFAULT_LINE_WORDS) -> str | None:
    """Why the reply repeats internal text, or None. ``reply_text`` is the spoken text (control tokens
    already removed)."""
    reply = words(reply_text)
    key = (harness.version(), run_words, line_words)
    indexes = [_HARNESS_INDEX.setdefault(key, lambda: _index(harness_sources(harness), run_words, line_words))]
    extra = request_sources(room, corrections)
    if extra:
        indexes.append(_index(extra, run_words, line_words))
    for index in indexes:
        hit = _find(index, reply, run_words)
        if hit is None:
            continue
        source = index.sources[hit]
        length, start = longest_shared_run(reply, _text_words(source.text))
        shown = " ".join(reply[start:start + min(length, 4)])
        return (f"the reply repeats {length} words of internal text ({source.label}) word for word, "
                f"starting {shown!r}; say it in your own words or leave it out")
    return None
