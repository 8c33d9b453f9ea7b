"""A running A/B experiment routes each viewer to their arm on live traffic: a harness version or the
ReAct baseline, stable per user, each exposure logged once."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from livehost.experiments.assign import REACT_BASELINE, Arm
from livehost.experiments.store import ExperimentStore
from livehost.harness.loader import load
from livehost.harness.registry import Registry
from services.hooks.clients import REFRESH_S
from tests.e2e.conftest import System
from tests.e2e.test_end_to_end import publish_comment, reply_for

pytestmark = pytest.mark.e2e


async def test_live_experiment_assigns_users_to_arms(system: System) -> None:
    shipped = load(system.settings.harness_path)
    registry = await Registry.connect(system.settings.postgres_dsn)
    await registry.push(shipped, author="ops-alice", message="shipped harness")
    await registry.close()
    store = await ExperimentStore.connect(system.settings.postgres_dsn)
    name = f"react-vs-harness-{uuid.uuid4().hex[:6]}"
    exp = await store.create(name, [Arm("control", shipped.version(), 0.5), Arm("react", REACT_BASELINE, 0.5)],
                             created_by="ops-alice")
    await store.start(name)
    try:
        await asyncio.sleep(REFRESH_S + 1)  # the hooks processor re-reads running experiments
        # four viewers per arm (the experiment's name is random, so a fixed list of users could all
        # hash to one arm: 1 run in 128)
        by_arm: dict[str, list[str]] = {"control": [], "react": []}
        for i in range(256):
            user = f"exp-user-{i}"
            arm = exp.assign(user)[0].name
            if len(by_arm[arm]) < 4:
                by_arm[arm].append(user)
        users = by_arm["control"] + by_arm["react"]
        expected = {u: exp.assign(u)[0].name for u in users}
        assert len(users) == 8 and set(expected.values()) == {"control", "react"}, "users covering both arms"
        replies = {}
        for user in users:
            event_id = await publish_comment(system, "room-b", user, "how much is the kettle on link 2?")
            replies[user] = await reply_for(system, event_id)
        # The same viewer again keeps their arm.
        again = await reply_for(system, await publish_comment(system, "room-b", users[0], "and link 3?"))
    finally:
        await store.stop(name)
        await store.close()
    for user, reply in replies.items():
        assert reply is not None and reply["outcome"] == "reply", (user, reply)
        policy = reply["state"]["policy"]
        if expected[user] == "react":
            assert policy.startswith("react:"), (user, policy)
            assert not reply["state"]["loaded_skills"]
        else:
            assert not policy.startswith("react:"), (user, policy)
            assert reply["state"]["harness_version"] == shipped.version()
        assert "129" in reply["text"]
    assert again is not None and again["state"]["policy"] == replies[users[0]]["state"]["policy"]
    conn = await asyncpg.connect(system.settings.postgres_dsn)
    try:
        rows = await conn.fetch("SELECT user_id, arm FROM experiment_exposures WHERE experiment = $1", name)
    finally:
        await conn.close()
    assert {r["user_id"]: r["arm"] for r in rows} == expected  # exactly one exposure per user, the right arm
