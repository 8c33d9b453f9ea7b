"""Runs evaluation cases through the real request path, in process.

For each case (eval/CASES.md) the runner loads the case's catalog into a fresh sandbox scope
and its faults into ``sandbox_faults`` (livehost.agent.sandbox), puts the scope (and the policy)
into the room state, and then drives exactly the handler classes the services run:

    HooksHandler.on_room_event / flush   merge (the case's offset_ms) + input hooks + room queue
    PromptHandler.next_prompt            prompt pipeline on PostgresFacts in the case's scope
    PolicyHandler.act                    the policy on Triton (PolicyClient, retries + breaker)
    HooksHandler.on_action               step hooks and routing (after_action)
    ToolsHandler.on_call                 tools (ToolExecutor) in the case's scope with its faults

until every request of the case reached a terminal outcome. The Kafka hops between the services
are the only thing skipped: each record a handler would publish is handed straight to the handler
that would consume it. Merge windows are evaluated in virtual time on the case's offsets (no
sleeping) as a discrete-event run: a virtual clock jumps to the next comment or window close when
idle and runs with the wall clock while handlers work; one worker takes one hop at a time, so
requests formed while the room is busy wait in the room queue, and deadlines and stale-work
cancellation see real processing time. ``latency_ms`` is the wall time the handlers spent on the
case; ``stages`` has the per-request end-to-end time (event time: merge wait and queueing
included), the merge wait per request and the per-call stage times (prompt, policy, tools, hooks).
With ``agent="react"`` the same path runs
the ReAct baseline (policy ``react:<model>``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import asyncpg

from livehost.agent import state as st
from livehost.agent.sandbox import PostgresFaults, close_case, open_case
from livehost.commerce.executor import ToolExecutor
from livehost.commerce.store import CommerceStore
from livehost.config import Settings
from livehost.harness.loader import load
from livehost.harness.model import Harness
from livehost.harness.provider import StaticHarnessProvider
from livehost.kafka import now_ms
from livehost.topics import REPLIES, REQUESTS, TOOL_CALLS
from services.hooks.handlers import Emit, Handled, HooksHandler
from services.policy.handlers import Generator, PolicyHandler
from services.prompt.clients import PostgresFacts
from services.prompt.handlers import PromptHandler
from services.tools.handlers import ToolsHandler

Agent = Literal["harness", "react"]
MAX_HOPS = 200  # records per case before the runner gives up (a routing loop would be a bug)


@dataclass
class Timings:
    merge_wait: list[float] = field(default_factory=list)
    hooks: list[float] = field(default_factory=list)


class VirtualClock:
    """Event time of the simulation: jumps to the next comment or window close when idle, and runs
    with the wall clock while handlers work (so deadlines and queueing see real processing time)."""

    def __init__(self, start_ms: int):
        self.anchor(start_ms)

    def anchor(self, t_ms: int) -> None:
        self._t = t_ms
        self._p = time.perf_counter()

    def __call__(self) -> int:
        return self._t + int((time.perf_counter() - self._p) * 1000)

    def advance_to(self, t_ms: int) -> None:
        if t_ms > self():
            self.anchor(t_ms)


@dataclass
class _Run:
    hooks: HooksHandler
    clock: VirtualClock
    pending: deque[Emit] = field(default_factory=deque)
    terminals: list[dict[str, Any]] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    busy_ms: float = 0.0

    async def hooks_call(self, call: Callable[[], Awaitable[Handled]]) -> Handled:
        started = time.perf_counter()
        done = await call()
        self.timings.hooks.append(round((time.perf_counter() - started) * 1000, 3))
        self.pending.extend(done.emits)
        return done

    def _known(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for sched in self.hooks.schedules.values():
            for q in sched.queue:
                out[q.state["request_id"]] = q.state
            if sched.in_flight is not None:
                out[sched.in_flight["request_id"]] = sched.in_flight
        return out

    async def flush(self, at_ms: int) -> None:
        """Close the windows due at ``at_ms``; the merge wait of each request formed (started or queued)."""
        before = self._known()
        done = await self.hooks_call(partial(self.hooks.flush, at_ms))
        formed = {e.record["state"]["request_id"]: e.record["state"] for e in done.emits
                  if e.topic.name == REQUESTS.name}
        formed.update({rid: s for rid, s in self._known().items() if rid not in before})
        self.timings.merge_wait += [float(at_ms - int(s["created_ms"])) for s in formed.values()]


def policy_field(policy: str, agent: Agent) -> str:
    return f"{st.REACT_PREFIX}{policy}" if agent == "react" else policy


class CaseRunner:
    """One harness, one policy model, one agent kind; cases run independently (own scope, own room)."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool, harness: Harness,
                 generators: dict[str, Generator], *, policy: str = "policy_reference", agent: Agent = "harness",
                 unavailable: tuple[type[BaseException], ...] = (),
                 sampling: dict[str, Any] | None = None):
        from services.policy.clients import UNAVAILABLE

        self.settings = settings
        self.pool = pool
        self.harness = harness
        self.policy = policy
        self.agent: Agent = agent
        self.provider = StaticHarnessProvider(harness)
        self.faults = PostgresFaults(pool)
        self.prompts = PromptHandler(self.provider, PostgresFacts(pool))
        self.policies = PolicyHandler(generators, policy, unavailable or UNAVAILABLE, sampling)
        self.tools = ToolsHandler(self.provider, ToolExecutor(CommerceStore(pool)), self.faults)

    async def run_case(self, case: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        scope = await open_case(self.pool, case, self.faults)
        try:
            terminals, timings, wall_ms = await self._drive(case, scope)
        finally:
            await close_case(self.pool, scope, self.faults)
        result = build_result(case, self.harness.version(), policy_field(self.policy, self.agent), terminals,
                              timings, wall_ms)
        result["runner_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return result

    async def _drive(self, case: dict[str, Any], scope: str) -> tuple[list[dict[str, Any]], Timings, float]:
        """A discrete-event run of one room: comments arrive at their offsets, merge windows close on
        time, and one worker takes one hop (prompt -> policy -> hooks, or tool -> prompt -> policy ->
        hooks) at a time, so requests formed while the room is busy wait in the room queue."""
        room = dict(case["room"])
        room_id = str(room["room_id"])
        room.update({"room_id": room_id, "scope": scope, "policy": policy_field(self.policy, self.agent)})
        hooks = HooksHandler(self.settings, self.provider, {room_id: json.dumps(room, sort_keys=True)})
        run = _Run(hooks, VirtualClock(now_ms()))
        base = run.clock()
        arrivals: deque[dict[str, Any]] = deque(
            {"event_id": f"{case.get('id', 'case')}-c{i}", "room_id": room_id, "type": "comment",
             "user_id": c.get("user_id") or "anonymous", "text": c.get("text") or "",
             "ts_ms": base + int(c.get("offset_ms") or 0)}
            for i, c in enumerate(case.get("comments") or []))
        hops = 0
        while True:
            now = run.clock()
            due = hooks.merger.next_due_ms()
            arrival = arrivals[0]["ts_ms"] if arrivals else None
            if due is not None and due <= now and (arrival is None or due <= arrival):
                await run.flush(due)  # the window closed at its time
            elif arrival is not None and arrival <= now:
                event = arrivals.popleft()
                await run.hooks_call(partial(hooks.on_room_event, event, event["ts_ms"]))
            elif run.pending:
                hops += 1
                if hops > MAX_HOPS:
                    raise RuntimeError(f"case {case.get('id')}: more than {MAX_HOPS} hops")
                await self._hop(run)
            else:
                upcoming = [t for t in (due, arrival) if t is not None]
                if not upcoming:
                    break
                run.clock.advance_to(min(upcoming))
        return run.terminals, run.timings, run.busy_ms

    async def _hop(self, run: _Run) -> None:
        """Hand one record to the handler that would consume it (and the result on to the next one)."""
        started = time.perf_counter()
        emit = run.pending.popleft()
        if emit.topic.name == REPLIES.name:
            run.terminals.append(emit.record)
            return
        state = emit.record["state"]
        if emit.topic.name == TOOL_CALLS.name:
            state = (await self.tools.on_call(emit.record))["state"]
        elif emit.topic.name != REQUESTS.name:
            raise RuntimeError(f"unexpected record for topic {emit.topic.name}")
        prompt = await self.prompts.next_prompt(state)
        action = await self.policies.act(prompt)
        await run.hooks_call(partial(run.hooks.on_action, action, run.clock()))
        run.busy_ms += (time.perf_counter() - started) * 1000

    async def run_all(self, cases: Iterable[dict[str, Any]], concurrency: int = 4,
                      on_result: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Every case (at most ``concurrency`` at once); results in case order. A case that cannot run
        (bad catalog, broken backend) gets a result line with ``error`` instead of stopping the run."""
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(case: dict[str, Any]) -> dict[str, Any]:
            async with gate:
                try:
                    result = await self.run_case(case)
                except Exception as exc:  # noqa: BLE001 - reported per case
                    result = {"id": str(case.get("id", "")), "harness_version": self.harness.version(),
                              "policy": policy_field(self.policy, self.agent), "responded": False, "reply": None,
                              "skills_loaded": [], "tool_calls": [], "hook_events": [], "turns": 0,
                              "latency_ms": None, "scores": None, "error": f"{type(exc).__name__}: {exc}"}
            if on_result is not None:
                on_result(result)
            return result

        return list(await asyncio.gather(*(one(c) for c in cases)))


def build_result(case: dict[str, Any], harness_version: str, policy: str, terminals: list[dict[str, Any]],
                 timings: Timings, wall_ms: float) -> dict[str, Any]:
    """One result line (CASES.md) from the terminal records of a case's requests."""
    spoken = [t for t in terminals if t["outcome"] in ("reply", "fallback") and t.get("text")]
    skills: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    hook_events: list[dict[str, Any]] = []
    turns = 0
    action_kinds: list[str] = []
    stages: dict[str, list[float]] = {
        "end_to_end": [float(t["completed_ms"] - t["state"]["created_ms"]) for t in terminals],
        "merge_wait": timings.merge_wait, "prompt": [], "policy": [], "tools": [], "hooks": timings.hooks}
    for term in terminals:
        state = term["state"]
        for sid in state.get("loaded_skills") or []:
            if sid not in skills:
                skills.append(sid)
        results = {s["data"].get("call_id"): s["data"] for s in st.steps(state, "tool_result")}
        for step in st.steps(state):
            data, kind = step["data"], step["kind"]
            if kind == "tool_call":
                res = results.get(data.get("call_id"))
                tool_calls.append({"name": data.get("tool"), "arguments": data.get("arguments") or {},
                                   "ok": bool(res and res.get("ok")),
                                   **({"error": res.get("error_code")} if res and not res.get("ok") else {})})
            elif kind in ("input_hook", "hook_verdict"):
                hook_events.append({"hook": step["name"], "verdict": data.get("verdict"),
                                    "reason": data.get("reason") or None})
            elif kind == "model_output":
                turns += 1
                if data.get("error"):
                    action_kinds.append("unavailable")
            elif kind == "action":
                action_kinds.append(str(data.get("kind")))
            stage = {"prompt": "prompt", "model_output": "policy", "tool_result": "tools"}.get(kind)
            if stage and step.get("duration_ms") is not None:
                stages[stage].append(round(float(step["duration_ms"]), 3))
    return {
        "id": str(case.get("id", "")),
        "harness_version": harness_version,
        "policy": policy,
        "responded": bool(spoken),
        "reply": " ".join(t["text"] for t in spoken) if spoken else None,
        "skills_loaded": skills,
        "tool_calls": tool_calls,
        "hook_events": hook_events,
        "turns": turns,
        "latency_ms": round(wall_ms, 1),
        "scores": None,
        "action_kinds": action_kinds,  # parsed kind of every policy turn ("invalid": unparseable output)
        "outcomes": [{"outcome": t["outcome"], "reason": t.get("reason")} for t in terminals],
        "stages": stages,
    }


def read_cases(path: Path | str) -> list[dict[str, Any]]:
    from livehost.eval.cases import is_sealed

    if is_sealed(path):
        raise ValueError(f"{path}: the sealed holdout is scored only by the release evaluation (make release-eval)")
    cases = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                cases.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON: {exc}") from None
    return cases


async def resolve_harness(ref: str | None, settings: Settings, pool: asyncpg.Pool) -> Harness:
    """A harness folder (path), a registry version (or unique prefix), or — when ``ref`` is None — the
    registry's globally active version, else the shipped folder (``settings.harness_path``)."""
    from livehost.harness.registry import Registry

    if ref and Path(ref).exists():
        return load(ref)
    registry = Registry(pool)
    if ref:
        return await registry.harness(ref)
    try:
        active = await registry.active()
    except asyncpg.PostgresError:
        active = None
    if active is not None and active.version:
        return await registry.harness(active.version)
    return load(settings.harness_path)


async def run_file(settings: Settings, cases_path: Path | str, out_path: Path | str, *, harness: str | None = None,
                   policy: str = "policy_reference", agent: Agent = "harness", concurrency: int = 4,
                   on_result: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """``livehost eval run``: every case of a file through the request path; writes one line per case."""
    from livehost.db import connect_pool, migrate
    from livehost.policy.client import PolicyClient

    cases = read_cases(cases_path)
    pool = await connect_pool(settings.postgres_dsn, attempts=10, max_size=max(5, concurrency * 2 + 2))
    client = PolicyClient(settings.triton_url, policy, timeout_s=settings.policy_timeout_s,
                          retries=settings.policy_retries)
    try:
        await migrate(pool)
        chosen = await resolve_harness(harness, settings, pool)
        runner = CaseRunner(settings, pool, chosen, {policy: client}, policy=policy, agent=agent)
        results = await runner.run_all(cases, concurrency, on_result)
    finally:
        await client.close()
        await pool.close()
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in results),
                   encoding="utf-8")
    return results
