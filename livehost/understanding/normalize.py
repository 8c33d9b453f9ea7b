"""Text normalisation before screening and matching.

NFKC (full-width letters and digits, compatibility forms), look-alike letters from other scripts
mapped to Latin, zero-width characters removed, case folded, every run of whitespace (line breaks
included) collapsed to one space. :func:`deobfuscate` also undoes digit/symbol letter swaps ("1gn0re")
and letters split by separators ("i.g.n.o.r.e"), for screening only.
"""

from __future__ import annotations

import re
import unicodedata

# Cyrillic and Greek letters that look like Latin ones (after NFKC and case folding).
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h",
    "ԛ": "q", "ԝ": "w", "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ɑ": "a", "ı": "i", "ℓ": "l",
})
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACE = re.compile(r"\s+")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"})
_SPLIT_LETTERS = re.compile(r"\b(?:[a-z][.\-_*·]){2,}[a-z]\b")


def normalize(text: str) -> str:
    """NFKC, look-alikes to Latin, invisible characters removed, case folded, whitespace collapsed."""
    out = unicodedata.normalize("NFKC", text)
    out = _INVISIBLE.sub("", out).casefold().translate(_CONFUSABLES)
    return _SPACE.sub(" ", out).strip()


def deobfuscate(text: str) -> str:
    """:func:`normalize`, then letters split by dots or dashes joined and digit/symbol swaps inside
    words undone (a word that is all digits stays a number)."""
    out = _SPLIT_LETTERS.sub(lambda m: re.sub(r"[.\-_*·]", "", m.group(0)), normalize(text))
    return re.sub(r"\S+", lambda m: m.group(0) if not re.search(r"[a-z]", m.group(0)) else
                  m.group(0).translate(_LEET), out)


# Chat shorthand of everyday English (not of any product or template): expanded before reading intents.
SHORTHAND = {
    "u": "you", "r": "are", "ur": "your", "pls": "please", "plz": "please", "pleaseee": "please",
    "thx": "thanks", "ty": "thank you", "hw": "how", "wat": "what", "wht": "what", "hv": "have",
    "cud": "could", "shud": "should", "wud": "would", "gimme": "give me", "lemme": "let me",
    "wanna": "want to", "gonna": "going to", "dunno": "do not know", "cuz": "because", "coz": "because",
    "bc": "because", "rn": "right now", "tmr": "tomorrow", "2day": "today", "y": "why", "n": "and",
    "abt": "about", "avail": "available", "qty": "quantity", "pcs": "pieces", "hmu": "tell me",
}
_TOKEN = re.compile(r"[a-z0-9]+")


def expand_shorthand(text: str) -> str:
    """:func:`normalize`, then common chat shorthand written out ("hw much r they" → "how much are they")."""
    return _TOKEN.sub(lambda m: SHORTHAND.get(m.group(0), m.group(0)), normalize(text))
