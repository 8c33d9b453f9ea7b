"""The shipped dev set: valid against schemas/eval/case.json, every category, reproducible, and every
case's expect block satisfiable (its gold reply passes the judge with accuracy 1, effectiveness 1)."""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
import pytest

from livehost.eval.cases import CATEGORIES, DEVSET_PATH, SCHEMA_DIR, CaseFileError, case_problems, load_cases
from livehost.eval.judge import DeterministicJudge
from livehost.sim.cli import devset
from livehost.sim.hard import hard_cases


def test_devset_validates_and_covers_every_category() -> None:
    cases = load_cases(DEVSET_PATH)  # raises on any schema problem
    assert len(cases) >= 480
    counts = Counter(c["category"] for c in cases)
    assert set(counts) == set(CATEGORIES)
    assert min(counts.values()) >= 30
    schema = json.loads((SCHEMA_DIR / "case.json").read_text())
    for case in cases:
        jsonschema.validate(case, schema)
    hard = [c for c in cases if c["id"].startswith("hard-")]
    assert len(hard) >= 30
    assert {"multi_intent", "ambiguous", "injection", "promotion", "after_sales"} <= {c["category"] for c in hard}
    assert any(c.get("orders") for c in hard) and any(c.get("faults") for c in cases)
    assert any(not c["expect"]["respond"] for c in cases)


def test_devset_file_is_the_seeded_generator_output() -> None:
    regenerated = [g.case for g in devset()]
    assert [json.loads(line) for line in DEVSET_PATH.read_text().splitlines()] == regenerated


def test_every_gold_reply_passes_the_judge() -> None:
    judge = DeterministicJudge()
    for g in devset():
        result = {"id": g.case["id"], "responded": g.gold is not None, "reply": g.gold}
        v = judge.score(g.case, result)
        assert (v.accuracy, v.effectiveness) == (1, 1.0), (g.case["id"], g.gold, v)


def test_generated_expectations_follow_the_data() -> None:
    for g in devset(per_category=10, hard=False):
        case, expect = g.case, g.case["expect"]
        if case["category"] in ("injection", "abuse"):
            assert expect["respond"] is False
        if case["category"] == "price" and not case.get("faults"):
            prices = {f"{i['price']:g}" for i in case["catalog"]}
            assert expect["must_include"] and set(expect["must_include"][0]) <= prices
        if case["category"] == "injection":
            assert expect["must_not_include"]


def test_hard_cases_are_distinct_and_valid() -> None:
    cases = [g.case for g in hard_cases()]
    assert len({c["id"] for c in cases}) == len(cases) >= 30
    for c in cases:
        assert case_problems(c) == [], c["id"]


def test_schema_rejects_broken_cases(tmp_path) -> None:  # type: ignore[no-untyped-def]
    good = load_cases(DEVSET_PATH)[0]
    bad = json.loads(json.dumps(good))
    bad["category"] = "gossip"
    bad["comments"][0]["offset_ms"] = -5
    bad["faults"] = {"inventory": "meltdown"}
    problems = case_problems(bad)
    assert len(problems) >= 3
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(CaseFileError, match="gossip|meltdown|-5"):
        load_cases(path)
