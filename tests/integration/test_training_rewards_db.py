"""``livehost trajectories score`` against real PostgreSQL: rewards land in trajectory_rewards (migration
032), scoring is idempotent (``--rescore`` overwrites), filters apply, and the RL export then carries
the reward components and validates against schemas/export/rl.json."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from livehost.config import REPO_ROOT
from livehost.db import connect_pool, migrate
from livehost.harness.loader import load
from livehost.training import formats
from livehost.training.cli import trajectories_app
from livehost.training.export import ExportFilter, export
from livehost.training.rewards import JUDGE, REWARD_COLUMNS, score_stored, score_trajectory
from livehost.training.synthetic import fallback_script, good_script, retry_script, run_script
from services.trajectories.handlers import TrajectoryStore
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration
FOLDER = REPO_ROOT / "harness" / "default"
HARNESS = load(FOLDER)
T0 = 1_700_000_000_000
SCRIPTS = [good_script, retry_script, fallback_script]
ROWS = [run_script(HARNESS, SCRIPTS[i % 3](HARNESS), i, room_id="room-a" if i < 30 else "room-b",
                   created_ms=T0 + i * 1000) for i in range(40)]


@pytest.fixture(scope="module")
async def dsn(pg_server: str) -> AsyncIterator[str]:
    url = await create_database(pg_server)
    pool = await connect_pool(url, attempts=5)
    try:
        applied = await migrate(pool)
        assert "032_trajectory_rewards.sql" in applied
        store = TrajectoryStore(pool)
        for row in ROWS:
            assert await store.save(row)
    finally:
        await pool.close()
    yield url


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def stored(dsn: str) -> dict[str, dict[str, Any]]:
    return asyncio.run(_stored(dsn))


async def _stored(dsn: str) -> dict[str, dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT * FROM trajectory_rewards")
    finally:
        await conn.close()
    return {r["request_id"]: dict(r) for r in rows}


async def _execute(dsn: str, sql: str, *args: Any) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


def cli(dsn: str, *args: str) -> str:
    res = CliRunner().invoke(trajectories_app, ["score", "--dsn", dsn, "--harness-folder", str(FOLDER), "--quiet",
                                                *args])
    assert res.exit_code == 0, res.output
    return res.output


def test_score_then_rl_export_carries_rewards(dsn: str, tmp_path: Path) -> None:
    out = cli(dsn, "--room", "room-a")
    assert "scored 30 of 30" in out and JUDGE in out and "accuracy" in out and "skill_selection" in out
    rewards = stored(dsn)
    assert len(rewards) == 30
    by_id = {r["request_id"]: r for r in ROWS}
    for rid, rec in rewards.items():
        assert by_id[rid]["room_id"] == "room-a" and rec["judge"] == JUDGE and rec["scored_at"] is not None
        expected = score_trajectory(by_id[rid], HARNESS)
        assert rec["accuracy"] == expected.accuracy and rec["effectiveness"] == expected.effectiveness
        assert rec["tool_rationality"] == pytest.approx(expected.tool_rationality, abs=1e-6)
        assert rec["skill_selection"] == expected.skill_selection
        assert json.loads(rec["reasons"]) == json.loads(json.dumps(expected.reasons))

    path = tmp_path / "rl.jsonl"
    stats = asyncio.run(export(dsn, "rl", path, harness_folder=FOLDER))
    lines = read(path)
    assert stats.written == len(lines) == 40
    for i, line in enumerate(lines, 1):
        formats.validate("rl", line, i)
    judged = {x["request_id"]: x["reward"] for x in lines if x["reward"] is not None}
    # The 30 scored requests carry their stored rewards; the 10 of room-b, never scored, are scored
    # during the export with the same judge (no null reward in an RL export).
    assert set(judged) == {r["request_id"] for r in ROWS}
    assert stats.rewards_on_the_fly == 10
    for rid, reward in judged.items():
        assert set(reward) == {*REWARD_COLUMNS, "judge"} and reward["judge"] == JUDGE
        expected = score_trajectory(by_id[rid], HARNESS)
        assert reward["accuracy"] == expected.accuracy and reward["effectiveness"] == expected.effectiveness
        assert reward["skill_selection"] == expected.skill_selection
    full = {"accuracy": 1, "effectiveness": 1, "tool_rationality": 1, "skill_selection": 1, "judge": JUDGE}
    assert all(judged[ROWS[i]["request_id"]] == full for i in range(0, 30, 3))  # good script
    assert all(judged[ROWS[i]["request_id"]]["skill_selection"] == 0.5 for i in range(1, 30, 3))  # corrected
    assert all(judged[ROWS[i]["request_id"]]["effectiveness"] == 0 for i in range(2, 30, 3))  # fallback


def test_idempotent_rescore_and_filters(dsn: str) -> None:
    cli(dsn, "--room", "room-a")  # (again, in case this test runs alone)
    before = stored(dsn)
    out = cli(dsn, "--room", "room-a")
    assert "scored 0 of 30" in out and "30 already scored" in out
    assert stored(dsn) == before

    victim = sorted(before)[0]
    asyncio.run(_execute(dsn, "UPDATE trajectory_rewards SET accuracy = 0, judge = 'other' WHERE request_id = $1",
                         victim))
    cli(dsn, "--room", "room-a")
    assert (stored(dsn))[victim]["judge"] == "other"  # kept without --rescore
    out = cli(dsn, "--room", "room-a", "--rescore")
    assert "scored 30 of 30" in out
    after = stored(dsn)
    assert after[victim]["judge"] == JUDGE and after[victim]["accuracy"] == before[victim]["accuracy"]
    assert after[victim]["scored_at"] > before[victim]["scored_at"]

    flt = ExportFilter(room="room-b", since_ms=T0 + 35_000, until_ms=T0 + 38_000)
    stats = asyncio.run(score_stored(dsn, flt, harness_folder=FOLDER))
    assert (stats.matched, stats.scored, stats.kept, stats.rewarded) == (3, 3, 0, 3)
    assert set(stats.means) == set(REWARD_COLUMNS)
    assert all(v is None or 0 <= v <= 1 for v in stats.means.values())
    out = cli(dsn, "--harness-version", HARNESS.version())
    assert "scored 7 of 40" in out and "33 already scored" in out
    assert len(stored(dsn)) == 40


def test_stored_trajectories_are_lz4_compressed_and_read_back_whole(dsn: str) -> None:
    """Migration 090: a served request's steps are stored with lz4 (PostgreSQL's pglz cost the server
    three times the CPU per row), and what is read back is what was stored."""

    async def check() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            got = {r["request_id"]: r for r in await conn.fetch(
                "SELECT request_id, pg_column_compression(steps) AS method, steps FROM trajectories")}
        finally:
            await conn.close()
        # only values PostgreSQL compressed name a method (a small one is stored as it is)
        methods = {r["method"] for r in got.values() if r["method"] is not None}
        assert methods == {"lz4"}, methods
        for row in ROWS:
            assert json.loads(got[row["request_id"]]["steps"]) == row["steps"]

    asyncio.run(check())
