"""``livehost trajectories export`` against real PostgreSQL: every format validates, filters work,
harness tool definitions come from the registry (or the shipped folder), rewards when judged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from livehost.config import REPO_ROOT
from livehost.db import connect_pool, migrate
from livehost.harness.augment import augment
from livehost.harness.loader import load
from livehost.harness.registry import Registry
from livehost.training import formats
from livehost.training.cli import trajectories_app
from livehost.training.export import ExportFilter, export
from livehost.training.synthetic import fallback_script, good_script, retry_script, run_script
from services.trajectories.handlers import TrajectoryStore
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration
HARNESS = load(REPO_ROOT / "harness" / "default")
VARIANT = augment(HARNESS, seed=5).harness  # only in the registry
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
async def dsn(pg_server: str) -> AsyncIterator[str]:
    url = await create_database(pg_server)
    pool = await connect_pool(url, attempts=5)
    try:
        await migrate(pool)
        store = TrajectoryStore(pool)
        for i in range(300):  # room-a: good / retried / fallback, shipped harness
            script = [good_script, retry_script, fallback_script][i % 3](HARNESS)
            await store.save(run_script(HARNESS, script, i, room_id="room-a", created_ms=T0 + i * 1000))
        for i in range(20):  # room-b: the registry-only variant
            await store.save(run_script(VARIANT, good_script(VARIANT), 1000 + i, room_id="room-b",
                                        created_ms=T0 + 500_000 + i))
        registry = Registry(pool)
        await registry.push(VARIANT, author="test", message="hsa variant")
    finally:
        await pool.close()
    yield url


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


async def test_every_format_validates(dsn: str, tmp_path: Path) -> None:
    for fmt in formats.FORMATS:
        out = tmp_path / f"{fmt}.jsonl"
        stats = await export(dsn, fmt, out, prefetch=25, harness_folder=REPO_ROOT / "harness" / "default")
        lines = read(out)
        assert stats.rows == 320 and stats.written == len(lines)
        for i, line in enumerate(lines, 1):
            formats.validate(fmt, line, i)
    assert len(read(tmp_path / "raw.jsonl")) == 320
    assert len(read(tmp_path / "rl.jsonl")) == 320
    sft = read(tmp_path / "sft.jsonl")
    assert len(sft) == 200 + 20  # fallbacks hold no accepted final action
    retried = [x for x in sft if x["retries"]]
    assert retried and 0 < sum(not x["trimmed"] for x in retried) < len(retried) * 0.3  # ~10% kept whole


async def test_sft_tool_definitions_follow_the_harness_version(dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "sft.jsonl"
    await export(dsn, "sft", out, ExportFilter(room="room-b"), harness_folder=REPO_ROOT / "harness" / "default")
    lines = read(out)
    assert len(lines) == 20 and {x["harness_version"] for x in lines} == {VARIANT.version()}
    names = {t["function"]["name"] for t in lines[0]["tools"]}
    assert {t.name for t in VARIANT.tools} <= names and not {t.name for t in HARNESS.tools} & names
    called = {c["function"]["name"] for m in lines[0]["messages"] for c in m.get("tool_calls") or []}
    assert called <= names


async def test_filters(dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    s = await export(dsn, "raw", out, ExportFilter(harness_version=HARNESS.version()))
    assert s.written == 300
    s = await export(dsn, "raw", out, ExportFilter(since_ms=T0 + 100_000, until_ms=T0 + 200_000))
    assert s.written == 100 and all(T0 + 100_000 <= x["created_ms"] < T0 + 200_000 for x in read(out))
    s = await export(dsn, "raw", out, ExportFilter(room="room-a", only_passed=True))
    assert s.written == 200 and all(formats.passed(x) for x in read(out))


async def test_rewards_from_the_judge_table(dsn: str, tmp_path: Path) -> None:
    from livehost.training.rewards import JUDGE

    out = tmp_path / "rl.jsonl"
    stats = await export(dsn, "rl", out, ExportFilter(room="room-b"))
    # nothing scored yet: every request is scored during the export, with the trajectory judge
    assert stats.rewards_on_the_fly == 20 and stats.rewards_stored == 0
    assert all(x["reward"] is not None and x["reward"]["judge"] == JUDGE for x in read(out))
    conn = await asyncpg.connect(dsn)
    try:
        first = await conn.fetchval("SELECT request_id FROM trajectories WHERE room_id = 'room-b'"
                                    " ORDER BY created_ms LIMIT 1")
        await conn.execute("INSERT INTO trajectory_rewards (request_id, accuracy, effectiveness, tool_rationality,"
                           " skill_selection, judge) VALUES ($1, 1, 0.5, 0.75, 1, 'judge-v1')", first)
        await export(dsn, "rl", out, ExportFilter(room="room-b"))
    finally:
        await conn.execute("DELETE FROM trajectory_rewards")
        await conn.close()
    lines = read(out)
    judged = [x for x in lines if x["reward"]["judge"] == "judge-v1"]
    assert [x["request_id"] for x in judged] == [first]
    assert judged[0]["reward"] == {"accuracy": 1, "effectiveness": 0.5, "tool_rationality": 0.75,
                                   "skill_selection": 1, "judge": "judge-v1"}


def test_cli_and_a_malformed_line_aborts(dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "cli.jsonl"
    args = ["export", "--format", "sft", "--out", str(out), "--dsn", dsn, "--room", "room-a",
            "--since", "2023-11-14T22:13:20Z", "--keep-retries", "0", "--quiet"]
    res = CliRunner().invoke(trajectories_app, args)
    assert res.exit_code == 0, res.output
    lines = read(out)
    assert len(lines) == 200 and all(x["trimmed"] for x in lines if x["retries"])

    def broken(row: dict[str, Any], harness: Any, keep: float = 0.1) -> dict[str, Any] | None:
        line = real(row, harness, keep)
        if line is not None:
            line["messages"][0]["role"] = "narrator"
        return line

    real = formats.to_sft
    monkeypatch.setattr(formats, "to_sft", broken)
    bad = tmp_path / "bad.jsonl"
    res = CliRunner().invoke(trajectories_app, [*args[:4], str(bad), *args[5:]])
    assert res.exit_code == 3 and "does not match" in res.output
    assert not bad.exists() and not bad.with_name("bad.jsonl.partial").exists()


def test_an_unknown_harness_version_is_an_error(dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "none.jsonl"
    res = CliRunner().invoke(trajectories_app, ["export", "--format", "raw", "--out", str(out), "--dsn", dsn,
                                                "--harness-version", "0000000000000000", "--quiet"])
    assert res.exit_code == 2, res.output
    assert "no trajectory was recorded on harness version '0000000000000000'" in res.output
    assert HARNESS.version() in res.output and VARIANT.version() in res.output  # what there is instead
    assert not out.exists()
    # a unique prefix names a recorded version
    res = CliRunner().invoke(trajectories_app, ["export", "--format", "raw", "--out", str(out), "--dsn", dsn,
                                                "--harness-version", VARIANT.version()[:8], "--quiet"])
    assert res.exit_code == 0, res.output
    assert {x["harness_version"] for x in read(out)} == {VARIANT.version()} and len(read(out)) == 20
