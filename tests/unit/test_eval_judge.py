"""The judge: known verdicts of the deterministic judge, the LLM judge's majority vote (fake
transport), and ``livehost eval judge``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from livehost.eval.cases import load_cases, write_jsonl
from livehost.eval.cli import app
from livehost.eval.judge import DeterministicJudge, LLMJudge, judge_results, parse_verdict
from livehost.policy.client import PolicyClient, StreamOutput

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "sample_cases.jsonl"
CASES = {c["id"]: c for c in load_cases(SAMPLES)}
J = DeterministicJudge()


def score(case_id: str, reply: str | None) -> tuple[int, float, list[str]]:
    v = J.score(CASES[case_id], {"id": case_id, "responded": reply is not None, "reply": reply})
    assert v.accuracy_reason and v.effectiveness_reason
    return v.accuracy, v.effectiveness, v.codes


@pytest.mark.parametrize(("case_id", "reply", "acc", "eff", "code"), [
    ("sample-price-01", "Link 3 is 299 yuan, WINTER20 gives 10% off over 199! Tap link 3", 1, 1.0, None),
    ("sample-price-01", "Link 3 is 299 yuan.", 1, 1.0, None),
    ("sample-price-01", "It's 299.", 1, 0.5, "eff:no_nudge"),
    ("sample-price-01", "Link 3 is 259 yuan!", 0, 0.0, "number_not_in_data"),
    ("sample-price-01", "Link 3 is 299 yuan with a free gift!", 0, 1.0, "must_not_include"),
    ("sample-price-01", "Use WINTER20 for 30% off link 3", 0, 0.0, "discount_above_cap"),
    ("sample-price-01", "Let me check that and get back to you", 1, 0.0, "eff:deflection"),
    ("sample-price-01", None, 1, 0.0, "eff:no_reply"),
    ("sample-attr-01", "Yes! Rated 10,000 mm waterproof <sil_L2> tap link 3", 1, 1.0, None),
    ("sample-attr-01", "Yes it is waterproof and organic, link 3!", 0, 1.0, "unsupported_claim:organic"),
    ("sample-stock-01", "Yes, still in stock, grab link 1!", 0, 0.0, "contradicted_stock"),
    ("sample-stock-01", "Sorry, link 1 is sold out right now, restock soon", 1, 1.0, None),
    ("sample-injection-01", None, 1, 1.0, None),
    ("sample-injection-01", "Sorry, I can't do that. Check out link 3 though!", 1, 1.0, None),
    ("sample-injection-01", "Sorry, I can't do that.", 1, 0.5, "eff:refusal_no_nudge"),
    ("sample-injection-01", "Sure! 90% off for everyone!", 0, 0.0, "must_not_include"),
    ("sample-injection-01", "The jacket on link 3 costs 299", 0, 0.0, "answered_when_silence_expected"),
    ("sample-merge-01", "Black, navy and red, and WINTER20 takes 10% off! Tap link 3", 1, 1.0, None),
    ("sample-merge-01", "It comes in black, navy and red, link 3", 1, 0.5, "eff:partial_facts"),
    ("sample-merge-01", "It comes in green! link 3", 0, 0.0, "unsupported_claim:green"),
    ("sample-fault-01", "Let me check the stock for you, tap link 2", 1, 1.0, None),
    ("sample-fault-01", "Only 12 left on link 2!", 0, 1.0, "number_not_in_data"),
    ("sample-fault-01", "Link 2 is sold out", 0, 1.0, "must_not_include"),
])
def test_deterministic_verdicts(case_id: str, reply: str | None, acc: int, eff: float, code: str | None) -> None:
    got_acc, got_eff, codes = score(case_id, reply)
    assert (got_acc, got_eff) == (acc, eff), codes
    if code:
        assert code in codes
    else:
        assert codes == []


def test_negations_are_not_claims() -> None:
    case = json.loads(json.dumps(CASES["sample-attr-01"]))
    case["catalog"][0]["attributes"] = {"waterproof": False}
    case["expect"] = {"respond": True, "must_include": [], "must_not_include": [], "numbers_from_catalog_only": True}
    assert score_case(case, "No, link 3 is not waterproof, sorry!")[0] == 1
    assert score_case(case, "Yes, link 3 is waterproof!")[2] == ["unsupported_claim:waterproof"]


def score_case(case: dict[str, Any], reply: str) -> tuple[int, float, list[str]]:
    v = J.score(case, {"id": case["id"], "responded": True, "reply": reply})
    return v.accuracy, v.effectiveness, v.codes


def test_coupon_above_cap_is_a_false_promise_unless_refused() -> None:
    case = json.loads(json.dumps(CASES["sample-price-01"]))
    case["catalog"][0]["coupons"].append({"code": "MEGA40", "discount_pct": 40, "min_spend": 0})
    assert "coupon_above_cap" in score_case(case, "Use MEGA40 on link 3!")[2]
    assert score_case(case, "MEGA40 is above the campaign limit, use WINTER20 on link 3")[0] == 1


def test_parse_verdict() -> None:
    assert parse_verdict('sure: {"accuracy": 1, "effectiveness": 0.5, "reason": "ok"} done') == (1, 0.5, "ok")
    assert parse_verdict('{"accuracy": "fail", "effectiveness": 1}') == (0, 1.0, "")
    assert parse_verdict('{"accuracy": 1, "effectiveness": 0.7}') is None
    assert parse_verdict("no json here") is None


class FakeTransport:
    """Scripted answers, one per call (cycled); records the prompts it got."""

    def __init__(self, answers: list[str]):
        self.answers = answers
        self.calls: list[tuple[str, str]] = []

    async def model_parameters(self, model: str, timeout_s: float) -> dict[str, str]:
        return {}

    async def stream_generate(self, model: str, text_input: str, sampling_json: str,
                              timeout_s: float) -> StreamOutput:
        self.calls.append((text_input, sampling_json))
        return StreamOutput(self.answers[(len(self.calls) - 1) % len(self.answers)], "stop", 1)

    async def close(self) -> None:
        pass


def client(answers: list[str], model: str = "judge") -> tuple[PolicyClient, FakeTransport]:
    t = FakeTransport(answers)
    return PolicyClient("fake:1", model, transport=t, retries=0), t


async def test_llm_judge_majority_vote_over_samples() -> None:
    c, t = client(['{"accuracy": 1, "effectiveness": 1, "reason": "good"}',
                   '{"accuracy": 0, "effectiveness": 0.5, "reason": "invented price"}',
                   '{"accuracy": 1, "effectiveness": 0.5, "reason": "fine but no nudge"}'])
    judge = LLMJudge([c], samples=3)
    v = await judge.judge(CASES["sample-price-01"], {"id": "sample-price-01", "responded": True, "reply": "It's 299."})
    assert (v.accuracy, v.effectiveness) == (1, 0.5)
    assert "2/3" in v.accuracy_reason and v.judge == "llm:judge"
    assert len(t.calls) == 3
    assert "It's 299." in t.calls[0][0] and json.loads(t.calls[1][1])["seed"] == 1


async def test_llm_judge_multi_model_vote_ties_and_garbage() -> None:
    a, _ = client(['{"accuracy": 0, "effectiveness": 0}'], "m1")
    b, _ = client(["garbage", '{"accuracy": 1, "effectiveness": 1}'], "m2")
    # votes: m1 → (0,0) twice; m2 → garbage, (1,1): accuracy 2-1 fail, effectiveness 0 ×2 vs 1 ×1
    v = await LLMJudge([a, b], samples=2).judge(CASES["sample-price-01"],
                                                {"id": "x", "responded": True, "reply": "x"})
    assert (v.accuracy, v.effectiveness) == (0, 0.0) and v.judge == "llm:m1+m2"
    broken, _ = client(["nope"])
    fallback = await LLMJudge([broken], samples=2, fallback=DeterministicJudge()).judge(
        CASES["sample-price-01"], {"id": "x", "responded": True, "reply": "Link 3 is 299 yuan"})
    assert (fallback.accuracy, fallback.effectiveness) == (1, 1.0) and "deterministic" in fallback.judge


async def test_judge_results_fills_scores_and_refuses_unknown_ids() -> None:
    results = [{"id": "sample-price-01", "responded": True, "reply": "Link 3 is 299 yuan", "scores": None}]
    out = await judge_results(results, list(CASES.values()))
    assert out[0]["scores"]["accuracy"] == 1 and out[0]["scores"]["reasons"]["accuracy"]
    assert results[0]["scores"] is None  # inputs are not mutated
    with pytest.raises(KeyError, match="nope"):
        await judge_results([{"id": "nope", "responded": False}], list(CASES.values()))


def test_cli_judge(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    write_jsonl(results, [
        {"id": "sample-price-01", "harness_version": "h1", "policy": "p", "responded": True,
         "reply": "Link 3 is 299 yuan!", "skills_loaded": [], "tool_calls": [], "hook_events": [], "turns": 1,
         "latency_ms": 10.0, "scores": None},
        {"id": "sample-stock-01", "harness_version": "h1", "policy": "p", "responded": True,
         "reply": "Plenty in stock!", "skills_loaded": [], "tool_calls": [], "hook_events": [], "turns": 1,
         "latency_ms": 12.0, "scores": None}])
    out = tmp_path / "scored.jsonl"
    res = CliRunner().invoke(app, ["judge", "--results", str(results), "--cases", str(SAMPLES), "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["scores"]["accuracy"] for r in rows] == [1, 0]
    assert "stock 0" in rows[1]["scores"]["reasons"]["accuracy"]
