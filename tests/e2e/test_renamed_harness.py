"""Renaming every skill, tool, tool argument, hook and prompt section keeps the whole system working.

Runs last in the e2e session (file order), and rolls the activation back at the end.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from livehost.harness.augment import rename_everything
from livehost.harness.hotreload import KafkaHarnessPublisher
from livehost.harness.loader import load
from livehost.harness.registry import Registry
from tests.e2e.conftest import System
from tests.e2e.test_end_to_end import publish_comment, reply_for

pytestmark = pytest.mark.e2e


async def test_renamed_harness_runs_end_to_end(system: System) -> None:
    shipped = load(system.settings.harness_path)
    renamed, renaming = rename_everything(shipped, seed=7)
    assert not set(renaming.tools.values()) & {t.name for t in shipped.tools}
    publisher = KafkaHarnessPublisher(system.settings)
    await publisher.start()
    registry = await Registry.connect(system.settings.postgres_dsn, publisher=publisher)
    try:
        for harness, message in ((shipped, "shipped harness"), (renamed, "rename everything")):
            pushed = await registry.push(harness, author="ops-alice", message=message)
            proposal = await registry.propose(pushed.version, author="ops-alice", message=message)
            await registry.review(proposal.id, reviewer="ops-bob", decision="approve")
            await registry.activate(pushed.version, actor="ops-bob", force=True,
                                    reason="e2e: no evaluation set in this test")
        await asyncio.sleep(2.0)  # replicas switch within 2 s of the announcement
        event_id = await publish_comment(system, "room-a", "u-200", "how much is link 3?")
        reply = await reply_for(system, event_id)
        assert reply is not None and reply["outcome"] == "reply", reply
        assert "299" in reply["text"]
        assert reply["state"]["harness_version"] == renamed.version()
        # an experiment another test stopped routes nobody (its ReAct arm would load no skill)
        assert not str(reply["state"].get("policy") or "").startswith("react:"), reply["state"].get("policy")
        steps = reply["state"]["steps"]
        called = {json.loads(s["data_json"])["tool"] for s in steps if s["kind"] == "tool_call"}
        loaded = {s["name"] for s in steps if s["kind"] == "skill_load"}
        assert called and called <= set(renaming.tools.values())
        assert loaded and loaded <= set(renaming.skills.values()), [(s["kind"], s["name"]) for s in steps]
        args = [json.loads(s["data_json"])["arguments"] for s in steps if s["kind"] == "tool_call"]
        new_arg_names = {a for m in renaming.arguments.values() for a in m.values()}
        assert all(set(a) <= new_arg_names for a in args)
    finally:
        # the shipped version was forced too (no evaluation here): returning to it is forced the same way
        await registry.rollback(actor="ops-bob", force=True, reason="e2e cleanup: back to the shipped harness")
        await registry.close()
        await publisher.stop()
