"""The evaluation gate: run candidate and baseline on the same cases, judge, compare paired by case,
decide, and attach the result to the candidate in the registry.

Decision rule: the candidate advances only if neither accuracy nor effectiveness is worse by more
than ``tolerance`` percentage points (default 0: the point estimate of each paired difference
candidate − baseline must be ≥ 0). The paired differences come with bootstrap confidence intervals
(cases resampled, seeded) so an operator sees how sure the comparison is.

With ``variants`` N the candidate also runs on N harness-state-augmented variants
(:func:`livehost.harness.augment.rename_everything` with seeds 1..N) and the robustness ratio
(variant score / original score) is reported per metric. Robustness is reported, not gated.

The runner is injected (:data:`RunCases`); the gate never names a skill, tool, hook or section.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from livehost.eval.judge import DeterministicJudge, Judge, judge_results, missing_result_verdict
from livehost.eval.stats import bootstrap_mean, bootstrap_paired_diff, finite_or_none
from livehost.harness.augment import rename_everything
from livehost.harness.model import Harness

METRICS = ("accuracy", "effectiveness")

# harness (object, or a registry version) + cases + policy → result lines (CASES.md format)
RunCases = Callable[[Harness | str, list[dict[str, Any]], str], Awaitable[list[dict[str, Any]]]]
DEFAULT_RUNNER = "livehost.runner:run_cases"


class AttachEvaluation(Protocol):
    async def attach_evaluation(self, version: str, result: dict[str, Any], passed: bool, *,
                                actor: str = "evaluation") -> Any: ...


def load_runner(spec: str = DEFAULT_RUNNER) -> RunCases:
    """Import ``module:function`` (the in-process runner plugs in here)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"runner {spec!r}: use module:function")
    fn = getattr(importlib.import_module(module), name)
    if not callable(fn):
        raise TypeError(f"runner {spec!r} is not callable")
    return fn  # type: ignore[no-any-return]


def version_of(harness: Harness | str) -> str:
    return harness.version() if isinstance(harness, Harness) else str(harness)


@dataclass
class Scored:
    """Per-case scores of one system, aligned to the case order."""

    ids: list[str]
    accuracy: np.ndarray
    effectiveness: np.ndarray
    results: list[dict[str, Any]] = field(default_factory=list)

    def metric(self, name: str) -> np.ndarray:
        return self.accuracy if name == "accuracy" else self.effectiveness


async def score_results(results: Sequence[dict[str, Any]], cases: Sequence[dict[str, Any]],
                        judge: Judge | None = None, *, rescore: bool = True) -> Scored:
    """Judge ``results`` (unless already scored and ``rescore`` is False), aligned to ``cases``; a
    case without a result scores 0/0 (a run that loses cases must not look better)."""
    judge = judge or DeterministicJudge()
    wanted = {str(c["id"]) for c in cases}
    present = [r for r in results if str(r.get("id")) in wanted]
    to_judge = present if rescore else [r for r in present if not r.get("scores")]
    judged = {str(r["id"]): r for r in await judge_results(to_judge, cases, judge)}
    if not rescore:
        judged.update({str(r["id"]): r for r in present if r.get("scores")})
    aligned = []
    for case in cases:
        cid = str(case["id"])
        aligned.append(judged.get(cid) or {"id": cid, "responded": False, "reply": None,
                                            "scores": missing_result_verdict(cid).scores()})
    acc = np.array([float(r["scores"]["accuracy"]) for r in aligned])
    eff = np.array([float(r["scores"]["effectiveness"]) for r in aligned])
    return Scored([str(c["id"]) for c in cases], acc, eff, aligned)


def summarize(scored: Scored, *, n_boot: int, seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(scored.ids)}
    for m in METRICS:
        ci = bootstrap_mean(scored.metric(m) * 100.0, n_boot=n_boot, seed=seed)
        out[m] = {"score": round(ci.estimate, 4), "ci95": [round(ci.low, 4), round(ci.high, 4)]}
    return out


def compare(candidate: Scored, baseline: Scored, *, tolerance: float = 0.0, n_boot: int = 2000,
            seed: int = 0) -> dict[str, Any]:
    """Paired comparison and decision (scores in percentage points)."""
    if candidate.ids != baseline.ids:
        raise ValueError("candidate and baseline must be aligned on the same case ids")
    diffs: dict[str, Any] = {}
    worse: list[str] = []
    for m in METRICS:
        a, b = candidate.metric(m) * 100.0, baseline.metric(m) * 100.0
        ci = bootstrap_paired_diff(a, b, n_boot=n_boot, seed=seed)
        changed = a != b
        diffs[m] = {"diff": round(ci.estimate, 4), "ci95": [round(ci.low, 4), round(ci.high, 4)],
                    "better_cases": int((a > b).sum()), "worse_cases": int((a < b).sum()),
                    "changed_cases": int(changed.sum())}
        if ci.estimate < -tolerance - 1e-9:
            worse.append(m)
    passed = not worse
    reason = ("neither metric is worse" + (f" by more than {tolerance:g} points" if tolerance else "")
              if passed else "worse on " + ", ".join(
                  f"{m} ({diffs[m]['diff']:+.2f} points, 95% CI {diffs[m]['ci95'][0]:+.2f}..{diffs[m]['ci95'][1]:+.2f})"
                  for m in worse))
    return {"paired_difference": diffs, "passed": passed, "reason": reason, "tolerance": tolerance}


