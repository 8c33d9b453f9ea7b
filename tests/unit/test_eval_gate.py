"""The gate with a fake runner returning planted results (no harness names involved)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from livehost.config import REPO_ROOT
from livehost.eval.cases import write_jsonl
from livehost.eval.gate import compare, evaluate, score_results
from livehost.eval.gate_cli import app
from livehost.harness.loader import dump, load
from livehost.harness.model import Harness
from livehost.sim.generator import generate_cases

DEFAULT = load(REPO_ROOT / "harness" / "default")
GEN = generate_cases(seed=11, per_category=4)  # 56 cases with gold replies
CASES = [g.case for g in GEN]
GOLD = {g.case["id"]: g.gold for g in GEN}
SAYING = [g.case["id"] for g in GEN if g.gold is not None]


def gold(cid: str) -> dict[str, Any]:
    return {"id": cid, "responded": GOLD[cid] is not None, "reply": GOLD[cid], "latency_ms": 100.0}


def wrong_price(cid: str) -> dict[str, Any]:
    return {"id": cid, "responded": True, "reply": "Only 1234567 yuan today, tap link 1!"}


def silent(cid: str) -> dict[str, Any]:
    return {"id": cid, "responded": False, "reply": None}


def system(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan.get(cid, gold)(cid) for cid in GOLD]


class FakeRunner:
    """Answers per harness version from planted plans; records what it ran."""

    def __init__(self, plans: dict[str, dict[str, Any]], default: dict[str, Any] | None = None):
        self.plans = plans
        self.default = default
        self.calls: list[str] = []

    async def __call__(self, harness: Harness | str, cases: list[dict[str, Any]], policy: str) -> list[dict[str, Any]]:
        version = harness.version() if isinstance(harness, Harness) else harness
        self.calls.append(version)
        plan = self.plans.get(version, self.default)
        assert plan is not None, version
        return system(plan)


class FakeRegistry:
    def __init__(self) -> None:
        self.attached: list[tuple[str, dict[str, Any], bool]] = []

    async def attach_evaluation(self, version: str, result: dict[str, Any], passed: bool, *,
                                actor: str = "evaluation") -> None:
        self.attached.append((version, result, passed))


BASELINE = {cid: wrong_price for cid in SAYING[:8]}  # 8 accuracy failures
V1 = {cid: silent for cid in SAYING[10:22]}  # accuracy fixed, 12 cases lose effectiveness (silence is accurate)
V2: dict[str, Any] = {SAYING[30]: silent}  # one case loses effectiveness: 1/56 = 1.79 points
V2_BETTER: dict[str, Any] = {}  # all gold


async def test_candidate_better_on_accuracy_worse_on_effectiveness_is_refused() -> None:
    runner, reg = FakeRunner({"cand": V1, "base": BASELINE}), FakeRegistry()
    gate = await evaluate("cand", "base", CASES, runner, policy="p", registry=reg, n_boot=500)
    diff = gate.result["paired_difference"]
    assert diff["accuracy"]["diff"] > 0 and diff["effectiveness"]["diff"] < 0
    assert diff["accuracy"]["better_cases"] == 8 and diff["accuracy"]["worse_cases"] == 0
    assert not gate.passed and "effectiveness" in gate.result["reason"]
    assert reg.attached == [("cand", gate.result, False)]
    assert runner.calls == ["cand", "base"]
    lo, hi = diff["effectiveness"]["ci95"]
    assert lo <= diff["effectiveness"]["diff"] <= hi
    json.dumps(gate.result)  # attachable as JSON


async def test_candidate_better_on_both_passes_and_tolerance_applies() -> None:
    gate = await evaluate("cand", "base", CASES, FakeRunner({"cand": V2_BETTER, "base": BASELINE}), n_boot=300)
    assert gate.passed and gate.result["candidate_scores"]["accuracy"]["score"] == 100.0
    # a small effectiveness drop passes only with enough tolerance (1 case / 56 cases ≈ 1.79 points)
    small = await evaluate("cand", "base", CASES, FakeRunner({"cand": V2, "base": {}}), n_boot=300)
    assert not small.passed
    tolerant = await evaluate("cand", "base", CASES, FakeRunner({"cand": V2, "base": {}}), tolerance=2.0,
                              n_boot=300)
    assert tolerant.passed


async def test_equal_systems_pass_with_zero_tolerance() -> None:
    gate = await evaluate("a", "b", CASES, FakeRunner({}, default=BASELINE), n_boot=200)
    assert gate.passed and gate.result["paired_difference"]["accuracy"]["diff"] == 0


async def test_missing_results_count_as_failures() -> None:
    async def lossy(h: Harness | str, cases: list[dict[str, Any]], policy: str) -> list[dict[str, Any]]:
        rows = system({})
        return rows[5:] if h == "cand" else rows

    gate = await evaluate("cand", "base", CASES, lossy, n_boot=200)
    assert not gate.passed and gate.result["candidate_scores"]["accuracy"]["score"] < 100


async def test_variants_report_robustness_ratio() -> None:
    # the fake "policy" breaks on variants 2 (renamed everything): half of its answers go silent
    variant2, _ = __import__("livehost.harness.augment", fromlist=["x"]).rename_everything(DEFAULT, seed=2)
    plans = {DEFAULT.version(): {}, "base": BASELINE,
             variant2.version(): {cid: silent for cid in SAYING[: len(SAYING) // 2]}}
    runner = FakeRunner(plans, default={})
    gate = await evaluate(DEFAULT, "base", CASES, runner, variants=3, n_boot=200)
    rob = gate.result["robustness"]
    assert rob["variants"] == 3 and len(runner.calls) == 5
    assert rob["effectiveness"]["ratios"][0] == 1.0 and rob["effectiveness"]["ratios"][2] == 1.0
    expected = (len(CASES) - len(SAYING) // 2) / len(CASES)  # silenced answers score 0, the rest 1
    assert rob["effectiveness"]["ratios"][1] == pytest.approx(expected, abs=1e-4)
    assert rob["effectiveness"]["ratio_min"] == rob["effectiveness"]["ratios"][1]
    assert rob["accuracy"]["ratios"] == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="variants"):
        await evaluate("cand", "base", CASES, runner, variants=1)


async def test_score_results_uses_case_order() -> None:
    s = await score_results(list(reversed(system({}))), CASES)
    assert s.ids == [c["id"] for c in CASES] and s.accuracy.mean() == 1.0


def test_compare_requires_alignment() -> None:
    import numpy as np

    from livehost.eval.gate import Scored

    a = Scored(["x"], np.ones(1), np.ones(1))
    b = Scored(["y"], np.ones(1), np.ones(1))
    with pytest.raises(ValueError):
        compare(a, b)


def test_cli_evaluate_from_result_files(tmp_path: Path) -> None:
    cand_dir = dump(DEFAULT.model_copy(update={"description": "candidate"}), tmp_path / "cand")
    base_dir = dump(DEFAULT, tmp_path / "base")
    write_jsonl(tmp_path / "cases.jsonl", CASES)
    write_jsonl(tmp_path / "cand.jsonl", system(V1))
    write_jsonl(tmp_path / "base.jsonl", system(BASELINE))
    args = ["evaluate", str(cand_dir), "--baseline", str(base_dir), "--cases", str(tmp_path / "cases.jsonl"),
            "--candidate-results", str(tmp_path / "cand.jsonl"), "--baseline-results", str(tmp_path / "base.jsonl"),
            "--no-attach", "--n-boot", "200", "--json", str(tmp_path / "gate.json")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output  # refused
    assert "REFUSED" in res.output and "effectiveness" in res.output
    assert json.loads((tmp_path / "gate.json").read_text())["passed"] is False
    write_jsonl(tmp_path / "cand.jsonl", system({}))
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "PASS" in res.output
