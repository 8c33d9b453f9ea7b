"""``livehost eval run`` end to end on real PostgreSQL and Triton: every sample case through merge,
input hooks, prompt assembly, the policy on Triton, sandbox tools (with the case's faults) and step
hooks — under the shipped harness and under a harness where every name was changed."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from livehost.agent import state as st
from livehost.agent.sandbox import PostgresFaults, close_case, open_case
from livehost.commerce.executor import ToolExecutor
from livehost.commerce.store import CommerceStore
from livehost.config import REPO_ROOT, Settings
from livehost.db import connect_pool, migrate
from livehost.harness.augment import rename_everything
from livehost.harness.loader import dump, load
from livehost.harness.provider import StaticHarnessProvider
from livehost.runner.cli import app
from livehost.runner.expect import check
from livehost.stack.testing import running_postgres, running_triton
from services.prompt.clients import PostgresFacts
from services.tools.handlers import ToolsHandler

pytestmark = pytest.mark.integration

CASES_PATH = REPO_ROOT / "tests" / "data" / "sample_cases.jsonl"
CASES = [json.loads(line) for line in CASES_PATH.read_text().splitlines() if line.strip()]
BY_ID = {c["id"]: c for c in CASES}
HARNESS = load(REPO_ROOT / "harness" / "default")
RESULT_SCHEMA = json.loads((REPO_ROOT / "schemas" / "eval" / "result.json").read_text())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    root = tmp_path_factory.mktemp("runner")
    with running_postgres(root) as dsn, \
            running_triton(root, REPO_ROOT / "infra" / "triton" / "models", timeout=120) as triton_url:
        env = {"LIVEHOST_POSTGRES_DSN": dsn, "LIVEHOST_TRITON_URL": triton_url,
               "LIVEHOST_STATE_DIR": str(root / "state")}
        old = dict(os.environ)
        os.environ.update(env)
        try:
            yield Settings(postgres_dsn=dsn, triton_url=triton_url)
        finally:
            os.environ.clear()
            os.environ.update(old)


def run_cli(tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(app, ["run", "--cases", str(CASES_PATH), "--out", str(out), *extra])
    assert result.exit_code == 0, result.output + repr(result.exception)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == [c["id"] for c in CASES]
    for r in lines:
        jsonschema.validate(r, RESULT_SCHEMA)
        assert r["scores"] is None and "error" not in r
    return lines


def capability_of(harness_dir: Path | None, tool: str) -> str:
    from livehost.commerce.operations import OPERATIONS

    harness = load(harness_dir) if harness_dir else HARNESS
    t = harness.tool(tool)
    assert t is not None, tool
    return OPERATIONS[t.binding.operation].capability


def assert_sample_results(results: list[dict[str, Any]], harness_dir: Path | None = None) -> None:
    harness = load(harness_dir) if harness_dir else HARNESS
    reply_skills = {s.id for s in harness.skills if s.kind == "reply"}
    for r in results:
        case = BY_ID[r["id"]]
        verdict = check(case, r)
        assert verdict["passed"], (r["id"], verdict, r["reply"], r["outcomes"])
        if r["responded"]:
            assert set(r["skills_loaded"]) & reply_skills, r  # the skill-load requirement held
            assert all(c["name"] in {t.name for t in harness.tools} for c in r["tool_calls"])
    injection = next(r for r in results if BY_ID[r["id"]]["category"] == "injection")
    assert not injection["responded"] and injection["reply"] is None
    assert any(e["verdict"] in ("drop", "reject") for e in injection["hook_events"])
    fault = next(r for r in results if BY_ID[r["id"]].get("faults"))
    (capability, kind), = BY_ID[fault["id"]]["faults"].items()
    failed = [c for c in fault["tool_calls"] if capability_of(harness_dir, c["name"]) == capability]
    assert failed and all(not c["ok"] and c.get("error") == kind for c in failed)
    stock = str(BY_ID[fault["id"]]["catalog"][0]["stock"])
    assert stock not in (fault["reply"] or ""), fault["reply"]  # the missing stock is not invented
    merge = next(r for r in results if len(BY_ID[r["id"]]["comments"]) > 1)
    assert len(merge["outcomes"]) == 1  # close comments merged into one request


def test_eval_run_sample_cases_with_the_reference_policy(stack: Settings, tmp_path: Path) -> None:
    results = run_cli(tmp_path, "--harness", str(REPO_ROOT / "harness" / "default"))
    assert_sample_results(results)
    assert {r["harness_version"] for r in results} == {HARNESS.version()}
    assert {r["policy"] for r in results} == {"policy_reference"}
    price = BY_ID["sample-price-01"]
    assert price and next(r for r in results if r["id"] == price["id"])["turns"] >= 2
    # the shipped tool-argument hook corrects the call for a link beyond the schema's maximum; the
    # policy's retry is another step (no repeat of the corrected call), and the case passes
    corrected = next(r for r in results if r["id"] == "sample-correction-01")
    arg_hook = next(h.id for h in HARNESS.hooks if h.kind == "tool_arguments")
    assert [e["hook"] for e in corrected["hook_events"] if e["verdict"] == "correct"] == [arg_hook], corrected
    assert corrected["responded"] and not corrected["tool_calls"], corrected


def test_eval_run_under_a_renamed_harness_passes_the_same(stack: Settings, tmp_path: Path) -> None:
    renamed, _ = rename_everything(HARNESS, seed=7)
    folder = dump(renamed, tmp_path / "renamed")
    results = run_cli(tmp_path, "--harness", str(folder), "--concurrency", "3")
    assert_sample_results(results, folder)
    assert {r["harness_version"] for r in results} == {load(folder).version()}
    shipped_tools = {t.name for t in HARNESS.tools}
    assert not {c["name"] for r in results for c in r["tool_calls"]} & shipped_tools


def test_react_baseline_runs_without_skills(stack: Settings, tmp_path: Path) -> None:
    results = run_cli(tmp_path, "--harness", str(REPO_ROOT / "harness" / "default"), "--agent", "react")
    assert {r["policy"] for r in results} == {"react:policy_reference"}
    for r in results:
        case = BY_ID[r["id"]]
        assert r["skills_loaded"] == [] and r["hook_events"] == []
        if case["expect"]["respond"]:
            assert r["responded"] and r["reply"], r
        else:
            assert not r["responded"], r
    assert any(r["tool_calls"] for r in results)


async def _with_pool(settings: Settings, fn: Any) -> Any:
    pool = await connect_pool(settings.postgres_dsn, attempts=5)
    try:
        await migrate(pool)
        return await fn(pool)
    finally:
        await pool.close()


def test_sandbox_faults_apply_per_scope_in_the_tools_service_handler(stack: Settings) -> None:
    """The tools service reads a scope's faults from PostgreSQL: the faulty case's scope times out,
    another case's scope and the live scope do not."""
    faulty = BY_ID["sample-fault-01"]
    clean = {**faulty, "id": "clean-copy", "faults": {}}
    tool = next(t for t in HARNESS.tools if t.binding.operation == "inventory.get")

    async def go(pool: Any) -> None:
        faults = PostgresFaults(pool)
        handler = ToolsHandler(StaticHarnessProvider(HARNESS), ToolExecutor(CommerceStore(pool)), faults)
        scopes = [await open_case(pool, faulty, faults), await open_case(pool, clean, faults)]
        try:
            assert await faults.faults_for(scopes[0]) == {"inventory": "timeout"}
            link = faulty["room"]["current_link"]
            outcomes = [await handler.execute(HARNESS.version(), tool.name, {"link_id": link}, "room-b", "u-1",
                                              f"r-{i}", None, scope=scope) for i, scope in enumerate(scopes)]
            assert outcomes[0].error_code == "timeout" and outcomes[0].fault == "timeout"
            assert outcomes[1].ok and outcomes[1].result["stock"] == faulty["catalog"][0]["stock"]
            facts = PostgresFacts(pool)
            product = await facts.product("room-b", link, scope=scopes[1])
            assert product is not None and product["sku"] == faulty["catalog"][0]["sku"]
            assert await facts.product("room-b", link) is None  # not in the live scope
            assert await facts.memory("room-b", 5, scope=scopes[1]) == []
        finally:
            for scope in scopes:
                await close_case(pool, scope, faults)
        assert await faults.faults_for(scopes[0]) == {}
        with pytest.raises(ValueError):
            await faults.set(st.LIVE_SCOPE, {"inventory": "timeout"})

    asyncio.run(_with_pool(stack, go))


