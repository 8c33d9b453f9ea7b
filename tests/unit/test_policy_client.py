import asyncio
import json

import pytest

from livehost.policy.client import (
    CircuitBreaker,
    PolicyClient,
    PolicyError,
    PolicyUnavailable,
    StreamOutput,
    is_retryable,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Unavailable(Exception):
    def status(self) -> str:
        return "StatusCode.UNAVAILABLE"


class InvalidArgument(Exception):
    def status(self) -> str:
        return "StatusCode.INVALID_ARGUMENT"


class FakeTransport:
    def __init__(self, input_format: str = "prompt", failures: list[BaseException | None] | None = None,
                 delay_s: float = 0.0, config_delay_s: float = 0.0):
        self.input_format = input_format
        self.config_delay_s = config_delay_s
        self.config_failures: list[BaseException] = []
        self.failures = list(failures or [])
        self.delay_s = delay_s
        self.config_reads = 0
        self.sent: list[tuple[str, str, dict]] = []
        self.closed = False

    async def model_parameters(self, model: str, timeout_s: float) -> dict[str, str]:
        self.config_reads += 1
        if self.config_delay_s:
            await asyncio.sleep(self.config_delay_s)
        if self.config_failures:
            raise self.config_failures.pop(0)
        return {"input_format": self.input_format}

    async def stream_generate(self, model: str, text_input: str, sampling_json: str, timeout_s: float):
        self.sent.append((model, text_input, json.loads(sampling_json)))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.failures:
            exc = self.failures.pop(0)
            if exc is not None:
                raise exc
        return StreamOutput('{"action": "no_reply", "reason": "x"}', "stop", 3)

    async def close(self) -> None:
        self.closed = True


def client(transport: FakeTransport, **kw) -> PolicyClient:
    kw.setdefault("backoff_initial_s", 0.001)
    kw.setdefault("backoff_max_s", 0.002)
    return PolicyClient("fake:1", "m", transport=transport, **kw)


async def test_prompt_model_gets_prompt_and_config_is_read_once():
    t = FakeTransport("prompt")
    c = client(t)
    for _ in range(3):
        r = await c.generate("PROMPT", {"a": 1}, {"temperature": 0.2})
    assert t.config_reads == 1
    assert t.sent[0] == ("m", "PROMPT", {"temperature": 0.2})
    assert r.attempts == 1 and r.chunks == 3 and r.finish_reason == "stop" and r.input_format == "prompt"


async def test_concurrent_first_calls_share_one_config_read():
    t = FakeTransport("context_json", config_delay_s=0.02)
    c = client(t)
    results = await asyncio.gather(*(c.generate("PROMPT", {"i": i}, None) for i in range(20)))
    assert t.config_reads == 1
    assert all(r.input_format == "context_json" for r in results)
    assert sorted(json.loads(sent[1])["i"] for sent in t.sent) == list(range(20))


async def test_a_failed_config_read_is_not_remembered():
    t = FakeTransport("context_json", config_delay_s=0.01)
    t.config_failures.append(InvalidArgument("bad config read"))
    c = client(t, retries=0)
    first = await asyncio.gather(*(c.generate("P", {}, None) for _ in range(3)), return_exceptions=True)
    assert isinstance(first[0], PolicyError)  # the call whose read failed fails
    assert all(not isinstance(r, BaseException) for r in first[1:])  # the waiters read again, once
    assert t.config_reads == 2


async def test_context_json_model_gets_context():
    t = FakeTransport("context_json")
    r = await client(t).generate("PROMPT", {"a": 1}, None)
    assert json.loads(t.sent[0][1]) == {"a": 1}
    assert r.input_format == "context_json"


async def test_unknown_input_format_is_an_error():
    with pytest.raises(PolicyError):
        await client(FakeTransport("pictures"), retries=0).generate("p", "{}", {})


async def test_retries_on_unavailable_then_succeeds(caplog: pytest.LogCaptureFixture):
    t = FakeTransport(failures=[Unavailable("down"), Unavailable("down")])
    with caplog.at_level("WARNING", logger="livehost.policy.client"):
        r = await client(t, retries=2).generate("p", "{}", {})
    assert r.attempts == 3
    # each retried attempt is logged, so a slow model does not show as latency alone
    retried = [m for m in caplog.messages if "retrying" in m]
    assert [m.split(": attempt ")[1][:1] for m in retried] == ["1", "2"]
    assert all("Unavailable: down" in m for m in retried)


async def test_non_retryable_error_fails_at_once():
    t = FakeTransport(failures=[InvalidArgument("bad")])
    with pytest.raises(PolicyError) as err:
        await client(t, retries=3).generate("p", "{}", {})
    assert len(t.sent) == 1 and not err.value.retryable


async def test_per_call_timeout_is_retried_then_fails():
    t = FakeTransport(delay_s=0.2)
    c = client(t, retries=1, timeout_s=0.02)
    with pytest.raises(PolicyError) as err:
        await c.generate("p", "{}", {})
    assert len(t.sent) == 2 and err.value.retryable and "timeout" in str(err.value)


async def test_breaker_opens_after_consecutive_failures_and_recovers():
    clock = FakeClock()
    t = FakeTransport(failures=[Unavailable("down")] * 4)
    c = client(t, retries=0, breaker_threshold=2, breaker_cooldown_s=5.0, clock=clock)
    for _ in range(2):
        with pytest.raises(PolicyError):
            await c.generate("p", "{}", {})
    assert c.breaker.state == "open"
    sent = len(t.sent)
    with pytest.raises(PolicyUnavailable):
        await c.generate("p", "{}", {})
    assert len(t.sent) == sent  # no call while open
    clock.now += 5.0
    assert c.breaker.state == "half_open"
    with pytest.raises(PolicyError):  # the trial call fails: open again
        await c.generate("p", "{}", {})
    assert c.breaker.state == "open"
    clock.now += 5.0
    t.failures = []
    r = await c.generate("p", "{}", {})
    assert r.attempts == 1 and c.breaker.state == "closed" and c.breaker.consecutive_failures == 0


def test_breaker_half_open_lets_one_trial_through():
    clock = FakeClock()
    b = CircuitBreaker(1, 1.0, clock)
    assert b.allow()
    b.record_failure()
    assert not b.allow() and b.retry_after_s() == pytest.approx(1.0)
    clock.now += 1.0
    assert b.allow() and not b.allow()
    b.record_success()
    assert b.state == "closed" and b.allow()


def test_success_resets_the_failure_count():
    b = CircuitBreaker(3, 1.0, FakeClock())
    b.record_failure()
    b.record_failure()
    b.record_success()
    b.record_failure()
    assert b.state == "closed"


def test_retryable_classification():
    assert is_retryable(Unavailable("x"))
    assert is_retryable(TimeoutError())
    assert is_retryable(Exception("[StatusCode.DEADLINE_EXCEEDED] Deadline Exceeded"))
    assert not is_retryable(InvalidArgument("x"))
    assert not is_retryable(ValueError("nope"))


async def test_close_closes_transport():
    t = FakeTransport()
    async with client(t) as c:
        await c.generate("p", "{}", {})
    assert t.closed


async def test_retrieved_prompt_model_gets_the_small_prompt_of_an_agent_context():
    from pathlib import Path

    from livehost.harness.loader import load
    from livehost.policy.testing import build_context, render_prompt

    root = Path(__file__).resolve().parents[2]
    harness = load(root / "harness/default")
    case = json.loads((root / "tests/data/sample_cases.jsonl").read_text().splitlines()[3])
    ctx = build_context(harness, case)
    t = FakeTransport("retrieved_prompt")
    c = client(t)
    r = await c.generate(render_prompt(ctx), json.dumps(ctx), None)
    sent = t.sent[0][1]
    assert r.input_format == "retrieved_prompt"
    assert "## Relevant facts" in sent and "black, navy and red" in sent and "what colors" in sent
    assert len(sent) < len(render_prompt(ctx))
    shown_tools = [t["name"] for t in ctx["tools"] if f"- {t['name']}(" in sent]
    assert 0 < len(shown_tools) < len(ctx["tools"])  # the closest tools by meaning, not all
    # a ReAct context or an empty one keeps the prompt it came with
    await c.generate("REACT PROMPT", json.dumps({**ctx, "mode": "react"}), None)
    await c.generate("PLAIN", "{}", None)
    assert [s[1] for s in t.sent[1:]] == ["REACT PROMPT", "PLAIN"]


class _SlowModel:
    """A batched model answering each row with its text upper-cased, after `delay_s`; records batches."""

    def __init__(self, delay_s: float = 0.01, fail: bool = False):
        self.delay_s = delay_s
        self.fail = fail
        self.batches: list[list[str]] = []

    async def __call__(self, rows: list[tuple[str, str]], timeout_s: float) -> list[tuple[str, str | None]]:
        self.batches.append([text for text, _ in rows])
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise ConnectionError("UNAVAILABLE")
        return [(text.upper(), "stop") for text, _ in rows]


async def test_row_batcher_sends_at_once_when_idle_and_batches_under_load() -> None:
    from livehost.policy.client import RowBatcher

    model = _SlowModel()
    batcher = RowBatcher(model, max_rows=4, max_in_flight=2)
    assert await batcher.call(("alone", "{}"), 1.0) == ("ALONE", "stop")
    assert model.batches == [["alone"]]  # nothing waited
    answers = await asyncio.gather(*(batcher.call((f"c{i}", "{}"), 1.0) for i in range(10)))
    assert answers == [(f"C{i}", "stop") for i in range(10)]  # each caller its own row, in order
    later = model.batches[1:]
    assert [len(b) for b in later] == [1, 1, 4, 4]  # two out at once, the rest waited and went together
    assert sorted(t for b in later for t in b) == sorted(f"c{i}" for i in range(10))


async def test_row_batcher_fails_every_call_of_a_failed_request_and_skips_callers_that_gave_up() -> None:
    from livehost.policy.client import RowBatcher

    failing = RowBatcher(_SlowModel(fail=True), max_rows=8, max_in_flight=1)
    results = await asyncio.gather(*(failing.call((f"c{i}", "{}"), 1.0) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)

    model = _SlowModel(delay_s=0.05)
    batcher = RowBatcher(model, max_rows=8, max_in_flight=1)
    first = asyncio.ensure_future(batcher.call(("first", "{}"), 1.0))
    await asyncio.sleep(0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(batcher.call(("impatient", "{}"), 1.0), 0.01)  # waits behind "first", gives up
    kept = asyncio.ensure_future(batcher.call(("kept", "{}"), 1.0))
    assert await first == ("FIRST", "stop") and await kept == ("KEPT", "stop")
    assert model.batches == [["first"], ["kept"]]  # the caller that gave up was left out
