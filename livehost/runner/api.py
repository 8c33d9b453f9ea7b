"""The runner as functions, for the evaluation gate and behaviour distributions.

``run_cases`` is the ``RunCases`` protocol of ``livehost.eval.gate``; ``sample_case`` the ``Sampler`` of
``livehost.eval.distribution``. Connections come from the settings (``livehost.config``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from livehost.config import load_settings
from livehost.harness.model import Harness
from livehost.runner.core import CaseRunner, resolve_harness

SAMPLING_TEMPERATURE = 0.8


@asynccontextmanager
async def _runner(harness: Harness | str | None, policy: str, sampling: dict[str, Any] | None = None
                  ) -> AsyncIterator[CaseRunner]:
    from livehost.db import connect_pool, migrate
    from livehost.policy.client import PolicyClient

    settings = load_settings()
    policy = policy or settings.policy_model
    pool = await connect_pool(settings.postgres_dsn, attempts=10, max_size=10)
    client = PolicyClient(settings.triton_url, policy, timeout_s=settings.policy_timeout_s,
                          retries=settings.policy_retries)
    try:
        await migrate(pool)
        chosen = harness if isinstance(harness, Harness) else await resolve_harness(harness, settings, pool)
        yield CaseRunner(settings, pool, chosen, {policy: client}, policy=policy, sampling=sampling)
    finally:
        await client.close()
        await pool.close()


async def run_cases(harness: Harness | str, cases: list[dict[str, Any]], policy: str) -> list[dict[str, Any]]:
    """Every case through the request path with this harness (object, folder or registry version)."""
    async with _runner(harness, policy) as runner:
        return await runner.run_all(cases, concurrency=4)


async def sample_case(case: dict[str, Any], k: int, *, harness: Harness | str | None = None,
                      policy: str = "") -> list[dict[str, Any]]:
    """The same case K times with sampling on (temperature > 0, a different seed each time)."""
    results = []
    for i in range(k):
        async with _runner(harness, policy, {"temperature": SAMPLING_TEMPERATURE, "seed": 1000 + i}) as runner:
            results.append(await runner.run_case(case))
    return results
