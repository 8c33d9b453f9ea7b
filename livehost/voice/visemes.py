"""Map IPA phonemes (from Piper alignments or eSpeak phoneme events) to visemes.

The viseme set is the 15-viseme Oculus/MPEG-4 style set used by most avatar rigs:

    sil PP FF TH DD kk CH SS nn RR aa E ih oh ou

The full table, and the timing rules, are in ``docs/visemes.md``. Timeline rules:

* a viseme event ``(t_ms, viseme)`` means "from t_ms on, show this viseme" (until the next event);
* ``t_ms`` is relative to the first sample of the segment's audio (``audio_ref``), not to the
  reply timeline — add the segment's ``start_ms`` for the reply timeline;
* the timeline starts at 0 (with ``sil`` unless speech starts on the first sample), ends with
  ``sil`` at the end of speech, is strictly increasing in time, never repeats a viseme twice in a
  row, and stays within [0, duration];
* stress and length marks, word spaces and unknown symbols continue the current viseme;
  punctuation, pauses and the start/end markers give ``sil``;
* diphthongs (``aɪ``, ``oʊ`` …) are split in two visemes over the phoneme's time span;
  affricates (``tʃ``, ``dʒ``, ``ts``) are one viseme, also when Piper emits them as two symbols.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

VISEMES = ("sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou")

_GROUPS: dict[str, str] = {
    "PP": "p b m ɓ ʙ ɸ β",
    "FF": "f v ɱ ʋ ⱱ",
    "TH": "θ ð",
    "DD": "t d ɾ ɖ ʈ ɗ ɺ ʔ",
    "kk": "k g ɡ ŋ x ɣ q ɢ ɴ χ ʁ h ɦ ħ ʕ ç ɟ ɠ ʜ ʡ ʢ c",
    "CH": "ʃ ʒ tʃ dʒ ɕ ʑ ʂ ʐ ɧ ʄ",
    "SS": "s z ts dz",
    "nn": "n l ɫ ɲ ɳ ɭ ʟ ɬ ɮ ʎ",
    "RR": "ɹ r ɻ ʀ ɽ ɚ ɝ ˞",
    "aa": "a ɑ æ ʌ ɐ ɶ",
    "E": "e ɛ ə ɜ ɘ ɞ ε œ ɤ",
    "ih": "i ɪ ɨ ᵻ j y ʏ ʝ",
    "oh": "o ɔ ɒ ɵ ø",
    "ou": "u ʊ w ʍ ɯ ʉ ɰ ɥ",
}
PHONEME_TO_VISEME: dict[str, str] = {p: v for v, ps in _GROUPS.items() for p in ps.split()}

# Symbols that produce silence / a closed mouth.
SILENCE_SYMBOLS = frozenset("_^$.,!?;:…—–\n") | {"", "sil", "pau"}
# Symbols that carry no mouth shape of their own (continue the current viseme).
_IGNORED = frozenset("ˈˌːˑʰʲˤ̧̩̯̪̃ '\"-()#0123456789↓ǀǁǂǃ")
_MULTI = sorted((p for p in PHONEME_TO_VISEME if len(p) > 1), key=len, reverse=True)
_AFFRICATE_PAIRS = {("t", "ʃ"), ("d", "ʒ"), ("t", "s"), ("d", "z")}


def phoneme_visemes(phoneme: str) -> list[str] | None:
    """Visemes for one IPA phoneme string.

    ``["sil"]`` for silence/punctuation, ``None`` when the symbol continues the current viseme,
    otherwise one viseme per sound (two for a diphthong).
    """
    stripped = phoneme.strip()
    if phoneme in SILENCE_SYMBOLS or (stripped and all(c in SILENCE_SYMBOLS for c in stripped)):
        return ["sil"]
    s = "".join(c for c in phoneme if c not in _IGNORED)
    out: list[str] = []
    i = 0
    while i < len(s):
        for m in _MULTI:
            if s.startswith(m, i):
                out.append(PHONEME_TO_VISEME[m])
                i += len(m)
                break
        else:
            v = PHONEME_TO_VISEME.get(s[i])
            if v is not None:
                out.append(v)
            i += 1
    dedup = [v for k, v in enumerate(out) if k == 0 or out[k - 1] != v]
    return dedup or None


def _merge_affricates(phonemes: Sequence[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    out: list[tuple[str, float, float]] = []
    for ph in phonemes:
        if out and (out[-1][0], ph[0]) in _AFFRICATE_PAIRS:
            prev = out.pop()
            out.append((prev[0] + ph[0], prev[1], ph[2]))
        else:
            out.append(tuple(ph))  # type: ignore[arg-type]
    return out


def visemes_from_phonemes(phonemes: Iterable[tuple[str, float, float]], duration_s: float) -> list[tuple[float, str]]:
    """Viseme timeline ``[(t_ms, viseme), ...]`` for phonemes timed in seconds within an audio of
    ``duration_s``. See the module docstring for the guarantees."""
    dur_ms = max(0.0, duration_s * 1000.0)
    raw: list[tuple[float, str]] = [(0.0, "sil")]
    last_end = 0.0
    for ph, start, end in _merge_affricates(sorted(phonemes, key=lambda p: p[1])):
        vs = phoneme_visemes(ph)
        s_ms = min(max(start * 1000.0, 0.0), dur_ms)
        e_ms = min(max(end * 1000.0, s_ms), dur_ms)
        if vs is None:
            last_end = max(last_end, e_ms)
            continue
        step = (e_ms - s_ms) / len(vs)
        for k, v in enumerate(vs):
            raw.append((s_ms + k * step, v))
        last_end = max(last_end, e_ms)
    raw.append((min(last_end, dur_ms), "sil"))

    # normalise: non-decreasing times, the later of two events at the same time wins, no repeats
    timeline: list[tuple[float, str]] = []
    for t, v in raw:
        t = round(t, 3)
        if timeline and t < timeline[-1][0]:
            t = timeline[-1][0]
        if timeline and t == timeline[-1][0]:
            timeline.pop()
        if timeline and timeline[-1][1] == v:
            continue
        timeline.append((t, v))
    if not timeline or timeline[0][0] > 0.0:
        timeline.insert(0, (0.0, "sil"))
    return timeline


def markdown_table() -> str:
    """The mapping as a Markdown table (used to write docs/visemes.md)."""
    lines = ["| viseme | IPA phonemes |", "|---|---|", "| sil | silence, pauses, punctuation, start/end |"]
    for v in VISEMES[1:]:
        lines.append(f"| {v} | {' '.join(_GROUPS[v].split())} |")
    return "\n".join(lines)