def test_redelivered_coupon_call_issues_one_coupon(stack: Settings) -> None:
    """A duplicate delivery of the same ToolCall record (at-least-once Kafka) issues one coupon."""
    case = {**BY_ID["sample-price-01"], "id": "coupon-dup"}
    tool = next(t for t in HARNESS.tools if t.binding.operation == "coupon.issue")
    code = case["catalog"][0]["coupons"][0]["code"]

    async def go(pool: Any) -> None:
        faults = PostgresFaults(pool)
        handler = ToolsHandler(StaticHarnessProvider(HARNESS), ToolExecutor(CommerceStore(pool)), faults)
        scope = await open_case(pool, case, faults)
        try:
            room = {**case["room"], "scope": scope}
            state = st.new_state(room_id=room["room_id"], harness_version=HARNESS.version(),
                                 comments=[{"event_id": "e1", "user_id": "u-9", "text": "coupon pls", "ts_ms": 1}],
                                 room=room, ttl_ms=10_000, time_budget_ms=8_000)
            call = {"state": state, "call_id": "c-1", "tool": tool.name,
                    "arguments_json": json.dumps({next(iter(tool.parameters["properties"])): code}),
                    "idempotency_key": "key-1"}
            first, second = await handler.on_call(call), await handler.on_call(call)
            assert first["ok"] and second["ok"]
            assert json.loads(first["result_json"]) == json.loads(second["result_json"])
            grants = await pool.fetchval("SELECT count(*) FROM coupon_grants WHERE scope = $1", scope)
            assert grants == 1
        finally:
            await close_case(pool, scope, faults)

    asyncio.run(_with_pool(stack, go))


def test_cli_prints_a_summary_and_lists_cases_only_when_verbose(stack: Settings, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    quiet = CliRunner().invoke(app, ["run", "--cases", str(CASES_PATH), "--out", str(out)], terminal_width=120)
    assert quiet.exit_code == 0, quiet.output
    lines = quiet.output.splitlines()
    assert not any(line.startswith(f"{c['id']}:") for c in CASES for line in lines), quiet.output
    results = [json.loads(line) for line in out.read_text().splitlines()]
    passed = sum(check(BY_ID[r["id"]], r)["passed"] for r in results)
    assert f"expect block passed │ {passed} of {len(CASES)}" in " ".join(quiet.output.split()).replace("  ", " ")
    assert "livehost eval judge --results" in quiet.output
    verbose = CliRunner().invoke(app, ["run", "--cases", str(CASES_PATH), "--out", str(out), "--verbose"],
                                 terminal_width=200)
    assert verbose.exit_code == 0, verbose.output
    assert all(any(line.startswith(f"{c['id']}:") for line in verbose.output.splitlines()) for c in CASES)
