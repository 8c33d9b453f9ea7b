"""Behaviour distributions: sample the policy K times per case and compare distributions.

A *behaviour* of one sample is (skills loaded, tools called, responded) — skill and tool names are
whatever the harness under test calls them. Per case we report the distribution over behaviours
and the marginals (skill sets, tool sequences, response rate), and, given a reference (a previous
run saved with ``--save-reference``), the total variation distance per case and on average.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from livehost.eval.stats import tv_distance

# case, k → k result lines for that case (the runner plugs in with temperature > 0)
Sampler = Callable[[dict[str, Any], int], Awaitable[list[dict[str, Any]]]]
DEFAULT_SAMPLER = "livehost.runner:sample_case"


def behaviour(result: dict[str, Any]) -> str:
    skills = "+".join(sorted(set(result.get("skills_loaded") or []))) or "-"
    tools = ",".join(str(t.get("name")) for t in result.get("tool_calls") or []) or "-"
    return f"skills={skills}|tools={tools}|responded={int(bool(result.get('responded')))}"


def distribution(samples: Sequence[dict[str, Any]]) -> dict[str, float]:
    counts = Counter(behaviour(s) for s in samples)
    n = sum(counts.values())
    return {k: v / n for k, v in sorted(counts.items())} if n else {}


def marginals(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(samples) or 1
    skills = Counter("+".join(sorted(set(s.get("skills_loaded") or []))) or "-" for s in samples)
    tools = Counter(",".join(str(t.get("name")) for t in s.get("tool_calls") or []) or "-" for s in samples)
    return {"skills": {k: v / n for k, v in skills.items()}, "tools": {k: v / n for k, v in tools.items()},
            "responded": sum(bool(s.get("responded")) for s in samples) / n}


def by_case(samples: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        grouped.setdefault(str(s["id"]), []).append(s)
    return grouped


def compare(grouped: dict[str, list[dict[str, Any]]], reference: dict[str, dict[str, float]] | None = None
            ) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    tvs = []
    for cid, samples in grouped.items():
        dist = distribution(samples)
        row: dict[str, Any] = {"samples": len(samples), "distribution": dist, "modes": len(dist),
                               "marginals": marginals(samples)}
        if reference is not None and cid in reference and reference[cid]:
            row["tv_distance"] = tv_distance(dist, reference[cid])
            tvs.append(row["tv_distance"])
        cases[cid] = row
    out: dict[str, Any] = {"cases": cases, "n_cases": len(cases)}
    if reference is not None:
        out["tv_mean"] = sum(tvs) / len(tvs) if tvs else None
        out["tv_max"] = max(tvs) if tvs else None
        out["compared"] = len(tvs)
        out["missing_in_reference"] = sorted(set(grouped) - set(reference))
    return out


async def sample_all(cases: Sequence[dict[str, Any]], sampler: Sampler, k: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        samples = await sampler(case, k)
        out[str(case["id"])] = [{**s, "id": str(case["id"])} for s in samples]
    return out


def reference_of(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The per-case distributions of a report, to save as a reference."""
    return {cid: row["distribution"] for cid, row in report["cases"].items()}
