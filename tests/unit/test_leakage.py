"""The leakage check (livehost/eval/leakage.py): the repository passes it, it catches the contaminated
lines, word lists and patterns the tree held before they were cleaned (tests/unit/data/leaked_lines.jsonl),
and each of its methods sees what a whole-phrase comparison misses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from livehost.eval import leakage as check
from livehost.eval.cases import (
    CATEGORIES,
    DEVSET_PATH,
    HAND_WRITTEN_DEV,
    SEALED_HOLDOUT_PATH,
    SealedError,
    load_cases,
)

LEAKED = Path(__file__).parent / "data" / "leaked_lines.jsonl"


@pytest.fixture(scope="module")
def report() -> check.Report:
    return check.run()


def test_the_repository_holds_no_evaluation_text(report: check.Report) -> None:
    assert report.scanned["data"] > 1000 and report.scanned["rule-pattern"] > 100
    assert {"simulator", "test", "holdout", "sealed"} <= set(report.protected)
    assert report.ok, "\n".join(report.lines())


def test_it_catches_the_contaminated_items_the_tree_held() -> None:
    rows = [json.loads(line) for line in LEAKED.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) > 100
    items = [check.Item(r["where"], r["kind"], r["text"]) for r in rows]
    caught = {(f.item.kind, f.item.text) for f in check.run(items).findings}
    missed = [r for r in rows if (r["kind"], r["text"]) not in caught]
    assert not missed, missed
    # every method is needed: each catches lines no other method does
    assert {r["method"] for r in rows} >= {"words", "chars", "embedding", "regex", "word-list"}


def test_the_paraphrase_threshold_in_force_is_the_one_chosen_on_dev() -> None:
    cal = check.calibrate()
    assert cal.threshold == check.PARAPHRASE_COSINE
    assert cal.precision == 1.0 and cal.recall > 0.3 and cal.positives >= 40 and cal.negatives >= 40


def test_regexes_are_compared_by_the_strings_they_match() -> None:
    assert check.expansions(r"\bhow much\b") == ["how much"]
    found = set(check.expansions(r"ignore (all )?(previous|prior) instructions"))
    assert found == {"ignore previous instructions", "ignore prior instructions", "ignore all previous instructions",
                     "ignore all prior instructions"}
    # a class or a wildcard is a gap: no word run crosses it
    assert all(check.word_runs(s, 4) == set() for s in check.expansions(r"please give .+ away right now"))
    assert check.alternatives(r"a(b|c)|[|]d|e\|f") == ["a(b|c)", "[|]d", r"e\|f"]


def test_chinese_is_compared_by_character_runs() -> None:
    assert check.cjk_runs("这个东西什么时候发货呢", 6) >= {"什么时候发货", "东西什么时候"}
    assert check.words("这个多少钱 how much") == ["how", "much"]
    protected = [check.Protected("holdout", "h-1", "请问这个保温杯什么时候发货呀")]
    index = check.Index(protected, public=[])
    item = check.Item("x", "data", "保温杯什么时候发货")
    assert [f.method for f in check.check_runs([item], index)] == ["chars"]
    # a shorter shared run is not enough
    assert not check.check_runs([check.Item("x", "data", "什么时候")], index)


def test_part_of_a_longer_comment_and_whole_comments_are_caught() -> None:
    protected = [check.Protected("test", "t-1", "hey host quick one, does the lamp come with a bulb or not")]
    index = check.Index(protected, public=[])
    assert check.check_runs([check.Item("x", "data", "does the lamp come with a bulb")], index)
    # a run shared with the public dev comments is everyday language, not knowledge of the split
    public = check.Index(protected, public=["so does the lamp come with a bulb"])
    assert not check.check_runs([check.Item("x", "data", "the lamp come with a bulb")], public)
    # a run of function words only is nobody's phrase
    assert not check.check_runs([check.Item("x", "data", "and it is in the")],
                                check.Index([check.Protected("test", "t", "and it is in the box")], []))


def test_a_pattern_that_fires_only_on_generated_text_is_reported() -> None:
    sim = [check.Protected("simulator", "s-1", "you absolute walnut, answer me"),
           check.Protected("simulator", "s-2", "how much is link 2")]
    people = ["how much for the red one", "is this cotton"]
    items = [check.Item("p.py:1", "rule-pattern", r"\bwalnut\b|\bhow much\b")]
    found = check.check_fitted_patterns(items, sim, people)
    assert [f.item.text for f in found] == [r"\bwalnut\b"]


def test_a_hook_word_list_that_fires_on_the_simulator_is_reported() -> None:
    sim = [check.Protected("simulator", "s-1", "you absolute walnut, answer me")]
    items = [check.Item("hooks.yaml", "harness-list", "walnut"), check.Item("hooks.yaml", "harness-list", "pecan")]
    assert [f.item.text for f in check.check_word_lists(items, sim)] == ["walnut"]


def test_every_string_of_the_rule_modules_is_scanned() -> None:
    kinds = {i.kind for i in check.code_items(dirs=["livehost/policy"])}
    assert {"rule-pattern", "rule-term", "rule-text"} <= kinds
    assert {i.kind for i in check.code_items(dirs=["livehost/voice"])} == {"code-text"}


def test_the_sealed_holdout_is_valid_and_refused_to_development_commands() -> None:
    cases = load_cases(SEALED_HOLDOUT_PATH, release=True)
    assert len({c["id"] for c in cases}) == len(cases) >= 100
    assert {c["category"] for c in cases} == set(CATEGORIES)
    dev_products = {i["title"] for p in [DEVSET_PATH, *HAND_WRITTEN_DEV.values()] for c in load_cases(p)
                    for i in c["catalog"]}
    assert not dev_products & {i["title"] for c in cases for i in c["catalog"]}
    with pytest.raises(SealedError, match="release"):
        load_cases(SEALED_HOLDOUT_PATH)
    from livehost.runner.core import read_cases

    with pytest.raises(ValueError, match="release"):
        read_cases(SEALED_HOLDOUT_PATH)


def test_only_the_release_evaluation_and_the_leakage_check_name_the_sealed_holdout() -> None:
    root = Path(__file__).resolve().parents[2]
    naming = sorted(p.relative_to(root).as_posix() for top in ("livehost", "services", "benchmarks", "scripts")
                    for p in (root / top).rglob("*.py") if "SEALED_HOLDOUT_PATH" in p.read_text(encoding="utf-8"))
    assert naming == ["livehost/eval/cases.py", "livehost/eval/leakage.py", "livehost/eval/release.py"]
