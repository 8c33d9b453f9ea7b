"""A screening classifier trained on labelled examples the project ships.

Classes: ``injection`` (instructions aimed at the host: role changes, prompt extraction, fake system or
admin messages, unauthorised discounts), ``abuse`` (insults, harassment), ``compliance`` (requests
the host must refuse: counterfeits, fake invoices or reviews, customs evasion), ``spam`` (links,
self-promotion, floods) and ``benign``. The examples are ``data/screening.jsonl`` (one
``{"text", "label"}`` per line, written for this project, independent of the simulator's templates
and of the test split; see ``data/README.md``).

The model is a complement naive Bayes over character 3–5-grams and word uni-/bigrams of the
normalised, de-obfuscated text (:mod:`livehost.understanding.normalize`), so full-width letters,
look-alike letters, digit swaps and line breaks do not change what it sees. Each clause of a comment
is scored as well as the whole comment; the most harmful clause counts. Training takes a few tenths
of a second and happens once per process (services warm it up); scoring one comment takes about a
millisecond.
Thresholds per class live in the harness (``hooks.yaml``, ``input_validation`` params).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from livehost.understanding.normalize import deobfuscate

DATA_PATH = Path(__file__).resolve().parent / "data" / "screening.jsonl"
HARMFUL = ("injection", "abuse", "compliance", "spam")
_CLAUSE = re.compile(r"[.!?;\n。！？；]+|\b(?:and then|then|also)\b")
_WORD = re.compile(r"[\w%]+|[^\w\s]")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
# How sharply the class scores become a posterior, chosen on the dev splits' comments (dev + dev-wild,
# 788 comments: 1 benign comment dropped and 6 harmful ones missed at the shipped thresholds, against
# 15 and 12 with the multinomial naive Bayes this replaced).
SHARPEN = 55.0
# the least whole-comment score of a class for a clause's score of that class to count
CLAUSE_SUPPORT = 1e-3


def features(text: str) -> Counter[str]:
    norm = deobfuscate(text)
    padded = f" {norm} "
    # built as lists and counted at once: Counter counts an iterable in C
    feats: Counter[str] = Counter(["c:" + padded[i:i + n] for n in (3, 4, 5) for i in range(len(padded) - n + 1)])
    toks = _WORD.findall(norm)
    feats.update(["w:" + tok for tok in toks])
    feats.update([f"b:{a} {b}" for a, b in zip(toks, toks[1:], strict=False)])
    # Chinese has no spaces: its words are one or two characters, which the character 3–5-grams above
    # and the whole-run "word" above both miss
    for run in _CJK_RUN.findall(norm):
        for i, ch in enumerate(run):
            feats["z:" + ch] += 1
            if i + 1 < len(run):
                feats["z:" + run[i:i + 2]] += 1
    # runs of one character and links are strong spam signals whatever the words are
    if re.search(r"(.)\1{7,}", norm):
        feats["x:repeat"] += 3
    if re.search(r"https?://|www\.|\.com\b|bit\.ly|t\.me/", norm):
        feats["x:link"] += 3
    return feats


@dataclass(frozen=True)
class Screening:
    label: str  # the most likely class
    scores: dict[str, float]  # posterior per class

    def harmful(self, thresholds: dict[str, float]) -> tuple[str, float] | None:
        """(class, score) of the harmful class above its threshold with the highest score, or None."""
        best: tuple[str, float] | None = None
        for cls in HARMFUL:
            s = self.scores.get(cls, 0.0)
            t = thresholds.get(cls)
            if t is not None and s >= t and (best is None or s > best[1]):
                best = (cls, s)
        return best


class NaiveBayes:
    """Complement naive Bayes over TF-IDF-weighted, length-normalised features (Rennie et al., 2003,
    "Tackling the poor assumptions of naive Bayes text classifiers"): each class is scored by how
    unlike the *other* classes' examples the comment is, which stays sound with classes of very
    different sizes and short texts (plain multinomial naive Bayes turned "nice stream" into abuse
    because two words of it appear in a few insults)."""

    def __init__(self, examples: list[tuple[str, str]], alpha: float = 0.3):
        self.classes = sorted({label for _, label in examples})
        feats = [features(text) for text, _ in examples]
        doc_freq: Counter[str] = Counter(f for fs in feats for f in fs)
        self.idf = {f: math.log(len(examples) / n) for f, n in doc_freq.items()}
        total: Counter[str] = Counter()
        per_class: dict[str, Counter[str]] = {c: Counter() for c in self.classes}
        for fs, (_, label) in zip(feats, examples, strict=True):
            weighted = self._weighted(fs)
            per_class[label].update(weighted)
            total.update(weighted)
        self.vocab = set(total)
        self.weights: dict[str, dict[str, float]] = {}
        for c in self.classes:
            complement = {f: total[f] - per_class[c][f] for f in self.vocab}
            denom = sum(complement.values()) + alpha * len(self.vocab)
            logw = {f: math.log((n + alpha) / denom) for f, n in complement.items()}
            # weights normalised to a mean magnitude of 1, so no class wins by the size of its data
            mean = sum(abs(w) for w in logw.values()) / max(len(logw), 1)
            self.weights[c] = {f: w / mean for f, w in logw.items()}
        # The same model as arrays, for scoring: a row of class weights per feature. Scoring in numpy is
        # a third of the time of the dict-per-class sums (it runs for every comment and clause).
        self._index = {f: i for i, f in enumerate(self.idf)}
        self._idf = np.array(list(self.idf.values()))
        self._matrix = np.array([[self.weights[c].get(f, 0.0) for c in self.classes] for f in self.idf])

    def _weighted(self, fs: Counter[str] | dict[str, int]) -> dict[str, float]:
        v = {f: math.log1p(n) * self.idf[f] for f, n in fs.items() if f in self.idf}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {f: x / norm for f, x in v.items()}

    def predict(self, text: str) -> dict[str, float]:
        rows: list[int] = []
        counts: list[int] = []
        for f, n in features(text).items():
            i = self._index.get(f)
            if i is not None:
                rows.append(i)
                counts.append(n)
        if not rows:
            return {c: (1.0 if c == "benign" else 0.0) for c in self.classes}
        x = np.log1p(np.array(counts, dtype=float)) * self._idf[rows]  # as _weighted, in arrays
        x /= math.sqrt(float(x @ x)) or 1.0
        raw = -(x @ self._matrix[rows])
        exp = np.exp(SHARPEN * (raw - raw.max()))
        return dict(zip(self.classes, (exp / exp.sum()).tolist(), strict=True))


def load_examples(path: Path = DATA_PATH) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(str(r["text"]), str(r["label"])) for r in rows]


@cache
def model() -> NaiveBayes:
    return NaiveBayes(load_examples())


def clauses(text: str) -> list[str]:
    parts = [p.strip() for p in _CLAUSE.split(text) if p and p.strip()]
    return parts if len(parts) > 1 else []


def screen(text: str) -> Screening:
    """Posterior per class of the comment; a harmful clause inside a longer comment counts."""
    m = model()
    scores = m.predict(text)
    whole = dict(scores)
    for part in clauses(text):
        # A clause scored alone needs at least one word the model knows: a lone order number or tracking
        # code matches a few character n-grams of some class by chance, and length normalisation would
        # turn that into a confident verdict.
        if len(part) < 4 or not any(f.startswith("w:") and len(f) > 4 and f[2:].isalpha() and f in m.vocab
                                    for f in features(part)):
            continue
        sub = m.predict(part)
        for cls in HARMFUL:
            # a clause's verdict counts when the whole comment leans that way at all: a short clause
            # alone ("beach trip next weekend") can look like anything to a bag of n-grams
            if whole.get(cls, 0.0) >= CLAUSE_SUPPORT:
                scores[cls] = max(scores.get(cls, 0.0), sub.get(cls, 0.0))
    label = max(scores, key=lambda c: scores[c])
    return Screening(label, scores)


DEFAULT_THRESHOLDS: dict[str, float] = {"injection": 0.8, "abuse": 0.6, "compliance": 0.7, "spam": 0.8}
