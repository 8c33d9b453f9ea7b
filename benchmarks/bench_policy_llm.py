"""``policy_llm`` (SmolLM2-135M in Triton, CPU) through the real request path on a subset of a split:
`livehost eval run`'s runner with the default budgets (policy timeout, request time budget, max turns)
on a PostgreSQL and a Triton started for the run. Prints aggregate figures only (the test split is
measured, not read): pass rate (expect block + judge accuracy 1), how requests ended, policy latency
per turn and latency per case.

    .venv/bin/python benchmarks/bench_policy_llm.py [--split test|dev] [--n 40] [--policy policy_llm]

The subset is every k-th case of the split (k = len / n), so every category is represented.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from livehost.config import REPO_ROOT, Settings
from livehost.eval.cases import DEVSET_PATH, load_cases
from livehost.eval.judge import DeterministicJudge
from livehost.runner.core import run_file
from livehost.runner.expect import check
from livehost.sim.split import TESTSET_PATH
from livehost.stack.testing import running_postgres, running_triton


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[int(q * (len(values) - 1))] if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "test"), default="test")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--policy", default="policy_llm")
    ap.add_argument("--policy-timeout-s", type=float, default=None, help="default: the settings' (5 s)")
    ap.add_argument("--time-budget-ms", type=int, default=None, help="default: the harness's (8000 ms)")
    args = ap.parse_args()
    path = TESTSET_PATH if args.split == "test" else DEVSET_PATH
    cases = load_cases(path)
    step = max(1, len(cases) // args.n)
    subset = cases[::step][: args.n]
    tmp = Path(tempfile.mkdtemp())
    cases_file = tmp / "subset.jsonl"
    cases_file.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in subset), encoding="utf-8")
    with running_postgres(tmp / "pg") as dsn, \
            running_triton(tmp / "triton", REPO_ROOT / "infra/triton/models", timeout=300) as url:
        settings = Settings(postgres_dsn=dsn, triton_url=url)
        if args.policy_timeout_s:
            settings = settings.model_copy(update={"policy_timeout_s": args.policy_timeout_s})
        if args.time_budget_ms:  # a request's deadline is the smaller of its TTL and the time budget
            settings = settings.model_copy(update={"request_ttl_ms": max(settings.request_ttl_ms,
                                                                         args.time_budget_ms)})
        harness = None
        if args.time_budget_ms:  # the shipped harness with another request time budget
            folder = tmp / "harness"
            shutil.copytree(REPO_ROOT / "harness/default", folder)
            raw = yaml.safe_load((folder / "harness.yaml").read_text(encoding="utf-8"))
            raw["limits"]["time_budget_ms"] = args.time_budget_ms
            (folder / "harness.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
            harness = str(folder)
        t0 = time.time()
        results = asyncio.run(run_file(settings, cases_file, tmp / "results.jsonl", policy=args.policy,
                                       concurrency=1, harness=harness))
        wall = time.time() - t0
    judge = DeterministicJudge()
    by_id = {c["id"]: c for c in subset}
    passed = 0
    outcomes: Counter[str] = Counter()
    per_turn: list[float] = []
    for r in results:
        case = by_id[r["id"]]
        expect = check(case, r)
        passed += bool(expect["respond"] and not expect["missing"] and not expect["forbidden"]
                       and judge.score(case, r).accuracy == 1)
        outcomes.update(o["outcome"] for o in r.get("outcomes") or [])
        per_turn += [float(x) for x in (r.get("stages") or {}).get("policy") or []]
    lat = [float(r.get("latency_ms") or 0) for r in results]
    n = len(results)
    budgets = (f"policy timeout {settings.policy_timeout_s:g} s, time budget "
               f"{args.time_budget_ms or 'harness default'} ms")
    print(f"{args.policy} ({budgets}) on {n} {args.split}-split cases (every {step}th) in {wall:.0f} s: "
          f"pass {100 * passed / max(n, 1):.1f} % ({passed}/{n}); outcomes {dict(outcomes)}")
    if per_turn:
        print(f"policy latency per turn: p50 {statistics.median(per_turn):.0f} ms, p95 {_pct(per_turn, 0.95):.0f} ms "
              f"({len(per_turn)} turns); per case p50 {statistics.median(lat):.0f} ms, p95 {_pct(lat, 0.95):.0f} ms")


if __name__ == "__main__":
    main()
