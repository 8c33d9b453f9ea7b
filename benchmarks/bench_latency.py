"""Request-path latency benchmark: per-stage latency (merge wait, prompt, policy, tools, hooks) of
the scripted demo session, and policy_llm's valid-action share and per-turn latency.

    python benchmarks/bench_latency.py [--repeat N] [--skip-llm]

Starts the embedded components it needs (PostgreSQL and Triton with infra/triton/models, on free
ports, via livehost.stack.testing) and runs the scripted session of livehost/demo/script.py through
the in-process runner (livehost.runner.core: the same handler classes as the services, with the
Kafka hops skipped). The session is cut into one case per room and product (a product switch starts
a new case); comments keep their timing, so merging, the per-room queue and deadlines behave as live.

Arms, all measured in this run:
  reference   harness agent, policy_reference        (the baseline of every ratio)
  llm         harness agent, policy_llm (SmolLM2-135M via llama.cpp on CPU)
  react       ReAct baseline, policy_reference
The llm arm runs with budgets a 135M model on a few CPU cores can meet: policy timeout, request TTL
and the harness time budget raised to LLM_BUDGET_MS (with the production 5 s / 8 s every turn
times out on a 2-core CPU). Stages per arm: end_to_end (per request, merge wait and queueing included), merge_wait (per
request), prompt / policy / tools / hooks (per call). Then policy_llm over the sample cases:
share of turns that parse as valid actions, and per-turn latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livehost.commerce.store import DEMO_CATALOG_PATH  # noqa: E402
from livehost.config import REPO_ROOT, Settings  # noqa: E402
from livehost.db import connect_pool, migrate  # noqa: E402
from livehost.demo.script import SESSION  # noqa: E402
from livehost.harness.loader import from_dict, load  # noqa: E402
from livehost.harness.model import Harness  # noqa: E402
from livehost.policy.client import PolicyClient  # noqa: E402
from livehost.runner.core import Agent, CaseRunner, read_cases  # noqa: E402
from livehost.stack.testing import running_postgres, running_triton  # noqa: E402

STAGES = ("end_to_end", "merge_wait", "prompt", "policy", "tools", "hooks")
ARMS: list[tuple[str, Agent, str]] = [("reference", "harness", "policy_reference"),
                                      ("llm", "harness", "policy_llm"),
                                      ("react", "react", "policy_reference")]
LLM_BUDGET_MS = 180_000
SAMPLE_CASES = REPO_ROOT / "tests" / "data" / "sample_cases.jsonl"


def session_cases() -> list[dict[str, Any]]:
    """The scripted session as cases: one per room and product on screen, comment timing kept."""
    rooms = {r["room_id"]: r for r in json.loads(DEMO_CATALOG_PATH.read_text())["rooms"]}
    current = {rid: r.get("current_link") for rid, r in rooms.items()}
    open_: dict[str, dict[str, Any]] = {}
    cases: list[dict[str, Any]] = []

    def close(room_id: str) -> None:
        seg = open_.pop(room_id, None)
        if seg:
            cases.append(seg)

    for t, room_id, kind, payload in SESSION:
        if kind == "product_switch":
            close(room_id)
            current[room_id] = payload["link_id"]
            continue
        r = rooms[room_id]
        seg = open_.setdefault(room_id, {
            "id": f"session-{room_id}-{len(cases) + len(open_)}", "category": "product_question", "t0": t,
            "room": {"room_id": room_id, "current_link": current[room_id], "viewer_count": r.get("viewer_count"),
                     "campaign": r.get("campaign")},
            "catalog": r["catalog"], "comments": [], "expect": {"respond": True}})
        seg["comments"].append({"user_id": payload["user_id"], "text": payload["text"],
                                "offset_ms": int(round((t - seg["t0"]) * 1000))})
    for room_id in list(open_):
        close(room_id)
    return cases


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def collect(results: list[dict[str, Any]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {s: [] for s in STAGES}
    for r in results:
        for stage in STAGES:
            out[stage].extend((r.get("stages") or {}).get(stage) or [])
    return out


def relaxed(settings: Settings) -> tuple[Settings, Harness]:
    """Settings and harness with budgets a 135M model on a few CPU cores can meet (for measuring it)."""
    harness = load(settings.harness_path)
    data = harness.canonical()
    data["limits"]["time_budget_ms"] = LLM_BUDGET_MS
    return (settings.model_copy(update={"policy_timeout_s": LLM_BUDGET_MS / 1000, "policy_retries": 0,
                                        "request_ttl_ms": LLM_BUDGET_MS}), from_dict(data))


async def run_arm(settings: Settings, pool: Any, agent: Agent, policy: str, cases: list[dict[str, Any]],
                  concurrency: int, harness: Harness | None = None) -> list[dict[str, Any]]:
    client = PolicyClient(settings.triton_url, policy, timeout_s=settings.policy_timeout_s,
                          retries=settings.policy_retries)
    try:
        runner = CaseRunner(settings, pool, harness or load(settings.harness_path), {policy: client},
                            policy=policy, agent=agent)
        return await runner.run_all(cases, concurrency)
    finally:
        await client.close()


def print_stages(name: str, stages: dict[str, list[float]], base: dict[str, list[float]] | None) -> None:
    print(f"\n[{name}]")
    print(f"  {'stage':<11} {'n':>4} {'p50 ms':>9} {'p95 ms':>9}" + ("   p50 ratio  p95 ratio" if base else ""))
    for stage in STAGES:
        v = stages[stage]
        line = f"  {stage:<11} {len(v):>4} {pct(v, .5):>9.1f} {pct(v, .95):>9.1f}"
        if base:
            b = base[stage]
            r50 = pct(v, .5) / pct(b, .5) if b and pct(b, .5) > 0 else float("nan")
            r95 = pct(v, .95) / pct(b, .95) if b and pct(b, .95) > 0 else float("nan")
            line += f"   {r50:>8.2f}x  {r95:>8.2f}x"
        print(line)


async def main_async(settings: Settings, repeat: int, skip_llm: bool) -> None:
    pool = await connect_pool(settings.postgres_dsn, attempts=10, max_size=8)
    try:
        await migrate(pool)
        cases = session_cases()
        n_comments = sum(len(c["comments"]) for c in cases)
        print(f"scripted session: {n_comments} comments in {len(cases)} room/product segments, x{repeat}")
        per_arm: dict[str, dict[str, list[float]]] = {}
        for name, agent, policy in ARMS:
            if skip_llm and policy == "policy_llm":
                continue
            results: list[dict[str, Any]] = []
            t0 = time.perf_counter()
            arm_settings, arm_harness = relaxed(settings) if policy == "policy_llm" else (settings, None)
            for _ in range(repeat):
                # segments of different rooms run concurrently, like live rooms; one room's are serial
                results += await run_arm(arm_settings, pool, agent, policy, cases, concurrency=len(cases),
                                         harness=arm_harness)
            wall = time.perf_counter() - t0
            per_arm[name] = collect(results)
            outcomes: dict[str, int] = {}
            for r in results:
                for o in r.get("outcomes") or []:
                    outcomes[o["outcome"]] = outcomes.get(o["outcome"], 0) + 1
            print_stages(f"{name}: agent={agent} policy={policy}", per_arm[name],
                         None if name == "reference" else per_arm.get("reference"))
            print(f"  outcomes {outcomes}; errors {sum(1 for r in results if r.get('error'))}; wall {wall:.1f}s")
        if "reference" in per_arm:
            ref = per_arm["reference"]
            hooks_share = sum(ref["hooks"]) / max(1e-9, sum(ref["hooks"]) + sum(ref["prompt"]) + sum(ref["policy"])
                                                  + sum(ref["tools"]))
            print(f"\nhooks share of handler time (reference arm): {hooks_share * 100:.1f}%")
        if not skip_llm:
            samples = read_cases(SAMPLE_CASES)
            llm_settings, llm_harness = relaxed(settings)
            results = []
            for _ in range(repeat):
                results += await run_arm(llm_settings, pool, "harness", "policy_llm", samples, concurrency=1,
                                         harness=llm_harness)
            kinds = [k for r in results for k in r.get("action_kinds") or []]
            valid = [k for k in kinds if k not in ("invalid", "unavailable")]
            turn_ms = collect(results)["policy"]
            print(f"\npolicy_llm on {len(samples)} sample cases x{repeat}: {len(kinds)} turns, "
                  f"valid actions {len(valid)}/{len(kinds)} = {100 * len(valid) / max(1, len(kinds)):.1f}%")
            by_kind = {k: kinds.count(k) for k in sorted(set(kinds))}
            print(f"  action kinds {by_kind}")
            if turn_ms:
                print(f"  per-turn latency p50 {pct(turn_ms, .5):.0f} ms, p95 {pct(turn_ms, .95):.0f} ms, "
                      f"mean {statistics.fmean(turn_ms):.0f} ms")
            print(f"  outcomes {[o['outcome'] for r in results for o in r.get('outcomes') or []]}")
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--skip-llm", action="store_true", help="Leave out policy_llm (fast run).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        with running_postgres(tmp) as dsn, \
                running_triton(tmp, REPO_ROOT / "infra" / "triton" / "models", timeout=180) as triton_url:
            print(f"PostgreSQL + Triton ready in {time.perf_counter() - t0:.1f}s")
            settings = Settings(postgres_dsn=dsn, triton_url=triton_url)
            asyncio.run(main_async(settings, args.repeat, args.skip_llm))


if __name__ == "__main__":
    main()
