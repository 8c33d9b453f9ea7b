"""Policy models served by a real tritonserver (python backend) on free ports, through PolicyClient."""

import asyncio
import json
import statistics
import time
from pathlib import Path

import pytest

from livehost.harness.loader import load
from livehost.policy.actions import parse_action
from livehost.policy.client import PolicyClient, PolicyError, TritonTransport
from livehost.policy.reference import decide
from livehost.policy.testing import build_context, render_prompt, run_loop
from livehost.stack.testing import running_triton

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "infra" / "triton" / "models"
CASES = [json.loads(line) for line in (ROOT / "tests/data/sample_cases.jsonl").read_text().splitlines() if line]


@pytest.fixture(scope="module")
def triton_url(tmp_path_factory):
    t0 = time.monotonic()
    with running_triton(tmp_path_factory.mktemp("triton"), MODELS, timeout=120) as url:
        print(f"\ntritonserver ready in {time.monotonic() - t0:.2f}s (policy_reference + policy_llm)")
        yield url


@pytest.fixture(scope="module")
def harness():
    return load(ROOT / "harness" / "default")


async def test_reference_model_returns_the_local_policy_action(triton_url, harness):
    async with PolicyClient(triton_url, "policy_reference", timeout_s=5.0) as client:
        assert await client.input_format() == "context_json"
        for case in CASES:
            ctx = build_context(harness, case)
            result = await client.generate(render_prompt(ctx), json.dumps(ctx), {})
            parsed = parse_action(result.text)
            assert parsed.valid and not parsed.repaired, result.text
            assert parsed.to_action() == decide(ctx)
            assert result.finish_reason == "stop" and result.attempts == 1
            assert result.chunks == 1  # one answer: a ModelInfer call, not a stream


async def test_the_client_streams_only_from_decoupled_models(triton_url):
    """policy_reference answers once (ModelInfer, cheaper than a stream per call); policy_llm streams,
    as a vLLM model does. The client learns which from each model's config."""
    async with PolicyClient(triton_url, "policy_reference", timeout_s=5.0) as client:
        transport = client.transport
        assert isinstance(transport, TritonTransport)
        assert not await transport.decoupled("policy_reference", 5.0)
        assert await transport.decoupled("policy_llm", 5.0)


async def test_reference_model_drives_a_whole_loop(triton_url, harness):
    loop = asyncio.get_running_loop()
    async with PolicyClient(triton_url, "policy_reference", timeout_s=5.0) as client:

        def remote(ctx):
            fut = asyncio.run_coroutine_threadsafe(client.generate("", json.dumps(ctx), {}), loop)
            return fut.result(timeout=10).text

        for case in CASES:
            local = run_loop(decide, harness, case)
            served = await asyncio.to_thread(run_loop, remote, harness, case)
            assert served.actions == local.actions and served.reply == local.reply


async def test_reference_model_rejects_bad_input_without_retrying(triton_url):
    async with PolicyClient(triton_url, "policy_reference", timeout_s=5.0, retries=2) as client:
        with pytest.raises(PolicyError) as err:
            await client.generate("", "not json", {})
    assert not err.value.retryable and "policy_reference" in str(err.value)


async def test_concurrent_calls_share_requests_and_each_gets_its_own_answer(triton_url, harness):
    """policy_reference has a batch dimension: calls made while requests are out go together, one row
    each; every caller still gets the action for its own context, and a bad row fails only its caller."""
    contexts = [build_context(harness, case) for case in CASES] * 4
    async with PolicyClient(triton_url, "policy_reference", timeout_s=10.0, retries=0) as client:
        transport = client.transport
        assert isinstance(transport, TritonTransport)
        batcher = await transport.batcher("policy_reference", 5.0)
        assert batcher is not None and batcher.max_rows == 64
        assert await transport.batcher("policy_llm", 5.0) is None  # streams: no batch dimension
        before = batcher.requests
        calls = [client.generate("", json.dumps(ctx), {}) for ctx in contexts]
        calls.insert(len(calls) // 2, client.generate("", "not json", {}))
        results = await asyncio.gather(*calls, return_exceptions=True)
        sent = batcher.requests - before
    bad = results.pop(len(contexts) // 2)
    assert isinstance(bad, PolicyError) and not bad.retryable and "JSONDecodeError" in str(bad)
    for ctx, result in zip(contexts, results, strict=True):
        assert not isinstance(result, BaseException), result
        assert parse_action(result.text).to_action() == decide(ctx)
    assert sent < (len(contexts) + 1) / 2, f"{sent} requests for {len(contexts) + 1} calls"


async def test_unreachable_server_opens_the_breaker():
    from livehost.policy.client import PolicyUnavailable

    client = PolicyClient("127.0.0.1:1", "policy_reference", timeout_s=0.5, retries=1,
                          breaker_threshold=1, breaker_cooldown_s=60, backoff_initial_s=0.01)
    with pytest.raises(PolicyError) as err:
        await client.generate("", "{}", {})
    assert err.value.retryable
    with pytest.raises(PolicyUnavailable):
        await client.generate("", "{}", {})
    await client.close()


async def test_llm_model_streams_parseable_actions(triton_url, harness):
    async with PolicyClient(triton_url, "policy_llm", timeout_s=30.0) as client:
        assert await client.input_format() == "retrieved_prompt"
        latencies: list[float] = []
        valid = 0
        total = 0
        kinds: dict[str, int] = {}
        known = 0
        for i in range(10):
            case = CASES[i % len(CASES)]
            ctx = build_context(harness, case)
            prompt = render_prompt(ctx)
            result = await client.generate(prompt, "{}", {"temperature": 0.7, "top_p": 0.95, "seed": i,
                                                          "max_tokens": 96})
            parsed = parse_action(result.text)  # must never raise
            total += 1
            valid += parsed.valid
            kinds[parsed.kind] = kinds.get(parsed.kind, 0) + 1
            names = {s["id"] for s in ctx["skills"]} | {t["name"] for t in ctx["tools"]}
            known += parsed.kind in ("reply", "no_reply") or (parsed.skill or parsed.tool) in names
            latencies.append(result.latency_ms)
            assert result.text and result.chunks > 1  # streamed in pieces
        print(f"\npolicy_llm: valid actions {valid}/{total} ({valid / total:.0%}), kinds {kinds}, "
              f"naming a real skill/tool or replying {known}/{total}, "
              f"latency p50 {statistics.median(latencies):.0f} ms, max {max(latencies):.0f} ms")


async def test_llm_sampling_is_reproducible_with_a_seed(triton_url, harness):
    prompt = render_prompt(build_context(harness, CASES[0]))
    sampling = {"temperature": 0.8, "seed": 42, "max_tokens": 48, "cache_prompt": False}
    async with PolicyClient(triton_url, "policy_llm", timeout_s=30.0) as client:
        a = await client.generate(prompt, "{}", sampling)
        b = await client.generate(prompt, "{}", sampling)
        short = await client.generate(prompt, "{}", {"temperature": 0.0, "max_tokens": 5})
    assert a.text == b.text
    assert short.finish_reason == "length" and len(short.text) < len(a.text)
