"""The test split: template families, product kinds and hand-written comments the dev split never uses.

``eval/devset.jsonl`` (dev split) may be read while writing rules. ``eval/testset.jsonl`` (test split) is
only measured: it is generated from ``eval/test/families.json`` (other comment templates and other
product kinds, through the same case builder, so every ``expect`` block still follows from the data)
plus the hand-written cases of ``eval/test/handwritten.jsonl`` (typos, slang, emoji, English–Chinese
code-switching, full-width characters, line breaks, multi-intent, per-size stock, FAQ-only questions,
campaign rules, clarifying questions).

:func:`template_phrases` lists the fixed phrases of the test templates; the leakage check
(``tests/unit/test_split_leakage.py``) fails when one of them appears verbatim in the harness or in code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from livehost.config import REPO_ROOT
from livehost.sim.catalog import Feature, Kind, Numeric
from livehost.sim.generator import Generated, Generator, Templates

TEST_DIR = REPO_ROOT / "eval" / "test"
FAMILIES_PATH = TEST_DIR / "families.json"
HANDWRITTEN_PATH = TEST_DIR / "handwritten.jsonl"
TESTSET_PATH = REPO_ROOT / "eval" / "testset.jsonl"
TESTSET_SEED = 1013
TESTSET_PER_CATEGORY = 12


def load_families(path: Path = FAMILIES_PATH) -> tuple[Templates, tuple[Kind, ...]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    templates: Templates = {k: list(v) for k, v in data["templates"].items()}
    kinds = tuple(
        Kind(kind=k["kind"], titles=tuple(k["titles"]), sku=k["sku"], price=(k["price"][0], k["price"][1]),
             colors=tuple(k.get("colors", ())), sizes=tuple(k.get("sizes", ())),
             materials=tuple(k.get("materials", ())),
             numeric=tuple(Numeric(**n) for n in k.get("numeric", ())),
             features=tuple(Feature(**f) for f in k.get("features", ())),
             faq=tuple((q, a, tuple(keys)) for q, a, keys in k.get("faq", ())), noun=k.get("noun", k["kind"]))
        for k in data["kinds"])
    return templates, kinds


def handwritten_cases(path: Path = HANDWRITTEN_PATH) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def testset(seed: int = TESTSET_SEED, per_category: int = TESTSET_PER_CATEGORY) -> list[dict[str, Any]]:
    """The test split's cases: generated from the test families, then the hand-written ones."""
    templates, kinds = load_families()
    generated: list[Generated] = Generator(seed, 8, kinds=kinds, templates=templates,
                                           prefix="test").generate(per_category)
    return [g.case for g in generated] + handwritten_cases()


def template_phrases(min_words: int = 4) -> list[str]:
    """Fixed phrases of the test split's templates and hand-written comments, and of the held-out
    cases' comments, titles and FAQ: the text between placeholders, normalised (lower case, single
    spaces), at least ``min_words`` words long, that no dev-split comment contains (a phrase both
    splits share is not knowledge of the test split)."""
    from livehost.eval.cases import DEVSET_PATH, FORMER_HOLDOUT_PATH

    dev_text = " " + " | ".join(normalise_phrase(str(c["text"])) for line in
                                DEVSET_PATH.read_text(encoding="utf-8").splitlines() if line.strip()
                                for c in json.loads(line)["comments"]) + " "
    templates, kinds = load_families()
    texts = [t for family in templates.values() for t in family]
    for k in kinds:
        texts += [n.question for n in k.numeric] + [f.question for f in k.features]
        texts += [q for q, _, _ in k.faq] + [a for _, a, _ in k.faq] + list(k.titles)
    for case in handwritten_cases():
        texts += [str(c["text"]) for c in case["comments"]]
    phrases: set[str] = set()
    for text in texts:
        for piece in re.split(r"\{[^}]*\}", text):
            norm = normalise_phrase(piece)
            if len(norm.split()) >= min_words and f" {norm} " not in dev_text:
                phrases.add(norm)
    if FORMER_HOLDOUT_PATH.exists():
        # The former held-out cases were written later and apart from the code: a phrase they share with any
        # part of the dev file (its catalogs too) is public, and a 4-word phrase of everyday chat
        # can coincide with older code by chance, so a held-out phrase counts from one word longer.
        dev_all = f" {normalise_phrase(DEVSET_PATH.read_text(encoding='utf-8'))} "
        for line in FORMER_HOLDOUT_PATH.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            held = json.loads(line)
            held_texts = [str(c["text"]) for c in held["comments"]]
            for item in held["catalog"]:
                held_texts += [str(item.get("title", ""))]
                held_texts += [str(f.get(k, "")) for f in item.get("faq") or [] for k in ("q", "a")]
            for text in held_texts:
                norm = normalise_phrase(text)
                if len(norm.split()) > min_words and f" {norm} " not in dev_all:
                    phrases.add(norm)
    return sorted(phrases)


def normalise_phrase(text: str) -> str:
    return " ".join(re.findall(r"[\w'%-]+", text.lower()))


PARAPHRASES_PATH = TEST_DIR / "paraphrases.json"


def reworded_variant(harness: Any, seed: int) -> Any:
    """An opaque, reworded harness for measuring retention on the test split: every id renamed, tool
    arguments renamed, prompt sections reordered (:func:`livehost.harness.augment.rename_everything`),
    then tool and skill descriptions and skill bodies reworded with the test split's paraphrase
    family (``eval/test/paraphrases.json``), which augmentation never uses."""
    from livehost.harness.augment import rename_everything
    from livehost.harness.loader import from_dict

    variant, _ = rename_everything(harness, seed=seed)
    phrases = json.loads(PARAPHRASES_PATH.read_text(encoding="utf-8"))["phrases"]

    def reword(text: str) -> str:
        for old, new in sorted(phrases, key=lambda p: -len(p[0])):
            text = re.sub(rf"(?<![\w-]){re.escape(old)}(?![\w-])", new, text)
        return text

    data = variant.to_dict() if hasattr(variant, "to_dict") else variant.model_dump(mode="json")
    for tool in data.get("tools") or []:
        tool["description"] = reword(str(tool.get("description", "")))
    for skill in data.get("skills") or []:
        skill["description"] = reword(str(skill.get("description", "")))
        skill["body"] = reword(str(skill.get("body", "")))
    return from_dict(data)
