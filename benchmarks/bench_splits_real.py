"""Dev and test split through the real request path: `livehost eval run`'s runner (merge, input hooks,
prompt assembly, policy through Triton, sandbox tools in PostgreSQL, step hooks) on a PostgreSQL and a
Triton started for the run. Prints pass rate (expect block + judge accuracy), judge accuracy and
per-case latency for each split."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from livehost.config import REPO_ROOT, Settings
from livehost.eval.cases import DEVSET_PATH, HAND_WRITTEN_DEV, load_cases
from livehost.eval.judge import DeterministicJudge
from livehost.runner.core import run_file
from livehost.runner.expect import check
from livehost.sim.split import TESTSET_PATH
from livehost.stack.testing import running_postgres, running_triton


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    with running_postgres(tmp / "pg") as dsn, \
            running_triton(tmp / "triton", REPO_ROOT / "infra/triton/models", timeout=180) as url:
        settings = Settings(postgres_dsn=dsn, triton_url=url)
        judge = DeterministicJudge()
        splits = {"dev": DEVSET_PATH, **HAND_WRITTEN_DEV, "test": TESTSET_PATH}
        for name, path in splits.items():
            if not path.exists():
                continue
            t0 = time.time()
            results = asyncio.run(run_file(settings, path, tmp / f"{name}.jsonl", concurrency=4))
            cases = {c["id"]: c for c in load_cases(path)}
            passed = accurate = 0
            for r in results:
                case = cases[r["id"]]
                expect = check(case, r)
                verdict = judge.score(case, r)
                accurate += verdict.accuracy == 1
                passed += bool(expect["respond"] and not expect["missing"] and not expect["forbidden"]
                               and verdict.accuracy == 1)
            lat = sorted(float(r.get("latency_ms") or 0) for r in results)
            n = len(results)
            p95 = lat[int(0.95 * (n - 1))]
            print(f"{name}: {n} cases in {time.time() - t0:.0f} s; pass {100 * passed / n:.1f} %; judge accuracy "
                  f"{100 * accurate / n:.1f} %; latency p50 {lat[n // 2]:.0f} ms, p95 {p95:.0f} ms")


if __name__ == "__main__":
    main()
