"""Two splits: the dev split may be read while writing rules, the test split is only measured.

The leakage check fails when a phrase of a test-split template (or hand-written test comment, or a
test product's question, FAQ or title) appears verbatim in the harness or in code."""

from __future__ import annotations

import json
from pathlib import Path

from livehost.eval.cases import CATEGORIES, DEVSET_PATH, load_cases
from livehost.sim.split import TESTSET_PATH, handwritten_cases, normalise_phrase, template_phrases
from livehost.sim.split import testset as build_testset

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("harness", "livehost", "services", "scripts", "benchmarks", "infra/triton")
SUFFIXES = {".py", ".yaml", ".yml", ".md", ".json", ".jsonl", ".txt", ".pbtxt"}


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for top in SCANNED:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "gen" not in path.parts:
                files.append(path)
    return files


def test_no_test_split_phrase_in_harness_or_code() -> None:
    phrases = template_phrases()
    assert len(phrases) > 100
    leaks: list[str] = []
    for path in scanned_files():
        text = normalise_phrase(path.read_text(encoding="utf-8", errors="replace"))
        padded = f" {text} "
        leaks += [f"{path.relative_to(ROOT)}: {p!r}" for p in phrases if f" {p} " in padded]
    assert not leaks, "test-split phrases in harness/code:\n" + "\n".join(leaks)


def test_leakage_check_catches_a_copied_phrase() -> None:
    phrase = template_phrases()[0]
    text = normalise_phrase(f"PATTERNS = [ {phrase.upper()} ]")
    assert f" {phrase} " in f" {text} "


def test_testset_file_is_the_generated_split() -> None:
    on_disk = [json.loads(line) for line in TESTSET_PATH.read_text(encoding="utf-8").splitlines()]
    assert on_disk == build_testset()
    cases = load_cases(TESTSET_PATH)  # schema-valid
    assert {c["category"] for c in cases} == set(CATEGORIES)
    dev_ids = {c["id"] for c in load_cases(DEVSET_PATH)}
    assert not dev_ids & {c["id"] for c in cases}


def test_handwritten_cases_carry_the_hard_surface_forms() -> None:
    texts = [c["text"] for case in handwritten_cases() for c in case["comments"]]
    assert any("\n" in t for t in texts)  # line breaks
    assert any(any("\uff01" <= ch <= "\uff5e" for ch in t) for t in texts)  # full-width letters
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts)  # Chinese
    assert any(any(ord(ch) > 0x1F000 for ch in t) for t in texts)  # emoji
    users = [c["user_id"] for case in handwritten_cases() for c in case["comments"]]
    assert any("\n" in u for u in users)  # a user id that carries an injection


def test_test_products_are_not_dev_products() -> None:
    dev_titles = {i["title"] for c in load_cases(DEVSET_PATH) for i in c["catalog"]}
    test_titles = {i["title"] for c in load_cases(TESTSET_PATH) for i in c["catalog"]}
    assert not dev_titles & test_titles


def test_hand_written_dev_cases_validate_and_cover_every_category() -> None:
    from livehost.eval.cases import DEV_WILD3_PATH, DEV_WILD4_PATH, FORMER_HOLDOUT_PATH, HAND_WRITTEN_DEV

    for path in HAND_WRITTEN_DEV.values():
        cases = load_cases(path)  # schema-valid
        assert len({c["id"] for c in cases}) == len(cases) >= 100
        # every category, but the third and fourth dev batches aim at the categories the test split fails most
        targeted = {"product_question", "inventory", "promotion", "multi_intent", "injection", "compliance"}
        assert {c["category"] for c in cases} >= (targeted if path in (DEV_WILD3_PATH, DEV_WILD4_PATH)
                                                  else set(CATEGORIES))
    dev_products = {i["title"] for p in HAND_WRITTEN_DEV.values() if p != FORMER_HOLDOUT_PATH
                    for c in load_cases(p) for i in c["catalog"]}
    held_products = {i["title"] for c in load_cases(FORMER_HOLDOUT_PATH) for i in c["catalog"]}
    assert not dev_products & held_products  # the former holdout sells its own products