def robustness(original: Scored, variants: Sequence[Scored]) -> dict[str, Any]:
    out: dict[str, Any] = {"variants": len(variants)}
    for m in METRICS:
        base = float(original.metric(m).mean())
        scores = [float(v.metric(m).mean()) for v in variants]
        ratios = [s / base if base > 0 else None for s in scores]
        valid = [r for r in ratios if r is not None]
        out[m] = {"original": round(base * 100, 4), "variant_scores": [round(s * 100, 4) for s in scores],
                  "ratios": [round(r, 4) if r is not None else None for r in ratios],
                  "ratio_mean": round(float(np.mean(valid)), 4) if valid else None,
                  "ratio_min": round(float(np.min(valid)), 4) if valid else None}
    return out


@dataclass
class GateResult:
    candidate: str
    baseline: str
    passed: bool
    result: dict[str, Any]
    candidate_scored: Scored
    baseline_scored: Scored


async def evaluate(candidate: Harness | str, baseline: Harness | str, cases: list[dict[str, Any]],
                   run_cases: RunCases, *, policy: str = "", judge: Judge | None = None, tolerance: float = 0.0,
                   variants: int = 0, n_boot: int = 2000, seed: int = 0,
                   registry: AttachEvaluation | None = None, actor: str = "evaluation",
                   cases_label: str = "") -> GateResult:
    """Run both versions on ``cases``, judge, compare paired by case id, decide, and (with a
    ``registry``) attach the result to the candidate. Variants need the candidate as a Harness."""
    if variants and not isinstance(candidate, Harness):
        raise ValueError("--variants needs the candidate harness itself (a folder or a registry bundle)")
    judge = judge or DeterministicJudge()
    cand_results = await run_cases(candidate, cases, policy)
    base_results = await run_cases(baseline, cases, policy)
    cand = await score_results(cand_results, cases, judge)
    base = await score_results(base_results, cases, judge)
    comparison = compare(cand, base, tolerance=tolerance, n_boot=n_boot, seed=seed)
    result: dict[str, Any] = {
        "kind": "gate", "candidate": version_of(candidate), "baseline": version_of(baseline), "policy": policy,
        "cases": cases_label, "n_cases": len(cases), "judge": getattr(judge, "name", "?"),
        "bootstrap": {"n_boot": n_boot, "seed": seed, "level": 0.95},
        "candidate_scores": summarize(cand, n_boot=n_boot, seed=seed),
        "baseline_scores": summarize(base, n_boot=n_boot, seed=seed),
        **comparison,
    }
    if variants:
        assert isinstance(candidate, Harness)
        scored_variants = []
        for k in range(1, variants + 1):
            variant, _ = rename_everything(candidate, seed=k)
            scored_variants.append(await score_results(await run_cases(variant, cases, policy), cases, judge))
        result["robustness"] = robustness(cand, scored_variants)
    if registry is not None:
        await registry.attach_evaluation(version_of(candidate), result, bool(comparison["passed"]), actor=actor)
    return GateResult(version_of(candidate), version_of(baseline), bool(comparison["passed"]), result, cand, base)


def render_text(result: dict[str, Any]) -> str:
    """The decision as plain text lines (the CLI prints it with rich)."""
    lines = [f"candidate {result['candidate']} vs baseline {result['baseline']} on {result['n_cases']} cases"]
    for m in METRICS:
        c, b = result["candidate_scores"][m], result["baseline_scores"][m]
        d = result["paired_difference"][m]
        lines.append(f"  {m:<13} candidate {c['score']:6.2f}  baseline {b['score']:6.2f}  "
                     f"diff {d['diff']:+6.2f} (95% CI {d['ci95'][0]:+.2f}..{d['ci95'][1]:+.2f}; "
                     f"{d['better_cases']} better, {d['worse_cases']} worse)")
    rob = result.get("robustness")
    if rob:
        for m in METRICS:
            lines.append(f"  robustness {m:<13} ratio mean {finite_or_none(rob[m]['ratio_mean'] or float('nan'))} "
                         f"min {rob[m]['ratio_min']} over {rob['variants']} variants")
    lines.append(("PASS: " if result["passed"] else "REFUSED: ") + result["reason"])
    return "\n".join(lines)
