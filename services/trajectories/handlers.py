"""Turning a terminal reply into a trajectory, and storing it idempotently (no Faust here)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from livehost.security.ids import check_state_ids


def policy_of(state: dict[str, Any]) -> str:
    """The policy the request ran on: the room's or arm's choice, else the model that answered its
    last policy turn (the ``model_output`` step is named after the model); empty when no turn ran."""
    chosen = str(state.get("policy") or "")
    if chosen:
        return chosen
    models = [str(s["name"]) for s in state["steps"] if s["kind"] == "model_output" and s.get("name")]
    return models[-1] if models else ""


def trajectory_from_reply(reply: dict[str, Any]) -> dict[str, Any]:
    state = reply["state"]
    check_state_ids(state)  # ids from Kafka have the format Ingest enforces (else dead-lettered)
    return {
        "request_id": state["request_id"], "room_id": state["room_id"],
        "harness_version": state["harness_version"], "policy": policy_of(state),
        "outcome": reply["outcome"], "reply_text": reply.get("text"), "reason": reply.get("reason"),
        "merged_text": state["merged_text"], "comments": state["comments"], "steps": state["steps"],
        "created_ms": state["created_ms"], "completed_ms": reply["completed_ms"],
    }


def passed_output_hooks(t: dict[str, Any]) -> bool:
    """True for a reply the host itself produced whose final action passed the harness's output hooks:
    the steps right before the terminal reply step are hook verdicts, at least one, all ``pass``. A
    fallback, a ReAct-baseline reply (no hooks) or anything else is not remembered."""
    if t["outcome"] != "reply" or not t["reply_text"]:
        return False
    steps = t["steps"]
    ends = [i for i, s in enumerate(steps) if s.get("kind") == "reply"]
    if not ends:
        return False
    verdicts = []
    for s in reversed(steps[:ends[-1]]):
        if s.get("kind") != "hook_verdict":
            break
        data = s.get("data") if isinstance(s.get("data"), dict) else json.loads(s.get("data_json") or "{}")
        verdicts.append(data.get("verdict"))
    return bool(verdicts) and all(v == "pass" for v in verdicts)


COLUMNS = ("request_id", "room_id", "harness_version", "policy", "outcome", "reply_text", "reason", "merged_text",
           "comments", "steps", "created_ms", "completed_ms")
TYPES = ("text", "text", "text", "text", "text", "text", "text", "text", "jsonb", "jsonb", "bigint", "bigint")


def _row(t: dict[str, Any]) -> tuple[Any, ...]:
    return (t["request_id"], t["room_id"], t["harness_version"], t["policy"], t["outcome"], t["reply_text"],
            t["reason"], t["merged_text"], json.dumps(t["comments"]), json.dumps(t["steps"]), t["created_ms"],
            t["completed_ms"])


@dataclass
class Saved:
    """What storing a batch found: rows it inserted, and rows already there whose record was never
    marked published (a recorder died after storing them, perhaps after publishing too)."""

    new: set[str] = field(default_factory=set)
    unmarked: set[str] = field(default_factory=set)

    @property
    def unpublished(self) -> set[str]:
        return self.new | self.unmarked

    def __or__(self, other: Saved) -> Saved:
        return Saved(self.new | other.new, self.unmarked | other.unmarked)


class TrajectoryStore:
    def __init__(self, pool: asyncpg.Pool):
        self._pool = pool

    async def save_many(self, ts: list[dict[str, Any]]) -> Saved:
        """Insert each trajectory once, all in one transaction (one durable commit for a batch, not two
        per request); redelivered ones store nothing. Says which rows are new and which were stored
        before but never marked published."""
        if not ts:
            return Saved()
        columns = list(zip(*(_row(t) for t in ts), strict=True))
        params = ", ".join(f"${i}::{kind}[]" for i, kind in enumerate(TYPES, 1))
        async with self._pool.acquire() as conn, conn.transaction():
            # The caller acknowledges the replies (their Kafka offsets may be committed) once this returns,
            # so the commit must not be one a server crash can take back: with synchronous_commit off (the
            # embedded stack's setting) the last few hundred ms of commits vanish when the postmaster is
            # SIGKILLed, and the fault suite found replies without a row that way.
            await conn.execute("SET LOCAL synchronous_commit = on")
            inserted = {r["request_id"] for r in await conn.fetch(
                f"INSERT INTO trajectories ({', '.join(COLUMNS)}) SELECT * FROM unnest({params})"
                " ON CONFLICT (request_id) DO NOTHING RETURNING request_id", *map(list, columns))}
            stored = [t["request_id"] for t in ts if t["request_id"] not in inserted]
            unsent = {r["request_id"] for r in await conn.fetch(
                "SELECT request_id FROM trajectories WHERE request_id = ANY($1::text[]) AND NOT published",
                stored)} if stored else set()
            # Room memory comes back into later prompts: only the host's own replies that passed the
            # output hooks are kept, never viewer text or an unchecked reply.
            memory = [t for t in ts if passed_output_hooks(t)]
            if memory:
                await conn.execute(
                    "INSERT INTO room_memory (request_id, room_id, text, ts_ms)"
                    " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])"
                    " ON CONFLICT (request_id) DO NOTHING",
                    [t["request_id"] for t in memory], [t["room_id"] for t in memory],
                    [t["reply_text"] for t in memory], [t["completed_ms"] for t in memory])
        return Saved(inserted, unsent)

    async def save(self, t: dict[str, Any]) -> bool:
        """One trajectory (:meth:`save_many`); True while its record is still to be published."""
        return t["request_id"] in (await self.save_many([t])).unpublished

    async def mark_published_many(self, request_ids: list[str]) -> None:
        """The trajectories' records are on the topic: a later copy of their replies publishes nothing."""
        if not request_ids:
            return
        async with self._pool.acquire() as conn, conn.transaction():
            # Durable before the replies are acknowledged, like the rows (save_many): an asynchronous commit
            # lost in a server crash left rows saying "never published" for records that went out (the crash
            # test found 2 of 200), and a redelivered reply would then publish its record a second time.
            await conn.execute("SET LOCAL synchronous_commit = on")
            await conn.execute("UPDATE trajectories SET published = true WHERE request_id = ANY($1::text[])",
                               request_ids)

    async def mark_published(self, request_id: str) -> None:
        await self.mark_published_many([request_id])
