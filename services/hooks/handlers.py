"""The hooks processor's logic, free of Faust: room state, merging, input screening, step routing.

Every method returns the records to emit as ``Emit`` values; the Faust app sends them and
acknowledges the source events only afterwards (at-least-once, idempotent downstream).
"""

from __future__ import annotations

import json
import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from livehost.agent import state as st
from livehost.agent.loop import Next, after_action, fallback, terminal
from livehost.agent.merge import Batch, Merger
from livehost.config import Settings
from livehost.harness.provider import HarnessProvider
from livehost.hooks.input import screen_comments
from livehost.topics import REPLIES, REQUESTS, TOOL_CALLS, Topic

_URGENT = re.compile(r"\?|\b(how much|price|buy|order|cart|checkout|stock|left|size|coupon)\b", re.I)


@dataclass
class Emit:
    topic: Topic
    key: str
    record: dict[str, Any]


@dataclass
class Handled:
    emits: list[Emit] = field(default_factory=list)
    tokens: list[Any] = field(default_factory=list)  # source events now safe to acknowledge


def priority(comments: list[dict[str, Any]]) -> int:
    """Questions and purchase intent before chit-chat."""
    return 2 if any(_URGENT.search(c["text"]) for c in comments) else 1


def reply_record(nxt: Next, now_ms: int) -> dict[str, Any]:
    return {"state": nxt.state, "outcome": nxt.outcome, "text": nxt.text, "reason": nxt.reason,
            "completed_ms": now_ms}


def route(nxt: Next, now_ms: int) -> Emit:
    key = nxt.state["room_id"]
    if nxt.route == "turn":
        return Emit(REQUESTS, key, {"state": nxt.state})
    if nxt.route == "tool_call":
        assert nxt.tool_call is not None
        return Emit(TOOL_CALLS, key, {"state": nxt.state, **nxt.tool_call})
    return Emit(REPLIES, key, reply_record(nxt, now_ms))


def action_from_record(record: dict[str, Any]) -> dict[str, Any]:
    kind = record["kind"]
    return {"kind": kind, "skill": record.get("skill"), "tool": record.get("tool"),
            "arguments": json.loads(record.get("arguments_json") or "{}"), "text": record.get("text"),
            "reason": record.get("reason"), "error": record.get("reason") if kind == "invalid" else None}


class HooksHandler:
    def __init__(self, settings: Settings, harnesses: HarnessProvider, rooms: MutableMapping[str, Any]):
        self._settings = settings
        self._harnesses = harnesses
        self.rooms = rooms  # room_id -> JSON string of the live-room state (a Faust table in production)
        self.merger = Merger(settings.merge_window_ms, settings.merge_max_batch)

    def room_state(self, room_id: str) -> dict[str, Any]:
        raw = self.rooms.get(room_id)
        return json.loads(raw) if raw else {"room_id": room_id}

    async def on_room_event(self, event: dict[str, Any], now_ms: int, token: Any = None) -> Handled:
        room_id = event["room_id"]
        if event["type"] == "comment":
            comment = {"event_id": event["event_id"], "user_id": event.get("user_id") or "anonymous",
                       "text": event.get("text") or "", "ts_ms": event["ts_ms"]}
            done = Handled()
            for batch in self.merger.add(room_id, comment, now_ms, token):
                await self._close(batch, now_ms, done)
            return done
        room = self.room_state(room_id)
        done = Handled(tokens=[token] if token is not None else [])
        if event["type"] == "product_switch":
            if room.get("current_link") not in (None, event.get("link_id")):
                pending = self.merger.flush_room(room_id)
                if pending is not None:
                    await self._cancel_batch(pending, room, now_ms, done,
                                             f"product switched from link {room.get('current_link')} "
                                             f"to {event.get('link_id')}")
            room["current_link"] = event.get("link_id")
        elif event["type"] == "campaign_change":
            room["campaign"] = json.loads(event.get("campaign_json") or "null")
        if event.get("viewer_count") is not None:
            room["viewer_count"] = event["viewer_count"]
        self.rooms[room_id] = json.dumps(room, sort_keys=True)
        return done

    async def flush(self, now_ms: int) -> Handled:
        done = Handled()
        for batch in self.merger.due(now_ms):
            await self._close(batch, now_ms, done)
        return done

    async def _new_state(self, batch: Batch, room: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        harness = await self._harnesses.for_new_request(batch.room_id)
        state = st.new_state(room_id=batch.room_id, harness_version=harness.version(), comments=batch.comments,
                             room=room, ttl_ms=self._settings.request_ttl_ms,
                             time_budget_ms=harness.limits.time_budget_ms, priority=priority(batch.comments),
                             policy=room.get("policy", ""), created_ms=min(c["ts_ms"] for c in batch.comments))
        st.add_step(state, "input", None, {"comments": batch.comments, "event_ids": batch.event_ids,
                                           "collapsed": batch.collapsed, "room": room})
        return harness, state

    async def _cancel_batch(self, batch: Batch, room: dict[str, Any], now_ms: int, done: Handled,
                            reason: str) -> None:
        _, state = await self._new_state(batch, room)
        done.emits.append(route(terminal(state, "cancelled", None, reason), now_ms))
        done.tokens.extend(batch.tokens)

    async def _close(self, batch: Batch, now_ms: int, done: Handled) -> None:
        harness, state = await self._new_state(batch, self.room_state(batch.room_id))
        kept, failed = screen_comments(harness, batch.comments)
        for comment, verdict in failed:
            st.add_step(state, "input_hook", verdict.hook, {**verdict.as_dict(), "comment": comment})
        if not kept:
            reasons = "; ".join(v.reason for _, v in failed)
            if any(v.verdict == "reject" for _, v in failed):
                nxt = fallback(harness, state, f"input rejected: {reasons}")
            else:
                nxt = terminal(state, "rejected", None, f"input dropped: {reasons}")
            done.emits.append(route(nxt, now_ms))
        else:
            if failed:
                state["comments"] = kept
                state["merged_text"] = st.merged_text(kept)
            done.emits.append(Emit(REQUESTS, batch.room_id, {"state": state}))
        done.tokens.extend(batch.tokens)

    async def on_action(self, record: dict[str, Any], now_ms: int) -> Handled:
        state = record["state"]
        harness = await self._harnesses.get(state["harness_version"])
        pinned_link = st.room(state).get("current_link")
        live_link = self.room_state(state["room_id"]).get("current_link")
        if pinned_link is not None and live_link is not None and pinned_link != live_link:
            nxt = terminal(st.clone(state), "cancelled", None,
                           f"product switched from link {pinned_link} to {live_link} while in flight")
        else:
            nxt = after_action(harness, state, action_from_record(record), now_ms)
        return Handled([route(nxt, now_ms)])
